#!/usr/bin/python3
"""Independent NumPy reference for Llama-family decoders (genperf tests).

Reads a Hugging Face model directory: config.json plus model.safetensors or
model.safetensors.index.json (+ shards named in weight_map). Supported tensor
dtypes: F32, F16, BF16. All math runs in float64 (weights are upcast).

Conventions (HF LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM):
  * Linear: y = x @ W.T (+ b). q/k/v biases if present (always for Qwen2).
  * RMSNorm: x / sqrt(mean(x^2) + eps) * w.
  * RoPE "rotate_half": inv_freq[i] = theta^(-2i/D), i < D/2, optional llama3
    scaling; cos/sin duplicated to [freqs, freqs];
    x' = x*cos + rotate_half(x)*sin, rotate_half(x) = concat(-x[D/2:], x[:D/2]).
  * Attention: causal, scale 1/sqrt(D), GQA (query head h -> kv head
    h // (H/Hkv)), softmax in float64.
  * MLP: down(silu(gate(x)) * up(x)); pre-norm residual blocks; final norm;
    lm_head (or tied embeddings) gives logits for every position.

CLI:
  llama_ref.py --model DIR --ids 1,5,9 --logits OUT.bin
      writes float32 logits [T, V] row-major, raw, no header.
  llama_ref.py --model DIR --ids 1,5,9 --greedy N
      prints N greedy token ids (argmax, full recompute each step), one line.
  --kv f16|bf16|q8_0 rounds the keys (after RoPE) and values as a KV cache of that type holds them.
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
    """Bad input (model directory, config, tensors or CLI arguments)."""


def read_safetensors(path):
    """Return {name: float64 ndarray} for one .safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise RefError(f"{path}: file too short")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise RefError(f"{path}: header length {n} exceeds file size")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], tuple(info["shape"])
        begin, end = info["data_offsets"]
        buf = raw[base + begin:base + end]
        if dtype == "F32":
            arr = np.frombuffer(buf, dtype="<f4")
        elif dtype == "F16":
            arr = np.frombuffer(buf, dtype="<f2")
        elif dtype == "BF16":
            u16 = np.frombuffer(buf, dtype="<u2")
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        else:
            raise RefError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        count = int(np.prod(shape)) if shape else 1
        if arr.size != count:
            raise RefError(f"{path}: tensor {name}: {arr.size} elements, shape {shape}")
        out[name] = arr.astype(np.float64).reshape(shape)
    return out


def load_weights(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        return read_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            tensors.update(read_safetensors(os.path.join(model_dir, shard)))
        missing = [k for k in weight_map if k not in tensors]
        if missing:
            raise RefError(f"tensors listed in index but missing: {missing[:5]}")
        return tensors
    raise RefError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


class Config:
    def __init__(self, c):
        try:
            self.vocab = int(c["vocab_size"])
            self.hidden = int(c["hidden_size"])
            self.inter = int(c["intermediate_size"])
            self.layers = int(c["num_hidden_layers"])
            self.heads = int(c["num_attention_heads"])
        except KeyError as e:
            raise RefError(f"config.json: missing {e}")
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = float(c.get("rope_theta", 10000.0))
        self.rope_scaling = c.get("rope_scaling")
        self.tied = bool(c.get("tie_word_embeddings", False))
        arch = (c.get("architectures") or [""])[0]
        self.qkv_bias = bool(c.get("attention_bias", False)) or arch == "Qwen2ForCausalLM"
        if self.heads % self.kv_heads:
            raise RefError("num_attention_heads not divisible by num_key_value_heads")
        if self.head_dim % 2:
            raise RefError("head_dim must be even")


def inv_freq(cfg):
    d = cfg.head_dim
    inv = 1.0 / cfg.theta ** (np.arange(0, d // 2, dtype=np.float64) * 2.0 / d)
    rs = cfg.rope_scaling
    if rs:
        kind = rs.get("rope_type", rs.get("type"))
        if kind == "default":
            return inv
        if kind != "llama3":
            raise RefError(f"unsupported rope_scaling type {kind!r}")
        factor = float(rs["factor"])
        low = float(rs["low_freq_factor"])
        high = float(rs["high_freq_factor"])
        orig = float(rs["original_max_position_embeddings"])
        wavelen = 2.0 * math.pi / inv
        smooth = (orig / wavelen - low) / (high - low)
        mid = (1.0 - smooth) * inv / factor + smooth * inv
        inv = np.where(wavelen < orig / high, inv,
                       np.where(wavelen > orig / low, inv / factor, mid))
    return inv


def round_kv(x, kv):
    """The values a KV cache of type kv holds: x in f32, then rounded to nearest even to f16 or
    bf16 (bf16: the top 16 bits of the f32, rounded on the 16 below), or quantized to Q8_0 along
    the last axis as ggml's reference does it in f32 (blocks of 32: d = amax / 127, codes
    round(x / d) with ties away from zero, d stored as f16)."""
    x32 = np.asarray(x, dtype=np.float32)
    if kv == "f32":
        return x32.astype(np.float64)
    if kv == "f16":
        return x32.astype(np.float16).astype(np.float64)
    if kv == "q8_0":
        b = x32.reshape(x32.shape[:-1] + (x32.shape[-1] // 32, 32))
        d = np.abs(b).max(axis=-1, keepdims=True) / np.float32(127)
        inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0))
        v = (b * inv).astype(np.float32)
        q = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
        return (q.astype(np.float64) * d.astype(np.float16).astype(np.float64)).reshape(x32.shape)
    u = x32.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


class Model:
    def __init__(self, model_dir):
        cfg_path = os.path.join(model_dir, "config.json")
        if not os.path.exists(cfg_path):
            raise RefError(f"{model_dir}: no config.json")
        with open(cfg_path) as f:
            self.cfg = Config(json.load(f))
        self.w = load_weights(model_dir)
        self.inv_freq = inv_freq(self.cfg)

    def get(self, name, shape=None):
        if name not in self.w:
            raise RefError(f"missing tensor {name}")
        t = self.w[name]
        if shape is not None and t.shape != tuple(shape):
            raise RefError(f"tensor {name}: shape {t.shape}, expected {tuple(shape)}")
        return t

    def linear(self, x, prefix, out_dim, in_dim, bias=False):
        y = x @ self.get(prefix + ".weight", (out_dim, in_dim)).T
        if bias:
            y = y + self.get(prefix + ".bias", (out_dim,))
        return y

    def forward(self, ids, kv="f32"):
        c = self.cfg
        d, D, H, Hkv = c.hidden, c.head_dim, c.heads, c.kv_heads
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            raise RefError("empty token id list")
        if ids.min() < 0 or ids.max() >= c.vocab:
            raise RefError(f"token id out of range [0, {c.vocab})")
        T = ids.size
        emb = self.get("model.embed_tokens.weight", (c.vocab, d))
        x = emb[ids]

        ang = np.arange(T, dtype=np.float64)[:, None] * self.inv_freq[None, :]
        ang = np.concatenate([ang, ang], axis=-1)  # [T, D]
        cos, sin = np.cos(ang)[None], np.sin(ang)[None]  # [1, T, D]
        mask = np.triu(np.ones((T, T), dtype=bool), k=1)
        group = H // Hkv

        for i in range(c.layers):
            p = f"model.layers.{i}."
            h = rms_norm(x, self.get(p + "input_layernorm.weight", (d,)), c.eps)
            q = self.linear(h, p + "self_attn.q_proj", H * D, d, c.qkv_bias)
            k = self.linear(h, p + "self_attn.k_proj", Hkv * D, d, c.qkv_bias)
            v = self.linear(h, p + "self_attn.v_proj", Hkv * D, d, c.qkv_bias)
            q = q.reshape(T, H, D).transpose(1, 0, 2)  # [H, T, D]
            k = k.reshape(T, Hkv, D).transpose(1, 0, 2)
            v = v.reshape(T, Hkv, D).transpose(1, 0, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if kv != "f32":  # keys and values as the cache holds them
                k, v = round_kv(k, kv), round_kv(v, kv)
            kv_idx = np.arange(H) // group
            k, v = k[kv_idx], v[kv_idx]  # [H, T, D]
            s = q @ k.transpose(0, 2, 1) / math.sqrt(D)  # [H, T, T]
            s = np.where(mask[None], -np.inf, s)
            s = s - s.max(axis=-1, keepdims=True)
            pr = np.exp(s)
            pr /= pr.sum(axis=-1, keepdims=True)
            a = (pr @ v).transpose(1, 0, 2).reshape(T, H * D)
            x = x + self.linear(a, p + "self_attn.o_proj", d, H * D)

            h = rms_norm(x, self.get(p + "post_attention_layernorm.weight", (d,)), c.eps)
            g = self.linear(h, p + "mlp.gate_proj", c.inter, d)
            u = self.linear(h, p + "mlp.up_proj", c.inter, d)
            silu = g / (1.0 + np.exp(-g))
            x = x + self.linear(silu * u, p + "mlp.down_proj", d, c.inter)

        x = rms_norm(x, self.get("model.norm.weight", (d,)), c.eps)
        if "lm_head.weight" in self.w:
            head = self.get("lm_head.weight", (c.vocab, d))
        elif c.tied:
            head = emb
        else:
            raise RefError("missing lm_head.weight and tie_word_embeddings is false")
        return x @ head.T  # [T, V]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="HF model directory")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--logits", help="write float32 logits [T, V] to this file")
    mode.add_argument("--greedy", type=int, help="generate N tokens greedily")
    ap.add_argument("--kv", choices=["f32", "f16", "bf16", "q8_0"], default="f32",
                    help="the KV cache's type: keys and values rounded to it (f32: kept exact)")
    def fail(msg):
        ap.print_usage(sys.stderr)
        print(f"llama_ref: error: {msg}", file=sys.stderr)
        sys.exit(1)
    ap.error = fail
    args = ap.parse_args(argv)
    try:
        try:
            ids = [int(t) for t in args.ids.split(",") if t.strip() != ""]
        except ValueError:
            raise RefError(f"bad --ids {args.ids!r}")
        model = Model(args.model)
        if args.logits is not None:
            logits = model.forward(ids, args.kv).astype("<f4")
            with open(args.logits, "wb") as f:
                f.write(logits.tobytes())
        else:
            if args.greedy < 0:
                raise RefError("--greedy must be >= 0")
            seq, out = list(ids), []
            for _ in range(args.greedy):
                nxt = int(np.argmax(model.forward(seq, args.kv)[-1]))
                out.append(nxt)
                seq.append(nxt)
            print(" ".join(str(t) for t in out))
    except (RefError, OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"llama_ref: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
