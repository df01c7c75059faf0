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
It also scores the wide bands of sr eval's spectrum_worst_wide (the integer bands grouped four to
an octave, their modes' power summed), and with --deficit a sampler whose samples lack that
fraction of the power above k_LR: whether a score can tell it from a perfect one.

    /usr/bin/python3 bench/sr_spectrum_floor.py [--size 256] [--scale 4] [--maps 4] [--samples 8] [--trials 100]
                                                 [--per-octave 4] [--deficit 0]
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
    ap.add_argument("--per-octave", type=int, default=4,
                    help="wide bands for the second score: this many a factor of 2 in k, as sr eval's spectrum_worst_wide")
    ap.add_argument("--deficit", type=float, default=0.0,
                    help="take this fraction of the power above k_LR from every sample (0: a perfect sampler), "
                         "to see whether a score tells such a model from a perfect one")
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
    # The wide bands: integer bands k_LR + 1 .. k_hi grouped into ranges of equal width in log k,
    # pooled by their modes (as genperf's wide_bands).
    edges = k_lr * 2.0 ** (np.arange(0, 64) / a.per_octave)
    wide = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if lo < k_hi]
    wide_of = [[b for b in range(k_lr + 1, k_hi + 1) if lo < b <= hi] for lo, hi in wide]
    wide_of = [w for w in wide_of if w]
    keep = np.sqrt(1.0 - a.deficit)
    print(f"seed {a.seed}: {a.trials} trials of {a.maps} maps of {n} x {n}, scale {a.scale}, {a.samples} samples; "
          f"bands {k_lr + 1} .. {k_hi}")

    def power(m):
        p = np.abs(np.fft.fft2((m - m.mean()) * taper)) ** 2
        return np.bincount(band, p.ravel(), minlength=n)[: n // 2 + 1] / np.maximum(count, 1)

    def gaussian(slope):
        amp = np.where(k > 0, np.maximum(k, 1e-12), 1.0) ** (0.5 * slope)
        amp[0, 0] = 0
        return np.fft.fft2(rng.standard_normal((n, n))) * amp

    worst, mean_r, worst_wide = [], [], []
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
                m = np.exp(s * (gs - mu) / sd - s * s / 2)
                if a.deficit:
                    m_hat = np.fft.fft2(m)
                    m = np.real(np.fft.ifft2(np.where(k > k_lr, keep * m_hat, m_hat)))
                p_sr += power(m) / a.samples
        r = p_sr[k_lr + 1 : k_hi + 1] / p_hr[k_lr + 1 : k_hi + 1]
        worst.append(np.max(np.abs(r - 1)))
        mean_r.append(r.mean())
        rw = [np.sum((p_sr * count)[w]) / np.sum((p_hr * count)[w]) for w in wide_of]
        worst_wide.append(np.max(np.abs(np.array(rw) - 1)))
    q = lambda v, p: float(np.quantile(v, p))
    print(f"worst |R - 1|: median {q(worst, 0.5):.3f}, 10% {q(worst, 0.1):.3f}, 90% {q(worst, 0.9):.3f}")
    print(f"worst |R - 1| over {len(wide_of)} wide bands ({a.per_octave} an octave): median {q(worst_wide, 0.5):.3f}, "
          f"10% {q(worst_wide, 0.1):.3f}, 90% {q(worst_wide, 0.9):.3f}; above 0.1 in "
          f"{100 * np.mean(np.array(worst_wide) > 0.1):.0f}% of trials")
    print(f"mean of R over the bands: median {q(mean_r, 0.5):.3f}, 5% {q(mean_r, 0.05):.3f}, 95% {q(mean_r, 0.95):.3f}")


if __name__ == "__main__":
    main()
