#!/usr/bin/python3
"""Training across ranks, side by side in one run (issue 24): `genperf bench train` on one rank
and under `mpirun -np 2` (one thread a rank, --batch sequences a rank), alternating for --rounds
rounds; each run is a warm-up step plus --reps timed steps (median). Prints per configuration
the median over rounds of the step time and tokens/s with min and max, and:

  weak-scaling efficiency  tokens/s of 2 ranks / (2 x tokens/s of 1 rank), same batch a rank
  overlap gain             step time with buckets reduced after backward / during it
  communication share      seconds a rank waited on communication with overlap off / step time
  ZeRO-1, 2, 3 cost        step time with the optimizer, gradients or everything sharded /
                           unsharded (the study's finding: a model that fits trains faster unsharded)

  /usr/bin/python3 bench/scaling.py --model random:default --seq 256 --batch 2 --rounds 5
  /usr/bin/python3 bench/scaling.py --model random:default --seq 32 --batch 1   (communication-heavy)

Runs mpirun as root where needed (OpenMPI's allow-run-as-root variables). Never run in CI.
"""
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"scaling: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genperf", default=os.path.join(HERE, "..", "build", "genperf"))
    ap.add_argument("--model", default="random:default")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=2, help="sequences per rank and step")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--bucket-mb", default="25")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    base = [a.genperf, "bench", "train", "--model", a.model, "--seq", str(a.seq), "--batch", str(a.batch),
            "--reps", str(a.reps), "--threads", "1", "--no-peaks", "--json", "--bucket-mb", a.bucket_mb]
    mpi = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(a.ranks)]
    configs = {
        "1 rank": base,
        f"{a.ranks} ranks": mpi + base,
        f"{a.ranks} ranks, overlap off": mpi + base + ["--no-overlap"],
        f"{a.ranks} ranks, ZeRO-1": mpi + base + ["--shard", "optimizer"],
        f"{a.ranks} ranks, ZeRO-2": mpi + base + ["--shard", "grads"],
        f"{a.ranks} ranks, ZeRO-3 (full)": mpi + base + ["--shard", "full"],
    }
    res = {k: [] for k in configs}
    for rnd in range(a.rounds):
        for name, cmd in configs.items():
            res[name].append(run(cmd, env))
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)

    def med(name, key):
        v = [r[key]["median"] if isinstance(r[key], dict) else r[key] for r in res[name]]
        return statistics.median(v), min(v), max(v)

    first = res["1 rank"][0]
    print(f"{a.model} ({first['trainable_params'] / 1e6:.1f}M parameters), seq {a.seq}, batch {a.batch} a rank, "
          f"1 thread a rank, {a.rounds} rounds of {a.reps} timed steps; medians over rounds (min-max)")
    print(f"{'configuration':32s} {'step s':>22s} {'tokens/s':>26s} {'MB sent/step':>13s} {'wait s':>8s}"
          f" {'state MB':>9s} {'buffers MB':>10s}")
    figures = {}
    for name in configs:
        s, t = med(name, "step_seconds"), med(name, "tokens_per_s")
        w = med(name, "comm_wait_seconds")
        mb = res[name][0]["comm_bytes_per_step"] / 1e6
        st = res[name][0]["model_state_bytes"]
        figures[name] = {"step_s": s, "tokens_per_s": t, "comm_mb": mb, "wait_s": w,
                         "model_state_bytes": st["total"], "comm_buffer_bytes": st["comm_buffers"]}
        print(f"{name:32s} {s[0]:8.4f} ({s[1]:.4f}-{s[2]:.4f}) {t[0]:10.1f} ({t[1]:.1f}-{t[2]:.1f}) {mb:13.2f} {w[0]:8.4f}"
              f" {st['total'] / 1e6:9.2f} {st['comm_buffers'] / 1e6:10.2f}")

    # Ratios per round (side by side), then their median, min and max.
    def ratio(f):
        v = [f(i) for i in range(a.rounds)]
        return statistics.median(v), min(v), max(v)
    n = a.ranks
    one, many = res["1 rank"], res[f"{n} ranks"]
    off, z1 = res[f"{n} ranks, overlap off"], res[f"{n} ranks, ZeRO-1"]
    eff = ratio(lambda i: many[i]["tokens_per_s"] / (n * one[i]["tokens_per_s"]))
    gain = ratio(lambda i: off[i]["step_seconds"]["median"] / many[i]["step_seconds"]["median"])
    share = ratio(lambda i: off[i]["comm_wait_seconds"]["median"] / off[i]["step_seconds"]["median"])
    zero = ratio(lambda i: z1[i]["step_seconds"]["median"] / many[i]["step_seconds"]["median"])
    z2, z3 = res[f"{n} ranks, ZeRO-2"], res[f"{n} ranks, ZeRO-3 (full)"]
    zero2 = ratio(lambda i: z2[i]["step_seconds"]["median"] / many[i]["step_seconds"]["median"])
    zero3 = ratio(lambda i: z3[i]["step_seconds"]["median"] / many[i]["step_seconds"]["median"])
    print(f"weak-scaling efficiency at {n} ranks  {100 * eff[0]:.1f}% ({100 * eff[1]:.1f}-{100 * eff[2]:.1f}); target >= 85%")
    print(f"overlap gain (off / on step time)   {gain[0]:.3f}x ({gain[1]:.3f}-{gain[2]:.3f})")
    print(f"communication share, overlap off    {100 * share[0]:.1f}% ({100 * share[1]:.1f}-{100 * share[2]:.1f})")
    print(f"ZeRO-1 / unsharded step time        {zero[0]:.3f}x ({zero[1]:.3f}-{zero[2]:.3f})")
    print(f"ZeRO-2 / unsharded step time        {zero2[0]:.3f}x ({zero2[1]:.3f}-{zero2[2]:.3f})")
    print(f"ZeRO-3 / unsharded step time        {zero3[0]:.3f}x ({zero3[1]:.3f}-{zero3[2]:.3f})"
          f"  (> 1: the model that fits trains faster unsharded)")
    if a.json:
        figures.update({"weak_scaling_efficiency": eff, "overlap_gain": gain, "comm_share_overlap_off": share,
                        "zero1_over_none": zero, "zero2_over_none": zero2,
                        "zero3_over_none": zero3, "model": a.model, "seq": a.seq, "batch": a.batch})
        with open(a.json + ".tmp", "w") as f:
            json.dump(figures, f, indent=2)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
