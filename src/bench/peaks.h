// This machine's floors, measured once per run so that benchmark figures can be stated as a
// fraction of them (BENCHMARKING.md, rule 4): streaming read bandwidth and the GEMM peak.
#pragma once
#include "genperf/dtype.h"

namespace genperf::bench {

// Read bandwidth in GB/s (1e9 bytes/s): every thread (genperf::num_threads()) sums its share of a
// 1 GiB buffer; median of 5 after one warm-up pass. The decode floor is weight bytes over this.
double measure_bandwidth_gbs();

// GFLOP/s of the engine's prefill GEMM (oneDNN, the path ops::linear takes for many rows) at
// T = K = N = 2048 with weights of `weight_type`; median of 5 after one warm-up call.
double measure_gemm_peak_gflops(DType weight_type);

}  // namespace genperf::bench
