// Collective communication between the ranks of a job: the one interface that data-parallel and
// sharded training call (genperf/dist.h), with an OpenMPI implementation (a job started by
// mpirun or srun) and a single-process one. NCCL joins behind the same interface with the CUDA
// backend.
//
// Every collective is asynchronous: it returns a handle at once and runs in the order issued, on
// a thread of its own, so that it overlaps the caller's compute (gradient buckets reduced while
// backward still runs). Every rank must issue the same collectives in the same order, as MPI
// requires. Buffers must stay valid, and untouched by the caller, until the handle is waited on.
//
// Faults never hang: a wait that sees no progress within the timeout (GENPERF_COMM_TIMEOUT
// seconds, 60 by default) prints which rank waited on what and aborts the whole job; an error
// thrown on one rank aborts every rank (abort()), and mpirun ends the job when a rank dies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace genperf {

// A collective in flight. wait() returns when it is complete on this rank, rethrows its error,
// and aborts the job when the timeout passes first. A default handle is complete.
class CommHandle {
 public:
  struct State;
  CommHandle() = default;
  explicit CommHandle(std::shared_ptr<State> s) : state_(std::move(s)) {}
  void wait();
  bool done() const;

 private:
  std::shared_ptr<State> state_;
};

// What this rank has sent, by the bandwidth-optimal (ring) algorithm's count per rank (NCCL's
// "bus bandwidth" convention): all-reduce of n elements 2 n (N-1)/N; reduce-scatter and
// all-gather the elements of the other ranks' segments; broadcast n (N-1)/N. Zero for one rank.
struct CommStats {
  double bytes = 0;  // bytes by the convention above
  int64_t ops = 0;   // collectives issued
  double wait_s = 0; // time spent blocked in wait()
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "local" or "mpi"

  // In place: buf[0, n) becomes the elementwise sum over ranks, the same bits on every rank.
  virtual CommHandle all_reduce(float* buf, size_t n) = 0;
  virtual CommHandle all_reduce(double* buf, size_t n) = 0;
  // In place over segments: buf holds sum(counts) elements, rank r's segment being counts[r]
  // elements after those of ranks < r. On completion this rank's segment holds the sum over
  // ranks of that segment; the rest of buf is undefined. counts has size() entries (zeros allowed).
  virtual CommHandle reduce_scatter(float* buf, std::vector<size_t> counts) = 0;
  // In place over the same segments: each rank's segment is its input; on completion buf holds
  // every rank's segment.
  virtual CommHandle all_gather(float* buf, std::vector<size_t> counts) = 0;
  // root's bytes to every rank.
  virtual CommHandle broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with a non-zero exit (after printing nothing more).
  [[noreturn]] virtual void abort(int code) = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 protected:
  void count(double bytes) { stats_.bytes += bytes, ++stats_.ops; }
  CommStats stats_;
  friend class CommHandle;
};

// The process's communicator: MPI when the process was started by mpirun or srun (OpenMPI's or
// PMI's environment says so) and genperf was built with MPI, else the single-process one.
// Initializes MPI on first use. Throws when started by a launcher in a build without MPI.
Communicator& world();
// Whether world() was created (so that error paths do not start MPI just to abort).
bool world_started();
// Ends MPI (after every handle is waited on); a no-op for the single-process communicator.
void finalize_world();

// "[rank r/N] " when the job has several ranks, else "" (log lines name their rank).
std::string rank_prefix();
// Seconds a wait may see no progress before the job is aborted (GENPERF_COMM_TIMEOUT, 60).
double comm_timeout_s();

// The single-process communicator (rank 0 of 1).
std::unique_ptr<Communicator> make_local_comm();

}  // namespace genperf
