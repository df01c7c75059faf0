// The Llama family (Llama, Mistral, Qwen2) for the model-family registry (src/models/families.cpp).
#pragma once
#include "genperf/model_family.h"

namespace genperf {

const ModelFamily& llama_family();

}  // namespace genperf
