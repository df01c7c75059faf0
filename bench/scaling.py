#!/usr/bin/python3
"""Training across ranks, side by side in one run (issue 24): `genperf bench train` on one rank
and under `mpirun -np 2` (one thread a rank, --batch sequences a rank), alternating for --rounds
rounds; each run is a warm-up step plus --reps timed steps (median). Prints per configuration
the median over rounds of the step time and tokens/s with min and max, and:

  weak-scaling efficiency  tokens/s of 2 ranks / (2 x tokens/s of 1 rank), same batch a rank
  overlap gain             step time with buckets reduced after backward / during it
                           (--comm-overlap off / on; the rest run genperf's default, auto)
  communication share      seconds a rank waited on communication with overlap off / step time
  ZeRO-1, 2, 3 cost        step time with the optimizer, gradients or everything sharded /
                           unsharded (the study's finding: a model that fits trains faster unsharded)

  /usr/bin/python3 bench/scaling.py --model random:default --seq 256 --batch 2 --rounds 5
  /usr/bin/python3 bench/scaling.py --model random:default --seq 32 --batch 1   (communication-heavy)
  /usr/bin/python3 bench/scaling.py --workload sr --batch 4 --size 64   (the SR diffusion model:
      `genperf bench sr`, --batch crops a rank, its default UNet unless --model names a directory)

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
    ap.add_argument("--workload", choices=["train", "sr"], default="train",
                    help="train: the LLM (bench train); sr: the SR diffusion model (bench sr)")
    ap.add_argument("--model", help="random:default (train) or default (sr) unless given")
    ap.add_argument("--seq", type=int, default=256, help="train: tokens a sequence")
    ap.add_argument("--size", type=int, default=64, help="sr: crop side")
    ap.add_argument("--batch", type=int, default=2, help="sequences (train) or crops (sr) per rank and step")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--bucket-mb", default="25")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    sr = a.workload == "sr"
    a.model = a.model or ("default" if sr else "random:default")
    common = ["--reps", str(a.reps), "--threads", "1", "--no-peaks", "--json", "--bucket-mb", a.bucket_mb]
    if sr:  # bench sr's --batch is the global batch: the same crops a rank at any rank count
        def base(ranks):
            return [a.genperf, "bench", "sr", "--model", a.model, "--size", str(a.size),
                    "--batch", str(a.batch * ranks)] + common
    else:  # bench train's --batch is a rank's
        def base(ranks):
            return [a.genperf, "bench", "train", "--model", a.model, "--seq", str(a.seq), "--batch", str(a.batch)] + common
    mpi = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(a.ranks)]
    many_cmd = mpi + base(a.ranks)
    configs = {
        "1 rank": base(1),
        f"{a.ranks} ranks": many_cmd,
        f"{a.ranks} ranks, overlap on": many_cmd + ["--comm-overlap", "on"],
        f"{a.ranks} ranks, overlap off": many_cmd + ["--comm-overlap", "off"],
        f"{a.ranks} ranks, ZeRO-1": many_cmd + ["--shard", "optimizer"],
        f"{a.ranks} ranks, ZeRO-2": many_cmd + ["--shard", "grads"],
        f"{a.ranks} ranks, ZeRO-3 (full)": many_cmd + ["--shard", "full"],
    }

    def common_keys(r):  # the two benches' records under one set of names
        if not sr:
            return r
        return dict(r, step_seconds=r["train_step_seconds"], tokens_per_s=r["train_images_per_s"],
                    trainable_params=r["parameters"])
    res = {k: [] for k in configs}
    for rnd in range(a.rounds):
        for name, cmd in configs.items():
            res[name].append(common_keys(run(cmd, env)))
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    unit = "images/s" if sr else "tokens/s"

    def med(name, key):
        v = [r[key]["median"] if isinstance(r[key], dict) else r[key] for r in res[name]]
        return statistics.median(v), min(v), max(v)

    first = res["1 rank"][0]
    shape = f"crops {a.size}x{a.size}" if sr else f"seq {a.seq}"
    print(f"{a.workload} {a.model} ({first['trainable_params'] / 1e6:.2f}M parameters), {shape}, batch {a.batch} a rank, "
          f"1 thread a rank, {a.rounds} rounds of {a.reps} timed steps; medians over rounds (min-max)")
    print(f"{'configuration':32s} {'step s':>22s} {unit:>26s} {'MB sent/step':>13s} {'wait s':>8s}"
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
    on, off, z1 = res[f"{n} ranks, overlap on"], res[f"{n} ranks, overlap off"], res[f"{n} ranks, ZeRO-1"]
    eff = ratio(lambda i: many[i]["tokens_per_s"] / (n * one[i]["tokens_per_s"]))
    gain = ratio(lambda i: off[i]["step_seconds"]["median"] / on[i]["step_seconds"]["median"])
    def wait(r):  # bench train: over the timed steps; bench sr: the last step's
        return r["comm_wait_seconds"]["median"] if isinstance(r["comm_wait_seconds"], dict) else r["comm_wait_seconds"]
    share = ratio(lambda i: wait(off[i]) / off[i]["step_seconds"]["median"])
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
                        "zero3_over_none": zero3, "workload": a.workload, "model": a.model, "seq": a.seq,
                        "size": a.size, "batch": a.batch})
        with open(a.json + ".tmp", "w") as f:
            json.dump(figures, f, indent=2)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
