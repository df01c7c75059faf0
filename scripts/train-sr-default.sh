#!/usr/bin/env bash
# Reproduces the embedded default SR model (models/sr-default): a 0.8M-parameter diffusion UNet
# (base 16, channel multipliers 1,2,4,4, attention at the 8 x 8 level, v-prediction, cosine
# schedule, log units) for 4x super-resolution, trained by genperf on 96 synthetic log-normal dust
# fields of 256 x 256 (power-spectrum slopes -3 .. -2.5, sigma_ln 0.3 .. 1, seeds 1 .. 96),
# validated on four others (seeds 1001 .. 1004); sr eval's held-out fields start at seed 2001.
#   scripts/train-sr-default.sh [WORK_DIR] [THREADS]   (default: out/train-sr-default, 2 threads)
# Every seed is fixed here; the same build and thread count give the same weights bit for bit.
# Then models/sr-default receives the model and its loss log.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/train-sr-default}
threads=${2:-2}
bash scripts/build.sh
resume=()
[ -s "$work/state.safetensors" ] && resume=(--resume)
build/genperf sr train --data synthetic:96:256:1:mixed --val-data synthetic:4:256:1001:mixed \
  --scale 4 --base 16 --mults 1,2,4,4 --attention-levels 3 --head-channels 32 --res-blocks 1 \
  --prediction v --schedule cosine --timesteps 1000 --transform log \
  --steps 6000 --batch 8 --crop 64 --lr 5e-4 --warmup 200 --ema 0.999 --seed 1 \
  --log-every 100 --save-every 500 --threads "$threads" --out "$work" "${resume[@]}"
mkdir -p models/sr-default
for f in model/config.json model/model.safetensors log.jsonl; do
  cp "$work/$f" "models/sr-default/$(basename "$f").tmp" && mv "models/sr-default/$(basename "$f").tmp" "models/sr-default/$(basename "$f")"
done
echo "models/sr-default updated"
