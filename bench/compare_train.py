#!/usr/bin/python3
"""Training speed, genperf vs PyTorch (python3-torch 1.13, eager; bench/torch_train.py), side by
side in one run, for each shape x precision: full optimizer steps of the same model on the same
batch shape with the same thread count. Never run in CI.

    /usr/bin/python3 bench/compare_train.py --threads 2 --rounds 3 --reps 5 --out out/compare_train.json

The engines alternate within each round (genperf then torch, the order reversed every other round
so slow drift in the machine's state falls on both); each run is the engine's own benchmark (one
warm-up step, --reps timed steps). Reported per shape x precision: tokens/s as the median of the
per-round medians with the slowest and fastest single step over all rounds, the median (min, max)
of the per-round genperf/torch ratios, MFU (genperf's train_step_flops / median step time /
genperf's measured GEMM peak of that precision, the same FLOPs and peak for both engines), and
peak RSS. The two must agree on parameters and FLOPs per step, else the run stops.

torch's f32 matmuls run on whatever libblas.so.3 is. Debian's default is the netlib reference
BLAS (see torch_train.py), against which an f32 ratio says nothing about genperf (and the 110m
row takes an hour), so the script stops when f32 is asked for and torch would load it, unless
--allow-reference-blas. Install libopenblas0-openmp (which becomes libblas.so.3), or unpack it
anywhere and pass its library directory as --torch-lib-dir (put first on torch's
LD_LIBRARY_PATH only). A genperf error (e.g. a precision it does not support yet) is reported in
its row and the other rows still run.

Before the rounds, the script checks torch's setup as it will run, and prints it and writes it
into the record ("torch_setup", "warnings"): the BLAS library torch mapped (/proc/self/maps),
OpenBLAS's kernel set, threading and thread count, torch's thread count, and torch's f32 and bf16
matmul GFLOP/s at 2048^3 against genperf's f32 GEMM peak measured just before. It stops, unless
--allow-slow-torch, when torch's thread count is not --threads or its f32 matmul runs below
--min-matmul-fraction of genperf's peak (a reference BLAS, one thread, two thread pools fighting
over the cores); it warns when OpenBLAS uses pthreads (its pool and torch's OpenMP pool then spin
on the same cores) or another thread count. Every torch run records the same figures after its
steps, and the load average of the machine is recorded before each round (a busy machine is
named in the output).
"""
import argparse, json, os, platform, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def run(cmd, env=None):
    """The JSON record a benchmark prints, or the error text when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip() or f"exit status {r.returncode}").splitlines()[-1]
    return json.loads(r.stdout), None


def peak_key(record, precision):
    """genperf's measured GEMM peak for this precision, else its f32 one (MFU against f32 then)."""
    for k in (f"gemm_peak_gflops_{precision}", "gemm_peak_gflops_f32"):
        if k in record:
            return k
    return None


def cpu_waiting_us():
    """Microseconds that some task of this machine has waited for a CPU (Linux's pressure stall
    information, /proc/pressure/cpu "some total"), or None where it is not available."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().split("total=")[1])
    except (OSError, IndexError, ValueError):
        return None


def run_contended(cmd, env=None):
    """run(), and the share of the run's wall time in which some task waited for a CPU: an engine
    runs --threads threads on as many cores, so any wait is another process taking its cores."""
    w0, t0 = cpu_waiting_us(), time.time()
    rec, err = run(cmd, env)
    w1, t1 = cpu_waiting_us(), time.time()
    if rec is not None and w0 is not None and w1 is not None:
        rec["cpu_contention"] = (w1 - w0) * 1e-6 / max(t1 - t0, 1e-9)
    return rec, err


def setup_warnings(setup, threads, peak_f32, min_fraction):
    """(fatal, warnings) about torch's setup: fatal ones stop the run without --allow-slow-torch."""
    fatal, warn = [], []
    ts = setup["thread_settings"]
    if ts["torch"] != threads:
        fatal.append(f"torch runs {ts['torch']} threads, not --threads {threads}")
    if ts["cpus_allowed"] < threads:
        fatal.append(f"the process may use {ts['cpus_allowed']} CPUs, fewer than --threads {threads}")
    ob = setup.get("openblas")
    if ob and ob["threading"] == "pthreads":
        warn.append("OpenBLAS is the pthreads build: its thread pool and torch's OpenMP pool spin on the same cores; "
                    "install libopenblas0-openmp (update-alternatives --config libblas.so.3-x86_64-linux-gnu)")
    if ob and ob["threads"] != threads:
        warn.append(f"OpenBLAS runs {ob['threads']} threads, not {threads}")
    mm = setup.get("matmul_gflops", {}).get("f32")
    if mm and peak_f32:
        frac = mm / peak_f32
        msg = (f"torch's f32 matmul runs at {mm:.0f} GFLOP/s, {100 * frac:.0f}% of genperf's f32 GEMM peak "
               f"({peak_f32:.0f} GFLOP/s)")
        if frac < min_fraction:
            fatal.append(msg + f", below --min-matmul-fraction {min_fraction}")
        elif frac < 2 * min_fraction:
            warn.append(msg)
    return fatal, warn


def span(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def setup_text(setup, peak_f32):
    """torch's setup in a few lines: library, threads, matmul speed against genperf's peak."""
    ob, ts, mm = setup.get("openblas"), setup["thread_settings"], setup.get("matmul_gflops", {})
    lines = [f"torch setup: BLAS {', '.join(setup['blas']) or '?'}"
             + (f" (OpenBLAS {ob['core']} kernels, {ob['threading']}, {ob['threads']} threads)" if ob else ""),
             f"  threads: torch {ts['torch']} (interop {ts['torch_interop']}), OMP_NUM_THREADS {ts['OMP_NUM_THREADS']}, "
             f"OPENBLAS_NUM_THREADS {ts['OPENBLAS_NUM_THREADS']}, CPUs allowed {ts['cpus_allowed']}"]
    if mm:
        rel = f", {100 * mm['f32'] / peak_f32:.0f}% of genperf's f32 GEMM peak {peak_f32:.0f}" if peak_f32 else ""
        lines.append(f"  torch.matmul 2048^3: f32 {mm['f32']:.0f} GFLOP/s{rel}; bf16 {mm['bf16']:.0f} GFLOP/s")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="default,110m")
    ap.add_argument("--precisions", default="f32,bf16")
    ap.add_argument("--batch", default="default=4,110m=1,tiny=2", help="sequences per step, per shape")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--attn", default="flash", help="genperf's attention (torch 1.13's is the explicit, naive one)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--genperf", default=os.path.join(root, "build/genperf"))
    ap.add_argument("--no-deps", action="store_true", help="skip scripts/deps.sh (python3-torch)")
    ap.add_argument("--torch-lib-dir", help="directory put first on LD_LIBRARY_PATH for torch (an optimized libblas.so.3)")
    ap.add_argument("--allow-reference-blas", action="store_true", help="run f32 even if torch gets the netlib BLAS")
    ap.add_argument("--allow-slow-torch", action="store_true",
                    help="run even if torch's threads or f32 matmul speed fail the setup check")
    ap.add_argument("--min-matmul-fraction", type=float, default=0.2,
                    help="the least fraction of genperf's f32 GEMM peak torch's f32 matmul must reach (warned below twice it)")
    ap.add_argument("--out", help="also write the full record (every round, provenance) as JSON here")
    a = ap.parse_args()
    batch = {k: int(v) for k, v in (kv.split("=") for kv in a.batch.split(","))}
    shapes, precisions = a.shapes.split(","), a.precisions.split(",")
    for s in shapes:
        if s not in batch:
            sys.exit(f"compare_train: no batch size for shape {s} in --batch {a.batch}")
    if not a.no_deps:
        subprocess.run(["bash", os.path.join(root, "scripts/deps.sh")], check=True, env=dict(os.environ, GENPERF_WITH_TORCH="1"))

    torch_env = dict(os.environ)
    if a.torch_lib_dir:
        torch_env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [os.path.abspath(a.torch_lib_dir), os.environ.get("LD_LIBRARY_PATH")]))
    probe, err = run(["/usr/bin/python3", os.path.join(here, "torch_train.py"), "--blas-only", "--threads", str(a.threads)],
                     torch_env)
    if err:
        sys.exit(f"compare_train: torch does not start: {err}")
    if probe["blas_reference"] and "f32" in precisions and not a.allow_reference_blas:
        sys.exit(f"compare_train: torch's f32 matmuls would run on the netlib reference BLAS ({', '.join(probe['blas'])}): "
                 "install libopenblas0-openmp, or unpack it (apt-get download libopenblas0-openmp; dpkg -x *.deb DIR) "
                 "and pass --torch-lib-dir DIR/usr/lib/x86_64-linux-gnu/openblas-openmp; --allow-reference-blas runs anyway")
    # genperf's f32 GEMM peak on this machine now, to hold torch's matmul to.
    gpeak, err = run([a.genperf, "bench", "train", "--model", "random:tiny", "--seq", "16", "--batch", "1", "--reps", "1",
                      "--threads", str(a.threads), "--json"])
    peak_f32 = gpeak.get("gemm_peak_gflops_f32") if gpeak else None
    # The host's memory bandwidth now (genperf's DRAM probe), and again after the rounds: the
    # state of a shared host that the CPU-contention probe cannot see (another tenant's memory
    # traffic slows torch's eager, allocation-heavy step more than genperf's; docs/BENCH_TRAIN.md).
    def bandwidth():
        rec, err = run([a.genperf, "bench", "infer", "--model", "random:default", "--reps", "1",
                        "--threads", str(a.threads), "--json"])
        return rec["machine"].get("bandwidth_gbs") if rec and "machine" in rec else None
    bw = [bandwidth()]
    fatal, warnings = setup_warnings(probe, a.threads, peak_f32, a.min_matmul_fraction)
    print(setup_text(probe, peak_f32), file=sys.stderr)
    for w in fatal + warnings:
        print(f"compare_train: WARNING: {w}", file=sys.stderr)
    if fatal and not a.allow_slow_torch:
        sys.exit("compare_train: torch would run below its own speed on this machine, so a ratio would flatter genperf; "
                 "fix the setup above, or pass --allow-slow-torch to run anyway (the warnings go into the output)")
    warnings = fatal + warnings

    def cmds(shape, prec):
        common = ["--seq", str(a.seq), "--batch", str(batch[shape]), "--precision", prec, "--threads", str(a.threads),
                  "--reps", str(a.reps)]
        gp = [a.genperf, "bench", "train", "--model", f"random:{shape}", "--attn", a.attn, "--json"] + common
        pt = ["/usr/bin/python3", os.path.join(here, "torch_train.py"), "--shape", shape] + common
        return gp, pt

    cases = [(s, p) for s in shapes for p in precisions]
    res = {c: {"genperf": [], "torch": [], "genperf_error": None, "torch_error": None} for c in cases}
    t0 = time.time()
    loads = []
    for i in range(a.rounds):
        loads.append(os.getloadavg()[0])  # before the round: what else ran on the machine
        for c in cases:
            gp, pt = cmds(*c)
            r = res[c]
            order = [("genperf", gp), ("torch", pt)]
            for engine, cmd in order if i % 2 == 0 else order[::-1]:
                if r[engine + "_error"]:
                    continue  # failed once: it will fail again
                rec, err = run_contended(cmd, torch_env if engine == "torch" else None)
                if err:
                    r[engine + "_error"] = err
                    print(f"compare_train: {' '.join(cmd)} failed: {err}", file=sys.stderr)
                else:
                    r[engine].append(rec)
            print(f"round {i + 1}/{a.rounds} {c[0]} {c[1]} done ({time.time() - t0:.0f} s)", file=sys.stderr)

    rows, torch_info = [], None
    for (shape, prec), r in res.items():
        row = {"shape": shape, "precision": prec, "batch": batch[shape], "seq": a.seq,
               "genperf_error": r["genperf_error"], "torch_error": r["torch_error"]}
        for e in ("genperf", "torch"):
            recs = r[e]
            if not recs:
                continue
            n = batch[shape] * a.seq
            steps = [t for x in recs for t in x["step_seconds"]["samples"]]
            row[e] = {"tokens_per_s": statistics.median(x["tokens_per_s"] for x in recs),
                      "tokens_per_s_min": n / max(steps), "tokens_per_s_max": n / min(steps),
                      "gflops": statistics.median(x["gflops"] for x in recs),
                      "peak_rss": max(x["peak_rss"] for x in recs)}
        g, t = r["genperf"], r["torch"]
        if t:
            torch_info = t[0]
        if g and t:
            if g[0]["parameters"] != t[0]["parameters"] or abs(g[0]["flops_per_step"] / t[0]["flops_per_step"] - 1) > 1e-9:
                sys.exit(f"compare_train: {shape}: the engines disagree on the model: parameters "
                         f"{g[0]['parameters']} vs {t[0]['parameters']}, FLOPs per step {g[0]['flops_per_step']} "
                         f"vs {t[0]['flops_per_step']}")
            k = min(len(g), len(t))
            row["ratio"] = span([g[j]["tokens_per_s"] / t[j]["tokens_per_s"] for j in range(k)])
        if g:
            row["genperf_precision"] = g[0].get("effective_precision", g[0].get("precision"))
            row["genperf_attention"] = g[0]["attention"]
            row["genperf_accounted_bytes"] = g[0]["memory"]["total"]
            key = peak_key(g[0], prec)
            if key:
                peak = statistics.median(x[key] for x in g)
                row["peak"] = {"key": key, "gflops": peak}
                for e in ("genperf", "torch"):
                    if e in row:
                        row[e]["mfu"] = row[e]["gflops"] / peak
                        # BENCHMARKING.md, rule 8: a fraction above 1 says the peak measured the wrong limit.
                        row[e]["floor_exceeded"] = row[e]["mfu"] > 1
                        if row[e]["floor_exceeded"]:
                            warnings.append(f"{shape} {prec}: {e}'s MFU is {100 * row[e]['mfu']:.0f}% of the measured "
                                            f"{key.split('_')[-1]} peak: the peak measured the wrong limit")
        if t:
            row["torch_matmul_gflops_f32"] = statistics.median(x["matmul_gflops"]["f32"] for x in t)
        cont = [x["cpu_contention"] for x in g + t if "cpu_contention" in x]
        if cont:
            row["cpu_contention"] = span(cont)
        rows.append(row)

    bw.append(bandwidth())
    gprov = next((x[0]["provenance"] for x in (r["genperf"] for r in res.values()) if x), {})
    print(f"\nTraining steps, genperf ({a.attn} attention) vs PyTorch {torch_info['torch'] if torch_info else '?'} "
          f"(eager, explicit attention): {a.threads} threads, {a.rounds} alternating rounds x {a.reps} steps, "
          f"seq {a.seq}")
    print(f"machine: {gprov.get('cpu', '?')} | isa {gprov.get('isa_path', '?')} | genperf {gprov.get('commit', '?')} "
          f"({gprov.get('build_type', '?')})")
    print(setup_text(probe, peak_f32))
    print("memory bandwidth (genperf's probe, " + f"{a.threads} threads): "
          + ", ".join("-" if x is None else f"{x:.0f} GB/s" for x in bw) + " before and after the rounds")
    if torch_info:
        flag = "  ** REFERENCE BLAS: torch f32 figures are not a fair baseline **" if torch_info["blas_reference"] else ""
        print(f"torch BLAS (f32 matmuls): {', '.join(torch_info['blas']) or '?'}{flag}")
    cont = [x["cpu_contention"] for r in res.values() for e in ("genperf", "torch") for x in r[e] if "cpu_contention" in x]
    if cont:
        print(f"CPU contention during the runs (share of each run's time in which another task waited for a CPU): "
              f"median {100 * statistics.median(cont):.0f}% (min {100 * min(cont):.0f}%, max {100 * max(cont):.0f}%); "
              f"load average before each round: {', '.join(f'{x:.1f}' for x in loads)} ({os.cpu_count()} CPUs)")
        if statistics.median(cont) > 0.10:
            warnings.append("the machine was busy: some task waited for a CPU during "
                            f"{100 * statistics.median(cont):.0f}% of the runs' time. Alternating the engines does not "
                            "cancel this: on a saturated machine torch's eager step slowed about twice as much as "
                            "genperf's (docs/BENCH_TRAIN.md), so the ratios overstate genperf's lead")
    for w in warnings:
        print(f"** WARNING: {w}")
    print()
    print("| shape | prec | batch x seq | genperf tok/s (min-max) | torch tok/s (min-max) | ratio (min-max) "
          "| MFU genperf | MFU torch | peak RSS genperf / torch | CPU contention |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x: f"{x['tokens_per_s']:.0f} ({x['tokens_per_s_min']:.0f}-{x['tokens_per_s_max']:.0f})"
    for row in rows:
        g, t = row.get("genperf"), row.get("torch")
        gcol = fmt(g) if g else f"error: {row['genperf_error']}"
        if g and row.get("genperf_precision") not in (None, row["precision"]):
            gcol += f" [ran {row['genperf_precision']}]"
        tcol = fmt(t) if t else f"error: {row['torch_error']}"
        rat = row.get("ratio")
        rcol = f"{rat['median']:.2f}x ({rat['min']:.2f}-{rat['max']:.2f})" if rat else "-"
        mfu = lambda x: f"{100 * x['mfu']:.0f}%" if x and "mfu" in x else "-"
        peak = row.get("peak")
        mcol = mfu(g) + (f" of {peak['gflops']:.0f} GF/s ({peak['key'].split('_')[-1]})" if peak else "")
        mcol += " EXCEEDS" if g and g.get("floor_exceeded") else ""
        rss = lambda x: f"{x['peak_rss'] / 1e6:.0f}" if x else "-"
        cc = row.get("cpu_contention")
        ccol = f"{100 * cc['median']:.0f}% ({100 * cc['min']:.0f}-{100 * cc['max']:.0f}%)" if cc else "-"
        print(f"| {row['shape']} | {row['precision']} | {row['batch']} x {row['seq']} | {gcol} | {tcol} | {rcol} "
              f"| {mcol} | {mfu(t)} | {rss(g)} / {rss(t)} MB | {ccol} |")

    if a.out:
        record = {"benchmark": "compare_train", "command": " ".join(sys.argv), "threads": a.threads,
                  "rounds": a.rounds, "reps": a.reps, "seq": a.seq, "genperf_attention": a.attn,
                  "genperf_provenance": gprov, "python": platform.python_version(),
                  "torch": {k: torch_info[k] for k in ("torch", "blas", "blas_reference", "mkldnn")} if torch_info else None,
                  "torch_lib_dir": a.torch_lib_dir, "torch_setup": probe, "genperf_f32_peak_gflops": peak_f32,
                  "bandwidth_gbs_before_after": bw,
                  "warnings": warnings, "load_average_before_rounds": loads,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows,
                  "runs": [{"shape": s, "precision": p, **{e: res[(s, p)][e] for e in ("genperf", "torch")}}
                           for s, p in cases]}
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out + ".tmp", "w") as f:
            json.dump(record, f, indent=1)
        os.replace(a.out + ".tmp", a.out)
        print(f"\nwrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
