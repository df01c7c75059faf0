// The registry of model families (genperf/model_family.h): each family's folder under src/models
// provides its ModelFamily; adding a family is one line here.
#include "genperf/error.h"
#include "genperf/model_family.h"
#include "models/llama/family.h"

namespace genperf {

std::span<const ModelFamily* const> model_families() {
  static const ModelFamily* const families[] = {&llama_family()};
  return families;
}

const ModelFamily& family_of(const Checkpoint& ck) {
  for (const ModelFamily* f : model_families())
    if (f->owns(ck)) return *f;
  fail("[model] ", ck.source, ": architecture ", ck.config.architecture, " belongs to no model family genperf knows");
}

}  // namespace genperf
