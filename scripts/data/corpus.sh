#!/usr/bin/env bash
# Builds the language-model corpora of the default model (docs/DATA.md):
#   scripts/data/corpus.sh OUT_DIR
#   OUT_DIR/train.txt       five Austen novels (all but Persuasion) then the King James Bible,
#                           one paragraph or verse a line
#   OUT_DIR/persuasion.txt  Persuasion, held out for perplexity and the continuation task
# Idempotent: a file that exists is kept; each is written to a temporary name and then renamed.
set -euo pipefail
out=${1:?usage: corpus.sh OUT_DIR}
here=$(dirname "$0")
mkdir -p "$out"
bash "$here/austen.sh" "$out/austen"
[ -s "$out/kjv.txt" ] || bash "$here/kjv.sh" "$out/kjv.txt"
if [ ! -s "$out/train.txt" ]; then
  tmp="$out/train.txt.tmp.$$"
  cat "$out"/austen/{sensesensibility,prideprejudice,mansfieldpark,emma,northangerabbey}.txt \
      "$out/kjv.txt" > "$tmp"
  mv "$tmp" "$out/train.txt"
fi
if [ ! -s "$out/persuasion.txt" ]; then
  cp "$out/austen/persuasion.txt" "$out/persuasion.txt.tmp.$$"
  mv "$out/persuasion.txt.tmp.$$" "$out/persuasion.txt"
fi
for f in train.txt persuasion.txt; do
  printf 'corpus: %s %d bytes, %d lines\n' "$out/$f" "$(stat -c %s "$out/$f")" "$(wc -l < "$out/$f")"
done
