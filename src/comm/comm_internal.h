// What the communicator's implementations share: the state behind a handle, and the MPI
// communicator's factory (null in a build without MPI).
#pragma once
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

#include "genperf/comm.h"

namespace genperf {

struct CommHandle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::string what;                // the collective, for the timeout's message
  Communicator* comm = nullptr;    // aborts on timeout; counts the wait
  static CommHandle finished();    // a complete handle
  void finish(std::exception_ptr e = nullptr);
};

std::unique_ptr<Communicator> make_mpi_comm();

}  // namespace genperf
