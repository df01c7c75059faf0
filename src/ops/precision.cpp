// Compute precision (genperf/ops_train.h): names, parsing, and what runs on this CPU.
#include "genperf/error.h"
#include "genperf/ops_train.h"
#include "genperf/runtime.h"

namespace genperf {

const char* precision_name(Precision p) { return p == Precision::Bf16 ? "bf16" : "f32"; }

Precision parse_precision(std::string_view s) {
  if (s == "f32") return Precision::F32;
  if (s == "bf16") return Precision::Bf16;
  fail("[precision] unknown precision '", s, "': expected f32 or bf16");
}

// bf16 products need AVX512-BF16 and the AVX-512 level selected (GENPERF_ISA or set_isa may
// select a lower one, as for inference).
Precision effective_precision(Precision requested) {
  return requested == Precision::Bf16 && cpu_features().avx512_bf16 && isa() == Isa::Avx512
             ? Precision::Bf16
             : Precision::F32;
}

}  // namespace genperf
