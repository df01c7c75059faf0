#!/usr/bin/env bash
# Writes the King James Bible (Debian package bible-kjv) as plain text, one verse a line,
# without the "Ge1:1 " verse prefixes:  scripts/data/kjv.sh OUT.txt
set -euo pipefail
out=${1:?usage: kjv.sh OUT.txt}
bash "$(dirname "$0")/../deps.sh"
tmp="$out.tmp.$$"
bible -f 'Gen1:1-Rev22:21' | sed -E 's/^[0-9A-Za-z]+[0-9]+:[0-9]+ +//' | grep -v '^\s*$' > "$tmp"
mv "$tmp" "$out"
