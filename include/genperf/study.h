// `genperf study`: the comparative study's workloads run on this machine, each by genperf's own
// benchmark (a child process, as a user would run it, under mpirun for several ranks), its record
// kept in the study directory and stored in the results store (genperf/study_store.h).
//
// The quick suite, on the embedded default models (models/default, models/sr-default):
//   infer.<isa>           bench infer at every ISA level the CPU has (generic, avx2, avxvnni,
//                         avx512): the measured analogue of the study's hardware generations;
//   train.<attn>.seq<S>   bench train, naive and flash attention at two sequence lengths;
//   train.ranks<N>.<mode> bench train on 1 rank, and on 2 unsharded and fully sharded (when
//                         mpirun is present): scaling and the cost of sharding;
//   sr.ranks<N>           bench sr, training and sampling steps, on 1 and 2 ranks;
//   sr.eval               sr eval: the SR model's quality beside bicubic's on held-out maps;
//   quant.<recipe>.<what> with --text (and --tasks): the default model as it is (bf16) and
//                         quantized (q8_0, q4_k_m, q4_0): KL against it and perplexity on the
//                         text (eval kl), multiple-choice accuracy (eval mc) and the speed of
//                         the quantized model (bench infer): accuracy against size.
// The full suite adds lengths, every shard mode, 4 ranks and larger batches.
//
// A workload whose record is already in the directory is not run again: an interrupted study
// resumes where it stopped (records are written atomically, so one that exists is complete).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace genperf {

struct StudyWorkload {
  std::string id;                 // names its record: <dir>/records/<id>.json
  std::vector<std::string> args;  // genperf's arguments (--out is added)
  std::vector<std::pair<std::string, std::string>> env;  // e.g. GENPERF_ISA
  int ranks = 1;                  // > 1: under mpirun
  // A genperf command that makes the file `prepared` first, unless it exists (a quantized model).
  std::vector<std::string> prepare;
  std::string prepared;
};

struct StudyOptions {
  std::string suite = "quick";  // quick or full
  std::string dir;              // records/, logs/ and (by default) study.db
  std::string db;               // the store; empty: <dir>/study.db
  std::string genperf;          // the binary the workloads run
  std::string models = "models";  // where default/ and sr-default/ are
  bool mpi = true;              // run the workloads of several ranks (needs mpirun)
  std::string text;             // held-out text for KL and perplexity; empty: no accuracy workloads
  std::string tasks;            // multiple-choice tasks (JSONL); empty: no accuracy by eval mc
};

// The suite's workloads on this machine (its ISA levels; the ranks only with mpi).
std::vector<StudyWorkload> study_workloads(const StudyOptions& o);

struct StudyProgress {
  const StudyWorkload* workload = nullptr;
  int index = 0, total = 0;
  bool resumed = false;  // its record was there: not run again
  double seconds = 0;    // how long it ran
};

// Runs the workloads missing from the directory and stores every record in the store (records
// already stored are recognized and kept once). A workload that fails stops the study with its
// command and log named; its record is not written, so a rerun starts there.
void run_study(const StudyOptions& o, const std::function<void(const StudyProgress&)>& on_done = {});

}  // namespace genperf
