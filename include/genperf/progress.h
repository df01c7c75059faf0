// A progress bar on stderr for long work: shown only when stderr is a terminal (and not with
// GENPERF_NO_PROGRESS=1), redrawn at most ~10 times a second, erased when done.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace genperf {

class Progress {
 public:
  Progress(std::string label, int64_t total);
  ~Progress();
  void update(int64_t done, const std::string& extra = "");
  void finish();
  // Erases the bar so a line can be printed; the next update draws it again.
  void clear();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace genperf
