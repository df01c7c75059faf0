// The CPU backend's table (ops/backend.h): every op has a kernel here. The drivers (cpu_ops.h)
// pick the ISA level's kernels at run time.
#include "backend/cpu/cpu_ops.h"
#include "ops/backend.h"

namespace genperf::ops {

const Backend& cpu_backend() {
  static const Backend table = [] {
    Backend b;
    b.name = "CPU";
    b.linear = cpu::linear;
    b.linear_many = cpu::linear_many;
    b.prepare_weight = cpu::prepare_weight;
    b.embedding = cpu::embedding;
    b.rms_norm = cpu::rms_norm;
    b.rope = cpu::rope;
    b.silu_mul = cpu::silu_mul;
    b.add_inplace = cpu::add_inplace;
    b.store_rows = cpu::store_rows;
    b.attention = cpu::attention;
    return b;
  }();
  return table;
}

}  // namespace genperf::ops
