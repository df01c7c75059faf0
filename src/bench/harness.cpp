#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include <oneapi/dnnl/dnnl.h>

#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/runtime.h"

#include "genperf_commit.h"  // GENPERF_COMMIT, written at build time (cmake/commit.cmake)
#ifndef GENPERF_BUILD_TYPE
#define GENPERF_BUILD_TYPE "unknown"
#endif

namespace genperf {

Stats Stats::of(std::vector<double> samples) {
  GP_CHECK(!samples.empty(), "[bench] no samples");
  Stats s;
  s.samples = samples;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

Json Stats::to_json() const {
  Json::Array a;
  a.reserve(samples.size());
  for (double x : samples) a.emplace_back(x);
  return Json(Json::Object{{"median", median}, {"min", min}, {"max", max}, {"n", int64_t(samples.size())},
                           {"samples", Json(std::move(a))}});
}

Stats measure(const std::function<void()>& fn, int warmup, int reps, double min_seconds) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  double total = 0;
  while (int(t.size()) < reps || total < min_seconds) {
    const auto a = clock::now();
    fn();
    const double s = std::chrono::duration<double>(clock::now() - a).count();
    t.push_back(s);
    total += s;
  }
  return Stats::of(std::move(t));
}

namespace {

std::string hostname() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

std::string os_name() {
  struct utsname u {};
  return uname(&u) == 0 ? cat(u.sysname, " ", u.release) : "";
}

std::vector<std::pair<std::string, std::string>> library_versions() {
  const dnnl_version_t* d = dnnl_version();
#if defined(__clang__)
  const std::string compiler = cat("clang ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#else
  const std::string compiler = cat("gcc ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#endif
  return {{"compiler", compiler},
          {"onednn", cat(d->major, ".", d->minor, ".", d->patch)},
          {"openmp", cat(_OPENMP)}};  // the version of the OpenMP specification, as yyyymm
}

}  // namespace

Provenance provenance(const std::string& command) {
  Provenance p;
  const auto& f = cpu_features();
  p.cpu = f.model;
  p.isa_flags = f.flags();
  p.isa_path = isa_path();
  p.threads = num_threads();
  p.commit = GENPERF_COMMIT;
  p.build_type = GENPERF_BUILD_TYPE;
  p.command = command;
  p.hostname = hostname();
  p.os = os_name();
  p.cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  p.memory_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  p.libraries = library_versions();
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  p.date = buf;
  return p;
}

Json Provenance::to_json() const {
  Json::Object libs;
  for (const auto& [name, version] : libraries) libs.emplace_back(name, version);
  return Json(Json::Object{{"cpu", cpu},         {"isa_flags", isa_flags}, {"isa_path", isa_path},
                           {"threads", threads}, {"commit", commit},       {"build_type", build_type},
                           {"date", date},       {"command", command},     {"gpu", "none"},
                           {"hostname", hostname}, {"os", os},             {"cores", cores},
                           {"memory_bytes", memory_bytes}, {"libraries", Json(std::move(libs))}});
}

size_t peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace genperf
