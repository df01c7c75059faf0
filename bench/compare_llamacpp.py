#!/usr/bin/python3
"""genperf against llama.cpp on the same GGUF files, side by side in one run.

Writes a random ~110M-shaped Llama (genperf random-model, with the default model's 4096-piece
tokenizer, which llama.cpp needs in the file) and its GGUF files: bf16 (genperf convert) and each
format (genperf quantize, round to nearest). Then, for --rounds rounds, runs every file in genperf
(`genperf bench infer`) and in llama.cpp (tools/llamacpp/bench.mjs: node-llama-cpp's prebuilt CPU
build, which scripts/deps.sh installs), one after the other; each run is a warm-up and --reps
repetitions (median). Reports per file the median over rounds of prefill and decode tokens/s in
each engine, with min and max, and the median [min, max] of the per-round ratios genperf /
llama.cpp. llama.cpp's figures are its own counts (llama_perf_context), without the JavaScript
around the calls.

One thread by default: node-llama-cpp runs llama.cpp's graphs without a persistent thread pool, so
ggml starts its worker threads anew for every graph and, with as many threads as this VM's two
cores, spins in ggml_barrier (69% of the samples in a perf profile here; decode ran at 3 tokens/s
with 2 threads against 260 with 1), which is not how llama.cpp's own programs run. With one
thread, both engines run their kernels on one core and nothing else competes.
Never run in CI (about 10 minutes; needs an otherwise idle machine).

  /usr/bin/python3 bench/compare_llamacpp.py --formats bf16,q4_0,q4_k,q6_k,q8_0,q4_k_m --rounds 5
"""
import argparse, json, os, shutil, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
tool = os.path.join(root, "tools/llamacpp")


def run(cmd, cwd=None):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit(f"compare_llamacpp: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return r.stdout


def mmm(v):
    return statistics.median(v), min(v), max(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genperf", default=os.path.join(root, "build/genperf"))
    ap.add_argument("--shape", default="110m")
    ap.add_argument("--formats", default="bf16,q4_0,q4_k,q6_k,q8_0,q4_k_m",
                    help="bf16 (unquantized), ggml formats, or q4_k_m for llama.cpp's mix")
    ap.add_argument("--prefill", default="128,512")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--decode-prompt", type=int, default=128, help="prompt tokens before decode is timed")
    ap.add_argument("--kv-type", default="f32",
                    help="genperf's KV cache type (llama.cpp keeps its default f16 cache)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default="/tmp/gp-llamacpp")
    ap.add_argument("--out", help="also write the table and raw records to OUT.md / OUT.json")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(tool, "node_modules/@node-llama-cpp/linux-x64/package.json")):
        sys.exit("compare_llamacpp: node-llama-cpp is not installed in tools/llamacpp: run scripts/deps.sh "
                 "(needs Node.js >= 20 and the npm registry)")
    os.makedirs(a.work, exist_ok=True)
    src = os.path.join(a.work, a.shape)
    shutil.rmtree(src, ignore_errors=True)
    run([a.genperf, "random-model", "--shape", a.shape, "--tokenizer",
         os.path.join(root, "models/default/tokenizer.model"), "--out", src])
    models = {}
    for f in a.formats.split(","):
        path = os.path.join(a.work, f"{a.shape}-{f}.gguf")
        if f == "bf16":
            run([a.genperf, "convert", "--model", src, "--out", path])
        else:
            run([a.genperf, "quantize", "--model", src, "--out", path,
                 "--recipe", f if f == "q4_k_m" else f"uniform:{f}"])
        models[f] = path
    lengths = [int(x) for x in a.prefill.split(",")]
    common = ["--prefill", a.prefill, "--decode-tokens", str(a.decode_tokens), "--reps", str(a.reps),
              "--threads", str(a.threads), "--decode-prompt", str(a.decode_prompt)]
    recs = {f: {"genperf": [], "llama.cpp": []} for f in models}
    for i in range(a.rounds):
        for f, path in models.items():
            g = json.loads(run([a.genperf, "bench", "infer", "--model", path, "--json", "--no-peaks",
                                "--kv-type", a.kv_type] + common))
            l = json.loads(run(["node", "bench.mjs", path] + common, cwd=tool))
            recs[f]["genperf"].append(
                dict(prefill=[p["tokens_per_s"] for p in g["prefill"]], decode=g["decode"]["tokens_per_s"],
                     weights_mb=g["memory"]["weights_bytes"] / 1e6))
            recs[f]["llama.cpp"].append(
                dict(prefill=[p["tokens_per_s_llama"]["median"] for p in l["prefill"]],
                     decode=l["decode"]["tokens_per_s_llama"]["median"],
                     decode_wall=l["decode"]["tokens_per_s_wall"]["median"]))
        print(f"  round {i + 1}/{a.rounds} done", file=sys.stderr)

    cols = [f"prefill {t}" for t in lengths] + ["decode"]
    lines = [f"Shape {a.shape} (vocab 4096), {a.threads} thread(s), decode after {a.decode_prompt} tokens, "
             f"genperf's KV cache {a.kv_type} (llama.cpp's f16), {a.rounds} rounds x {a.reps} reps; tokens/s, "
             f"median [min, max] over rounds; ratio: median [min, max] of the per-round genperf / llama.cpp.", "",
             "| file | MB | " + " | ".join(f"{c}: genperf | llama.cpp | ratio" for c in cols) + " |",
             "|---|---|" + "---|---|---|" * len(cols)]
    summary = {}
    for f in models:
        g, l = recs[f]["genperf"], recs[f]["llama.cpp"]
        cells, s = [], {}
        for k, c in enumerate(cols):
            pick = (lambda r: r["decode"]) if c == "decode" else (lambda r, k=k: r["prefill"][k])
            gv, lv = [pick(r) for r in g], [pick(r) for r in l]
            ratio = [x / y for x, y in zip(gv, lv)]
            cells.append("%.0f [%.0f, %.0f] | %.0f [%.0f, %.0f] | **%.2f** [%.2f, %.2f]" % (mmm(gv) + mmm(lv) + mmm(ratio)))
            s[c] = dict(genperf=gv, llama_cpp=lv, ratio=ratio)
        lines.append(f"| {f} | {g[0]['weights_mb']:.1f} | " + " | ".join(cells) + " |")
        summary[f] = s
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out + ".md.tmp", "w") as fh:
            fh.write(text + "\n")
        os.replace(a.out + ".md.tmp", a.out + ".md")
        with open(a.out + ".json.tmp", "w") as fh:
            json.dump(dict(summary=summary, records=recs, args=vars(a)), fh, indent=1)
        os.replace(a.out + ".json.tmp", a.out + ".json")


if __name__ == "__main__":
    main()
