#!/usr/bin/env bash
# The main job on the embedded default model (models/default: 6.8M parameters, trained by genperf
# itself on Jane Austen and the King James Bible, see scripts/train-default.sh): builds genperf,
# prepares the held-out evaluation sets from Persuasion (Debian's r-cran-janeaustenr), then runs
# generation, perplexity, the HellaSwag-style continuation task and the inference benchmark; then
# the default super-resolution model (models/sr-default, scripts/train-sr-default.sh) upscales a
# held-out dust field and is judged on held-out fields and real dust photographs; last, the
# comparative study's quick suite (genperf study) and its report (genperf report, report.html).
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
echo "== super-resolution (models/sr-default, 4x): a held-out synthetic dust field, upscaled with 4 samples"
mkdir -p "$out/sr"
$gp sr degrade synthetic:1:512:3001:mixed "$out/sr/field_lr.fits" --truth "$out/sr/field_hr.fits"
$gp sr upscale "$out/sr/field_lr.fits" "$out/sr/field_sr.fits" --model models/sr-default --samples 4 \
  --preview "$out/sr/field_sr.png"
echo "== super-resolution metrics, bicubic beside each (held-out synthetic fields; real dust photographs)"
$gp sr eval --model models/sr-default --data synthetic:4:256:2001:mixed --samples 8 | tee "$out/sr-eval-synthetic.txt"
photos=$(bash scripts/data/nebulae.sh "$out/sr/nebulae" barnard72 ldn1622)
$gp sr eval --model models/sr-default --data "$photos" --samples 4 | tee "$out/sr-eval-photos.txt"
cat "$out/sr/nebulae/CREDITS.txt"
echo "== the comparative study, quick suite: inference at every ISA level, naive and flash attention, 1 and 2 ranks"
echo "   (unsharded and fully sharded), the SR model's steps, and accuracy against size of the quantized models"
$gp study --suite quick --out "$out/study" --text "$out/eval/heldout_ppl.txt" --tasks "$out/eval/heldout_mc.jsonl"
$gp report --db "$out/study/study.db" --out "$out/report.html"
echo "results in $out/ (eval-ppl.json, eval-mc.json, bench-infer.json, sr/, sr-eval-*.txt, study/, report.html, report.md)"
