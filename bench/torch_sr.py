#!/usr/bin/python3
"""The SR diffusion UNet of include/genperf/unet.h in PyTorch (python3-torch 1.13, eager,
channels_last so that its convolutions run oneDNN's NHWC kernels as genperf's do), timed the way
`genperf bench sr` times genperf: a training step (zero grads, forward, v-prediction MSE, backward,
clipping at 1.0, AdamW, EMA) and a sampler step (a forward without autograd) on a batch of
images. Prints one JSON record. Used by bench/compare_sr.py; never run in CI.

    /usr/bin/python3 bench/torch_sr.py --config /tmp/cfg/config.json --batch 8 --size 64 --threads 2
"""
import argparse, json, math, os, statistics, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupNorm32(nn.GroupNorm):
    """Group norm in f32, returned in the input's dtype: under bf16 autocast PyTorch 1.13's CPU
    group_norm rejects a bf16 input with f32 affine parameters, and diffusion code normalizes in
    f32 anyway (OpenAI's guided-diffusion has a GroupNorm32 for it). In f32 this is nn.GroupNorm."""

    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb, groups, eps):
        super().__init__()
        self.norm1 = GroupNorm32(groups, cin, eps=eps)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = GroupNorm32(groups, cout, eps=eps)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(temb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.skip(x) if self.skip is not None else x) + h


class Attention(nn.Module):
    def __init__(self, c, head_channels, groups, eps):
        super().__init__()
        self.heads, self.hc = c // head_channels, head_channels
        self.norm = GroupNorm32(groups, c, eps=eps)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        B, C, H, W = x.shape
        h = self.norm(x).permute(0, 2, 3, 1).reshape(B, H * W, C)
        q, k, v = self.qkv(h).reshape(B, H * W, 3, self.heads, self.hc).permute(2, 0, 3, 1, 4)
        s = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hc), dim=-1)
        o = (s @ v).permute(0, 2, 1, 3).reshape(B, H * W, C)
        return x + self.proj(o).reshape(B, H, W, C).permute(0, 3, 1, 2)


class UNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        base, g, eps = c["base"], c["groups"], c["norm_eps"]
        L = len(c["mults"])
        ch = [base * m for m in c["mults"]]
        self.fc1, self.fc2 = nn.Linear(base, 4 * base), nn.Linear(4 * base, 4 * base)
        self.conv_in = nn.Conv2d(2 * c["channels"], base, 3, padding=1)
        self.down = nn.ModuleList()
        h = base
        for l in range(L):
            level = nn.ModuleDict()
            level["res"] = nn.ModuleList()
            level["attn"] = nn.ModuleList()
            for r in range(c["res_blocks"]):
                level["res"].append(ResBlock(h, ch[l], 4 * base, g, eps))
                h = ch[l]
                if l in c["attention_levels"]:
                    level["attn"].append(Attention(h, c["head_channels"], g, eps))
            if l + 1 < L:
                level["down"] = nn.Conv2d(h, h, 3, stride=2, padding=1)
            self.down.append(level)
        self.mid1 = ResBlock(h, h, 4 * base, g, eps)
        self.mid_attn = Attention(h, c["head_channels"], g, eps)
        self.mid2 = ResBlock(h, h, 4 * base, g, eps)
        self.up = nn.ModuleList()
        for l in reversed(range(L)):
            level = nn.ModuleDict()
            level["res"] = nn.ModuleList()
            level["attn"] = nn.ModuleList()
            for r in range(c["res_blocks"]):
                level["res"].append(ResBlock(h + (ch[l] if r == 0 else 0), ch[l], 4 * base, g, eps))
                h = ch[l]
                if l in c["attention_levels"]:
                    level["attn"].append(Attention(h, c["head_channels"], g, eps))
            if l > 0:
                level["up"] = nn.Conv2d(h, h, 3, padding=1)
            self.up.append(level)
        self.out_norm = GroupNorm32(g, h, eps=eps)
        self.out_conv = nn.Conv2d(h, c["channels"], 3, padding=1)

    def forward(self, x, t):
        half = self.c["base"] // 2
        f = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        te = torch.cat([torch.sin(t[:, None] * f), torch.cos(t[:, None] * f)], dim=1)
        temb = F.silu(self.fc2(F.silu(self.fc1(te))))
        h = self.conv_in(x)
        skips = []
        for level in self.down:
            for i, res in enumerate(level["res"]):
                h = res(h, temb)
                if len(level["attn"]):
                    h = level["attn"][i](h)
            skips.append(h)
            if "down" in level:
                h = level["down"](h)
        h = self.mid2(self.mid_attn(self.mid1(h, temb)), temb)
        for level in self.up:
            h = torch.cat([h, skips.pop()], dim=1)
            for i, res in enumerate(level["res"]):
                h = res(h, temb)
                if len(level["attn"]):
                    h = level["attn"][i](h)
            if "up" in level:
                h = level["up"](F.interpolate(h, scale_factor=2, mode="nearest"))
        return self.out_conv(F.silu(self.out_norm(h)))


def timed(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    s = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        s.append(time.perf_counter() - t0)
    return {"median": statistics.median(s), "min": min(s), "max": max(s), "samples": s}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    defaults = {"channels": 1, "base": 32, "mults": [1, 2, 2], "res_blocks": 1, "attention_levels": [2],
                "head_channels": 32, "groups": 8, "norm_eps": 1e-5, "timesteps": 1000}
    c = {**defaults, **json.load(open(a.config))}
    net = UNet(c).to(memory_format=torch.channels_last)
    ema = UNet(c).to(memory_format=torch.channels_last)
    ema.load_state_dict(net.state_dict())
    params = sum(p.numel() for p in net.parameters())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-5, betas=(0.9, 0.999), weight_decay=0.0)
    B, S = a.batch, a.size
    x = torch.randn(B, 2 * c["channels"], S, S).to(memory_format=torch.channels_last)
    target = torch.randn(B, c["channels"], S, S).to(memory_format=torch.channels_last)
    t = torch.randint(0, c["timesteps"], (B,)).float()
    auto = torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    def train_step():
        opt.zero_grad(set_to_none=True)
        with auto:
            loss = F.mse_loss(net(x, t).float(), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for pe, pn in zip(ema.parameters(), net.parameters()):
                pe.mul_(0.999).add_(pn, alpha=0.001)

    def sample_step():
        with torch.no_grad(), auto:
            ema(x, t)

    train = timed(train_step, 1, a.reps)
    sample = timed(sample_step, 1, a.reps)
    print(json.dumps({"engine": "torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "precision": a.precision, "parameters": params, "batch": B, "size": S,
                      "train_step_seconds": train, "sample_step_seconds": sample,
                      "train_images_per_s": B / train["median"], "sample_images_per_s_per_step": B / sample["median"]}))


if __name__ == "__main__":
    sys.exit(main())
