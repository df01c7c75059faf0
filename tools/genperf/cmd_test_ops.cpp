// genperf test-ops: the op harness (genperf/op_harness.h) over every op on every backend present.
#include <cstdio>

#include "common.h"
#include "genperf/error.h"
#include "genperf/op_harness.h"
#include "genperf/runtime.h"

namespace genperf::cli {

int cmd_test_ops(int argc, char** argv) {
  Args a("test-ops",
         {{"mode", "check (each op against its reference) or perf (achieved FLOP/s, GB/s against the peak)", "check"},
          {"op", "only ops whose name contains this", "", false, true},
          {"backend", "cpu, cuda or all (the backends present)", "all"},
          {"isa", "all, generic, avx2 or avx512 (levels the CPU lacks are skipped)", "all"},
          {"seed", "base seed of the check cases (each case prints its own)", "20260522"},
          {"reps", "perf: timed runs per op, after one warm-up", "5"},
          {"list", "list the check cases and exit", "", true},
          kThreads, kJson},
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  const std::string mode = a.str("mode"), op = a.has("op") ? a.str("op") : "";
  const bool json = a.flag("json");
  GP_CHECK(mode == "check" || mode == "perf", "[test-ops] --mode ", mode, ": expected check or perf");
  if (a.flag("list")) {
    for (const auto& c : bench::list_op_cases(op)) std::printf("%s\n", c.c_str());
    return 0;
  }
  if (mode == "perf") {
    GP_CHECK(a.str("backend") != "cuda", "[test-ops] perf mode times the CPU backend only");
    bench::OpPerfOptions o;
    o.op_filter = op;
    o.isa = a.str("isa");
    o.reps = int(a.integer("reps"));
    GP_CHECK(o.reps >= 5, "[test-ops] --reps ", o.reps, ": a median needs at least 5 timed runs");
    if (!json) {
      std::printf("test-ops perf: %s, %d threads, %d timed runs per op (median, min, max)\n",
                  cpu_features().model.c_str(), num_threads(), o.reps);
      std::printf("%s\n", bench::format_perf_header().c_str());
      o.on_result = [](const bench::OpPerfResult& r) {
        std::printf("%s\n", bench::format_perf_row(r).c_str());
        std::fflush(stdout);
      };
    }
    const auto rs = bench::perf_ops(o);
    if (json) print_json(bench::to_json(rs));
    return 0;
  }
  bench::OpCheckOptions o;
  o.op_filter = op;
  o.backend = a.str("backend");
  o.isa = a.str("isa");
  o.seed = uint64_t(a.integer("seed"));
  if (!json) {
    std::printf("test-ops check: %s (%s), base seed %llu\n", cpu_features().model.c_str(), isa_path(),
                (unsigned long long)o.seed);
    std::printf("%s\n", bench::format_check_header().c_str());
    o.on_result = [](const bench::OpCaseResult& r) {
      std::printf("%s\n", bench::format_check_row(r).c_str());
      std::fflush(stdout);
    };
  }
  const bench::OpCheckSummary s = bench::check_ops(o);
  if (json)
    print_json(bench::to_json(s));
  else
    std::printf("%s\n", bench::format_check_summary(s).c_str());
  return s.passed() ? 0 : 1;
}

}  // namespace genperf::cli
