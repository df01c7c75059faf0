#!/usr/bin/env python3
"""The noise floor of the SR spectrum score: what a perfect sampler would score.

`genperf sr eval` reports R(k) = <P_SR>/<P_HR> per integer band of |k| (Hann-tapered, means
removed; docs/SR.md), pooled over maps of one side, and the worst |R - 1| over
k_LR < k <= 0.8 k_Nyquist. The truth is one realization, so even a sampler that draws the missing
scales from their true distribution scores a worst |R - 1| above zero. This script measures that
floor by simulation, with NumPy alone (an independent reference of the estimator).

The "perfect" conditional sampler: the truth is a log-normal dust field exp(s g) (as genperf's
synthetic:N:size:seed:mixed fields: slope -3 .. -2.5, sigma_ln s 0.3 .. 1); a sample keeps the
Fourier modes of g with |k| <= k_LR, the scales the input holds, and draws those above afresh from
the same spectrum. Its R(k) is 1 in expectation; what it scores is the estimator's scatter.

    /usr/bin/python3 bench/sr_spectrum_floor.py [--size 256] [--scale 4] [--maps 4] [--samples 8] [--trials 100]
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--maps", type=int, default=4, help="maps pooled, as sr eval pools maps of one side")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    n = a.size
    k_lr, k_hi = n // (2 * a.scale), int(0.8 * (n // 2))
    f1 = np.fft.fftfreq(n) * n
    k = np.sqrt(f1[:, None] ** 2 + f1[None, :] ** 2)
    band = k.astype(int).ravel()  # integer bands of |k|, as genperf's band_average
    count = np.bincount(band, minlength=n)[: n // 2 + 1]
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)
    taper = hann[:, None] * hann[None, :]
    rng = np.random.default_rng(a.seed)
    print(f"seed {a.seed}: {a.trials} trials of {a.maps} maps of {n} x {n}, scale {a.scale}, {a.samples} samples; "
          f"bands {k_lr + 1} .. {k_hi}")

    def power(m):
        p = np.abs(np.fft.fft2((m - m.mean()) * taper)) ** 2
        return np.bincount(band, p.ravel(), minlength=n)[: n // 2 + 1] / np.maximum(count, 1)

    def gaussian(slope):
        amp = np.where(k > 0, np.maximum(k, 1e-12), 1.0) ** (0.5 * slope)
        amp[0, 0] = 0
        return np.fft.fft2(rng.standard_normal((n, n))) * amp

    worst, mean_r = [], []
    for _ in range(a.trials):
        p_sr, p_hr = np.zeros(n // 2 + 1), np.zeros(n // 2 + 1)
        for _ in range(a.maps):
            slope, s = -3 + 0.5 * rng.random(), 0.3 + 0.7 * rng.random()
            g_hat = gaussian(slope)
            g = np.real(np.fft.ifft2(g_hat))
            mu, sd = g.mean(), g.std()
            p_hr += power(np.exp(s * (g - mu) / sd - s * s / 2))
            for _ in range(a.samples):
                mixed = np.where(k <= k_lr, g_hat, gaussian(slope))
                gs = np.real(np.fft.ifft2(mixed))
                p_sr += power(np.exp(s * (gs - mu) / sd - s * s / 2)) / a.samples
        r = p_sr[k_lr + 1 : k_hi + 1] / p_hr[k_lr + 1 : k_hi + 1]
        worst.append(np.max(np.abs(r - 1)))
        mean_r.append(r.mean())
    q = lambda v, p: float(np.quantile(v, p))
    print(f"worst |R - 1|: median {q(worst, 0.5):.3f}, 10% {q(worst, 0.1):.3f}, 90% {q(worst, 0.9):.3f}")
    print(f"mean of R over the bands: median {q(mean_r, 0.5):.3f}, 5% {q(mean_r, 0.05):.3f}, 95% {q(mean_r, 0.95):.3f}")


if __name__ == "__main__":
    main()
