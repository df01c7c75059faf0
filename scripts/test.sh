#!/usr/bin/env bash
# Installs what is missing, builds genperf (Release) and runs the test suite.
#   scripts/test.sh             the default suite (a few minutes on 2 cores)
#   scripts/test.sh --long      adds the long suites (label "long")
#   scripts/test.sh --sanitize  builds with ASan+UBSan into build-asan/ and runs the suite there
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
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
cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
cd "$build" && ctest --output-on-failure -j "$jobs" "${ctest_args[@]}"
