#!/usr/bin/env bash
# Real photographs of dust nebulae from Debian's stellarium-data (installed by
# `scripts/deps.sh data`; licences are mixed, so no copy is committed): links the chosen images
# into OUT_DIR and writes OUT_DIR/CREDITS.txt with each image's credit from Stellarium's
# textures.json. Prints the comma-separated list of the images, for --data.
#   scripts/data/nebulae.sh OUT_DIR [NAME ...]   (default: barnard72 ldn1622 barnard207 ic4592)
set -euo pipefail
out=$1
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(barnard72 ldn1622 barnard207 ic4592)
src=/usr/share/stellarium/nebulae/default
[ -f "$src/textures.json" ] || { echo "nebulae.sh: $src is missing: run scripts/deps.sh data" >&2; exit 1; }
mkdir -p "$out"
/usr/bin/python3 - "$src" "$out" "${names[@]}" <<'PY'
import os, re, sys
src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(os.path.join(src, "textures.json"), encoding="utf-8").read()
# textures.json is not strict JSON; each tile block names its credit before its image.
credits = {}
for block in re.split(r"\n\t\{", text):
    url = re.search(r'"imageUrl"\s*:\s*"([^"]+)"', block)
    who = re.search(r'"short"\s*:\s*"([^"]*)"', block)
    if url:
        credits[url.group(1)] = who.group(1) if who else "unknown"
lines, files = [], []
for n in names:
    f = n + ".png"
    path = os.path.join(src, f)
    if not os.path.exists(path):
        sys.exit(f"nebulae.sh: {path} is not in stellarium-data")
    dst = os.path.join(out, f)
    if not os.path.exists(dst):
        os.symlink(path, dst)
    lines.append(f"{f}: {credits.get(f, 'unknown')} (Stellarium's nebula textures, Debian package stellarium-data)")
    files.append(dst)
open(os.path.join(out, "CREDITS.txt"), "w").write("\n".join(lines) + "\n")
print(",".join(files))
PY
