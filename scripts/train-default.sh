#!/usr/bin/env bash
# Reproduces the embedded default model (models/default): a 6.8M-parameter Llama ("default"
# shape: d 256, 6 layers, 8 heads / 4 KV heads, ffn 768) with a 4096-piece SentencePiece
# tokenizer, trained from scratch by genperf on five Jane Austen novels and the King James Bible
# (Debian packages r-cran-janeaustenr and bible-kjv); Persuasion is held out for evaluation.
#   scripts/train-default.sh [WORK_DIR]      (default: out/train-default; about 30 min on 2 cores)
# Every seed is fixed here; the same thread count gives the same losses bit for bit. Then
# models/default receives the exported model, its tokenizer, loss log and run record.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/train-default}
bash scripts/build.sh
bash scripts/data/corpus.sh "$work/data"
resume=()
[ -s "$work/run/train_state.safetensors" ] && resume=(--resume)
build/genperf train --text "$work/data/train.txt" --vocab-size 4096 --shape default --seq 256 \
  --batch 16 --steps 3000 --lr 2e-3 --min-lr 2e-4 --warmup 100 --weight-decay 0.1 --clip 1.0 \
  --val-fraction 0.01 --eval-every 250 --save-every 250 --seed 1 --init-seed 1 --attn flash \
  --precision f32 --dtype bf16 --log-every 50 --threads 2 --out "$work/run" "${resume[@]}"
mkdir -p models/default
for f in config.json model.safetensors tokenizer.model train_log.jsonl train_run.json; do
  cp "$work/run/$f" "models/default/$f.tmp" && mv "models/default/$f.tmp" "models/default/$f"
done
echo "models/default updated"
