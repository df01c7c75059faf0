// The report layer: the files genperf writes for people and other tools to read (CSV, JSON,
// SVG), built from the results of the layers below it.
#pragma once
#include <string>

#include "genperf/sensitivity.h"

namespace genperf {

// ---------------------------------------------------------------------------------------------
// The sensitivity map (genperf/sensitivity.h).

// Files: PREFIX.csv (one row per entry), PREFIX.json (entries + metadata), PREFIX.svg (heatmap:
// layers x tensor kinds, colored by log10 KL, one panel per format). Each written atomically.
std::string sensitivity_csv(const SensitivityMap& m);
std::string sensitivity_json(const SensitivityMap& m);  // read back by read_sensitivity_json
std::string sensitivity_svg(const SensitivityMap& m);
void write_sensitivity(const SensitivityMap& m, const std::string& prefix);

}  // namespace genperf
