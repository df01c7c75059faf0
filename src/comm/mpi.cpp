// The MPI communicator: collectives queued in the order issued and run by one thread of their
// own, so that they overlap the caller's compute (OpenMPI makes no progress on a non-blocking
// collective between calls, so a thread that keeps calling is what makes the overlap real). MPI
// is initialized for threads (MPI_THREAD_MULTIPLE where offered, so that a timed-out wait may
// abort while the thread is still inside a call).
//
// The thread never sits in a blocking call: OpenMPI's blocking calls spin on its progress engine,
// and a rank's collective is usually issued well before its peers reach theirs (a prefetched
// gather waits for a layer of their compute). Spinning then takes a core from the compute of a
// rank on the same node: on this 2-core VM, 2 ranks fully sharded at a small shape stepped 1.13x
// as long spinning as with this wait (bench/comm_wait.py, DISTRIBUTED.md; OpenMPI's own
// mpi_yield_when_idle helps too). Each call is non-blocking and then polled (MPI_Testall): 20 us
// of spinning, for a peer that is already there, then sleeps of a twentieth of the time waited
// (at most 0.1 ms), so that an idle wait costs a poll every tenth of a millisecond.
// GENPERF_COMM_WAIT=spin polls without sleeping (for ranks with a core to spare).
#include "comm/comm_internal.h"

#ifdef GENPERF_HAVE_MPI
// The C API only (OpenMPI's and MPICH's deprecated C++ bindings need a library of their own).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <numeric>
#include <string_view>
#include <thread>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "genperf/error.h"

namespace genperf {
namespace {

class MpiComm final : public Communicator {
 public:
  MpiComm() {
    // How the communication thread waits: polls with sleeps (the default), or spinning.
    if (const char* e = std::getenv("GENPERF_COMM_WAIT"); e && *e) {
      GP_CHECK(std::string_view(e) == "spin" || std::string_view(e) == "sleep",
               "[comm] GENPERF_COMM_WAIT must be spin or sleep, got '", e, "'");
      spin_ = std::string_view(e) == "spin";
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    GP_CHECK(!initialized, "[comm] MPI was initialized outside genperf");
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      fail("[comm] this MPI offers thread level ", provided,
           ": genperf needs MPI_THREAD_SERIALIZED or better to communicate on a thread of its own");
    }
    multiple_ = provided >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    worker_ = std::thread([this] {
#ifdef __linux__
      // The polls' sleeps are tens of microseconds: the default 50 us of timer slack would double them.
      prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
      loop();
    });
  }

  ~MpiComm() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  CommHandle all_reduce(float* buf, size_t n) override {
    count(2.0 * double(n) * sizeof(float) * double(size_ - 1) / double(size_));
    return enqueue(cat("all-reduce of ", n, " floats"), [=, this] {
      // Large: the ring's reduce-scatter, then all-gather (each value summed on one rank, so every
      // rank gets the same bits); small ones are latency-bound, MPI's own.
      if (n * sizeof(float) < kRingBytes || size_ == 1 || n > size_t(INT_MAX)) return allreduce(buf, n, MPI_FLOAT, sizeof(float));
      std::vector<size_t> even(size_t(size_), n / size_t(size_));
      even.back() += n % size_t(size_);
      const Segments s = segments(even, "all-reduce");
      ring_reduce_scatter(buf, s);
      all_gatherv(buf, s);
    });
  }
  CommHandle all_reduce(double* buf, size_t n) override {
    count(2.0 * double(n) * sizeof(double) * double(size_ - 1) / double(size_));
    return enqueue(cat("all-reduce of ", n, " doubles"), [=, this] { allreduce(buf, n, MPI_DOUBLE, sizeof(double)); });
  }

  CommHandle reduce_scatter(float* buf, std::vector<size_t> counts) override {
    const Segments s = segments(counts, "reduce-scatter");
    count(double(s.total - counts[size_t(rank_)]) * sizeof(float));
    return enqueue(cat("reduce-scatter of ", s.total, " floats"), [this, buf, s] { ring_reduce_scatter(buf, s); });
  }

  CommHandle all_gather(float* buf, std::vector<size_t> counts) override {
    const Segments s = segments(counts, "all-gather");
    count(double(s.total - counts[size_t(rank_)]) * sizeof(float));
    return enqueue(cat("all-gather of ", s.total, " floats"), [this, buf, s] { all_gatherv(buf, s); });
  }

  CommHandle broadcast(void* buf, size_t bytes, int root) override {
    GP_CHECK(root >= 0 && root < size_, "[comm] broadcast from rank ", root, " in a job of ", size_, " ranks");
    count(double(bytes) * double(size_ - 1) / double(size_));
    return enqueue(cat("broadcast of ", bytes, " bytes from rank ", root), [=, this] {
      auto* p = static_cast<char*>(buf);
      for (size_t done = 0; done < bytes;) {
        const size_t n = std::min<size_t>(bytes - done, size_t(INT_MAX));
        MPI_Request req;
        MPI_Ibcast(p + done, int(n), MPI_BYTE, root, MPI_COMM_WORLD, &req);
        wait(&req, 1);
        done += n;
      }
    });
  }

  void barrier() override {
    enqueue("barrier", [this] {
      MPI_Request req;
      MPI_Ibarrier(MPI_COMM_WORLD, &req);
      wait(&req, 1);
    }).wait();
  }

  [[noreturn]] void abort(int code) override {
    // Without MPI_THREAD_MULTIPLE the worker may be inside a call; ending this process is then
    // the safe way, and mpirun ends the others when one rank exits non-zero.
    if (multiple_) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  struct Segments {
    std::vector<int> counts, displs;
    size_t total = 0;
  };
  Segments segments(const std::vector<size_t>& counts, const char* op) const {
    GP_CHECK(counts.size() == size_t(size_), "[comm] ", op, " with ", counts.size(), " segments in a job of ",
             size_, " ranks");
    Segments s;
    for (size_t c : counts) {
      GP_CHECK(c <= size_t(INT_MAX) && s.total + c <= size_t(INT_MAX), "[comm] ", op, " of more than ", INT_MAX,
               " elements: split it");
      s.counts.push_back(int(c));
      s.displs.push_back(int(s.total));
      s.total += c;
    }
    return s;
  }

  // The ring's reduce-scatter, in place over the segments: N - 1 steps; at step k rank r sends
  // its partial sum of segment r - k - 1 to rank r + 1 and adds to segment r - k - 2 the partial
  // sum rank r - 1 sends; after the last step its own segment holds the sum over all ranks. A
  // rank sends (N - 1)/N of the buffer, the least there is, in messages of kChunk through one
  // scratch buffer kept between calls. (OpenMPI 4.1's MPI_Reduce_scatter in place allocates a
  // temporary of the whole buffer at every call, page faults included, and at 2 ranks reached half
  // the bus bandwidth of its all-reduce here: `genperf bench comm`, DISTRIBUTED.md.)
  void ring_reduce_scatter(float* buf, const Segments& s) {
    const int N = size_, r = rank_;
    if (N == 1) return;
    const int next = (r + 1) % N, prev = (r + N - 1) % N;
    scratch_.resize(kChunk);
    for (int k = 0; k < N - 1; ++k) {
      const size_t si = size_t((r - k - 1 + 2 * N) % N), ti = size_t((r - k - 2 + 2 * N) % N);
      const size_t sn = size_t(s.counts[si]), tn = size_t(s.counts[ti]);
      const float* send = buf + s.displs[si];
      float* into = buf + s.displs[ti];
      // The segments sent and received differ in size (so in messages): each side posts its own.
      const size_t chunks = (std::max(sn, tn) + kChunk - 1) / kChunk;
      for (size_t c = 0; c < chunks; ++c) {
        const size_t o = c * kChunk;
        const int sc = o < sn ? int(std::min(kChunk, sn - o)) : 0, tc = o < tn ? int(std::min(kChunk, tn - o)) : 0;
        MPI_Request req[2];
        int nreq = 0;
        if (tc > 0) MPI_Irecv(scratch_.data(), tc, MPI_FLOAT, prev, kRingTag, MPI_COMM_WORLD, &req[nreq++]);
        if (sc > 0) MPI_Isend(send + o, sc, MPI_FLOAT, next, kRingTag, MPI_COMM_WORLD, &req[nreq++]);
        wait(req, nreq);
        float* dst = into + o;
        const float* src = scratch_.data();
        for (int i = 0; i < tc; ++i) dst[i] += src[i];
      }
    }
  }

  void allreduce(void* buf, size_t n, MPI_Datatype type, size_t elem) {
    auto* p = static_cast<char*>(buf);
    for (size_t done = 0; done < n;) {
      const size_t k = std::min<size_t>(n - done, size_t(1) << 30);
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, p + done * elem, int(k), type, MPI_SUM, MPI_COMM_WORLD, &req);
      wait(&req, 1);
      done += k;
    }
  }

  void all_gatherv(float* buf, const Segments& s) {
    MPI_Request req;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, s.counts.data(), s.displs.data(), MPI_FLOAT,
                    MPI_COMM_WORLD, &req);
    wait(&req, 1);
  }

  // Polls the requests to completion: spinning for the first kSpinNs, then sleeping between polls
  // for a twentieth of the time waited so far, from kMinPollSleepNs up to kMaxPollSleepNs (file
  // comment): a wait overshoots its end by at most about 5%, and a long one costs a poll every
  // tenth of a millisecond. With GENPERF_COMM_WAIT=spin, never sleeping.
  void wait(MPI_Request* req, int n) const {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    for (;;) {
      int done = 0;
      MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
      if (done) return;
      if (spin_) continue;
      const long waited = long(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
      if (waited < kSpinNs) continue;
      const timespec ts{0, std::clamp(waited / 20, kMinPollSleepNs, kMaxPollSleepNs)};
      nanosleep(&ts, nullptr);
    }
  }

  CommHandle enqueue(std::string what, std::function<void()> fn) {
    auto s = std::make_shared<CommHandle::State>();
    s->what = std::move(what);
    s->comm = this;
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back({s, std::move(fn)});
    }
    cv_.notify_one();
    return CommHandle(s);
  }

  void loop() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        t.fn();
        t.state->finish();
      } catch (...) {
        t.state->finish(std::current_exception());
      }
    }
  }

  struct Task {
    std::shared_ptr<CommHandle::State> state;
    std::function<void()> fn;
  };
  static constexpr size_t kRingBytes = size_t(256) << 10;  // all-reduces from here on go round the ring
  static constexpr size_t kChunk = size_t(1) << 20;       // floats a message of the ring (4 MiB)
  static constexpr int kRingTag = 0x6770;
  static constexpr long kSpinNs = 20'000;  // polls in a row before the first sleep
  static constexpr long kMinPollSleepNs = 5'000;
  static constexpr long kMaxPollSleepNs = 100'000;
  std::vector<float> scratch_;  // the ring's receive buffer (worker thread only)
  int rank_ = 0, size_ = 1;
  bool multiple_ = false;
  bool spin_ = false;  // GENPERF_COMM_WAIT=spin
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_comm() { return std::make_unique<MpiComm>(); }

}  // namespace genperf

#else

namespace genperf {
std::unique_ptr<Communicator> make_mpi_comm() { return nullptr; }
}  // namespace genperf

#endif
