// genperf test-comm: the communicator's collectives across the ranks of a job (mpirun -np N
// genperf test-comm), each checked against a reference every rank computes alone (rank r's
// input is a function of (seed, r, i), so any rank knows every rank's input). Values are small
// integers, so the sums are exact in any reduction order and compared bit for bit; a random-
// valued all-reduce checks that every rank gets the same bits. With --fail-rank, --kill-rank or
// --hang-rank one rank fails, dies or stops answering mid-way, to check that the others end.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <thread>

#include "common.h"
#include "genperf/comm.h"
#include "genperf/error.h"
#include "genperf/rng.h"

namespace genperf::cli {
namespace {

// Rank r's input value i: an integer in [-8, 8].
float input(uint64_t seed, int r, size_t i) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(r) << 40) ^ i;
  h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29;
  return float(int64_t(h % 17) - 8);
}

// Segment sizes for n elements over N ranks, uneven, with an empty one when N > 2.
std::vector<size_t> segments(size_t n, int N) {
  std::vector<size_t> c(static_cast<size_t>(N));
  size_t left = n;
  for (int r = 0; r < N; ++r) {
    const size_t take = r == N - 1 ? left : (N > 2 && r == 1) ? 0 : std::min(left, n / size_t(N) + size_t(r) * 3);
    c[size_t(r)] = take;
    left -= take;
  }
  return c;
}

}  // namespace

int cmd_test_comm(int argc, char** argv) {
  Args a("test-comm",
         {{"n", "elements per collective", "100003"},
          {"seed", "inputs' seed", "1"},
          {"fail-rank", "this rank throws an error (as on a bad file) before the third check", "-1"},
          {"kill-rank", "this rank is killed (SIGKILL) before the third check", "-1"},
          {"hang-rank", "this rank stops answering (sleeps) before the third check", "-1"}},
         argc, argv, 2);
  if (run_help(a)) return 0;
  Communicator& w = world();
  const int R = w.rank(), N = w.size();
  const size_t n = size_t(a.integer("n"));
  const uint64_t seed = uint64_t(a.integer("seed"));
  GP_CHECK(n >= 1, "[test-comm] --n must be positive");
  int checks = 0;
  auto expect = [&](bool ok, const std::string& what) {
    GP_CHECK(ok, "[test-comm] ", what, " differs from the reference");
    ++checks;
  };
  auto sum_of = [&](size_t i) {
    float s = 0;
    for (int r = 0; r < N; ++r) s += input(seed, r, i);
    return s;
  };
  const std::string who = rank_prefix();

  // 1. All-reduce, several in flight at once, waited in reverse order.
  {
    std::vector<std::vector<float>> bufs(3, std::vector<float>(n));
    std::vector<CommHandle> h;
    for (size_t k = 0; k < bufs.size(); ++k) {
      for (size_t i = 0; i < n; ++i) bufs[k][i] = input(seed + k, R, i);
      h.push_back(w.all_reduce(bufs[k].data(), n));
    }
    for (size_t k = bufs.size(); k-- > 0;) h[k].wait();
    bool ok = true;
    for (size_t k = 0; k < bufs.size(); ++k)
      for (size_t i = 0; i < n; ++i) {
        float s = 0;
        for (int r = 0; r < N; ++r) s += input(seed + k, r, i);
        ok = ok && bufs[k][i] == s;
      }
    expect(ok, "all-reduce (three in flight)");
    std::vector<double> d(7);
    for (size_t i = 0; i < d.size(); ++i) d[i] = double(input(seed, R, i)) * 0.5;
    w.all_reduce(d.data(), d.size()).wait();
    ok = true;
    for (size_t i = 0; i < d.size(); ++i) ok = ok && d[i] == double(sum_of(i)) * 0.5;
    expect(ok, "all-reduce of doubles");
  }

  const int fail_rank = int(a.integer("fail-rank")), kill = int(a.integer("kill-rank")), hang = int(a.integer("hang-rank"));
  if (R == fail_rank) fail("[test-comm] rank ", R, " failed on purpose (--fail-rank), as on a bad file");
  if (R == kill) raise(SIGKILL);
  if (R == hang)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));

  // 2. Reduce-scatter over uneven segments (one empty), in place.
  {
    const std::vector<size_t> c = segments(n, N);
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = input(seed, R, i);
    w.reduce_scatter(buf.data(), c).wait();
    const size_t lo = std::accumulate(c.begin(), c.begin() + R, size_t(0));
    bool ok = true;
    for (size_t i = lo; i < lo + c[size_t(R)]; ++i) ok = ok && buf[i] == sum_of(i);
    expect(ok, cat("reduce-scatter (segment of ", c[size_t(R)], " at ", lo, ")"));
  }
  // 3. All-gather over the same segments.
  {
    const std::vector<size_t> c = segments(n, N);
    std::vector<float> buf(n, NAN);
    const size_t lo = std::accumulate(c.begin(), c.begin() + R, size_t(0));
    for (size_t i = lo; i < lo + c[size_t(R)]; ++i) buf[i] = input(seed, R, i);
    w.all_gather(buf.data(), c).wait();
    bool ok = true;
    size_t at = 0;
    for (int r = 0; r < N; ++r)
      for (size_t k = 0; k < c[size_t(r)]; ++k, ++at) ok = ok && buf[at] == input(seed, r, at);
    expect(ok, "all-gather");
  }
  // 4. Broadcast from the last rank.
  {
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = input(seed, R, i);
    w.broadcast(buf.data(), n * sizeof(float), N - 1).wait();
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok = ok && buf[i] == input(seed, N - 1, i);
    expect(ok, "broadcast");
  }
  // 5. Random values: every rank gets the same bits (compared with rank 0's by broadcast).
  {
    Rng rng(seed * 1000 + uint64_t(R));
    std::vector<float> buf(n);
    for (float& x : buf) x = float(rng.normal());
    w.all_reduce(buf.data(), n).wait();
    std::vector<float> zero = buf;
    w.broadcast(zero.data(), n * sizeof(float), 0).wait();
    expect(std::memcmp(zero.data(), buf.data(), n * sizeof(float)) == 0, "the all-reduce's bits on this rank");
  }
  // 6. The byte count: the ring algorithm's per-rank volume of what was issued.
  {
    const double f = double(N - 1) / double(N);
    const std::vector<size_t> c = segments(n, N);
    const double rs = double(n - c[size_t(R)]) * 4;
    const double want = N == 1 ? 0
                                : 3 * 2 * f * double(n) * 4 + 2 * f * 7 * 8 + 2 * rs + f * double(n) * 4 * 2 +
                                      2 * f * double(n) * 4;
    expect(std::fabs(w.stats().bytes - want) <= 1e-9 * want + 1e-9, cat("the byte count ", w.stats().bytes, " (expected ", want, ")"));
  }
  w.barrier();
  std::printf("%stest-comm: %d checks passed on %d rank%s (%s)\n", who.c_str(), checks, N, N > 1 ? "s" : "", w.backend());
  return 0;
}

}  // namespace genperf::cli
