#!/usr/bin/python3
"""Flash vs naive attention in genperf training, by sequence length: `genperf bench train` with
--attn naive and --attn flash at each --seqs length, interleaved (each round runs every length,
the two modes alternating and their order reversed every other round). Never run in CI.

    /usr/bin/python3 bench/attn_sweep.py --threads 2 --rounds 3 --reps 3 --out out/attn_sweep.json

Reports per length: step time of each mode (median of the per-round medians, slowest and fastest
single step), the naive/flash step-time ratio (median, min, max of the per-round ratios), and the
attention memory of genperf's accounting (memory.activations: attention outputs + attention_scores
+ attention_backward: deterministic, from the first record), with its growth exponent from the
previous length (log2 of the ratio per doubling: 1 linear, 2 quadratic), and peak RSS.
Targets checked: flash at least 1.2x faster at 2048, and flash's attention memory linear in T.

The built-in shapes' context (512 for "default") bounds the sequence length of training, so the
sweep writes that shape's config (genperf random-model) with max_position_embeddings raised to
the longest length and passes the directory as --model: bench train reads only its config.json
and initializes the weights itself, so the model is the random:<shape> one with a longer context.
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
ATTN_KEYS = ("attention", "attention_scores", "attention_backward")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"attn_sweep: {' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def attention_bytes(rec):
    act = rec["memory"]["activations"]
    return sum(act[k] for k in ATTN_KEYS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="default")
    ap.add_argument("--seqs", default="512,1024,2048,4096")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--genperf", default=os.path.join(root, "build/genperf"))
    ap.add_argument("--out", help="also write the full record (every run, provenance) as JSON here")
    a = ap.parse_args()
    seqs = [int(s) for s in a.seqs.split(",")]
    modes = ("naive", "flash")
    res = {(T, m): [] for T in seqs for m in modes}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="genperf-attn-sweep-") as tmp:
        model = os.path.join(tmp, "model")
        run([a.genperf, "random-model", "--shape", a.shape, "--dtype", "bf16", "--out", model])
        cfg_path = os.path.join(model, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        ctx = cfg["max_position_embeddings"]
        cfg["max_position_embeddings"] = max(ctx, max(seqs))
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
        for i in range(a.rounds):
            for T in seqs:
                for m in modes if i % 2 == 0 else modes[::-1]:
                    cmd = [a.genperf, "bench", "train", "--model", model, "--attn", m, "--seq", str(T),
                           "--batch", str(a.batch), "--threads", str(a.threads), "--reps", str(a.reps),
                           "--no-peaks", "--json"]
                    res[(T, m)].append(json.loads(run(cmd)))
                print(f"round {i + 1}/{a.rounds} seq {T} done ({time.time() - t0:.0f} s)", file=sys.stderr)

    rows = []
    for T in seqs:
        row = {"seq": T}
        for m in modes:
            recs = res[(T, m)]
            steps = [t for x in recs for t in x["step_seconds"]["samples"]]
            row[m] = {"step_seconds": statistics.median(x["step_seconds"]["median"] for x in recs),
                      "step_seconds_min": min(steps), "step_seconds_max": max(steps),
                      "tokens_per_s": statistics.median(x["tokens_per_s"] for x in recs),
                      "gflops": statistics.median(x["gflops"] for x in recs),
                      "attention_bytes": attention_bytes(recs[0]),
                      "attention_parts": {k: recs[0]["memory"]["activations"][k] for k in ATTN_KEYS},
                      "accounted_bytes": recs[0]["memory"]["total"],
                      "peak_rss": max(x["peak_rss"] for x in recs)}
        ratios = [n["step_seconds"]["median"] / f["step_seconds"]["median"] for n, f in zip(res[(T, "naive")], res[(T, "flash")])]
        row["naive_over_flash"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
        rows.append(row)
    for prev, row in zip(rows, rows[1:]):  # growth exponent: bytes ~ T^k between consecutive lengths
        for m in modes:
            row[m]["memory_exponent"] = (math.log(row[m]["attention_bytes"] / prev[m]["attention_bytes"]) /
                                         math.log(row["seq"] / prev["seq"]))

    prov = res[(seqs[0], "flash")][0]["provenance"]
    print(f"\ngenperf training, naive vs flash attention: shape {a.shape} (context raised to {max(ctx, max(seqs))}), "
          f"batch {a.batch}, f32, {a.threads} threads, {a.rounds} alternating rounds x {a.reps} steps")
    print(f"machine: {prov.get('cpu', '?')} | isa {prov.get('isa_path', '?')} | genperf {prov.get('commit', '?')} "
          f"({prov.get('build_type', '?')})\n")
    print("| seq | naive step s (min-max) | flash step s (min-max) | naive/flash (min-max) "
          "| attention MB naive (exp.) | attention MB flash (exp.) | peak RSS MB naive / flash |")
    print("|---|---|---|---|---|---|---|")
    st = lambda x: f"{x['step_seconds']:.3f} ({x['step_seconds_min']:.3f}-{x['step_seconds_max']:.3f})"
    mem = lambda x: f"{x['attention_bytes'] / 1e6:.1f}" + (f" ({x['memory_exponent']:.2f})" if "memory_exponent" in x else "")
    for r in rows:
        q = r["naive_over_flash"]
        print(f"| {r['seq']} | {st(r['naive'])} | {st(r['flash'])} | {q['median']:.2f}x ({q['min']:.2f}-{q['max']:.2f}) "
              f"| {mem(r['naive'])} | {mem(r['flash'])} | {r['naive']['peak_rss'] / 1e6:.0f} / {r['flash']['peak_rss'] / 1e6:.0f} |")
    print("\n(exp.: growth exponent of the attention memory from the previous length; 1 = linear, 2 = quadratic)")
    verdict = {}
    at2048 = next((r for r in rows if r["seq"] == 2048), None)
    if at2048:
        verdict["flash_speedup_2048"] = at2048["naive_over_flash"]["median"]
        print(f"target flash >= 1.2x faster at 2048: {verdict['flash_speedup_2048']:.2f}x -> "
              f"{'met' if verdict['flash_speedup_2048'] >= 1.2 else 'NOT met'}")
    exps = [r["flash"]["memory_exponent"] for r in rows[1:]]
    if exps:
        verdict["flash_memory_exponent_max"] = max(exps)
        print(f"target flash attention memory linear in seq: largest growth exponent {max(exps):.2f} -> "
              f"{'met' if max(exps) <= 1.05 else 'NOT met'}")

    if a.out:
        record = {"benchmark": "attn_sweep", "command": " ".join(sys.argv), "shape": a.shape, "batch": a.batch,
                  "threads": a.threads, "rounds": a.rounds, "reps": a.reps, "context": max(ctx, max(seqs)),
                  "provenance": prov, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows,
                  "verdict": verdict, "runs": [{"seq": T, "attention": m, "records": res[(T, m)]} for T, m in res]}
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".tmp", "w") as f:
            json.dump(record, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"\nwrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
