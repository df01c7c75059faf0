#!/usr/bin/env bash
# Installs the two capital sources (kgeography-data, miscfiles) and builds the country -> capital
# fine-tuning and evaluation sets:  scripts/data/capitals.sh OUT_DIR [SEED]   (docs/DATA.md)
set -euo pipefail
out=${1:?usage: capitals.sh OUT_DIR [SEED]}
here=$(dirname "$0")
bash "$here/../deps.sh" data
/usr/bin/python3 "$here/capitals.py" --out "$out" --seed "${2:-1}"
