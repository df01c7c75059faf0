// Whole-file helpers. Writes go to a temporary name beside the target and are renamed into
// place, so a failure never leaves a partial file.
#pragma once
#include <string>
#include <string_view>

namespace genperf {

std::string read_text_file(const std::string& path);  // errors name the file
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace genperf
