// The study's hardware model (docs/STUDY.md, "Hardware model"): the time of a workload on a device
// it was not measured on, from the op layer's costs (genperf/ops_cost.h) and the device's peaks.
//
// A workload is the list of ops one forward (inference) or one training step runs, each with its
// FLOPs, bytes and the compute type its FLOPs run at. Its time on a device is a per-op roofline:
//   t = sum over ops of max(flops / (peak[type] x e), bytes / (bandwidth x e))
// with one efficiency e per workload phase (prefill, decode, train), calibrated on one measured
// run of this machine (at its best ISA level): e = t(e = 1) / measured seconds. This machine has
// one roofline per ISA level (the peaks and bandwidth its bench infer record measured at that
// level), and each measured figure is costed with its own level's. The model's error is then its
// prediction against every other measured run; every catalogue prediction is *modeled*
// (BENCHMARKING.md, "where a model of hardware stands in for hardware").
//
// Shape legend: B sequences (batch), T tokens of each, P position of the first token (decode: the
// prompt's length), d hidden size, V vocabulary, FF the MLP's hidden size.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "genperf/dtype.h"
#include "genperf/llama_config.h"
#include "genperf/plan.h"
#include "genperf/study_store.h"

namespace genperf {

// The type an op's FLOPs run at: which of a device's peaks bounds it. Elementwise ops (norms, rope,
// activations, residuals, the optimizer) run at the f32 peak where the device publishes one, and are
// bound by memory alone where it does not (Gaudi: no fp32 figure; every such op is memory-bound on it).
enum class ComputeType : uint8_t { F32 = 0, Bf16 = 1, Elementwise = 2 };
const char* compute_type_name(ComputeType t);

// A device as the roofline sees it: dense peaks (TFLOPS, 1e12 FLOP/s; 0 = none published) and
// memory bandwidth (1e9 bytes/s).
struct RooflineDevice {
  std::string id, name;
  double fp32_tflops = 0, bf16_tflops = 0, memory_gbs = 0;
  FigureKind kind = FigureKind::Modeled;  // Measured for this machine
  std::string source, note;               // where the figures come from; what was substituted
  // This machine at one ISA level: the level ("avx2", as a run's provenance names it; empty for the
  // catalogue), and whether its bf16 matmuls run in f32 (below AVX-512 genperf converts bf16
  // weights to f32 blocks and multiplies in f32, gemm_onednn.cpp: they take the f32 peak).
  std::string isa_path;
  bool bf16_as_f32 = false;
  double peak_tflops(ComputeType t) const {
    return t == ComputeType::Bf16 && !bf16_as_f32 ? bf16_tflops : fp32_tflops;
  }
  bool has_peak(ComputeType t) const { return t == ComputeType::Elementwise || peak_tflops(t) > 0; }
};
// From the planner's catalogue: bf16 is the vendor's bf16 peak, or its fp16 peak where it has no
// bf16 (V100: said in `note`); fp32 is the non-tensor fp32 peak (genperf's f32 never rounds to
// TF32). A peak the vendor does not publish stays 0, and workloads needing it are not timed.
RooflineDevice roofline_device(const DeviceSpec& d);

// This machine at each ISA level that a bench infer record under `records_dir` measured (`bench
// infer` without --no-peaks writes a `machine` block: the GEMM peak of the model's compute type at
// that level, f32 or bf16, and the memory bandwidth), lowest level first, one device per level
// from its first record by file name; isa_path from the record's provenance, Measured, the file
// named in `source`. Levels below AVX-512 run bf16 matmuls in f32 (bf16_as_f32). Records of
// another GEMM type (int8: a quantized model) bound no f32 or bf16 op and are passed over.
std::vector<RooflineDevice> isa_level_rooflines(const std::string& records_dir);

// This machine at its best ISA level as the roofline sees it (the calibration level). Each figure,
// in order of preference: given (> 0); read from the record of the best level of
// isa_level_rooflines(records_dir); or measured now (measure_this_machine, at this process's
// level). The f32 peak is measured when a bf16 one was read and vice versa only when
// `measure_missing`. isa_path: the record's level, else this process's (isa_path()).
struct CpuFigures {
  double fp32_gflops = 0, bf16_gflops = 0, memory_gbs = 0;  // given; 0 = not given
  std::string records_dir;
  bool measure_missing = true;
};
RooflineDevice this_machine_roofline(const CpuFigures& given);

enum class Phase : uint8_t { Prefill = 0, Decode = 1, Train = 2 };
const char* phase_name(Phase p);

struct OpWork {
  std::string op;  // "linear q", "attention", ... (one entry per op and layer)
  double flops = 0, bytes = 0;
  ComputeType compute = ComputeType::F32;
};

struct WorkloadCost {
  Phase phase = Phase::Decode;
  std::vector<OpWork> ops;
  double flops() const;
  double bytes() const;
};

// One forward of B sequences of T new tokens at positions P.. (prefill: P = 0; decode: T = 1, P =
// the context), as genperf's Llama forward runs it: embedding, per layer norm, q/k/v, rope, the
// cache's stores, attention, o, residual, norm, gate/up, silu*mul, down, residual; final norm and
// output head on the last token of each sequence. Weights (and the embedding table) at `weight`,
// cache at `kv`; matmuls and attention at `compute`, the rest Elementwise.
WorkloadCost inference_cost(const LlamaConfig& c, Phase phase, int64_t B, int64_t T, int64_t P, DType weight,
                            DType kv, ComputeType compute);
// One training step of B x T tokens (bench train): every op's forward and its backward cost
// (ops_cost.h's *_backward_cost), flash or naive attention, and AdamW over every parameter.
// precision: the matmuls' and attention's compute type (F32 or Bf16); the rest Elementwise.
WorkloadCost train_step_cost(const LlamaConfig& c, int64_t B, int64_t T, bool flash, Precision precision);

// Seconds on d at efficiency e (of both peak and bandwidth): the per-op roofline above. Throws
// "[hw model] <device> publishes no <type> peak" when an op needs a peak the device lacks.
double roofline_seconds(const WorkloadCost& w, const RooflineDevice& d, double efficiency = 1.0);
// Whether d has every peak w needs.
bool can_time(const WorkloadCost& w, const RooflineDevice& d);

// A measured figure of the store the model can cost: the metric (a time), its workload and run.
struct ModeledFigure {
  const MetricRow* row = nullptr;
  Phase phase = Phase::Decode;
  WorkloadCost cost;
  int ranks = 1;  // bench train on N ranks of this machine: N x the work shares the device
  // This machine's roofline at the figure's ISA level (its run's isa_path), or the calibration
  // level's where that level's peaks were not measured (said in the notes).
  RooflineDevice roofline;
};

// The efficiency of one phase and the run it came from.
struct PhaseCalibration {
  Phase phase = Phase::Decode;
  const MetricRow* row = nullptr;  // the calibration figure
  double roofline_s = 0, measured_s = 0, efficiency = 0;
};

struct ErrorRow {
  const MetricRow* row = nullptr;
  Phase phase = Phase::Decode;
  std::string peaks_of;  // the ISA level whose peaks costed it (its own, or the calibration level's)
  double measured_s = 0, predicted_s = 0;
  double error() const { return predicted_s / measured_s - 1; }  // > 0: the model is slow
};

struct Prediction {
  const MetricRow* row = nullptr;  // the workload and metric predicted (as measured here)
  Phase phase = Phase::Decode;
  RooflineDevice device;
  double seconds = 0;
};

struct HwModelOptions {
  RooflineDevice cpu;  // this machine at the calibration (best) level: measured GEMM peaks and bandwidth
  // This machine at its other ISA levels (isa_level_rooflines): a figure is costed with the device
  // of its run's isa_path; cpu where that is cpu's level, or where no device has it (noted).
  std::vector<RooflineDevice> cpu_levels;
  std::vector<std::string> devices = {"h100", "h200", "a100", "v100", "gaudi2", "gaudi3"};
};

struct HwModelResult {
  std::vector<ModeledFigure> figures;  // every measured figure the model can cost
  std::vector<PhaseCalibration> calibration;
  std::vector<ErrorRow> errors;        // every measured figure but the calibration ones
  double median_abs_error = 0, worst_abs_error = 0;
  std::vector<Prediction> predictions;
  std::vector<std::string> notes;      // what was left out, and why
};

// Costs the store's bench infer (decode.seconds_per_token, prefill[tokens=N].seconds) and bench
// train (step_seconds) figures, each with the roofline of its ISA level, calibrates each phase on
// the figure of the best ISA level (the first in store order among equals), and predicts each
// single-rank workload on the devices.
// A workload's config comes from its model (random:<preset>, or a Hugging Face directory's
// config.json or a GGUF file that exists here). Throws "[hw model] ..." when the store holds no
// measured figure it can cost, naming the store. The result points into `rows`: keep them alive.
HwModelResult run_hw_model(const std::vector<MetricRow>& rows, const HwModelOptions& o, const std::string& source);

// Stores the predictions as modeled metrics (n = 0) of the workloads they predict, in one run of
// suite "model" on the machine of the calibration runs, each on device {kind "model", name the
// device's name, isa_path its id}. Returns the run's uuid.
std::string store_predictions(ResultsStore& s, const HwModelResult& r, const std::string& command);

// A published cross-hardware ratio and the workload the model sets against it.
struct PublishedRatio {
  std::string what;      // "MLPerf Inference v4.1 Llama 2 70B offline, H200 / H100"
  std::string numerator, denominator;  // catalogue ids
  double published = 0;  // numerator's throughput / denominator's
  std::string source;    // URL, and what the figure is
  std::string modeled_as;  // the workload the model predicts
  Phase phase = Phase::Decode;
  LlamaConfig config;
  int64_t batch = 1, tokens = 1, position = 0;
  Precision precision = Precision::Bf16;
};
const std::vector<PublishedRatio>& published_ratios();
// The model's ratio (denominator's seconds / numerator's), at equal efficiencies on both devices.
double predicted_ratio(const PublishedRatio& p);

}  // namespace genperf
