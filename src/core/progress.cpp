#include "genperf/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace genperf {

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(total), start_(std::chrono::steady_clock::now()), last_() {
  const char* off = std::getenv("GENPERF_NO_PROGRESS");
  enabled_ = isatty(STDERR_FILENO) && !(off && std::strcmp(off, "0") != 0);
}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done, const std::string& extra) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double frac = total_ > 0 ? double(done) / double(total_) : 1.0;
  const int width = 30, fill = int(frac * width + 0.5);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  char bar[width + 1];
  for (int i = 0; i < width; ++i) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %.0fs ETA %.0fs %s\033[K", label_.c_str(), bar,
               (long long)done, (long long)total_, elapsed, eta, extra.c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (!enabled_ || finished_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  last_ = {};  // redraw at the next update
}

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace genperf
