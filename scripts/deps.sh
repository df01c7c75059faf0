#!/usr/bin/env bash
# Installs the Debian 12 packages genperf builds, tests and benchmarks with. Idempotent: installs
# only what is missing. Runs apt-get as root, or through sudo when not root.
#   bash scripts/deps.sh        build, test and benchmark packages
#   bash scripts/deps.sh data   the packages the real-text corpora and eval sets come from
#                               (scripts/data/*; see docs/DATA.md)
set -euo pipefail
case "${1:-}" in
  "")
    packages=(
      build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev libbenchmark-dev
      libdnnl-dev libsentencepiece-dev sentencepiece libpcre2-dev
      python3-numpy python3-sentencepiece
      clang libclang-rt-14-dev
      bible-kjv
    )
    # PyTorch for the side-by-side benchmarks, with an optimized BLAS: Debian's torch calls the
    # system libblas.so.3, which is the slow reference BLAS unless OpenBLAS provides it.
    if [ "${GENPERF_WITH_TORCH:-0}" = 1 ]; then packages+=(python3-torch libopenblas0-openmp); fi
    ;;
  data)
    # Jane Austen's novels (pulls r-base-core for Rscript), the King James Bible, and the two
    # independent country -> capital sources of the capitals fine-tuning/eval set.
    packages=(r-cran-janeaustenr bible-kjv kgeography-data miscfiles)
    ;;
  *) echo "usage: deps.sh [data]" >&2; exit 2 ;;
esac
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
