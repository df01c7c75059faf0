#!/usr/bin/python3
"""Independent NumPy float64 reference for genperf training (tests/train).

Reads a Hugging Face directory written by genperf's save_hf_checkpoint (config.json and one
model.safetensors of F32 tensors), runs the Llama forward pass with a hand-written backward
pass, and AdamW steps with warm-up + cosine learning rate and global-norm clipping.

Conventions (the HF Llama model and PyTorch's AdamW):
  * RMSNorm y = x / sqrt(mean(x^2) + eps) * w; rotary "rotate_half" pairing (i, i + D/2) with
    inv_freq[i] = theta^(-2i/D); causal GQA attention with scale 1/sqrt(D); MLP
    down(silu(gate(x)) * up(x)); lm_head or tied embeddings.
  * Loss: mean over positions whose target is not -1 of -log softmax(logits)[target].
  * AdamW: p *= 1 - lr*wd (2-D tensors only); m, v moments; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
  * Clipping: g *= max_norm / (norm + 1e-6) when the global norm exceeds max_norm.
  * lr(step) = max_lr*(step+1)/warmup while step < warmup, then cosine from max_lr to min_lr
    at total steps.

CLI:
  train_ref.py --model DIR --batch B --seq T --tokens 1,2,... --targets 3,-1,...
               --grads OUT.bin [--steps N --losses OUT.bin --lr-max X --lr-min X
               --warmup N --total N --beta1 X --beta2 X --eps X --wd X --clip X]
  OUT.bin of --grads: float64 raw: the loss, then every tensor's gradient flattened, tensors in
  sorted name order. OUT.bin of --losses: float64 raw, the loss before each of the N steps.
Errors: message on stderr, exit code 1.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


class RefError(Exception):
    pass


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise RefError(f"{path}: too short")
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise RefError(f"{path}: {name} is {info['dtype']}, expected F32")
        b, e = info["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4")
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


class Cfg:
    def __init__(self, c):
        self.V = int(c["vocab_size"])
        self.C = int(c["hidden_size"])
        self.FF = int(c["intermediate_size"])
        self.L = int(c["num_hidden_layers"])
        self.NH = int(c["num_attention_heads"])
        self.NKV = int(c.get("num_key_value_heads") or self.NH)
        self.HS = int(c.get("head_dim") or self.C // self.NH)
        self.eps = float(c["rms_norm_eps"])
        self.theta = float(c["rope_theta"])
        self.tied = bool(c.get("tie_word_embeddings", False))
        self.bias = bool(c.get("attention_bias", False))
        if c.get("rope_scaling"):
            raise RefError("rope_scaling is not supported by this reference")


# ---- layers: forward returns (out, cache); backward returns input gradients -------------

def rmsnorm_fwd(x, w, eps):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * r * w, (x, w, r)


def rmsnorm_bwd(dy, cache):
    x, w, r = cache
    g = dy * w
    dx = r * g - r ** 3 * x * np.sum(g * x, axis=-1, keepdims=True) / x.shape[-1]
    dw = np.sum(dy * x * r, axis=tuple(range(x.ndim - 1)))
    return dx, dw


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope_tables(cfg, T):
    inv = 1.0 / cfg.theta ** (np.arange(0, cfg.HS // 2, dtype=np.float64) * 2.0 / cfg.HS)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)  # [T, HS]
    return np.cos(ang), np.sin(ang)


def rope_fwd(x, cos, sin):  # x [B, heads, T, HS]
    return x * cos + rotate_half(x) * sin


def rope_bwd(dy, cos, sin):  # the transpose of rotate_half is -rotate_half
    return dy * cos - rotate_half(dy * sin)


def attention_fwd(q, k, v, cfg):  # q [B,NH,T,HS], k/v [B,NKV,T,HS]
    g = cfg.NH // cfg.NKV
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    T = q.shape[2]
    s = q @ kk.transpose(0, 1, 3, 2) / math.sqrt(cfg.HS)
    s = np.where(np.triu(np.ones((T, T), dtype=bool), 1)[None, None], -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ vv, (q, kk, vv, p)


def attention_bwd(do, cache, cfg):
    q, kk, vv, p = cache
    sc = 1.0 / math.sqrt(cfg.HS)
    dp = do @ vv.transpose(0, 1, 3, 2)
    ds = p * (dp - np.sum(p * dp, axis=-1, keepdims=True))
    dq = ds @ kk * sc
    dkk = ds.transpose(0, 1, 3, 2) @ q * sc
    dvv = p.transpose(0, 1, 3, 2) @ do
    B, _, T, HS = q.shape
    g = cfg.NH // cfg.NKV
    dk = dkk.reshape(B, cfg.NKV, g, T, HS).sum(axis=2)
    dv = dvv.reshape(B, cfg.NKV, g, T, HS).sum(axis=2)
    return dq, dk, dv


# ---- the model ----------------------------------------------------------------------------

def lname(i, rest):
    return f"model.layers.{i}.{rest}"


def heads(x, n, cfg):  # [B,T,n*HS] -> [B,n,T,HS]
    B, T, _ = x.shape
    return x.reshape(B, T, n, cfg.HS).transpose(0, 2, 1, 3)


def unheads(x):  # [B,n,T,HS] -> [B,T,n*HS]
    B, n, T, HS = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, n * HS)


def loss_and_grads(W, cfg, tokens, targets):
    B, T = tokens.shape
    cos, sin = rope_tables(cfg, T)
    G = {k: np.zeros_like(v) for k, v in W.items()}
    x = W["model.embed_tokens.weight"][tokens]
    caches = []
    for i in range(cfg.L):
        c = {"x": x}
        h1, c["n1"] = rmsnorm_fwd(x, W[lname(i, "input_layernorm.weight")], cfg.eps)
        proj = {}
        for nm in ("q", "k", "v"):
            y = h1 @ W[lname(i, f"self_attn.{nm}_proj.weight")].T
            if cfg.bias:
                y = y + W[lname(i, f"self_attn.{nm}_proj.bias")]
            proj[nm] = y
        q = rope_fwd(heads(proj["q"], cfg.NH, cfg), cos, sin)
        k = rope_fwd(heads(proj["k"], cfg.NKV, cfg), cos, sin)
        v = heads(proj["v"], cfg.NKV, cfg)
        o, c["att"] = attention_fwd(q, k, v, cfg)
        a = unheads(o)
        x2 = x + a @ W[lname(i, "self_attn.o_proj.weight")].T
        h2, c["n2"] = rmsnorm_fwd(x2, W[lname(i, "post_attention_layernorm.weight")], cfg.eps)
        gt = h2 @ W[lname(i, "mlp.gate_proj.weight")].T
        up = h2 @ W[lname(i, "mlp.up_proj.weight")].T
        sg = 1.0 / (1.0 + np.exp(-gt))
        act = gt * sg * up
        x = x2 + act @ W[lname(i, "mlp.down_proj.weight")].T
        c.update(h1=h1, a=a, h2=h2, gt=gt, up=up, sg=sg, act=act)
        caches.append(c)
    hf, nf = rmsnorm_fwd(x, W["model.norm.weight"], cfg.eps)
    head_name = "model.embed_tokens.weight" if cfg.tied else "lm_head.weight"
    logits = hf @ W[head_name].T  # [B,T,V]
    mx = logits.max(axis=-1, keepdims=True)
    lse = mx + np.log(np.exp(logits - mx).sum(axis=-1, keepdims=True))
    scored = targets >= 0
    count = int(scored.sum())
    tgt = np.where(scored, targets, 0)
    picked = np.take_along_axis(logits, tgt[..., None], axis=-1)
    loss = float(((lse - picked)[..., 0] * scored).sum() / count) if count else 0.0

    # backward
    dlogits = np.exp(logits - lse)
    np.put_along_axis(dlogits, tgt[..., None], np.take_along_axis(dlogits, tgt[..., None], -1) - 1.0, -1)
    dlogits *= (scored / count if count else 0.0)[..., None]
    G[head_name] += dlogits.reshape(-1, cfg.V).T @ hf.reshape(-1, cfg.C)
    dx, dw = rmsnorm_bwd(dlogits @ W[head_name], nf)
    G["model.norm.weight"] += dw
    for i in reversed(range(cfg.L)):
        c = caches[i]
        flat = lambda t: t.reshape(-1, t.shape[-1])
        # MLP branch
        G[lname(i, "mlp.down_proj.weight")] += flat(dx).T @ flat(c["act"])
        dact = dx @ W[lname(i, "mlp.down_proj.weight")]
        gt, sg, up = c["gt"], c["sg"], c["up"]
        dup = dact * gt * sg
        dgt = dact * up * sg * (1.0 + gt * (1.0 - sg))
        G[lname(i, "mlp.gate_proj.weight")] += flat(dgt).T @ flat(c["h2"])
        G[lname(i, "mlp.up_proj.weight")] += flat(dup).T @ flat(c["h2"])
        dh2 = dgt @ W[lname(i, "mlp.gate_proj.weight")] + dup @ W[lname(i, "mlp.up_proj.weight")]
        d, dw = rmsnorm_bwd(dh2, c["n2"])
        G[lname(i, "post_attention_layernorm.weight")] += dw
        dx = dx + d
        # attention branch
        G[lname(i, "self_attn.o_proj.weight")] += flat(dx).T @ flat(c["a"])
        da = dx @ W[lname(i, "self_attn.o_proj.weight")]
        dq, dk, dv = attention_bwd(heads(da, cfg.NH, cfg), c["att"], cfg)
        dproj = {"q": unheads(rope_bwd(dq, cos, sin)), "k": unheads(rope_bwd(dk, cos, sin)),
                 "v": unheads(dv)}
        dh1 = 0.0
        for nm in ("q", "k", "v"):
            wn = lname(i, f"self_attn.{nm}_proj.weight")
            G[wn] += flat(dproj[nm]).T @ flat(c["h1"])
            if cfg.bias:
                G[lname(i, f"self_attn.{nm}_proj.bias")] += flat(dproj[nm]).sum(axis=0)
            dh1 = dh1 + dproj[nm] @ W[wn]
        d, dw = rmsnorm_bwd(dh1, c["n1"])
        G[lname(i, "input_layernorm.weight")] += dw
        dx = dx + d
    np.add.at(G["model.embed_tokens.weight"], tokens.reshape(-1), dx.reshape(-1, cfg.C))
    return loss, G


def lr_at(step, a):
    if step < a.warmup:
        return a.lr_max * (step + 1) / a.warmup
    if step >= a.total:
        return a.lr_min
    span = a.total - a.warmup
    ratio = (step - a.warmup) / span if span > 0 else 1.0
    return a.lr_min + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.lr_max - a.lr_min)


def train(W, cfg, tokens, targets, a):
    m = {k: np.zeros_like(v) for k, v in W.items()}
    v = {k: np.zeros_like(x) for k, x in W.items()}
    losses = []
    for step in range(a.steps):
        loss, G = loss_and_grads(W, cfg, tokens, targets)
        losses.append(loss)
        norm = math.sqrt(sum(float((g * g).sum()) for g in G.values()))
        if a.clip > 0 and norm > a.clip:
            for g in G.values():
                g *= a.clip / (norm + 1e-6)
        lr = lr_at(step, a)
        t = step + 1
        bc1, bc2 = 1.0 - a.beta1 ** t, 1.0 - a.beta2 ** t
        for k in W:
            if W[k].ndim == 2:
                W[k] *= 1.0 - lr * a.wd
            m[k] = a.beta1 * m[k] + (1.0 - a.beta1) * G[k]
            v[k] = a.beta2 * v[k] + (1.0 - a.beta2) * G[k] * G[k]
            W[k] -= lr / bc1 * m[k] / (np.sqrt(v[k]) / math.sqrt(bc2) + a.eps)
    return losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--targets", required=True)
    ap.add_argument("--grads", required=True)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--losses")
    ap.add_argument("--lr-max", type=float, default=1e-3)
    ap.add_argument("--lr-min", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--total", type=int, default=1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=0.0)
    a = ap.parse_args(argv)
    try:
        with open(os.path.join(a.model, "config.json")) as f:
            cfg = Cfg(json.load(f))
        W = read_safetensors(os.path.join(a.model, "model.safetensors"))
        ids = lambda s: np.array([int(t) for t in s.split(",")], dtype=np.int64)
        tokens, targets = ids(a.tokens), ids(a.targets)
        if tokens.size != a.batch * a.seq or targets.size != a.batch * a.seq:
            raise RefError(f"{tokens.size} tokens and {targets.size} targets for {a.batch} x {a.seq}")
        tokens, targets = tokens.reshape(a.batch, a.seq), targets.reshape(a.batch, a.seq)
        loss, G = loss_and_grads(W, cfg, tokens, targets)
        out = [np.array([loss])] + [G[k].reshape(-1) for k in sorted(G)]
        np.concatenate(out).astype("<f8").tofile(a.grads)
        if a.steps > 0:
            if not a.losses:
                raise RefError("--steps needs --losses")
            np.array(train(W, cfg, tokens, targets, a), dtype="<f8").tofile(a.losses)
    except (RefError, OSError, ValueError, KeyError) as e:
        print(f"train_ref: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
