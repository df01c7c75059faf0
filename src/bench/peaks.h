// This machine's floors, measured in the run whose figures they bound (BENCHMARKING.md, rules 4
// and 8): streaming read bandwidth (from memory, or from cache for a working set that fits the
// last-level cache) and the GEMM peak of a compute type; and the rules that judge a figure
// against them (a fraction above 1 is flagged, never printed silently).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "genperf/dtype.h"

namespace genperf::bench {

// Read bandwidth in GB/s (1e9 bytes/s): every thread (genperf::num_threads()) sums its share of a
// buffer of memory_probe_bytes(), 64-byte aligned, as four streams; median of 5 after one
// warm-up pass (BandwidthProbe). The decode floor is weight bytes over this.
double measure_bandwidth_gbs();

// The same measurement on a buffer kept between calls, so that readings can be interleaved with
// a workload's repetitions: on a shared machine the bandwidth drifts by tens of percent over
// minutes (this VM: 40 to 95 GB/s), so one reading taken at another moment than the workload can
// put the workload above 100% of it. The best reading of several is the floor.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(size_t bytes);  // allocates, fills and reads the buffer once
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;
  size_t bytes() const { return floats_ * 4; }
  // GB/s of one pass: the whole buffer read once, or as many times as make 256 MiB (a buffer that
  // stays in cache is read in microseconds, too short to time alone, and a pass of under a
  // millisecond reads far low whenever the scheduler takes a thread away from it).
  double pass() const;
  double measure(int passes) const;   // the median of `passes` passes

 private:
  float* data_;
  size_t floats_;
  int reads_;
};

// GFLOP/s of the engine's prefill GEMM (oneDNN, the path ops::linear takes for many rows) at
// T = K = N = 2048 with weights of `weight_type`; median of 5 after one warm-up call.
double measure_gemm_peak_gflops(DType weight_type);

// The arithmetic a prefill GEMM runs in, which sets its peak: f32, bf16 (AVX512-BF16 dot
// products; also the block formats' decoded panels where the bf16 matmul runs) or int8 (the
// block formats' integer GEMM: activations quantized to 8 bits, 8-bit dot products).
enum class GemmCompute { F32, BF16, Int8 };
const char* gemm_compute_name(GemmCompute c);

// The compute type prefill runs in for weights of type `weight`, given whether the backend has an
// integer GEMM for it (cpu::linear_qgemm) and whether the bf16 matmul runs (AVX512-BF16 at the
// AVX-512 level): the rules of src/backend/cpu/gemm_onednn.cpp and cpu_ops.cpp's linear.
GemmCompute gemm_compute_type(DType weight, bool has_int8_gemm, bool bf16_matmul);
// The same, asking this machine's backend (a GEMM on a small prepared weight of that type).
GemmCompute gemm_compute_type(DType weight);
// Of several compute types (a model of mixed weight types), the one of the highest peak, so that
// no mix of them can pass it: int8, then bf16, then f32.
GemmCompute fastest(const std::vector<GemmCompute>& types);

// The peak of a compute type at T = K = N = 2048 on operands kept between calls, measured with
// oneDNN: f32 x f32, bf16 x bf16 (f32 where the bf16 matmul does not run), u8 x s8 for int8. On
// the backend's engine, so oneDNN is capped by GENPERF_ISA as the backend's own prefill GEMMs are
// (gemm_onednn.cpp): at a lower level the peak is that level's (how() names oneDNN's ISA).
class GemmPeakProbe {
 public:
  explicit GemmPeakProbe(GemmCompute type);  // allocates the operands and runs one warm-up call
  ~GemmPeakProbe();
  GemmPeakProbe(const GemmPeakProbe&) = delete;
  GemmPeakProbe& operator=(const GemmPeakProbe&) = delete;
  double sample() const;  // GFLOP/s of one call
  const std::string& how() const { return how_; }  // what ran, e.g. "oneDNN u8 x s8 matmul"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string how_;
};

// Size of the last-level cache as the OS reports it: the highest level of
// /sys/devices/system/cpu/cpu0/cache/index*/ holding data, else sysconf's L3, then L2 size; 0
// where neither says. On a VM this can be the socket's whole L3, more than its cores reach (this
// 2-core Zen 5 VM reports 508 MiB): the cache probe over the working set tells what it delivers.
size_t last_level_cache_bytes();
// sysfs's "size" text ("32768K", "1M", "512") in bytes; 0 when it is not a size.
size_t parse_cache_size(const std::string& text);
// Bytes of the memory probe's buffer: 1 GiB, or 2x the LLC where that is more, so that it streams
// from memory, but at most a quarter of physical memory (`phys` bytes; 0: no bound).
size_t memory_probe_bytes(size_t llc_bytes, size_t phys_bytes);
size_t memory_probe_bytes();  // for this machine
// Whether a working set of `bytes` fits the last-level cache (false when its size is unknown).
bool fits_in_cache(double bytes, size_t llc_bytes);

// A measured figure against its floor: the fraction, and whether it passes 100%, which says the
// floor measured the wrong limit (BENCHMARKING.md, rule 8).
struct FloorFraction {
  double fraction = 0;
  bool exceeded = false;
};
FloorFraction against_floor(double measured, double floor);

}  // namespace genperf::bench
