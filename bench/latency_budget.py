#!/usr/bin/python3
"""`genperf quantize --recipe auto --target-latency`: predicted against measured decode steps.

For each budget (ms per decode step, or a fraction of the way from the fastest achievable step to
the source model's step, written "f0.5"), runs genperf quantize with the budget --rounds times.
Each run times the products per format, calibrates on two measured steps, allocates, quantizes,
and then measures the quantized model's step interleaved with the source model's (median of 5,
bench infer's decode protocol). Reports per budget the median over rounds (min-max) of the
measured step, of measured / predicted, and of the measured speedup over the source model beside
the predicted one, and the mix chosen in the first round.
Never run in CI (minutes; needs an otherwise idle machine).

  /usr/bin/python3 bench/latency_budget.py --model M --sensitivity S.json [--proxy] \\
      --budgets f0.25,f0.5,f0.75,f1 --rounds 5 --out latency_budget.json
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def quantize(args, budget_ms, out):
    cmd = [args.genperf, "quantize", "--model", args.model, "--recipe", "auto", "--sensitivity", args.sensitivity,
           "--target-latency", repr(budget_ms), "--device", args.device, "--latency-context", str(args.context),
           "--out", out, "--json"]
    if args.proxy:
        cmd.append("--proxy")
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        m = re.search(r"fastest achievable step is ([0-9.e+-]+) ms", r.stderr)
        if m:
            return {"infeasible": float(m.group(1))}
        sys.exit(f"latency_budget: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout)


def mmm(v):
    return statistics.median(v), min(v), max(v)


def fmt(v, digits=3):
    m, lo, hi = mmm(v)
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--sensitivity", required=True)
    p.add_argument("--proxy", action="store_true", help="allocate by the map's proxy (a --proxy-only map)")
    p.add_argument("--budgets", default="f0.25,f0.5,f0.75,f1")
    p.add_argument("--device", default="cpu")
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--genperf", default=os.path.join(root, "build", "genperf"))
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "q.gguf")
        # The fastest achievable step and the source's: one infeasible run names the first, a
        # generous one reports the second.
        fastest = quantize(args, 1e-6, out)["infeasible"]
        source = quantize(args, 1e6, out)["allocation"]["source_latency_ms"]
        print(f"fastest achievable step {fastest:.4g} ms, source model {source:.4g} ms (this run's calibration)")
        rows = []
        for b in args.budgets.split(","):
            budget = fastest + float(b[1:]) * (source - fastest) if b.startswith("f") else float(b)
            runs = [quantize(args, budget, out) for _ in range(args.rounds)]
            ok = [r for r in runs if "allocation" in r]
            row = {"budget": b, "budget_ms": budget, "rounds": len(runs), "infeasible": len(runs) - len(ok)}
            if ok:
                al = [r["allocation"] for r in ok]
                row["predicted_ms"] = [a["predicted_latency_ms"] for a in al]
                row["mix"] = ok[0]["format_counts"]
                row["bpw"] = [r["bpw"] for r in ok]
                if "measured_latency_ms" in al[0]:
                    row["measured_ms"] = [a["measured_latency_ms"]["median"] for a in al]
                    row["measured_over_predicted"] = [a["measured_over_predicted_latency"] for a in al]
                    row["predicted_speedup"] = [a["predicted_speedup"] for a in al]
                    row["measured_speedup"] = [a["measured_speedup"] for a in al]
            rows.append(row)

    print(f"\n| budget | ms | feasible | predicted ms | measured ms | measured / predicted | speedup predicted | "
          f"speedup measured | mix (first round) |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = []
    for r in rows:
        feasible = f"{r['rounds'] - r['infeasible']}/{r['rounds']}"
        if "predicted_ms" not in r:
            print(f"| {r['budget']} | {r['budget_ms']:.3f} | {feasible} | | | | | | |")
            continue
        mix = ", ".join(f"{n} {f}" for f, n in sorted(r["mix"].items(), key=lambda x: -x[1]))
        if "measured_ms" in r:
            errors += [abs(x - 1) for x in r["measured_over_predicted"]]
            print(f"| {r['budget']} | {r['budget_ms']:.3f} | {feasible} | {fmt(r['predicted_ms'])} | {fmt(r['measured_ms'])} | "
                  f"{fmt(r['measured_over_predicted'])} | {fmt(r['predicted_speedup'], 2)} | "
                  f"{fmt(r['measured_speedup'], 2)} | {mix} |")
        else:
            print(f"| {r['budget']} | {r['budget_ms']:.3f} | {feasible} | {fmt(r['predicted_ms'], 4)} (modeled) | | | | | {mix} |")
    if errors:
        print(f"\n|measured / predicted - 1| over {len(errors)} runs: median {statistics.median(errors):.3f}, "
              f"worst {max(errors):.3f}")
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"model": args.model, "device": args.device, "fastest_ms": fastest, "source_ms": source,
                       "rows": rows}, f, indent=1)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
