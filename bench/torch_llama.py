#!/usr/bin/python3
"""The same Llama shape in PyTorch (Debian's python3-torch 1.13, eager), for side-by-side speed
comparisons with `genperf bench infer`. Never run in CI.

    /usr/bin/python3 bench/torch_llama.py --shape 110m --dtype bf16 --threads 2 [--reps 5]

Prints one JSON record: prefill tokens/s at 128 and 512 tokens (median, min, max of --reps after a
warm-up), decode tokens/s after a 128-token prompt (KV cache, batch 1), with the same shapes and
work as genperf's benchmark. Random weights (N(0, 1/fan_in)), seed printed.
"""
import argparse, json, math, statistics, sys, time

import torch

SHAPES = {  # vocab, dim, ffn, layers, heads, kv_heads
    "110m": (32000, 768, 2048, 12, 12, 12),
    "default": (4096, 256, 768, 6, 8, 4),
}


class Llama(torch.nn.Module):
    def __init__(self, vocab, dim, ffn, layers, heads, kv_heads, dtype):
        super().__init__()
        self.h, self.kv, self.d = heads, kv_heads, dim // heads
        lin = lambda o, i: torch.nn.Linear(i, o, bias=False, dtype=dtype)
        self.embed = torch.nn.Embedding(vocab, dim, dtype=dtype)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            l = torch.nn.Module()
            l.q, l.k, l.v, l.o = lin(heads * self.d, dim), lin(kv_heads * self.d, dim), lin(kv_heads * self.d, dim), lin(dim, heads * self.d)
            l.gate, l.up, l.down = lin(ffn, dim), lin(ffn, dim), lin(dim, ffn)
            l.n1, l.n2 = torch.nn.Parameter(torch.ones(dim, dtype=dtype)), torch.nn.Parameter(torch.ones(dim, dtype=dtype))
            self.layers.append(l)
        self.norm = torch.nn.Parameter(torch.ones(dim, dtype=dtype))
        self.head = lin(vocab, dim)
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2, dtype=torch.float32) / self.d))
        self.register_buffer("inv_freq", inv)

    @staticmethod
    def rms(x, w, eps=1e-5):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    def rope(self, x, pos):
        ang = pos[:, None].float() * self.inv_freq[None, :]
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype), torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    def forward(self, ids, cache, pos0, last_only=True):
        T = ids.shape[0]
        pos = torch.arange(pos0, pos0 + T)
        x = self.embed(ids)
        for i, l in enumerate(self.layers):
            h = self.rms(x, l.n1)
            q = self.rope(l.q(h).view(T, self.h, self.d), pos)
            k = self.rope(l.k(h).view(T, self.kv, self.d), pos)
            v = l.v(h).view(T, self.kv, self.d)
            kc, vc = cache[i]
            kc[pos0:pos0 + T], vc[pos0:pos0 + T] = k, v
            K, V = kc[:pos0 + T], vc[:pos0 + T]
            rep = self.h // self.kv
            K, V = K.repeat_interleave(rep, 1), V.repeat_interleave(rep, 1)
            s = torch.einsum("thd,shd->hts", q, K) / math.sqrt(self.d)
            mask = torch.arange(pos0 + T)[None, :] > pos[:, None]
            s = s.masked_fill(mask[None], float("-inf")).float().softmax(-1).to(x.dtype)
            a = torch.einsum("hts,shd->thd", s, V).reshape(T, -1)
            x = x + l.o(a)
            h = self.rms(x, l.n2)
            x = x + l.down(torch.nn.functional.silu(l.gate(h)) * l.up(h))
        if last_only:
            x = x[-1:]
        return self.head(self.rms(x, self.norm))


def timed(fn, reps):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="110m", choices=SHAPES)
    ap.add_argument("--dtype", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    vocab, dim, ffn, layers, heads, kv = SHAPES[a.shape]
    with torch.no_grad():
        m = Llama(vocab, dim, ffn, layers, heads, kv, dtype).eval()
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0, 1 / math.sqrt(p.shape[1]))
        cap = 512 + 1
        new_cache = lambda: [(torch.zeros(cap, kv, dim // heads, dtype=dtype), torch.zeros(cap, kv, dim // heads, dtype=dtype)) for _ in range(layers)]
        res = {"shape": a.shape, "dtype": a.dtype, "threads": a.threads, "seed": a.seed, "torch": torch.__version__, "prefill": []}
        cache = new_cache()
        for L in (128, 512):
            ids = torch.randint(0, vocab, (L,))
            t = timed(lambda: m(ids, cache, 0), a.reps)
            med = statistics.median(t)
            res["prefill"].append({"tokens": L, "tokens_per_s": L / med, "tokens_per_s_min": L / max(t), "tokens_per_s_max": L / min(t)})
        prompt = torch.randint(0, vocab, (128,))

        def decode():
            m(prompt, cache, 0)
            tok = torch.tensor([0])
            t0 = time.perf_counter()
            for i in range(a.decode_tokens):
                logits = m(tok, cache, 128 + i)
                tok = logits.argmax(-1)
            return (time.perf_counter() - t0) / a.decode_tokens

        decode()
        per = [decode() for _ in range(a.reps)]
        res["decode"] = {"tokens_per_s": 1 / statistics.median(per), "tokens_per_s_min": 1 / max(per), "tokens_per_s_max": 1 / min(per)}
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
