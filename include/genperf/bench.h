// The measurement harness (../shared/design/BENCHMARKING.md): warm-up, repetitions, median with
// min and max, provenance, peak memory; and the inference benchmark built on it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genperf/json.h"

namespace genperf {

class LlamaModel;
class Session;

struct Stats {
  std::vector<double> samples;  // seconds (or the unit measured), in run order
  double median = 0, min = 0, max = 0;
  double spread() const { return median > 0 ? (max - min) / median : 0; }  // > 0.10: noisy
  static Stats of(std::vector<double> samples);
  Json to_json() const;
};

// Runs fn `warmup` times untimed, then at least `reps` timed times and until `min_seconds` of
// timed work; returns the seconds per call.
Stats measure(const std::function<void()>& fn, int warmup = 1, int reps = 5, double min_seconds = 0.0);

// Where and how a figure was measured. hostname, os, cores and memory_bytes name the machine
// (the results store tells machines apart by them, docs/STUDY.md); libraries are the versions
// the figures depend on (compiler, oneDNN, OpenMP), as name -> version.
struct Provenance {
  std::string cpu, isa_flags, isa_path, commit, build_type, date, command;
  std::string hostname, os;
  int threads = 0, cores = 0;
  int64_t memory_bytes = 0;
  std::vector<std::pair<std::string, std::string>> libraries;
  Json to_json() const;
};
Provenance provenance(const std::string& command);

// Peak resident set size of this process so far, in bytes.
size_t peak_rss_bytes();

struct InferBenchOptions {
  std::vector<int64_t> prefill_lengths = {128, 512};
  int64_t decode_prompt = 128;  // decode is measured after a prompt of this many tokens
  int64_t decode_tokens = 32;   // tokens generated per decode repetition
  int reps = 5, warmup = 1;
  bool measure_peaks = true;    // measure this machine's bandwidth and GEMM peak in the same run
  size_t memory_probe_bytes = 0;  // the memory bandwidth probe's buffer; 0: bench::memory_probe_bytes()
  uint64_t seed = 1;            // for the random prompt tokens
};

// bench infer's decode protocol on one model: a random prompt of `prompt` tokens (its time is the
// time to first token), then `tokens` greedy single-token steps. Each call of once() runs it
// afresh; timers of several models interleave their calls so that they see the same machine.
class DecodeTimer {
 public:
  DecodeTimer(const LlamaModel& m, int64_t prompt, int64_t tokens, uint64_t seed);
  ~DecodeTimer();
  struct Times {
    double first_token_s = 0, per_token_s = 0;
  };
  Times once();

 private:
  const LlamaModel& m_;
  std::unique_ptr<Session> s_;
  std::vector<int32_t> prompt_;
  int64_t tokens_;
};

// prefill tokens/s and GFLOP/s at each length, decode tokens/s and GB/s of weights, time to
// first token, memory accounting and peak RSS, and the fractions of the measured floors.
Json bench_infer(const LlamaModel& m, const InferBenchOptions& o, bool progress = false);

}  // namespace genperf
