#!/usr/bin/python3
"""Two builds of genperf side by side (the commit before a change and the one after): each
configuration runs on build A, then build B, alternating for --rounds rounds; a round runs each
build's own benchmark (warm-up + --reps repetitions, median). Prints, per configuration and
figure, the median of the per-round ratios B/A with min and max. No speed is lost when every
median ratio is >= 0.97 (issue 22). Never run in CI.

  /usr/bin/python3 bench/compare_builds.py --old /work/base/build/genperf --new build/genperf --rounds 3
  ... --suite infer|train|all   --threads 2   --isa avx2 (both builds at that level)
"""
import argparse, json, os, statistics, subprocess, sys

# (model, dtype) for bench infer; prefill 128,512 and decode are read from each record. A model
# named q4_k:<shape> or q8_0:<shape> is quantized once, by build A, into --workdir (uniform recipe),
# and both builds read that file.
INFER = [(f"{t}:{shape}", "bf16" if t == "bf16" else None)
         for shape in ("110m", "default") for t in ("bf16", "q4_k", "q8_0")]
TRAIN = [(shape, prec, attn)  # bench train
         for shape in ("default", "110m") for prec in ("f32", "bf16") for attn in ("flash", "naive")]


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"compare_builds: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def infer_figures(rec):
    out = {f"prefill {p['tokens']} tok/s": p["tokens_per_s"] for p in rec["prefill"]}
    out["decode tok/s"] = rec["decode"]["tokens_per_s"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="build A's genperf binary (the reference)")
    ap.add_argument("--new", required=True, help="build B's genperf binary")
    ap.add_argument("--suite", default="all", choices=["infer", "train", "all"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--train-steps-seq", default="256", help="bench train --seq")
    ap.add_argument("--isa", help="GENPERF_ISA for both builds (e.g. avx2)")
    ap.add_argument("--workdir", default="/tmp/genperf-compare", help="quantized models (reused)")
    a = ap.parse_args()
    env = dict(os.environ, GENPERF_THREADS=str(a.threads))
    if a.isa: env["GENPERF_ISA"] = a.isa
    configs = []
    if a.suite in ("infer", "all"):
        os.makedirs(a.workdir, exist_ok=True)
        for name, dtype in INFER:
            kind, shape = name.split(":")
            model = f"random:{shape}"
            if kind != "bf16":
                model = os.path.join(a.workdir, f"{shape}-{kind}.gguf")
                if not os.path.exists(model):
                    r = subprocess.run([a.old, "quantize", "--model", f"random:{shape}", "--recipe",
                                        f"uniform:{kind}", "--out", model], capture_output=True, text=True, env=env)
                    if r.returncode != 0:
                        sys.exit(f"compare_builds: quantizing {name} failed:\n{r.stderr[-2000:]}")
            args = ["bench", "infer", "--model", model, "--reps", str(a.reps), "--json", "--no-peaks"]
            if dtype: args += ["--dtype", dtype]
            configs.append((f"infer {shape} {kind}", args, infer_figures))
    if a.suite in ("train", "all"):
        for shape, prec, attn in TRAIN:
            args = ["bench", "train", "--model", f"random:{shape}", "--precision", prec, "--attn", attn,
                    "--seq", a.train_steps_seq, "--reps", str(a.reps), "--json", "--no-peaks"]
            configs.append((f"train {shape} {prec} {attn}", args,
                            lambda r: {"tok/s": r["tokens_per_s"]}))
    ratios = {}  # (config, figure) -> [B/A per round]
    values = {}  # (config, figure, build) -> [value per round]
    for rnd in range(a.rounds):
        for name, args, figures in configs:
            got = {}
            for build, exe in (("A", a.old), ("B", a.new)):
                got[build] = figures(run([exe] + args, env))
            for fig in got["A"]:
                ratios.setdefault((name, fig), []).append(got["B"][fig] / got["A"][fig])
                for b in "AB":
                    values.setdefault((name, fig, b), []).append(got[b][fig])
            print(f"round {rnd + 1}/{a.rounds}: {name} done", file=sys.stderr)
    print(f"| configuration | figure | A median | B median | B/A median | min | max |")
    print(f"|---|---|---|---|---|---|---|")
    worst = 10.0
    for (name, fig), r in ratios.items():
        med = statistics.median(r)
        worst = min(worst, med)
        print(f"| {name} | {fig} | {statistics.median(values[(name, fig, 'A')]):.1f} | "
              f"{statistics.median(values[(name, fig, 'B')]):.1f} | {med:.3f} | {min(r):.3f} | {max(r):.3f} |")
    print(f"\nlowest median ratio {worst:.3f} ({'>=' if worst >= 0.97 else '<'} 0.97); {a.rounds} rounds, "
          f"{a.reps} reps, {a.threads} threads{'; GENPERF_ISA=' + a.isa if a.isa else ''}; A = {a.old}, B = {a.new}")


if __name__ == "__main__":
    main()
