#!/usr/bin/env bash
# Installs what is missing and builds genperf (Release); the CLI is then at build/genperf.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
