// Text placed in XML or HTML (the SVG heatmap, the study's report page): the characters markup
// gives a meaning to, as entities.
#pragma once
#include <string>

namespace genperf::report {

inline std::string xml_text(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

}  // namespace genperf::report
