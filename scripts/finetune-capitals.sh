#!/usr/bin/env bash
# The fine-tuning task of the default model: country -> capital facts (kgeography-data,
# cross-checked with miscfiles; scripts/data/capitals.py), trained in four phrasings and
# evaluated as multiple choice in two phrasings training never shows. Fine-tunes models/default
# fully and with LoRA, and reports the accuracy before and after.
#   scripts/finetune-capitals.sh [WORK_DIR]     (default: out/capitals)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-out/capitals}
bash scripts/build.sh
gp=build/genperf
base=models/default
bash scripts/data/capitals.sh "$work/data" >/dev/null
train="$work/data/capitals_train.jsonl"
mc="$work/data/capitals_mc.jsonl"
common=(--data "$train" --seq 64 --batch 16 --steps 240 --warmup 20 --val-fraction 0.05 --eval-every 80
        --seed 1 --threads 2 --dtype bf16 --log-every 40)
echo "== before: $base"
$gp eval mc --model "$base" --tasks "$mc" --json > "$work/mc-base.json"
echo "== full fine-tune"
$gp finetune --model "$base" "${common[@]}" --lr 5e-4 --out "$work/full"
$gp eval mc --model "$work/full" --tasks "$mc" --json > "$work/mc-full.json"
echo "== LoRA fine-tune (rank 16, alpha 32, q/k/v/o/gate/up/down), merged on export"
$gp finetune --model "$base" "${common[@]}" --lr 2e-3 --weight-decay 0 --lora-rank 16 --lora-alpha 32 \
  --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --out "$work/lora"
$gp eval mc --model "$work/lora" --tasks "$mc" --json > "$work/mc-lora.json"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
for name in ("base", "full", "lora"):
    r = json.load(open(f"{w}/mc-{name}.json"))
    print(f"{name:5s} acc {r['acc']:.3f}  acc_norm {r['acc_norm']:.3f}  acc_pmi {r['acc_pmi']:.3f}  ({r['n']} tasks)")
PY
