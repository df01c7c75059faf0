// One harness over every op on every backend (in the spirit of ggml's test-backend-ops).
// Check mode runs each registered case, at every ISA level the CPU supports and on every backend
// present, against its oracle: inference ops (ops.h) against ops::ref::X; training ops
// (ops_train.h) in float against the float64 reference on the same inputs, and the float64
// backward against central finite differences; the optimizer's ops against plain double loops.
// Cases sit at block boundaries, on strided row views with guard values around them, with fixed
// printed seeds. Perf mode times ops at the Llama presets' shapes and sets achieved GFLOP/s or
// GB/s (from ops_cost.h) against this machine's measured peak (bench/peaks.h).
// `genperf test-ops` is the command; a new backend is checked by `genperf test-ops --backend X`.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genperf/json.h"

namespace genperf::ops {
struct Backend;
}

namespace genperf::bench {

enum class CaseStatus { Ok, Fail, NoKernel, NotPresent };
const char* case_status_name(CaseStatus s);  // "OK", "FAIL", "no kernel", "not present"

struct OpCaseResult {
  std::string op;       // "linear", "matmul_backward", ...
  std::string backend;  // "CPU", "CUDA", "float64" (finite-difference checks of the reference)
  std::string isa;      // "generic", "avx2", "avx512", or "-"
  std::string name;     // shape, types and views of the case
  std::string metric;   // what error is: "nmse", "max rel", "fd rel", "guards", ...
  std::string worst;    // the output whose error is reported (the worst of the case's checks)
  double error = 0, tolerance = 0;
  uint64_t seed = 0;
  CaseStatus status = CaseStatus::Ok;
  std::string message;  // an exception's text, or why a case did not run
};

struct OpCheckOptions {
  std::string op_filter;          // substring of the op's name; "" = all
  std::string backend = "all";    // "cpu", "cuda" or "all" (the backends present)
  std::string isa = "all";        // "all", "generic", "avx2", "avx512" (clamped: unsupported = skipped)
  uint64_t seed = 20260522;       // base seed; each case derives its own (printed)
  // Test this table instead of the CPU's (tensors on the CPU): the harness's own test sabotages
  // entries of a copy of the CPU table. Named `table_name` in the results.
  const ops::Backend* table = nullptr;
  std::string table_name = "CPU*";
  std::function<void(const OpCaseResult&)> on_result;  // called as each case finishes
};

struct OpCheckSummary {
  std::vector<OpCaseResult> results;
  int64_t ok = 0, failed = 0, no_kernel = 0, not_present = 0;
  bool passed() const { return failed == 0; }
};

OpCheckSummary check_ops(const OpCheckOptions& o);
// The cases the registry holds for an op filter (names "op: case"), for listing.
std::vector<std::string> list_op_cases(const std::string& op_filter);

struct OpPerfResult {
  std::string op, name, isa;
  double flops = 0, bytes = 0;                    // per call (ops_cost.h): the model's count
  // Where the kernel's algorithm does other arithmetic (Winograd's convolution), its name and the
  // FLOPs it does per call; the fraction of the floor is of those. Else empty and 0.
  std::string algorithm;
  double executed_flops = 0;
  double median_s = 0, min_s = 0, max_s = 0;      // of `reps` timed calls after warm-up
  double gflops = 0, gbs = 0;                     // achieved, at the median (the model's FLOPs)
  std::string bound;     // "compute" or "memory": which floor the op is held to
  std::string floor_name;  // "gemm f32", "gemm int8", "read bandwidth (memory)", "... (cache)"
  double floor = 0;        // GFLOP/s or GB/s
  double fraction = 0;     // achieved / floor
  bool floor_exceeded = false;  // fraction > 1: flagged, never printed silently
};

struct OpPerfOptions {
  std::string op_filter;
  std::string isa = "all";  // the levels to time ("all": each the CPU supports)
  int reps = 5;             // timed runs per op (at least 5 for a reported median)
  bool tiny = false;        // small shapes and floors (for the harness's own test)
  std::function<void(const OpPerfResult&)> on_result;
};
std::vector<OpPerfResult> perf_ops(const OpPerfOptions& o);

// Text tables and JSON records of the results.
std::string format_check_row(const OpCaseResult& r);
std::string format_check_header();
std::string format_check_summary(const OpCheckSummary& s);
std::string format_perf_row(const OpPerfResult& r);
std::string format_perf_header();
Json to_json(const OpCheckSummary& s);
Json to_json(const std::vector<OpPerfResult>& r);

}  // namespace genperf::bench
