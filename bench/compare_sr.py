#!/usr/bin/python3
"""The SR diffusion UNet, genperf vs PyTorch (python3-torch 1.13, eager, channels_last;
bench/torch_sr.py), side by side in one run: training steps and sampler steps of the same network
on the same batch with the same thread count. Never run in CI.

    /usr/bin/python3 bench/compare_sr.py --model default --threads 2 --rounds 5 --out out/compare_sr.json
    /usr/bin/python3 bench/compare_sr.py --model default --threads 2 --rounds 5 --precision bf16

--precision bf16 runs both in mixed precision: genperf's convolutions on bf16 operands with f32
sums (--precision bf16), PyTorch under torch.autocast("cpu", bfloat16), where convolutions and
linear layers take bf16 (and group norm runs in f32, as diffusion code does it). The run stops if
genperf falls back to f32 (a CPU without AVX512-BF16).

Each round runs `genperf bench sr` and torch_sr.py (the order reversed every other round, so that
drift in the machine's state falls on both); each is the engine's own benchmark (one warm-up,
--reps timed steps). Reported per measure: images/s as the median of the per-round medians with
the slowest and fastest single step over all rounds, and the median (min, max) of the per-round
genperf/torch ratios. Both engines must count the same parameters, else the run stops. The CPU
contention of each run (the share of its wall time in which some task waited for a CPU, from
/proc/pressure/cpu) is recorded: a figure measured on a busy machine says so.
"""
import argparse, json, os, statistics, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
sys.path.insert(0, here)
from compare_train import run_contended  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="default", help="an SR model directory, or default")
    p.add_argument("--genperf", default=os.path.join(root, "build", "genperf"))
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--out")
    a = p.parse_args()

    common = ["--batch", str(a.batch), "--size", str(a.size), "--reps", str(a.reps)]
    gp_cmd = [a.genperf, "bench", "sr", "--model", a.model, "--threads", str(a.threads), "--json",
              "--precision", a.precision, *common]
    first, err = run_contended(gp_cmd)
    if first is None:
        sys.exit(f"genperf bench sr failed: {err}")
    if first.get("precision", "f32") != a.precision:
        sys.exit(f"genperf ran {first.get('precision')} for --precision {a.precision} (no AVX512-BF16 here)")
    cfg_dir = tempfile.mkdtemp(prefix="compare_sr-")
    cfg = os.path.join(cfg_dir, "config.json")
    with open(cfg, "w") as f:
        json.dump(first["config"], f)
    torch_cmd = ["/usr/bin/python3", os.path.join(here, "torch_sr.py"), "--config", cfg,
                 "--threads", str(a.threads), "--precision", a.precision, *common]

    rounds = []
    for r in range(a.rounds):
        order = [("genperf", gp_cmd + ["--no-peaks"]), ("torch", torch_cmd)]
        if r % 2:
            order.reverse()
        rec = {}
        for name, cmd in order:
            out, err = run_contended(cmd)
            if out is None:
                sys.exit(f"{name} failed: {err}")
            rec[name] = out
        if rec["genperf"]["parameters"] != rec["torch"]["parameters"]:
            sys.exit(f"parameters differ: genperf {rec['genperf']['parameters']}, torch {rec['torch']['parameters']}")
        rounds.append(rec)
        print(f"round {r + 1}: train {rec['genperf']['train_images_per_s']:.1f} vs {rec['torch']['train_images_per_s']:.1f}"
              f" images/s, sample {rec['genperf']['sample_images_per_s_per_step']:.1f} vs"
              f" {rec['torch']['sample_images_per_s_per_step']:.1f} images/s per step", file=sys.stderr)

    def summary(key, seconds):
        out = {}
        for e in ("genperf", "torch"):
            med = [x[e][key] for x in rounds]
            steps = [s for x in rounds for s in x[e][seconds]["samples"]]
            out[e] = {"images_per_s": statistics.median(med), "slowest": a.batch / max(steps), "fastest": a.batch / min(steps)}
        ratios = [x["genperf"][key] / x["torch"][key] for x in rounds]
        out["ratio"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
        return out

    result = {
        "model": a.model, "precision": a.precision, "config": first["config"], "parameters": first["parameters"], "batch": a.batch,
        "size": a.size, "threads": a.threads, "rounds": a.rounds, "reps": a.reps,
        "forward_flops": first["forward_flops"], "gemm_peak_gflops_f32": first.get("gemm_peak_gflops_f32"),
        "train": summary("train_images_per_s", "train_step_seconds"),
        "sample": summary("sample_images_per_s_per_step", "sample_step_seconds"),
        "cpu_contention": {e: [x[e].get("cpu_contention") for x in rounds] for e in ("genperf", "torch")},
        "provenance": first["provenance"], "torch": rounds[0]["torch"]["torch"],
    }
    for m in ("train", "sample"):
        s = result[m]
        print(f"{m:6s} genperf {s['genperf']['images_per_s']:7.1f} images/s ({s['genperf']['slowest']:.1f} .. "
              f"{s['genperf']['fastest']:.1f})  torch {s['torch']['images_per_s']:7.1f} ({s['torch']['slowest']:.1f} .. "
              f"{s['torch']['fastest']:.1f})  ratio {s['ratio']['median']:.2f} ({s['ratio']['min']:.2f} .. {s['ratio']['max']:.2f})")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
