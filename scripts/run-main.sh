#!/usr/bin/env bash
# The main job on the embedded default: builds genperf, prepares real text from Debian's
# bible-kjv package, and runs generation, perplexity and the inference benchmark on the default
# model. Until the trained default model lands (training issue), the default model is the
# "default" shape with RANDOM weights and a SentencePiece tokenizer trained here on the text:
# its outputs measure speed and exercise the whole path, not language quality.
#   scripts/run-main.sh [OUT_DIR]     (default: out/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
bash scripts/build.sh
mkdir -p "$out"
gp=build/genperf
[ -s "$out/kjv.txt" ] || bash scripts/data/kjv.sh "$out/kjv.txt"
# Held out: the last 1,000 verses (Revelation and before) for evaluation.
head -n -1000 "$out/kjv.txt" > "$out/train.txt"
tail -n 1000 "$out/kjv.txt" > "$out/heldout.txt"
if [ ! -s "$out/tokenizer/tokenizer.model" ]; then
  mkdir -p "$out/tokenizer"
  spm_train --input="$out/train.txt" --model_prefix="$out/tokenizer/tokenizer" --vocab_size=4096 \
    --model_type=bpe --character_coverage=1.0 --byte_fallback=true --bos_id=1 --eos_id=2 --unk_id=0 \
    --random_seed=1 --minloglevel=2 >/dev/null 2>&1
fi
model="$out/default-random"
[ -s "$model/config.json" ] || $gp random-model --shape default --dtype bf16 --seed 1 \
  --tokenizer "$out/tokenizer/tokenizer.model" --out "$model"
echo "== model (RANDOM weights: the trained default model comes with the training issue)"
$gp info --model "$model"
echo "== generate (seed 1)"
$gp generate --model "$model" --prompt "In the beginning" --max-tokens 32 --seed 1
echo "== perplexity on held-out text"
$gp eval ppl --model "$model" --text "$out/heldout.txt" --ctx 256
echo "== inference benchmark"
$gp bench infer --model "$model" --out "$out/bench-infer.json"
echo "results in $out/ (bench-infer.json)"
