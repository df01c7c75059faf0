#!/usr/bin/python3
"""How the communication thread waits (issue 24), side by side in one run: the default polled
wait against spinning (GENPERF_COMM_WAIT=spin), alternating for --rounds rounds, on 2 ranks of
one thread: `genperf bench train` (default model, --reps timed steps) at two shapes, unsharded
and fully sharded, and `genperf bench comm --mb 25`. Prints per case the median over rounds with
min and max, and the median of the per-round ratio spinning / polled (for the collectives, of the
bus bandwidth: > 1 is faster spinning; for the steps, of the time: > 1 is slower spinning).

  /usr/bin/python3 bench/comm_wait.py --rounds 5

Runs mpirun as root where needed (OpenMPI's allow-run-as-root variables). Never run in CI.
"""
import argparse, json, os, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [(64, 1, "none"), (64, 1, "full"), (256, 2, "none"), (256, 2, "full")]
WAITS = ["sleep", "spin"]


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"comm_wait: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def spread(xs, digits=4):
    return f"{statistics.median(xs):.{digits}f} ({min(xs):.{digits}f}-{max(xs):.{digits}f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genperf", default=os.path.join(HERE, "..", "build", "genperf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none", "-x", "GENPERF_COMM_WAIT", "-np", "2", a.genperf]
    got = {}
    for r in range(a.rounds):
        for wait in WAITS:
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       GENPERF_COMM_WAIT=wait)
            for seq, batch, shard in CASES:
                j = run(mpirun + ["bench", "train", "--model", "random:default", "--seq", str(seq), "--batch",
                                  str(batch), "--reps", str(a.reps), "--threads", "1", "--no-peaks", "--json",
                                  "--shard", shard], env)
                got.setdefault((f"seq {seq}, batch {batch}, {shard} (step s)", wait), []).append(
                    j["step_seconds"]["median"])
            j = run(mpirun + ["bench", "comm", "--mb", "25", "--threads", "1", "--json"], env)
            for name, c in j["collectives"].items():
                got.setdefault((f"{name}, 25 MiB (bus GB/s)", wait), []).append(c["bus_gbs"])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{'case':36s} {'polled':>24s} {'spinning':>24s} {'spinning / polled':>26s}")
    for case in dict.fromkeys(k[0] for k in got):
        polled, spun = got[(case, "sleep")], got[(case, "spin")]
        ratio = [s / p for p, s in zip(polled, spun)]
        print(f"{case:36s} {spread(polled):>24s} {spread(spun):>24s} {spread(ratio, 3) + 'x':>26s}")


if __name__ == "__main__":
    main()
