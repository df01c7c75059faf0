// PNG images in and out (through libpng), for maps that come as pictures and for previews of maps:
// the stored sample values as doubles in [0, 1], a luminance, an asinh stretch, and a gray writer.
//
// Layout: v[(y * w + x) * channels + c], y = 0..h-1 from the top row down, x = 0..w-1 from the
// left, c = 0..channels-1 (gray: 0; RGB: 0 R, 1 G, 2 B). Values are the file's samples divided by
// 2^bit_depth - 1, as stored: no gamma, colour-space or ICC conversion is applied.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace genperf {

struct PngImage {
  int64_t h = 0, w = 0;  // rows, columns
  int64_t channels = 0;  // 1 (gray) or 3 (RGB); an alpha channel is not kept
  std::vector<double> v;  // [h, w, channels], row-major, in [0, 1]
  // The file's bits per sample: 1, 2, 4, 8 or 16 for gray, 8 or 16 for RGB; 8 for a palette
  // image (the depth of its palette's entries, whatever the depth of its indices).
  int bit_depth = 8;
  bool has_alpha = false;  // the file had an alpha channel or a tRNS chunk (dropped here)
};

struct PngReadOptions {
  int64_t max_pixels = int64_t(1) << 28;  // larger images (h * w) are refused before allocation
};

// Reads any PNG: gray, gray + alpha, RGB, RGBA or palette; 1-, 2- and 4-bit samples expanded to
// 8 bits, palettes expanded to RGB, alpha (and tRNS) dropped, 16-bit samples byte-swapped from
// the file's big-endian order by libpng; interlaced or not. Throws genperf::Error
// "[png] <path>: <problem>" for a missing or unreadable file, one that is not a PNG, a truncated
// or corrupt one (libpng's message), and an image over 65536 pixels on a side or over
// options.max_pixels pixels (checked before the pixels are allocated).
PngImage read_png(const std::string& path, const PngReadOptions& options = {});
// The same, on a PNG held in memory; `name` is used in messages.
PngImage read_png_bytes(const std::string& name, const void* data, size_t size, const PngReadOptions& options = {});

// One value a pixel, [h, w]: gray images their value; RGB images 0.2126 R + 0.7152 G + 0.0722 B
// (Rec. 709's weights) on the stored values, which for an sRGB file are gamma-encoded, so this is
// an approximation of luminance (luma), not a colorimetric one.
std::vector<double> png_luminance(const PngImage& img);

// Writes v ([h, w], row-major, top row first) as an 8- or 16-bit gray PNG: each value clamped to
// [0, 1] and stored as round(value * (2^bit_depth - 1)), NaN as 0. Reading it back gives every
// value within half a quantization step, 1 / (2 * (2^bit_depth - 1)), and values already on the
// grid (k / (2^bit_depth - 1)) exactly. The file is written to a temporary name in the same
// directory and renamed, so a failure leaves no partial output. Throws "[png] <path>: <problem>".
void write_png_gray(const std::string& path, int64_t h, int64_t w, std::span<const double> v, int bit_depth);

// A display stretch of v into [0, 1]: with lo and hi the 0.5th and 99.5th percentiles of v's
// finite values (NaN and +-inf ignored; percentile p is the linear interpolation between order
// statistics at position p / 100 * (n - 1) of the n sorted values, as numpy.percentile's default)
// and s = soft * (hi - lo), each value x becomes
//   clamp(asinh((x - lo) / s) / asinh((hi - lo) / s), 0, 1) = clamp(asinh((x - lo) / s) / asinh(1 / soft), 0, 1):
// linear near lo, logarithmic well above it; a small `soft` (0.01) stretches the faint end more,
// a large one (10) is nearly linear. NaN and -inf become 0, +inf 1. When v has no finite value,
// or hi == lo, every value becomes 0. `soft` must be finite and positive.
std::vector<double> asinh_stretch(std::span<const double> v, double soft);

}  // namespace genperf
