#!/usr/bin/env bash
# Fine-tunes the default SR model (models/sr-default, synthetic dust fields) on real photographs
# of dust nebulae from Debian's stellarium-data, split by image: the pieces of one mosaic
# (rho-a*, ic2118-*, barnard_loop-*) stay in one set. Then judges both models on the held-out
# photographs, bicubic beside each figure. The images are linked, not copied (mixed licences;
# CREDITS.txt beside them); the tuned model stays in WORK_DIR, uncommitted for the same reason.
#   scripts/train-sr-photos.sh [WORK_DIR] [THREADS] [STEPS]   (default: out/train-sr-photos, 2, 1500)
# Every seed is fixed; the same build and thread count give the same weights bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/train-sr-photos}
threads=${2:-2}
steps=${3:-1500}
bash scripts/build.sh
bash scripts/deps.sh data
train=(barnard22 barnard142-vasey barnard150 barnard173-vasey darkshark-vasey ldn673 lbn438 lbn782 n1333 n7023
       vdb152 ic2118-1 ic2118-2 rho-a00 rho-a01 rho-a10 rho-a11 barnard_loop-1 barnard_loop-2 barnard_loop-4)
val=(ic4601)
test=(barnard72 ldn1622 barnard207 ic4592)
train_list=$(bash scripts/data/nebulae.sh "$work/photos/train" "${train[@]}")
val_list=$(bash scripts/data/nebulae.sh "$work/photos/val" "${val[@]}")
test_list=$(bash scripts/data/nebulae.sh "$work/photos/test" "${test[@]}")
resume=()
[ -s "$work/run/state.safetensors" ] && resume=(--resume)
# Crops are drawn by area: about 60% from the photographs (9.1 M pixels), 40% from the default's
# own 96 synthetic training fields (6.3 M), so the tuned model keeps what it knew of them.
build/genperf sr train --init models/sr-default --data "$train_list,synthetic:96:256:1:mixed" \
  --val-data "$val_list" --steps "$steps" --batch 8 --crop 64 --lr 2e-4 --warmup 100 --ema 0.995 --seed 2 \
  --log-every 100 --save-every 500 --threads "$threads" --out "$work/run" "${resume[@]}"
for m in models/sr-default "$work/run/model"; do
  name=$(basename "$(dirname "$m")")/$(basename "$m")
  echo "== $m on the held-out photographs (${test[*]})"
  build/genperf sr eval --model "$m" --data "$test_list" --samples 8 --threads "$threads" \
    --out "$work/eval-photos-${name//\//-}.json"
  echo "== $m on held-out synthetic fields"
  build/genperf sr eval --model "$m" --data synthetic:4:256:2001:mixed --samples 8 --threads "$threads" \
    --out "$work/eval-synthetic-${name//\//-}.json"
done
cat "$work/photos/train/CREDITS.txt" "$work/photos/val/CREDITS.txt" "$work/photos/test/CREDITS.txt"
