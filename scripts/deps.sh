#!/usr/bin/env bash
# Installs the Debian 12 packages genperf builds, tests and benchmarks with. Idempotent: installs
# only what is missing. Runs apt-get as root, or through sudo when not root.
#   bash scripts/deps.sh        build, test and benchmark packages
#   bash scripts/deps.sh data   the packages the real-text corpora and eval sets come from
#                               (scripts/data/*; see docs/DATA.md)
#   bash scripts/deps.sh slurm  a one-node Slurm cluster, to check `srun genperf train`
#                               (scripts/slurm_check.sh; never run in CI)
set -euo pipefail
case "${1:-}" in
  "")
    packages=(
      build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev libbenchmark-dev
      libdnnl-dev libsentencepiece-dev sentencepiece libpcre2-dev
      libcfitsio-dev  # FITS images (src/io/fits_*.cpp)
      zlib1g-dev      # the FITS reader's own check of gzip-compressed tiles (src/io/fits_tiles.cpp)
      libpng-dev      # PNG images (src/io/png.cpp)
      libsqlite3-dev  # the study's results store (src/study/)
      libopenmpi-dev openmpi-bin  # data-parallel and sharded training across ranks (src/comm/)
      python3-numpy python3-sentencepiece
      python3-astropy  # tests only: an independent FITS and WCS reader for tests/io/test_fits.cpp
      python3-pil      # tests only: an independent PNG reader and writer for tests/io/test_png.cpp
      clang libclang-rt-14-dev libomp-dev  # the fuzz build (scripts/fuzz.sh): clang, its sanitizer runtimes, its OpenMP
      chromium  # tests only: the headless browser that opens genperf report's HTML (tests/report/check_report.mjs)
      bible-kjv
    )
    # PyTorch for the side-by-side benchmarks, with an optimized BLAS: Debian's torch calls the
    # system libblas.so.3, which is the slow reference BLAS unless OpenBLAS provides it.
    if [ "${GENPERF_WITH_TORCH:-0}" = 1 ]; then packages+=(python3-torch libopenblas0-openmp); fi
    ;;
  data)
    # Jane Austen's novels (pulls r-base-core for Rscript), the King James Bible, the two
    # independent country -> capital sources of the capitals fine-tuning/eval set, and
    # Stellarium's photographs of dust nebulae (246 MB; scripts/data/nebulae.sh keeps credits).
    packages=(r-cran-janeaustenr bible-kjv kgeography-data miscfiles stellarium-data)
    ;;
  slurm)
    # The controller and node daemons, the client commands (srun, sinfo), and munge, Slurm's
    # authentication. slurm-wlm-basic-plugins (a dependency of each) holds srun's MPI plugins,
    # pmix (built on Debian's libpmix2, the PMIx OpenMPI uses) among them.
    packages=(slurmctld slurmd slurm-client munge)
    ;;
  *) echo "usage: deps.sh [data|slurm]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# llama.cpp for the test that runs genperf's GGUF files in it (tests/quant/test_llamacpp.cpp): its
# prebuilt CPU build as node-llama-cpp ships it, from the npm registry into tools/llamacpp/ (the
# versions pinned in package-lock.json, which npm leaves as it is; no install scripts run). Needs Node.js >= 20 and npm, which
# this machine kind provides; where they or the registry are missing the test skips and says why.
if [ -z "${1:-}" ]; then
  tool="$(cd "$(dirname "$0")/.." && pwd)/tools/llamacpp"
  node_major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\).*/\1/p')
  if [ "$(uname -m)" = x86_64 ] && [ "${node_major:-0}" -ge 20 ] && command -v npm >/dev/null &&
     [ ! -f "$tool/node_modules/@node-llama-cpp/linux-x64/package.json" ]; then
    echo "deps: installing node-llama-cpp (llama.cpp's prebuilt CPU build) into tools/llamacpp" >&2
    log=$(mktemp)
    if ! (cd "$tool" && npm install --omit=optional --ignore-scripts --no-save --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
      head -5 "$log" >&2
      echo "deps: npm could not install node-llama-cpp; the llama.cpp test will skip" >&2
    fi
    rm -f "$log"
  fi
  # The charting library genperf report inlines into its HTML (Vega, Vega-Lite, vega-embed), and
  # puppeteer-core, which drives Debian's chromium in the report's test: into tools/report/ at the
  # versions of its package-lock.json (npm ci), no install scripts (puppeteer-core downloads no browser).
  report="$(cd "$(dirname "$0")/.." && pwd)/tools/report"
  if [ "${node_major:-0}" -ge 20 ] && command -v npm >/dev/null &&
     { [ ! -f "$report/node_modules/vega-embed/build/vega-embed.min.js" ] ||
       [ ! -f "$report/node_modules/puppeteer-core/package.json" ]; }; then
    echo "deps: installing vega, vega-lite, vega-embed and puppeteer-core into tools/report" >&2
    log=$(mktemp)
    if ! (cd "$report" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
      head -5 "$log" >&2
      echo "deps: npm could not install tools/report; genperf report and its browser test need it" >&2
    fi
    rm -f "$log"
  fi
fi
