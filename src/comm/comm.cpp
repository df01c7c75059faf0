// The communicator's shared parts: handles and their timed wait, the single-process
// communicator, the process's world() and its launcher detection.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm/comm_internal.h"
#include "genperf/error.h"

namespace genperf {

namespace {

double env_number(const char* name, double fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const double v = std::strtod(e, &end);
  return end && *end == '\0' && v > 0 ? v : fallback;
}

}  // namespace

double comm_timeout_s() { return env_number("GENPERF_COMM_TIMEOUT", 60.0); }

CommHandle CommHandle::State::finished() {
  auto s = std::make_shared<State>();
  s->done = true;
  return CommHandle(s);
}

void CommHandle::State::finish(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lk(mu);
    error = std::move(e);
    done = true;
  }
  cv.notify_all();
}

void CommHandle::wait() {
  if (!state_) return;
  State& s = *state_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (!s.done) {
    const auto t0 = std::chrono::steady_clock::now();
    const double timeout = comm_timeout_s();
    if (!s.cv.wait_for(lk, std::chrono::duration<double>(timeout), [&] { return s.done; })) {
      std::fprintf(stderr,
                   "%sgenperf: [comm] no progress for %.0f s in %s: another rank died, failed or hangs; "
                   "aborting the job (GENPERF_COMM_TIMEOUT sets the limit)\n",
                   rank_prefix().c_str(), timeout, s.what.c_str());
      std::fflush(stderr);
      s.comm->abort(1);
    }
    if (s.comm) s.comm->stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (s.error) std::rethrow_exception(s.error);
}

bool CommHandle::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->done;
}

namespace {

// One rank: every collective is the identity and complete at once.
class LocalComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "local"; }
  CommHandle all_reduce(float*, size_t) override { return done(); }
  CommHandle all_reduce(double*, size_t) override { return done(); }
  CommHandle reduce_scatter(float*, std::vector<size_t> counts) override { return check(counts); }
  CommHandle all_gather(float*, std::vector<size_t> counts) override { return check(counts); }
  CommHandle broadcast(void*, size_t, int root) override {
    GP_CHECK(root == 0, "[comm] broadcast from rank ", root, " in a job of one rank");
    return done();
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  CommHandle done() {
    count(0);
    return CommHandle::State::finished();
  }
  CommHandle check(const std::vector<size_t>& counts) {
    GP_CHECK(counts.size() == 1, "[comm] ", counts.size(), " segments for a job of one rank");
    return done();
  }
};

std::mutex g_world_mu;
std::unique_ptr<Communicator> g_world;

// The launcher's world size, or 0 when no launcher started this process.
int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const double v = env_number(var, 0);
    if (v >= 1) return int(v);
  }
  return 0;
}

}  // namespace

std::unique_ptr<Communicator> make_local_comm() { return std::make_unique<LocalComm>(); }

Communicator& world() {
  std::lock_guard<std::mutex> lk(g_world_mu);
  if (!g_world) {
    const int n = launcher_size();
    if (n > 1) {
      g_world = make_mpi_comm();
      GP_CHECK(g_world, "[comm] started by a launcher as one of ", n,
               " ranks, but this genperf was built without MPI (install libopenmpi-dev and rebuild)");
    } else {
      g_world = make_local_comm();
    }
  }
  return *g_world;
}

bool world_started() {
  std::lock_guard<std::mutex> lk(g_world_mu);
  return g_world != nullptr;
}

void finalize_world() {
  std::lock_guard<std::mutex> lk(g_world_mu);
  g_world.reset();
}

std::string rank_prefix() {
  if (!world_started()) return "";
  const Communicator& w = world();
  return w.size() > 1 ? cat("[rank ", w.rank(), "/", w.size(), "] ") : std::string();
}

}  // namespace genperf
