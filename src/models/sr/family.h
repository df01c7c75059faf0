// The SR UNet family for the model-family registry (src/models/families.cpp).
#pragma once
#include "genperf/model_family.h"

namespace genperf::sr {

const ModelFamily& unet_family();

}  // namespace genperf::sr
