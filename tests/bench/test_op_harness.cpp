// The op harness (genperf/op_harness.h): check mode passes on the CPU; it fails on a CPU table
// with sabotaged entries, and only on the ops sabotaged; perf mode yields finite figures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "genperf/op_harness.h"
#include "genperf/ops.h"
#include "genperf/runtime.h"
#include "ops/backend.h"

using namespace genperf;
using namespace genperf::bench;

namespace {

constexpr uint64_t kSeed = 20260522;

void print_failures(const OpCheckSummary& s) {
  for (const auto& r : s.results)
    if (r.status == CaseStatus::Fail) std::printf("%s\n", format_check_row(r).c_str());
}

TEST(OpHarness, EveryOpPassesOnTheCpu) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  OpCheckOptions o;
  o.seed = kSeed;
  o.backend = "cpu";
  const OpCheckSummary s = check_ops(o);
  print_failures(s);
  std::printf("%s\n", format_check_summary(s).c_str());
  EXPECT_TRUE(s.passed());
  EXPECT_GT(s.ok, 300);
  EXPECT_EQ(s.no_kernel, 0);  // the CPU table is full
  // Every op family is covered, forward and backward, and the float64 reference's gradients.
  for (const char* op : {"linear", "linear_many", "embedding", "rms_norm", "rope", "silu_mul", "add_inplace",
                         "store_rows", "attention", "embedding_backward", "rmsnorm_backward", "rope_backward",
                         "swiglu_backward", "matmul_forward", "matmul_backward", "lora_backward",
                         "crossentropy_backward", "residual_backward", "attention_backward_naive",
                         "attention_backward_flash", "adamw_step", "sum_squares", "scale"}) {
    int64_t n = 0;
    for (const auto& r : s.results) n += r.op == op && r.status == CaseStatus::Ok;
    EXPECT_GT(n, 0) << op;
  }
  int64_t fd = 0;
  for (const auto& r : s.results) fd += r.backend == "float64";
  EXPECT_GE(fd, 15);
}

// Sabotaged kernels: linear writes zeros, matmul_backward's input gradient is off by a factor.
void zero_linear(const Tensor&, const Tensor&, const Tensor*, Tensor& y, int64_t T, int64_t, int64_t N) {
  for (int64_t t = 0; t < T; ++t) std::memset(y.ndim() == 1 ? y.raw() : y.row(t), 0, size_t(N) * 4);
}
void scaled_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                            const float* w, int64_t N, int64_t IC, int64_t OC, const ops::Bf16Scratch* bf16) {
  ops::cpu_backend().train.matmul_backward(dinp, dw, dbias, dout, inp, w, N, IC, OC, bf16);
  if (dinp)
    for (int64_t i = 0; i < N * IC; ++i) dinp[i] *= 1.5f;
}

TEST(OpHarness, SabotagedKernelsFail) {
  std::printf("seed %llu\n", (unsigned long long)kSeed);
  ops::Backend bad = ops::cpu_backend();
  bad.linear = zero_linear;
  bad.train.matmul_backward = scaled_matmul_backward;
  bad.train.scale = nullptr;  // a missing kernel is reported, not failed
  OpCheckOptions o;
  o.seed = kSeed;
  o.table = &bad;
  o.isa = "generic";
  const OpCheckSummary s = check_ops(o);
  std::printf("%s\n", format_check_summary(s).c_str());
  EXPECT_FALSE(s.passed());
  int64_t linear_fail = 0, linear_total = 0, mm_fail = 0, mm_total = 0, others_fail = 0, no_kernel = 0;
  for (const auto& r : s.results) {
    if (r.backend == "float64") {  // the reference's own checks do not use the table
      EXPECT_EQ(r.status, CaseStatus::Ok) << format_check_row(r);
      continue;
    }
    if (r.op == "linear") {
      ++linear_total;
      linear_fail += r.status == CaseStatus::Fail;
    } else if (r.op == "matmul_backward") {
      ++mm_total;
      mm_fail += r.status == CaseStatus::Fail;
    } else if (r.op == "scale") {
      no_kernel += r.status == CaseStatus::NoKernel;
    } else if (r.status != CaseStatus::Ok) {
      ++others_fail;
      ADD_FAILURE() << format_check_row(r);
    }
  }
  EXPECT_GT(linear_total, 0);
  EXPECT_EQ(linear_fail, linear_total);  // every linear case sees the zeros
  EXPECT_GT(mm_total, 0);
  EXPECT_EQ(mm_fail, mm_total);  // dinp 50% off, beyond even the bf16 case's 1e-2
  EXPECT_EQ(others_fail, 0);
  EXPECT_EQ(no_kernel, 1);
  EXPECT_EQ(s.no_kernel, 1);
}

TEST(OpHarness, PerfModeGivesFiniteFigures) {
  OpPerfOptions o;
  o.tiny = true;
  o.op_filter = "rms_norm";
  o.isa = isa_name(isa());
  o.reps = 5;
  const auto rs = perf_ops(o);
  ASSERT_EQ(rs.size(), 1u);
  const auto& r = rs[0];
  std::printf("%s\n%s\n", format_perf_header().c_str(), format_perf_row(r).c_str());
  EXPECT_EQ(r.op, "rms_norm");
  EXPECT_TRUE(std::isfinite(r.gbs) && r.gbs > 0);
  EXPECT_TRUE(std::isfinite(r.gflops) && r.gflops > 0);
  EXPECT_TRUE(std::isfinite(r.floor) && r.floor > 0);
  EXPECT_TRUE(std::isfinite(r.fraction) && r.fraction > 0);
  EXPECT_EQ(r.floor_exceeded, r.fraction > 1);
  EXPECT_LE(r.min_s, r.median_s);
  EXPECT_LE(r.median_s, r.max_s);
  EXPECT_EQ(r.bound, "memory");
}

// The UNet's convolutions are held to the GEMM peak of their compute type measured in the same
// run: f32 cases to "gemm f32", bf16 cases (only where bf16 runs) to "gemm bf16".
TEST(OpHarness, PerfModeHoldsConvolutionsToThePeakOfTheirType) {
  OpPerfOptions o;
  o.tiny = true;
  o.op_filter = "conv2d";
  o.isa = isa_name(isa());
  o.reps = 5;
  const auto rs = perf_ops(o);
  const bool bf16 = effective_precision(Precision::Bf16) == Precision::Bf16;
  ASSERT_EQ(rs.size(), bf16 ? 4u : 2u);
  for (const auto& r : rs) {
    std::printf("%s\n", format_perf_row(r).c_str());
    const bool is_bf16 = r.name.ends_with(" bf16");
    EXPECT_TRUE(is_bf16 || r.name.ends_with(" f32")) << r.name;
    EXPECT_EQ(r.floor_name, is_bf16 ? "gemm bf16" : "gemm f32") << r.name;
    EXPECT_EQ(r.bound, "compute");
    EXPECT_TRUE(std::isfinite(r.fraction) && r.fraction > 0) << r.name;
  }
}

}  // namespace
