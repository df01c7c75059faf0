#!/usr/bin/python3
"""The quantization study's Pareto table: for one model, every uniform format, llama.cpp's q4_k_m
mix, and the sensitivity-guided allocation (--recipe auto) at the bits per weight of q4_k_m and at
4.0 and 4.5, each scored by genperf itself: perplexity on a text, KL divergence from the source
model (mean, top-1 agreement), multiple-choice accuracy, and prefill/decode speed and peak memory
(genperf bench infer). Prints a Markdown table and writes it with the raw records as JSON.

  /usr/bin/python3 bench/quant_pareto.py --model models/default --calib CALIB.txt \\
      --ppl-text /tmp/gp-data/eval/heldout_ppl.txt --mc /tmp/gp-data/eval/heldout_mc.jsonl \\
      --work /tmp/gp-pareto --out /tmp/gp-pareto/pareto

Speed columns are only meaningful on an otherwise idle machine (--no-bench skips them).
"""
import argparse, json, math, os, shutil, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def run(cmd, want_json=True):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"quant_pareto: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    print(f"  {' '.join(cmd[1:4])} ... {time.time() - t0:.1f} s", file=sys.stderr)
    return json.loads(r.stdout) if want_json else r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genperf", default=os.path.join(root, "build/genperf"))
    ap.add_argument("--model", help="the source model (HF directory)")
    ap.add_argument("--calib", help="calibration text for the sensitivity map (not the eval text)")
    ap.add_argument("--sensitivity", help="an existing PREFIX.json of genperf sensitivity (else measured here)")
    ap.add_argument("--ppl-text")
    ap.add_argument("--mc", action="append", default=[], help="multiple-choice JSONL (repeatable)")
    ap.add_argument("--formats", default="q2_k,q3_k,q4_0,q4_k,q5_k,q6_k,q8_0")
    ap.add_argument("--auto-bpw", default="q4_k_m,4.0,4.5",
                    help="budgets for --recipe auto: numbers, or plan names (q4_k_m, uniform:q4_k) for that plan's bpw")
    ap.add_argument("--method", default="rtn", help="quantizer for every plan (rtn, imatrix, gptq)")
    ap.add_argument("--ctx", type=int, default=256, help="window of the sensitivity map and of eval ppl/kl")
    ap.add_argument("--calib-tokens", type=int, default=0, help="tokens of --calib to use (0: all)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-bench", action="store_true", help="skip bench infer (speed and memory)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ppl-chars", type=int, default=0, help="score only the first N characters of --ppl-text (0: all)")
    ap.add_argument("--mc-limit", type=int, default=0, help="score only the first N tasks of each --mc file (0: all)")
    ap.add_argument("--work", help="directory for the quantized models")
    ap.add_argument("--out", required=True, help="writes OUT.md and OUT.json")
    ap.add_argument("--report", metavar="JSON",
                    help="measure nothing: render the tables again from an earlier OUT.json")
    a = ap.parse_args()
    if a.report:
        prev = json.load(open(a.report))
        for k in ("model", "ppl_text", "mc", "method", "ctx"):
            setattr(a, k, prev[k])
        rows, sens = prev["rows"], prev["sensitivity"]
        a.no_bench = not all("decode_tok_s" in r for r in rows)
        smap = json.load(open(sens))
    else:
        for k in ("model", "calib", "ppl_text", "work"):
            if not getattr(a, k):
                ap.error(f"--{k.replace('_', '-')} is required (unless --report)")
        rows, sens, smap = measure(a)
    render(a, rows, sens, smap)


def measure(a):
    """Quantizes and scores every plan; returns the rows, the sensitivity map's path and the map."""

    gp = [a.genperf]
    thr = ["--threads", str(a.threads)] if a.threads else []
    os.makedirs(a.work, exist_ok=True)

    # Shorter eval sets when asked (copies in --work).
    if a.ppl_chars:
        text = open(a.ppl_text, encoding="utf-8").read()[: a.ppl_chars]
        a.ppl_text = os.path.join(a.work, "ppl_text.txt")
        open(a.ppl_text, "w", encoding="utf-8").write(text)
    if a.mc_limit:
        cut = []
        for f in a.mc:
            lines = [l for l in open(f, encoding="utf-8") if l.strip()][: a.mc_limit]
            out = os.path.join(a.work, os.path.basename(f))
            open(out, "w", encoding="utf-8").writelines(lines)
            cut.append(out)
        a.mc = cut

    sens = a.sensitivity
    if not sens:
        prefix = os.path.join(a.work, "sensitivity")
        cmd = gp + ["sensitivity", "--model", a.model, "--calib", a.calib, "--formats", a.formats,
                    "--ctx", str(a.ctx), "--method", a.method, "--out", prefix, "--json"] + thr
        if a.calib_tokens:
            cmd += ["--tokens", str(a.calib_tokens)]
        print("measuring the sensitivity map", file=sys.stderr)
        run(cmd)
        sens = prefix + ".json"
    smap = json.load(open(sens))

    # The plans: uniform formats, q4_k_m, then auto at q4_k_m's bpw and the extra budgets.
    plans = [(f"uniform:{f}", ["--recipe", f"uniform:{f}"]) for f in a.formats.split(",")]
    plans.append(("q4_k_m", ["--recipe", "q4_k_m"]))
    # Plans are calibrated on the tokens and windows the map was measured on (GPTQ's Gram
    # matrices gain from them: default model, q2_k, 8192 tokens in windows of 256 against
    # quantize's default 4096 in 512: held-out KL 0.225 against 0.237).
    quant_extra = ["--method", a.method]
    if a.method != "rtn":
        quant_extra += ["--calib", a.calib, "--ctx", str(smap.get("ctx", a.ctx)),
                        "--calib-tokens", str(smap["tokens"])]
    rows = []

    def evaluate(name, model_dir, qrec):
        print(f"{name}", file=sys.stderr)
        r = {"plan": name, "model": model_dir}
        if qrec:
            r["bpw"] = qrec["bpw"]
            r["total_bytes"] = qrec["total_bytes"]
            r["compression_vs_bf16"] = qrec.get("compression_vs_bf16")
            r["format_counts"] = qrec.get("format_counts")
            r["notes"] = qrec.get("notes")
        ppl = run(gp + ["eval", "ppl", "--model", model_dir, "--text", a.ppl_text, "--ctx", str(a.ctx), "--json"] + thr)
        r["ppl"] = ppl["ppl"]
        if model_dir != a.model:
            kl = run(gp + ["eval", "kl", "--model", model_dir, "--ref", a.model, "--text", a.ppl_text, "--ctx", str(a.ctx),
                           "--json"] + thr)
            r["kl"] = kl["kl_mean"]
            r["kl_p99"] = kl["kl_p99"]
            r["top1"] = kl["top1_agreement"]
        else:
            r["kl"], r["kl_p99"], r["top1"] = 0.0, 0.0, 1.0
        r["mc"] = {}
        for f in a.mc:
            mc = run(gp + ["eval", "mc", "--model", model_dir, "--tasks", f, "--json"] + thr)
            r["mc"][os.path.basename(f)] = {"acc": mc["acc"], "acc_norm": mc["acc_norm"], "acc_pmi": mc["acc_pmi"],
                                             "n": mc["n"]}
        if not a.no_bench:
            b = run(gp + ["bench", "infer", "--model", model_dir, "--json", "--no-peaks", "--reps", str(a.reps),
                          "--prefill", "256", "--decode-prompt", "128", "--decode-tokens", "32"] + thr)
            r["prefill_tok_s"] = b["prefill"][0]["tokens_per_s"]
            r["decode_tok_s"] = b["decode"]["tokens_per_s"]
            r["peak_rss_bytes"] = b["memory"]["peak_rss_bytes"]
            r["weights_bytes"] = b["memory"]["weights_bytes"]
        rows.append(r)
        return r

    def quantize(name, args):
        out = os.path.join(a.work, name.replace(":", "_").replace("@", "_at_"))
        shutil.rmtree(out, ignore_errors=True)
        rec = run(gp + ["quantize", "--model", a.model, "--out", out, "--json"] + args + quant_extra + thr)
        return out, rec

    src = evaluate("source", a.model, None)
    info = run(gp + ["info", "--model", a.model, "--json"])
    src["total_bytes"] = info["weights_bytes"]
    src["bpw"] = 8.0 * sum(t["source_bytes"] for t in smap["tensors"]) / smap["quantizable_elements"]
    bf16_bytes = 2 * info["parameters"]
    src["compression_vs_bf16"] = bf16_bytes / info["weights_bytes"]

    bpw_of = {}
    for name, args in plans:
        out, rec = quantize(name, args)
        evaluate(name, out, rec)
        bpw_of[name] = rec["bpw"]
    for x in [x for x in a.auto_bpw.split(",") if x]:
        bpw = bpw_of[x] if x in bpw_of else float(x)
        name = f"auto@{bpw:.4g}"
        out, rec = quantize(name, ["--recipe", "auto", "--target-bpw", repr(bpw), "--sensitivity", sens])
        r = evaluate(name, out, rec)
        r["target_bpw"] = bpw
        r["matched_plan"] = x if x in bpw_of else None

    return rows, sens, smap


def render(a, rows, sens, smap):
    """Writes OUT.md and OUT.json: the plans by bits per weight, and the auto plans' ratios."""
    src = next(r for r in rows if r["plan"] == "source")
    # Markdown: one row per plan, by bits per weight.
    mc_names = [os.path.basename(f) for f in a.mc]
    head = ["plan", "bpw", "size MB", "x vs bf16", "ppl", "KL mean", "top-1"] + [f"MC {n} acc / pmi" for n in mc_names]
    if not a.no_bench:
        head += ["prefill tok/s", "decode tok/s", "peak MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r["plan"] != "source", r.get("bpw") or 0)):
        cells = [r["plan"], f"{r['bpw']:.3f}", f"{r['total_bytes'] / 1e6:.2f}", f"{r['compression_vs_bf16']:.2f}",
                 f"{r['ppl']:.3f}", f"{r['kl']:.5f}", f"{r['top1']:.4f}"]
        cells += [f"{r['mc'][n]['acc']:.3f} / {r['mc'][n]['acc_pmi']:.3f}" for n in mc_names]
        if not a.no_bench:
            cells += [f"{r['prefill_tok_s']:.0f}", f"{r['decode_tok_s']:.0f}", f"{r['peak_rss_bytes'] / 1e6:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")

    # The allocation against uniform quantization and q4_k_m at equal bits per weight: the KL
    # increase ratio (auto / reference). Uniform quantization at a bpw is the best uniform format
    # there: formats are first reduced to their frontier for the measure (a format is dropped when
    # one with no more bits scores no worse; of two at one bpw the better stays), and a bpw between
    # two frontier formats is interpolated linearly (in log KL for KL) between them.
    uni = sorted(((r["bpw"], r) for r in rows if r["plan"].startswith("uniform:")), key=lambda x: x[0])

    def frontier(key):
        out = []  # by bpw, then measure: a later point with no better measure is dropped
        for b, r in sorted(uni, key=lambda x: (x[0], x[1][key])):
            if not out or r[key] < out[-1][1][key]:
                out.append((b, r))
        return out

    fronts = {key: frontier(key) for key in ("kl", "ppl")}

    def uniform_at(bpw, key):
        front = fronts[key]
        exact = [r for b, r in front if abs(b - bpw) < 1e-6]
        if exact:
            tied = [r["plan"] for b, r in uni if abs(b - bpw) < 1e-6]
            return exact[0][key], exact[0]["plan"] + (f" (best of {'+'.join(tied)})" if len(tied) > 1 else "")
        lo = max(((b, r) for b, r in front if b < bpw), default=None, key=lambda x: x[0])
        hi = min(((b, r) for b, r in front if b > bpw), default=None, key=lambda x: x[0])
        if not lo or not hi:
            return None, None
        t = (bpw - lo[0]) / (hi[0] - lo[0])
        if key == "kl":
            v = math.exp((1 - t) * math.log(max(lo[1][key], 1e-12)) + t * math.log(max(hi[1][key], 1e-12)))
        else:
            v = (1 - t) * lo[1][key] + t * hi[1][key]
        return v, f"interpolated {lo[1]['plan']}..{hi[1]['plan']}"

    # Each auto plan against the plan whose bpw it matched (when named), else uniform at its bpw;
    # and against q4_k_m. Ratios are of increases over the source (KL, ppl - source ppl).
    by_name = {r["plan"]: r for r in rows}
    q4km = by_name["q4_k_m"]
    comparisons = []
    cmp_lines = ["", "| auto plan | bpw | KL | compared with | its bpw | its KL | KL ratio | ppl-increase ratio | KL ratio vs q4_k_m |",
                 "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"
    for r in rows:
        if not r["plan"].startswith("auto@"):
            continue
        if r.get("matched_plan"):
            ref = by_name[r["matched_plan"]]
            rname, rbpw, rkl, rppl = ref["plan"], ref["bpw"], ref["kl"], ref["ppl"]
        else:
            rkl, rname = uniform_at(r["target_bpw"], "kl")
            rppl, _ = uniform_at(r["target_bpw"], "ppl")
            rbpw = r["target_bpw"]
        dppl = r["ppl"] - src["ppl"]
        c = {"plan": r["plan"], "bpw": r["bpw"], "kl": r["kl"], "ppl": r["ppl"], "compared_with": rname, "ref_bpw": rbpw,
             "ref_kl": rkl, "ref_ppl": rppl,
             "kl_ratio": r["kl"] / rkl if rkl else None,
             "ppl_increase_ratio": dppl / (rppl - src["ppl"]) if rppl is not None and rppl != src["ppl"] else None,
             "kl_ratio_vs_q4_k_m": r["kl"] / q4km["kl"] if q4km["kl"] else None}
        comparisons.append(c)
        cmp_lines.append(f"| {r['plan']} | {r['bpw']:.3f} | {r['kl']:.5f} | {rname} | {rbpw:.3f} | {fmt(rkl)} | "
                         f"{fmt(c['kl_ratio'])} | {fmt(c['ppl_increase_ratio'])} | {fmt(c['kl_ratio_vs_q4_k_m'])} |")

    md = "\n".join(lines + cmp_lines) + "\n"
    hdr = (f"Model {a.model}; ppl/KL on {a.ppl_text} (ctx {a.ctx}); sensitivity map {sens} "
           f"(calibration {smap['calib']}, {smap['tokens']} tokens, {smap['method']}); method {a.method}.\n\n")
    print(hdr + md)
    with open(a.out + ".md", "w") as f:
        f.write(hdr + md)
    with open(a.out + ".json", "w") as f:
        json.dump({"model": a.model, "ppl_text": a.ppl_text, "mc": a.mc, "sensitivity": sens, "method": a.method,
                   "ctx": a.ctx, "rows": rows, "comparisons": comparisons}, f, indent=1)
    print(f"wrote {a.out}.md and {a.out}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
