// The SR model applied to maps: the network's units, training pairs, and the tiled upscaling of
// a whole map with feathered seams and per-pixel uncertainty.
//
// Units: a map x (physical) becomes y = (T(x) - mean) / sd, T the config's transform (ln x or
// x), mean and sd those of T(LR) over the low-resolution map's valid pixels. The condition is the
// bicubic up-sampling of y(LR), the target x0 = (y(HR) - condition) / residual_std.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "genperf/diffusion.h"
#include "genperf/sr.h"
#include "genperf/unet.h"

namespace genperf::sr {

struct Units {
  std::string transform = "linear";
  double mean = 0, sd = 1;
  // The log transform is ln(max(x + offset, floor)): offset 0 for a positive map; for a map with
  // pixels <= 0 (a photograph's black sky), offset = -min + 0.01 (max - min) of the
  // low-resolution map; floor (5e-4 min for a positive map, else 1e-6 (max - min)) keeps the
  // darker pixels of the finer map finite.
  double offset = 0, floor = 0;
  // From a low-resolution map's valid (finite) pixels; errors name `what` for a map without
  // valid pixels or a constant map.
  static Units of(const Map& lr, const std::string& transform, const std::string& what);
  double to(double x) const;    // physical -> network units
  double from(double y) const;  // network units -> physical
};

// The bicubic up-sampling of map by an integer factor (ops::bicubic_up_forward in float64).
Map bicubic_up(const Map& m, int64_t scale);

// Back-projection (Irani and Peleg 1991): x <- x + U(lr - D(x)) with D the degradation without
// its noise and U bicubic up-sampling, repeated until ||D(x) - lr|| / ||lr|| <= tol or `iters`
// rounds have run. It changes the scales the input holds and leaves the finer ones nearly alone.
// Blank (NaN) pixels of lr pull on nothing. Returns the relative residual ||D(x) - lr|| / ||lr||
// of the map it leaves (as measured before the round that would have been next).
double back_project(Map& x, const Map& lr, const Degradation& d, int64_t iters, double tol);

// A high-resolution map as the network sees it: cond and x0 at high resolution (see above), from
// hr and its degradation; NaN pixels of hr are an error naming `what`.
struct TrainingPair {
  Map cond, x0;
};
TrainingPair training_pair(const Map& hr, const UNetConfig& c, const Degradation& d, const std::string& what);

struct UpscaleOptions {
  SamplerOptions sampler;
  int64_t samples = 1;   // independent samples per map; their mean and standard deviation
  uint64_t seed = 0;
  int64_t tile = 128;    // tile side in high-resolution pixels (a multiple of scale and of the network's)
  double overlap = 0.25;  // fraction of a tile shared with its neighbour (0 .. 0.5)
  int64_t batch = 8;     // tiles per forward pass
  bool keep_samples = false;  // keep every sample (Upscaled::samples), as the evaluation scores them
  // Data consistency: back-project each sample onto the input (back_project, in physical units)
  // "none", at the "end", or at "every" step on the network's estimate of the map (as DDNM,
  // Wang et al. 2023, does; the step then continues from the projected estimate, and the last
  // step's output is it). `degradation` is the input's; its scale must be the model's.
  std::string project = "none";
  Degradation degradation;
  int64_t project_iters = 10;
  double project_tol = 1e-4;
};
struct Upscaled {
  Map mean, sd;       // physical units; NaN where the input was blank
  Map first;          // the first sample alone
  std::vector<Map> samples;  // every sample, with UpscaleOptions::keep_samples
  int64_t tiles = 0;  // per sample
  double flops = 0;   // the network's, all steps and samples
};
// Upscales lr by the model's scale. Tiles cover the map with at least `overlap` shared between
// neighbours (the last row and column of tiles end at the map's edge). A sample is one map: its
// noise is drawn for the whole map from (seed, sample) alone, and at every step each tile's
// prediction is weighted by a window that falls linearly to near zero across the overlap and
// blended with its neighbours' before the map takes the step, so seams blend and overlapping tiles
// agree on one realization of the small scales. The result does not depend on the thread count;
// the batch changes at most oneDNN's rounding. Blank (NaN) pixels are filled with the map's mean for the network and written back
// as NaN. progress(done, total) counts tile batches x steps x samples.
Upscaled upscale(UNet<float>& net, const Map& lr, const UpscaleOptions& o, const std::string& what,
                 const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace genperf::sr
