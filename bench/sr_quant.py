#!/usr/bin/python3
"""The SR UNet quantized through its sensitivity map: each metric's change at each budget.

Measures the map on calibration maps (genperf sensitivity), quantizes the model with the
allocation at each bits-per-weight budget and with uniform formats (genperf quantize), evaluates
every variant on held-out maps with the same seeds (genperf sr eval), and prints one Markdown
table: size, the calibration error (rel_mse of the prediction), and the SR metrics beside the
f32 model's. Calibration, held-out and training maps are disjoint (seeds 3001+, 2001+ and the
training script's).

  /usr/bin/python3 bench/sr_quant.py [--model models/sr-default] [--out /tmp/sr-quant]
"""
import argparse
import json
import os
import subprocess
import sys


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--genperf", default="build/genperf")
    p.add_argument("--model", default="models/sr-default")
    p.add_argument("--calib", default="synthetic:4:128:3001:mixed")
    p.add_argument("--data", default="synthetic:2:256:2001")
    p.add_argument("--formats", default="bf16,q8_0,q5_0,q4_0")
    p.add_argument("--budgets", default="8,6,5")
    p.add_argument("--uniform", default="q8_0,q4_0")
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--crops", type=int, default=32)
    p.add_argument("--out", default="/tmp/sr-quant")
    p.add_argument("--reuse", action="store_true",
                   help="reuse the map, models and evaluations an earlier run left in --out")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    g = a.genperf
    prefix = os.path.join(a.out, "map")
    def cached(path, cmd):  # a command's JSON record, kept beside its outputs
        if a.reuse and os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        rec = run_json(cmd)
        with open(path, "w") as f:
            json.dump(rec, f)
        return rec

    print(f"sensitivity map on {a.calib} ...", file=sys.stderr)
    cached(prefix + ".run.json", [g, "sensitivity", "--model", a.model, "--calib", a.calib, "--formats", a.formats,
                                  "--crops", str(a.crops), "--out", prefix, "--json"])

    variants = [("f32", a.model, None)]
    for b in a.budgets.split(","):
        variants.append((f"auto@{b}", os.path.join(a.out, f"auto-{b}"),
                         ["--recipe", "auto", "--target-bpw", b, "--sensitivity", prefix + ".json"]))
    for f in a.uniform.split(","):
        variants.append((f"uniform:{f}", os.path.join(a.out, f"uniform-{f}"), ["--recipe", f"uniform:{f}"]))

    rows = []
    for name, path, recipe in variants:
        q = None
        tag = name.replace(":", "-").replace("@", "-")
        if recipe:
            qrec = os.path.join(a.out, tag + ".quantize.json")
            if not (a.reuse and os.path.exists(qrec)):
                subprocess.run(["rm", "-rf", path], check=True)
            q = cached(qrec, [g, "quantize", "--model", a.model, "--out", path, "--calib", a.calib, "--json"] + recipe)
        print(f"sr eval {name} ...", file=sys.stderr)
        e = cached(os.path.join(a.out, tag + ".eval.json"),
                   [g, "sr", "eval", "--model", path, "--data", a.data, "--samples", str(a.samples), "--json"])
        rows.append((name, q, e))

    base = rows[0][2]["maps"]
    keys = [("psnr_mean", "PSNR", "%.2f"), ("ssim_mean", "SSIM", "%.4f"), ("spectrum_worst", "|R-1|", "%.3f"),
            ("min_corr", "r_min", "%.4f"), ("w1", "W1", "%.4f"), ("minkowski", "Mink", "%.3f"),
            ("consistency", "consist", "%.4f"), ("coverage", "cover", "%.3f")]
    head = ["variant", "bpw", "MB", "rel_mse"] + [k[1] + " (change)" for k in keys]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, q, e in rows:
        maps = e["maps"]
        n = len(maps)
        cells = [name]
        if q:
            cells += ["%.2f" % q["bpw"], "%.3f" % (q["total_bytes"] / 1e6)]
            kl = (q.get("allocation") or {}).get("kl")
            cells.append("%.3g" % kl if kl is not None else "")
        else:
            cells += ["32", "", "0"]
        for k, _, fmt in keys:
            v = sum(m[k] for m in maps) / n
            d = v - sum(m[k] for m in base) / n
            cells.append((fmt % v) + ("" if q is None else " (" + ("%+.4f" % d) + ")"))
        print("| " + " | ".join(cells) + " |")
    print(f"\nmeans over {len(base)} held-out maps ({a.data}), {a.samples} samples each; "
          f"calibration {a.calib}, {a.crops} crops")


if __name__ == "__main__":
    main()
