// genperf bench comm: the communicator's collectives timed across the ranks of a job (mpirun -np
// N genperf bench comm), as nccl-tests time NCCL's: each collective on a message of --mb MiB a
// rank, a warm-up then --reps timed calls (each after a barrier, so that every rank starts
// together), and its bus bandwidth, the bytes a rank sends by the ring convention (genperf/comm.h)
// over the median time. These are the measured link figures `genperf plan` takes for this machine
// (--link-gbs) in place of its model of shared-memory MPI.
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "common.h"
#include "genperf/bench.h"
#include "genperf/comm.h"
#include "genperf/error.h"

namespace genperf::cli {

int cmd_bench_comm(int argc, char** argv) {
  Args a("bench comm",
         {{"mb", "message size per rank, MiB (PyTorch DDP's bucket is 25)", "25"},
          {"reps", "timed calls per collective, after one warm-up", "5"},
          kOut, kThreads, kJson},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  Communicator& c = world();
  const double mb = a.number("mb");
  GP_CHECK(mb > 0 && mb <= 4096, "[bench comm] --mb must lie in (0, 4096], got ", mb);
  const int reps = int(a.integer("reps"));
  GP_CHECK(reps >= 1, "[bench comm] --reps must be at least 1");
  const size_t n = size_t(mb * 1024 * 1024 / sizeof(float));
  const std::vector<size_t> even(size_t(c.size()), n / size_t(c.size()));
  std::vector<float> buf(n, 1.0f);
  struct Collective {
    const char* name;
    std::function<CommHandle()> call;
  } collectives[] = {{"all_reduce", [&] { return c.all_reduce(buf.data(), n); }},
                     {"reduce_scatter", [&] { return c.reduce_scatter(buf.data(), even); }},
                     {"all_gather", [&] { return c.all_gather(buf.data(), even); }}};
  Json j = Json::Object{};
  j["ranks"] = c.size(), j["backend"] = c.backend(), j["message_bytes"] = double(n * sizeof(float));
  Json out = Json::Object{};
  for (const Collective& k : collectives) {
    std::vector<double> secs;
    double bytes = 0;
    for (int i = 0; i <= reps; ++i) {
      c.barrier();
      const double b0 = c.stats().bytes;
      const auto t0 = std::chrono::steady_clock::now();
      k.call().wait();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i == 0) continue;  // warm-up
      secs.push_back(s);
      bytes = c.stats().bytes - b0;
    }
    const Stats st = Stats::of(secs);
    Json r = Json::Object{};
    r["seconds"] = st.to_json();
    r["bytes_sent"] = bytes;
    r["bus_gbs"] = st.median > 0 ? bytes / st.median / 1e9 : 0.0;
    out[k.name] = r;
  }
  j["collectives"] = out;
  if (c.rank() != 0) return 0;
  write_record(a, j);
  if (a.flag("json")) {
    print_json(j);
    return 0;
  }
  std::printf("%d ranks (%s), %.1f MiB a rank, median of %d (min-max)\n", c.size(), c.backend(), mb, reps);
  for (const Collective& k : collectives) {
    const Json& r = out.at(k.name);
    const Json& s = r.at("seconds");
    std::printf("%-15s %9.3f ms (%.3f-%.3f)  %8.2f GB/s bus bandwidth, %.1f MB sent\n", k.name,
                1e3 * s.at("median").as_number(), 1e3 * s.at("min").as_number(), 1e3 * s.at("max").as_number(),
                r.at("bus_gbs").as_number(), r.at("bytes_sent").as_number() / 1e6);
  }
  return 0;
}

}  // namespace genperf::cli
