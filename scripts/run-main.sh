#!/usr/bin/env bash
# The main job on the embedded default model (models/default: 6.8M parameters, trained by genperf
# itself on Jane Austen and the King James Bible, see scripts/train-default.sh): builds genperf,
# prepares the held-out evaluation sets from Persuasion (Debian's r-cran-janeaustenr), then runs
# generation, perplexity, the HellaSwag-style continuation task and the inference benchmark.
#   scripts/run-main.sh [OUT_DIR]     (default: out/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out}
bash scripts/build.sh
bash scripts/deps.sh data
mkdir -p "$out"
gp=build/genperf
model=models/default
bash scripts/data/corpus.sh "$out/data" >/dev/null
[ -s "$out/eval/heldout_mc.jsonl" ] || /usr/bin/python3 scripts/data/evalsets.py \
  --heldout "$out/data/persuasion.txt" --out "$out/eval" --seed 1
echo "== model"
$gp info --model "$model"
echo "== generate (greedy, then sampled with seed 1)"
$gp generate --model "$model" --prompt "It was a truth universally acknowledged" --max-tokens 40 --temperature 0
$gp generate --model "$model" --prompt "And the LORD said unto Moses" --max-tokens 40 --temperature 0.8 --top-p 0.9 --seed 1
echo "== perplexity on held-out Persuasion"
$gp eval ppl --model "$model" --text "$out/eval/heldout_ppl.txt" --ctx 256 --json > "$out/eval-ppl.json"
cat "$out/eval-ppl.json"
echo "== continuation task (true next sentence among 4; chance 25%)"
$gp eval mc --model "$model" --tasks "$out/eval/heldout_mc.jsonl" --json > "$out/eval-mc.json"
cat "$out/eval-mc.json"
echo "== inference benchmark"
$gp bench infer --model "$model" --out "$out/bench-infer.json"
echo "results in $out/ (eval-ppl.json, eval-mc.json, bench-infer.json)"
