#!/usr/bin/env bash
# Installs the Debian 12 packages genperf builds, tests and benchmarks with. Idempotent: installs
# only what is missing. Runs apt-get as root, or through sudo when not root.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev libsentencepiece-dev sentencepiece libpcre2-dev
  python3-numpy python3-sentencepiece
  clang libclang-rt-14-dev
  bible-kjv
)
if [ "${GENPERF_WITH_TORCH:-0}" = 1 ]; then packages+=(python3-torch); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
