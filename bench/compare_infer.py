#!/usr/bin/python3
"""genperf vs PyTorch (python3-torch, eager) on the same Llama shape, side by side in one run:
the two alternate (A B A B ...) for --rounds rounds; each round runs each engine's own benchmark
(warm-up + --reps repetitions, median). Reports the median of the per-round ratios, with min/max.
Never run in CI.   /usr/bin/python3 bench/compare_infer.py --shape 110m --dtype bf16 --rounds 3
"""
import argparse, json, os, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_infer: {' '.join(cmd)} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="110m")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    subprocess.run(["bash", os.path.join(root, "scripts/deps.sh")], check=True, env=dict(os.environ, GENPERF_WITH_TORCH="1"))
    gp = [os.path.join(root, "build/genperf"), "bench", "infer", "--model", f"random:{a.shape}", "--dtype", a.dtype,
          "--threads", str(a.threads), "--reps", str(a.reps), "--json", "--no-peaks"]
    pt = ["/usr/bin/python3", os.path.join(here, "torch_llama.py"), "--shape", a.shape, "--dtype", a.dtype,
          "--threads", str(a.threads), "--reps", str(a.reps)]
    keys = [("prefill 128", lambda r: r["prefill"][0]["tokens_per_s"]),
            ("prefill 512", lambda r: r["prefill"][1]["tokens_per_s"]),
            ("decode", lambda r: r["decode"]["tokens_per_s"])]
    rows = {k: {"genperf": [], "torch": [], "ratio": []} for k, _ in keys}
    for i in range(a.rounds):
        g, t = run(gp), run(pt)
        for k, f in keys:
            rows[k]["genperf"].append(f(g)); rows[k]["torch"].append(f(t)); rows[k]["ratio"].append(f(g) / f(t))
        print(f"round {i + 1}/{a.rounds} done", file=sys.stderr)
    print(f"shape {a.shape}, {a.dtype} weights, {a.threads} threads, {a.rounds} alternating rounds x {a.reps} reps; torch {t['torch']}")
    print(f"{'':12} {'genperf tok/s':>15} {'torch tok/s':>13} {'ratio median':>13} {'(min, max)':>14}")
    for k, v in rows.items():
        r = v["ratio"]
        print(f"{k:12} {statistics.median(v['genperf']):15.1f} {statistics.median(v['torch']):13.1f} "
              f"{statistics.median(r):13.2f}  ({min(r):.2f}, {max(r):.2f})")


if __name__ == "__main__":
    main()
