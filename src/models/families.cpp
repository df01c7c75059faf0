// The registry of model families (genperf/model_family.h): each family's folder under src/models
// provides its ModelFamily; adding a family is one line here.
#include "genperf/error.h"
#include "genperf/model_family.h"
#include "models/llama/family.h"
#include "models/sr/family.h"

namespace genperf {

std::span<const ModelFamily* const> model_families() {
  static const ModelFamily* const families[] = {&llama_family(), &sr::unet_family()};
  return families;
}

const ModelFamily& family_of(const Checkpoint& ck) {
  for (const ModelFamily* f : model_families())
    if (f->owns(ck)) return *f;
  fail("[model] ", ck.source, ": architecture ", ck.arch(), " belongs to no model family genperf knows");
}

const ModelFamily& family_for_config(const Json& j) {
  const Json* a = j.is_object() ? j.find("architectures") : nullptr;
  if (a && a->is_array() && !a->as_array().empty() && a->as_array()[0].is_string())
    for (const ModelFamily* f : model_families())
      if (f->owns_architecture(a->as_array()[0].as_string())) return *f;
  return *model_families()[0];
}

}  // namespace genperf
