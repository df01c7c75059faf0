#include "genperf/runtime.h"

#include <cpuid.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "genperf/error.h"

namespace genperf {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = avx && os_avx && (b & (1u << 5));
    f.avx512f = os_avx512 && (b & (1u << 16));
    f.avx512dq = f.avx512f && (b & (1u << 17));
    f.avx512bw = f.avx512f && (b & (1u << 30));
    f.avx512vl = f.avx512f && (b & (1u << 31));
    f.avx512_vnni = f.avx512f && (c & (1u << 11));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx512_bf16 = f.avx512f && (a & (1u << 5));
    f.avx_vnni = f.avx2 && (a & (1u << 4));
  }
  f.fma = f.fma && os_avx;
  f.f16c = f.f16c && os_avx;
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    unsigned r[4];
    if (!__get_cpuid(0x80000002 + i, &r[0], &r[1], &r[2], &r[3])) break;
    std::memcpy(brand + 16 * i, r, 16);
  }
  f.model = brand;
  while (!f.model.empty() && f.model.back() == ' ') f.model.pop_back();
  return f;
}

Isa best_isa(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c) return Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
  return Isa::Generic;
}

Isa initial_isa() {
  Isa best = best_isa(cpu_features());
  if (const char* e = std::getenv("GENPERF_ISA")) {
    Isa want = best;
    if (!std::strcmp(e, "generic")) want = Isa::Generic;
    else if (!std::strcmp(e, "avx2") || !std::strcmp(e, "avxvnni")) want = Isa::Avx2;
    else if (!std::strcmp(e, "avx512")) want = Isa::Avx512;
    else fail("[runtime] GENPERF_ISA='", e, "' (expected generic, avx2, avxvnni or avx512)");
    if (int(want) < int(best)) best = want;
  }
  return best;
}

std::atomic<int> g_isa{-1};

}  // namespace

std::string CpuFeatures::flags() const {
  std::string s;
  auto add = [&](bool on, const char* n) { if (on) s += s.empty() ? n : cat(" ", n); };
  add(avx2, "avx2"); add(fma, "fma"); add(f16c, "f16c"); add(avx512f, "avx512f");
  add(avx512bw, "avx512bw"); add(avx512vl, "avx512vl"); add(avx512dq, "avx512dq");
  add(avx512_vnni, "avx512_vnni"); add(avx512_bf16, "avx512_bf16"); add(avx_vnni, "avx_vnni");
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

Isa isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = int(initial_isa());
    g_isa.store(v);
  }
  return Isa(v);
}

bool avx_vnni() {
  static const bool on = [] {
    const char* e = std::getenv("GENPERF_ISA");
    return cpu_features().avx_vnni && !(e && !std::strcmp(e, "avx2"));
  }();
  return on;
}

Isa cpu_isa() { return best_isa(cpu_features()); }

const char* isa_path() {
  return isa() == Isa::Avx2 && avx_vnni() ? "avx2+avxvnni" : isa_name(isa());
}

void set_isa(Isa i) {
  const Isa best = best_isa(cpu_features());
  g_isa.store(int(i) < int(best) ? int(i) : int(best));
}

const char* isa_name(Isa i) {
  switch (i) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

namespace {
int default_threads() {
  for (const char* var : {"GENPERF_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* e = std::getenv(var)) {
      const int n = std::atoi(e);
      if (n > 0) return n;
    }
  }
  const int procs = omp_get_num_procs();
  cpu_set_t set;
  const int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : procs;
  // Ranks sharing the node's cores share them out (a launcher that bound each rank to cores of
  // its own has already narrowed the affinity).
  const int local = launcher_local_ranks();
  return local > 1 && n >= procs ? std::max(1, n / local) : n;
}
std::atomic<int> g_threads{0};
}  // namespace

int launcher_local_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* e = std::getenv(var)) {
      const int n = std::atoi(e);
      if (n > 0) return n;
    }
  }
  return 1;
}

int node_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : omp_get_num_procs();
}

int affinity_cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : node_cores();
}

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) set_num_threads(n = default_threads());
  return n;
}

void set_num_threads(int n) {
  GP_CHECK(n > 0, "[runtime] thread count must be positive, got ", n);
  g_threads.store(n);
  omp_set_num_threads(n);
}

}  // namespace genperf
