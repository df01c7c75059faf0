#!/usr/bin/python3
"""Quantized inference speed and memory against BF16 on one Llama shape, side by side in one run.

Quantizes random:<shape> (genperf quantize, round to nearest) to each format, then for --rounds
rounds runs genperf bench infer on BF16 and on every quantized file in turn (B Q1 Q2 ... B Q1 ...),
each run warm-up + --reps repetitions (median). Reports per format the median over rounds of
prefill and decode tokens/s with min and max, the median of the per-round ratios to BF16, decode
GB/s of packed weights as a fraction of the measured read bandwidth (the best of genperf's memory
probe over the rounds; a fraction above 1 is flagged), and peak RSS.
Never run in CI (minutes; needs an otherwise idle machine).

  /usr/bin/python3 bench/quant_speed.py --shape 110m --formats q4_0,q4_k,q6_k,q8_0,q4_k_m

--stored also runs every quantized file with GENPERF_PACK=0 (weights kept in their stored row
layout instead of ops::prepare_weight's packed one), in the same rounds, as rows "<format> stored",
and reports the per-round ratios packed / stored.

--isas A,B runs every model (BF16 included) under each GENPERF_ISA value in turn, in the same
rounds, as rows "<model> @A", "<model> @B" (ratios to BF16 under the same value), and reports the
per-round ratios of the last value's tokens/s over the first's, e.g. --isas avx2,avxvnni.

--kv-types A,B does the same with the KV cache's type (genperf bench infer --kv-type), rows
"<model> kv A", e.g. --kv-types f32,f16 --decode-prompt 1024 for decode over a long context.
"""
import argparse, json, os, shutil, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"quant_speed: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return r.stdout


def med_min_max(v):
    return statistics.median(v), min(v), max(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genperf", default=os.path.join(root, "build/genperf"))
    ap.add_argument("--shape", default="110m")
    ap.add_argument("--formats", default="q4_0,q4_k,q6_k,q8_0,q4_k_m",
                    help="uniform formats, or q4_k_m for llama.cpp's mix")
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--work", default="/tmp/gp-quant-speed")
    ap.add_argument("--out", help="also write the table and raw records to OUT.md / OUT.json")
    ap.add_argument("--stored", action="store_true", help="also run each quantized file with GENPERF_PACK=0")
    ap.add_argument("--isas", help="comma-separated GENPERF_ISA values to run every model under, side by side")
    ap.add_argument("--kv-types", help="comma-separated KV cache types to run every model with, side by side")
    ap.add_argument("--decode-prompt", type=int, default=128, help="prompt tokens before decode is timed")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    thr = ["--threads", str(a.threads)] if a.threads else []
    models = {"bf16": f"random:{a.shape}"}
    for f in a.formats.split(","):
        # GGUF holds the ggml types; FP8 goes to a safetensors directory, which quantize writes
        # anew, never into an existing one.
        fp8 = f.startswith("f8")
        path = os.path.join(a.work, f"{a.shape}-{f}" + ("" if fp8 else ".gguf"))
        if fp8:
            shutil.rmtree(path, ignore_errors=True)
        recipe = f if f == "q4_k_m" else f"uniform:{f}"
        run([a.genperf, "quantize", "--model", f"random:{a.shape}", "--out", path, "--recipe", recipe] + thr)
        models[f] = path
        if a.stored and not fp8:  # FP8 is never repacked
            models[f + " stored"] = path
    isas = a.isas.split(",") if a.isas else [None]
    kvs = a.kv_types.split(",") if a.kv_types else [None]

    def suffix(isa, kv):
        return (f" @{isa}" if isa else "") + (f" kv {kv}" if kv else "")
    # (row name, model, environment, arguments) of every run of a round, and each row's BF16
    # reference (under the same settings).
    runs, ref = [], {}
    for name, m in models.items():
        for isa in isas:
            for kv in kvs:
                env = dict(os.environ)
                if name.endswith(" stored"):
                    env["GENPERF_PACK"] = "0"
                if isa:
                    env["GENPERF_ISA"] = isa
                key = name + suffix(isa, kv)
                runs.append((key, m, env, ["--kv-type", kv] if kv else []))
                ref[key] = "bf16" + suffix(isa, kv)
    # The read bandwidth floor: genperf's memory probe (best of its readings), once per round
    # between the runs, and the best of the rounds (the machine's bandwidth drifts).
    def probe_bw():
        bw = json.loads(run([a.genperf, "bench", "infer", "--model", "random:tiny", "--json", "--reps", "3",
                             "--prefill", "16", "--decode-tokens", "2"] + thr))
        return bw.get("machine", {}).get("bandwidth_gbs")
    bw_readings = []
    recs = {k: [] for k, _, _, _ in runs}
    for i in range(a.rounds):
        bw_readings.append(probe_bw())
        for k, m, env, extra in runs:
            out = run([a.genperf, "bench", "infer", "--model", m, "--json", "--no-peaks", "--reps", str(a.reps),
                       "--prefill", str(a.prefill), "--decode-prompt", str(a.decode_prompt)] + thr + extra, env=env)
            recs[k].append(json.loads(out))
        print(f"  round {i + 1}/{a.rounds} done", file=sys.stderr)

    bw_readings = [x for x in bw_readings if x]
    peak_bw = max(bw_readings) if bw_readings else None
    exceeded = []

    def pf(r): return r["prefill"][0]["tokens_per_s"]
    def dc(r): return r["decode"]["tokens_per_s"]
    lines = [f"Shape {a.shape}, prefill T={a.prefill}, decode after {a.decode_prompt} tokens, "
             f"{a.rounds} rounds x {a.reps} reps, "
             f"read bandwidth {('%.1f' % peak_bw) if peak_bw else '?'} GB/s (best of {len(bw_readings)} rounds' memory "
             f"probes{', lowest %.1f' % min(bw_readings) if bw_readings else ''}); median [min, max] over rounds; "
             "ratios: median of per-round ratios to bf16.", "",
             "| weights | bytes (MB) | prefill tok/s | x bf16 | decode tok/s | x bf16 | decode GB/s | of bw | "
             "KV cache (MB) | peak RSS (MB) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    summary = {}
    for k in recs:
        rs = recs[k]
        p, d = [pf(r) for r in rs], [dc(r) for r in rs]
        pr = [pf(r) / pf(b) for r, b in zip(rs, recs[ref[k]])]
        dr = [dc(r) / dc(b) for r, b in zip(rs, recs[ref[k]])]
        gbs = statistics.median(r["decode"]["gbs"] for r in rs)
        rss = statistics.median(r["memory"]["peak_rss_bytes"] for r in rs) / 1e6
        kvmb = rs[0]["memory"]["kv_cache_bytes"] / 1e6
        wb = rs[0]["memory"]["weights_bytes"] / 1e6
        frac = f"{gbs / peak_bw:.2f}" if peak_bw else "?"
        if peak_bw and gbs > peak_bw:  # BENCHMARKING.md, rule 8: never above the floor unflagged
            frac += " EXCEEDS"
            exceeded.append(k)
        pm, pl, ph = med_min_max(p)
        dm, dl, dh = med_min_max(d)
        lines.append(f"| {k} | {wb:.1f} | {pm:.0f} [{pl:.0f}, {ph:.0f}] | {statistics.median(pr):.2f} | "
                     f"{dm:.1f} [{dl:.1f}, {dh:.1f}] | {statistics.median(dr):.2f} | {gbs:.1f} | {frac} | {kvmb:.1f} | {rss:.0f} |")
        summary[k] = dict(prefill=p, decode=d, prefill_ratio=pr, decode_ratio=dr, decode_gbs=gbs, peak_rss_mb=rss,
                          weights_mb=wb, kv_cache_mb=kvmb, floor_exceeded=bool(peak_bw and gbs > peak_bw))
    if exceeded:
        lines += ["", f"FLAGGED: decode of {', '.join(exceeded)} read its weights faster than the memory bandwidth "
                  "floor: the floor measured the wrong limit (the weights may fit the cache); \"of bw\" is not a "
                  "fraction of a limit for them."]
    def ratios(key, over):
        pr = [pf(r) / pf(b) for r, b in zip(recs[key], recs[over])]
        dr = [dc(r) / dc(b) for r, b in zip(recs[key], recs[over])]
        return "| %s | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] |" % ((key,) + med_min_max(pr) + med_min_max(dr)), pr, dr
    if a.stored:
        lines += ["", "| weights | packed / stored prefill | packed / stored decode |", "|---|---|---|"]
        for name in models:
            if name + " stored" not in models:
                continue
            for isa in isas:
                for kv in kvs:
                    at = suffix(isa, kv)
                    line, pr, dr = ratios(name + at, name + " stored" + at)
                    lines.append(line)
                    summary[name + at]["packed_over_stored"] = dict(prefill=pr, decode=dr)
    # Per setting with several values: the last value over the first, the other setting alike.
    for axis, values in (("isa", isas), ("kv", kvs)):
        if len(values) < 2:
            continue
        def at(v, other):
            return suffix(v, other) if axis == "isa" else suffix(other, v)
        last, first = at(values[-1], None).strip(), at(values[0], None).strip()
        lines += ["", f"| weights | prefill {last} / {first} | decode {last} / {first} |", "|---|---|---|"]
        for name in models:
            for other in (kvs if axis == "isa" else isas):
                hi, lo = name + at(values[-1], other), name + at(values[0], other)
                line, pr, dr = ratios(hi, lo)
                lines.append(line.replace(f"| {hi} |", f"| {name + at(None, other)} |", 1))
                summary[hi][f"over_first_{axis}"] = dict(prefill=pr, decode=dr)
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out + ".md.tmp", "w") as f:
            f.write(text + "\n")
        os.replace(a.out + ".md.tmp", a.out + ".md")
        with open(a.out + ".json.tmp", "w") as f:
            json.dump(dict(summary=summary, peak_bw_gbs=peak_bw, bw_readings_gbs=bw_readings,
                           floor_exceeded=bool(exceeded), records=recs), f, indent=1)
        os.replace(a.out + ".json.tmp", a.out + ".json")


if __name__ == "__main__":
    main()
