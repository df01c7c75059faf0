#!/usr/bin/python3
"""Float64 NumPy reference of the SR UNet (include/genperf/unet.h) and of one DDIM step,
written from the documented architecture, independently of genperf's code.

usage: unet_ref.py MODEL_DIR INPUT.f64 B H W T_INDEX T_PREV OUT.f64
  INPUT.f64: x [B,H,W,C] then cond [B,H,W,C], float64 little-endian
  writes pred [B,H,W,C] then x_prev [B,H,W,C] (DDIM, eta 0, from step T_INDEX to T_PREV; -1: abar 1)
"""
import json
import math
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").astype(np.float64).reshape(info["shape"])
    return out


def conv(x, w, b, stride):
    # x [B,H,W,IC], w [OC,K,K,IC], zero padding K//2
    B, H, W, IC = x.shape
    OC, K, _, _ = w.shape
    p = K // 2
    xp = np.zeros((B, H + 2 * p, W + 2 * p, IC))
    xp[:, p:p + H, p:p + W, :] = x
    Ho, Wo = (H + 2 * p - K) // stride + 1, (W + 2 * p - K) // stride + 1
    out = np.zeros((B, Ho, Wo, OC))
    for ky in range(K):
        for kx in range(K):
            patch = xp[:, ky:ky + stride * (Ho - 1) + 1:stride, kx:kx + stride * (Wo - 1) + 1:stride, :]
            out += patch @ w[:, ky, kx, :].T
    return out + b


def group_norm(x, g, b, groups, eps):
    B, H, W, C = x.shape
    xg = x.reshape(B, H * W, groups, C // groups)
    mean = xg.mean(axis=(1, 3), keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=(1, 3), keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(B, H, W, C)
    return y * g + b


def silu(x):
    return x / (1 + np.exp(-x))


class Net:
    def __init__(self, cfg, w):
        self.c, self.w = cfg, w

    def lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def conv(self, x, name, stride=1):
        return conv(x, self.w[name + ".weight"], self.w[name + ".bias"], stride)

    def norm(self, x, name):
        return group_norm(x, self.w[name + ".weight"], self.w[name + ".bias"], self.c["groups"], self.c["norm_eps"])

    def res(self, x, name, temb):
        h = self.conv(silu(self.norm(x, name + ".norm1")), name + ".conv1")
        h = h + self.lin(temb, name + ".temb")[:, None, None, :]
        h = self.conv(silu(self.norm(h, name + ".norm2")), name + ".conv2")
        skip = self.conv(x, name + ".skip") if name + ".skip.weight" in self.w else x
        return skip + h

    def attn(self, x, name):
        B, H, W, C = x.shape
        hc = self.c["head_channels"]
        nh = C // hc
        qkv = self.lin(self.norm(x, name + ".norm"), name + ".qkv").reshape(B, H * W, 3, nh, hc)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, T, nh, hc]
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hc)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        o = np.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, H, W, C)
        return x + self.lin(o, name + ".proj")

    def __call__(self, x, t):
        c = self.c
        half = c["base"] // 2
        f = np.exp(-math.log(10000.0) * np.arange(half) / half)
        te = np.concatenate([np.sin(t[:, None] * f), np.cos(t[:, None] * f)], axis=1)
        temb = silu(self.lin(silu(self.lin(te, "time.fc1")), "time.fc2"))
        L = len(c["mults"])
        h = self.conv(x, "conv_in")
        skips = []
        for l in range(L):
            for r in range(c["res_blocks"]):
                h = self.res(h, f"down.{l}.res.{r}", temb)
                if l in c["attention_levels"]:
                    h = self.attn(h, f"down.{l}.attn.{r}")
            skips.append(h)
            if l + 1 < L:
                h = self.conv(h, f"down.{l}.down", stride=2)
        h = self.res(h, "mid.res.0", temb)
        h = self.attn(h, "mid.attn")
        h = self.res(h, "mid.res.1", temb)
        for l in reversed(range(L)):
            h = np.concatenate([h, skips[l]], axis=-1)
            for r in range(c["res_blocks"]):
                h = self.res(h, f"up.{l}.res.{r}", temb)
                if l in c["attention_levels"]:
                    h = self.attn(h, f"up.{l}.attn.{r}")
            if l > 0:
                h = self.conv(h.repeat(2, axis=1).repeat(2, axis=2), f"up.{l}.up")
        return self.conv(silu(self.norm(h, "out.norm")), "out.conv")


def abar(cfg):
    T = cfg["timesteps"]
    if cfg["schedule"] == "cosine":
        fn = lambda t: math.cos((t / T + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = [min(1 - fn(t + 1) / fn(t), 0.999) for t in range(T)]
    else:
        lo, hi = 1e-4 * 1000 / T, 0.02 * 1000 / T
        betas = list(np.linspace(lo, hi, T))
    return np.cumprod(1 - np.array(betas))


def main():
    d, inp, B, H, W, ti, tp, out = sys.argv[1:9]
    B, H, W, ti, tp = int(B), int(H), int(W), int(ti), int(tp)
    cfg = json.load(open(d + "/config.json"))
    net = Net(cfg, read_safetensors(d + "/model.safetensors"))
    C = cfg["channels"]
    raw = np.fromfile(inp, dtype="<f8")
    x = raw[:B * H * W * C].reshape(B, H, W, C)
    cond = raw[B * H * W * C:].reshape(B, H, W, C)
    pred = net(np.concatenate([x, cond], axis=-1), np.full(B, float(ti)))
    ab = abar(cfg)
    a, ap = ab[ti], (ab[tp] if tp >= 0 else 1.0)
    if cfg["prediction"] == "v":
        x0 = math.sqrt(a) * x - math.sqrt(1 - a) * pred
        eps = math.sqrt(1 - a) * x + math.sqrt(a) * pred
    else:
        eps = pred
        x0 = (x - math.sqrt(1 - a) * eps) / math.sqrt(a)
    x_prev = math.sqrt(ap) * x0 + math.sqrt(1 - ap) * eps
    np.concatenate([pred.ravel(), x_prev.ravel()]).astype("<f8").tofile(out)


if __name__ == "__main__":
    main()
