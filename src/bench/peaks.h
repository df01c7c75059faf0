// This machine's floors, measured once per run so that benchmark figures can be stated as a
// fraction of them (BENCHMARKING.md, rule 4): streaming read bandwidth and the GEMM peak.
#pragma once
#include "genperf/dtype.h"

namespace genperf::bench {

// Read bandwidth in GB/s (1e9 bytes/s): every thread (genperf::num_threads()) sums its share of a
// 1 GiB buffer, 64-byte aligned, as four streams; median of 5 after one warm-up pass
// (BandwidthProbe). The decode floor is weight bytes over this.
double measure_bandwidth_gbs();

// The same measurement on a buffer kept between calls, for figures paired with a measurement
// made just before them: on a shared machine the bandwidth drifts by tens of percent over
// minutes, so a floor measured once at start-up can put a later kernel above 100% of it.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(size_t bytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;
  // GB/s now: the median of `passes` reads of the buffer after one warm-up pass.
  double measure(int passes) const;

 private:
  float* data_;
  size_t floats_;
};

// GFLOP/s of the engine's prefill GEMM (oneDNN, the path ops::linear takes for many rows) at
// T = K = N = 2048 with weights of `weight_type`; median of 5 after one warm-up call.
double measure_gemm_peak_gflops(DType weight_type);

}  // namespace genperf::bench
