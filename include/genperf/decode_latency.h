// Decode latency of a quantization mix: the weights of `quantize --recipe auto --target-latency`
// (docs/QUANT.md, "A latency budget").
//
// One decode step of a Llama-family model is its quantizable matrix-vector products plus the rest
// (attention over the cache, norms, rope, residuals, the embedding row):
//   t(plan) = fixed + sum over tensors of t(tensor, its format)
// On this machine every t(tensor, format) is measured: a matrix of the tensor's shape in that
// format, multiplied by one row with the step's threads, cycling through copies of it that hold
// as many bytes as the whole model would in that format (capped at a few times the last-level
// cache), so that the caches see what a decode step sees: a model that fits the cache is timed
// from it, one that does not from memory. Two whole steps, measured interleaved (bench infer's
// decode protocol), calibrate how those times add up inside a step:
//   t(plan) = fixed + scale * sum of the products timed alone
// on the source model and on the model uniformly in the candidate format whose products' sum
// differs most from the source's; both models are then predicted exactly. `scale` holds what a
// product gains or loses inside a step (q, k, v and gate, up share one parallel region), `fixed`
// the rest (attention, norms, rope), which may come out negative: it is an offset.
//
// On a catalogue device every figure is *modeled*: the hardware model's per-op roofline
// (genperf/hw_model.h) at the decode efficiency measured on this machine in the same run (the
// source model's measured step against its roofline here). Quantized weights are costed by their
// bytes and bf16 arithmetic; nothing is measured there.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "genperf/bench.h"
#include "genperf/checkpoint.h"
#include "genperf/plan.h"
#include "genperf/quantize.h"
#include "genperf/sensitivity.h"

namespace genperf {

struct DecodeLatencyOptions {
  std::string device = "cpu";  // this machine, or a catalogue id (plan.h's device_catalog)
  int64_t context = 128;       // tokens in the cache: bench infer's decode prompt
  int64_t tokens = 32;         // decoded tokens per timed repetition
  int reps = 5;                // timed repetitions (medians)
  bool progress = false;
  uint64_t seed = 1;           // the random prompt's and the timed matrices' values
};

struct DecodeLatency {
  std::string device = "cpu", device_name = "this machine";
  FigureKind kind = FigureKind::Measured;  // Modeled on a catalogue device
  int threads = 0;
  int64_t context = 0;
  Stats source;              // the source model's step on this machine, measured (seconds)
  double source_s = 0;       // its step on `device`: source.median here, modeled elsewhere
  // This machine's second calibration step: the model uniformly in second_format (where it fits),
  // interleaved with the source's; absent (n = 0) when no format changes the products' time by 5%.
  Stats second;
  DType second_format = DType::F32;
  double scale = 1;          // products timed alone -> inside a step
  bool fitted = false;       // scale fitted on the two steps (else 1: one step, or a fit out of
                             // [0.25, 4], said in notes)
  double efficiency = 0;     // catalogue devices: the roofline efficiency of decode measured here
  TensorSeconds table;       // fixed part and per tensor, per format seconds on `device`
  std::vector<std::string> notes;
  // The step's predicted seconds with the tensors of `plan` in their formats and every other
  // quantizable tensor in its source type; throws naming a tensor or format without a figure.
  double predict(const Checkpoint& ck, const QuantPlan& plan) const;
  Json to_json() const;
};

// Measures (device "cpu") or models (a catalogue id) the step and each quantizable tensor of ck in
// each of `formats` that fits its rows and in its source type. Llama-family checkpoints only
// (a model that decodes); throws "[latency] ..." otherwise.
DecodeLatency decode_latency(const Checkpoint& ck, std::span<const DType> formats, const DecodeLatencyOptions& o);

// One decode step of each model on this machine, bench infer's protocol (DecodeTimer: a random
// prompt of o.context tokens, then o.tokens greedy steps), o.reps times after a warm-up, the
// models' repetitions interleaved so that all see the same machine: seconds per token.
std::vector<Stats> measure_decode_steps(std::span<const Checkpoint* const> cks, const DecodeLatencyOptions& o);

}  // namespace genperf
