#!/usr/bin/python3
"""How far per-tensor mixed precision can go on one model, from its sensitivity map alone.

For each budget (bits per weight) it prints the predicted KL (the sum of the map's entries, the
additivity assumption of docs/QUANT.md) of:
  - the best allocation over the map's formats (multiple-choice knapsack by dynamic programming
    over bytes, as `genperf quantize --recipe auto` solves it),
  - uniform quantization at that budget (the uniform frontier of --formats, interpolated in log
    KL between neighbouring formats),
  - both again with "continuous bits": every tensor may take any multiple of --step bits between
    the smallest and the largest of --formats, its KL interpolated in log between its measured
    formats. No set of formats with per-tensor choice and the same quantizer does better than
    this allocation predicts, up to the interpolation, so its ratio to uniform is a floor for the
    allocation's gain on this model.
With --row-split OUT.json (bench/row_split), the tensors it measured take its options instead of
the map's: each whole-tensor format and each split of the rows by token frequency between two
formats, with the held-out KL it measured (the uniform frontier then uses its whole-tensor KL
for them too). The allocation columns then say what precision by vocabulary row would add.

  /usr/bin/python3 bench/allocation_bound.py --sensitivity sens.json --bpw 4.0,4.5
"""
import argparse, json, math, sys

import numpy as np


def knapsack(options, budget_bytes, unit):
    """Least summed KL choosing one (bytes, kl) option per tensor within the budget."""
    cells = budget_bytes // unit
    dp = np.full(cells + 1, np.inf)
    dp[0] = 0.0
    for opts in options:
        best = np.full(cells + 1, np.inf)
        for nbytes, kl in opts:
            u = -(-nbytes // unit)
            if u <= cells:
                best[u:] = np.minimum(best[u:], dp[: cells + 1 - u] + kl)
        dp = best
    return float(dp.min())


def log_interp(points, x):
    """points: [(bpw, kl)] sorted by bpw; KL at x interpolated in log (None outside)."""
    for (b1, k1), (b2, k2) in zip(points, points[1:]):
        if b1 <= x <= b2:
            t = (x - b1) / (b2 - b1) if b2 > b1 else 0.0
            return math.exp(math.log(max(k1, 1e-12)) * (1 - t) + math.log(max(k2, 1e-12)) * t)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sensitivity", required=True, help="PREFIX.json of genperf sensitivity")
    ap.add_argument("--bpw", default="4.0,4.5", help="budgets, bits per weight")
    ap.add_argument("--formats", default="q2_k,q3_k,q4_k,q5_k,q6_k",
                    help="the uniform frontier and the points of the continuous-bits curve")
    ap.add_argument("--step", type=float, default=0.125, help="bits between the continuous options")
    ap.add_argument("--row-split", help="OUT.json of bench/row_split: its tensors' options replace the map's")
    a = ap.parse_args()
    try:
        m = json.load(open(a.sensitivity))
        tensors = {t["name"]: t for t in m["tensors"]}
        entries = m["entries"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"allocation_bound: {a.sensitivity}: not a genperf sensitivity map ({e})")
    elements = sum(t["elements"] for t in tensors.values())
    kl = {(e["tensor"], e["format"]): max(e["kl"], 0.0) for e in entries}
    bpw = {e["format"]: e["bpw"] for e in entries}
    frontier = [f for f in a.formats.split(",") if f]
    missing = [(n, f) for n in tensors for f in frontier if (n, f) not in kl]
    if missing:
        sys.exit(f"allocation_bound: {a.sensitivity} has no entry for {missing[0][0]} in {missing[0][1]} "
                 f"({len(missing)} missing); choose --formats the map measured for every tensor")
    frontier.sort(key=lambda f: bpw[f])

    options = {n: [(e["bytes"], max(e["kl"], 0.0)) for e in entries if e["tensor"] == n] for n in tensors}
    if a.row_split:
        try:
            rs = json.load(open(a.row_split))
            for t in rs["tensors"]:
                n = t["name"]
                if n not in tensors:
                    sys.exit(f"allocation_bound: {a.row_split} measured {n}, which {a.sensitivity} does not have")
                options[n] = [(int(o["bytes"]), max(o["kl"], 0.0)) for o in t["options"]]
                for o in t["options"]:
                    if o["hi"] == o["lo"]:
                        kl[(n, o["hi"])] = max(o["kl"], 0.0)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"allocation_bound: {a.row_split}: not an output of bench/row_split ({e})")
    keep = [(t["source_bytes"], 0.0) for t in tensors.values()]
    measured = [[keep[i]] + options[n] for i, n in enumerate(tensors)]
    curve = {n: [(bpw[f], kl[(n, f)]) for f in frontier] for n in tensors}
    lo, hi = bpw[frontier[0]], bpw[frontier[-1]]
    steps = [lo + a.step * i for i in range(int((hi - lo) / a.step + 1e-9) + 1)]
    continuous = [[keep[i]] + [(int(tensors[n]["elements"] * x / 8), log_interp(curve[n], x)) for x in steps]
                  for i, n in enumerate(tensors)]
    uniform_points = [(bpw[f], sum(kl[(n, f)] for n in tensors)) for f in frontier]

    print(f"{a.sensitivity}: {len(tensors)} tensors, {elements} elements, formats {','.join(frontier)}")
    print("| bpw | allocation (map's formats) | uniform | ratio | allocation (continuous bits) | uniform | ratio |")
    print("|---|---|---|---|---|---|---|")
    for x in [float(v) for v in a.bpw.split(",") if v]:
        budget = int(x * elements / 8)
        alloc = knapsack(measured, budget, 512)
        uni = log_interp(uniform_points, x)
        calloc = knapsack(continuous, budget, 2048)
        cuni = sum(log_interp(curve[n], x) for n in tensors)
        if uni is None:
            sys.exit(f"allocation_bound: {x} bpw is outside the formats' {lo}..{hi}")
        print(f"| {x:g} | {alloc:.5f} | {uni:.5f} | {alloc / uni:.3f} | {calloc:.5f} | {cuni:.5f} | {calloc / cuni:.3f} |")


if __name__ == "__main__":
    main()
