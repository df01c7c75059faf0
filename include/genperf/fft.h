// Fast Fourier transforms of power-of-two sizes (iterative radix-2), in float64: the power spectra
// of the super-resolution metrics and the synthetic dust fields. The forward transform is
// unnormalized, X[k] = sum_n x[n] exp(-2 pi i k n / N); the inverse divides by N, so
// inverse(forward(x)) = x.
#pragma once
#include <complex>
#include <cstdint>
#include <span>

namespace genperf {

bool is_pow2(int64_t n);
// In place over a.size() values (a power of two; an error otherwise).
void fft(std::span<std::complex<double>> a, bool inverse = false);
// The 2-D transform of a row-major [h, w] array (both powers of two): rows, then columns.
void fft2(std::span<std::complex<double>> a, int64_t h, int64_t w, bool inverse = false);

}  // namespace genperf
