#!/usr/bin/env bash
# Installs what is missing, builds genperf (Release) and runs the test suite.
#   scripts/test.sh             the default suite (a few minutes on 2 cores)
#   scripts/test.sh --long      adds the long suites (label "long")
#   scripts/test.sh --sanitize  builds with ASan+UBSan into build-asan/ and runs the suite there
# With CI set in the environment (CI runs `CI=true bash .ci/run`), warnings are errors and the
# libFuzzer targets are built with clang and each run for a few seconds on its seed corpus
# (scripts/fuzz.sh), so that neither the quiet build nor the fuzz targets can rot unnoticed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
werror=OFF; if [ -n "${CI:-}" ]; then werror=ON; fi
build=build; cmake_args=(-DCMAKE_BUILD_TYPE=Release); ctest_args=(-LE long)
for arg in "$@"; do
  case "$arg" in
    --long) ctest_args=() ;;
    --sanitize) build=build-asan; cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGENPERF_SANITIZE=ON -DGENPERF_BENCH=OFF) ;;
    *) echo "test.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)
# Tests run in parallel on few cores: idle OpenMP threads must sleep, not spin.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" -DGENPERF_WERROR=$werror >/dev/null
cmake --build "$build" -j "$jobs"
(cd "$build" && ctest --output-on-failure -j "$jobs" "${ctest_args[@]}")
if [ -n "${CI:-}" ]; then GENPERF_WERROR=ON bash scripts/fuzz.sh 5; fi
