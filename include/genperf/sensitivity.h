// Which tensors a model can afford to quantize hard: the sensitivity map (for each quantizable
// tensor and candidate format, the whole model's degradation when only that tensor is quantized:
// KL divergence from the unquantized model and the change in loss on calibration text, plus a
// cheap activation-weighted error proxy), and the budgeted allocation built on it (each tensor's
// format chosen to minimize the predicted degradation under a size or bits-per-weight budget, or
// the size under a KL budget).
//
// Additivity assumption: the allocation predicts a plan's KL as the sum of its tensors' measured
// KLs (each measured with every other tensor unquantized). Errors of different tensors interact,
// so the prediction is checked against the achieved KL (score_against_reference) after
// quantizing; the report prints both.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/dtype.h"
#include "genperf/quantize.h"

namespace genperf {

// ---------------------------------------------------------------------------------------------
// Calibration: a reference model's outputs on calibration data, computed once and shared by
// every measurement (sensitivity entries, and the achieved divergence of a plan). Each model
// family has its own (make_calibration):
//  - Llama: KL of next-token distributions on text windows (CalibrationReference). Windows
//    follow eval.h's perplexity(): the text is tokenized without BOS, cut into windows of ctx
//    tokens, each fed as [BOS] + window[:-1] with every window token scored (without a BOS the
//    first token is context only). The text must hold at least one whole window (and
//    max_tokens tokens when given); a shorter last window is scored too.
//  - the SR UNet: the relative squared error of the network's prediction on noised crops of
//    calibration maps (src/quant/sr_calibration.cpp).
struct CalibrationOptions {
  int64_t ctx = 256;
  int64_t max_tokens = 0;  // 0: every token of the text; else the first max_tokens (the text must have them)
  // SR models: crops of crop x crop high-resolution pixels, each at its own diffusion step and
  // noise (drawn from seed), taken from the calibration maps in turn.
  int64_t crops = 16, crop = 64;
  uint64_t seed = 1;
  std::string source = "<calibration text>";  // the file name, for error messages
  bool progress = false;
};

// A variant's divergence from the reference on the calibration data, in the calibration's
// metric: KL(P_ref || P_model) per scored token (metric "kl"), or the squared error of the
// prediction over the reference's squared norm (metric "rel_mse").
struct CalibrationScore {
  double kl = 0;          // mean divergence (KL in nats per token, or relative squared error)
  double kl_max = 0;      // largest per-token KL (rel_mse: the largest per-crop value)
  double nll = 0;         // model's mean loss (NLL in nats; SR: the diffusion loss)
  double dloss = 0;       // nll - reference nll
  double top1 = 0;        // fraction of tokens where the argmaxes agree (SR: NaN)
  int64_t tokens = 0;     // scored tokens (SR: pixels)
};

class Calibration {
 public:
  virtual ~Calibration() = default;
  virtual const char* metric() const = 0;  // "kl" or "rel_mse"
  // Scores a variant of the reference checkpoint (same config; e.g. with some tensors
  // quantized). Tensors are shared, not copied.
  virtual CalibrationScore score(const Checkpoint& variant) const = 0;
  // Same, for a map of tensors replacing the reference's (the others are the reference's own).
  virtual CalibrationScore score_with(const std::map<std::string, Tensor>& replaced) const = 0;
  // Input statistics of the quantizable matrices on the calibration data (the proxy's weights,
  // imatrix and GPTQ); gram adds the Gram matrices. Empty where the family collects none.
  virtual ActivationStats activation_stats(const Checkpoint& ck, bool gram) const = 0;
  // The weight of each row of a lookup table in the proxy (the embedding: token frequencies);
  // empty when the calibration has none.
  virtual std::vector<float> lookup_row_weights() const { return {}; }
  virtual int64_t ctx() const = 0;              // tokens per window; SR: the crop's side
  virtual int64_t tokens() const = 0;           // scored tokens; SR: pixels
  virtual double reference_nll() const = 0;     // the reference model's mean loss
  virtual double seconds_per_score() const = 0;  // of the reference pass, for estimates
  virtual std::string describe() const = 0;     // one line: the data and the reference's loss
};

class CalibrationReference final : public Calibration {
 public:
  // Tokenizes `text` with ck's tokenizer (which must exist). Errors name opt.source and the token
  // counts when the text is too short for one window of ctx, or for opt.max_tokens.
  CalibrationReference(const Checkpoint& ck, const std::string& text, const CalibrationOptions& opt);
  // From token ids (no BOS; bos < 0 when the model has none), e.g. for models without a tokenizer.
  CalibrationReference(const Checkpoint& ck, const std::vector<int32_t>& ids, int32_t bos,
                       const CalibrationOptions& opt);
  ~CalibrationReference() override;
  CalibrationReference(CalibrationReference&&) noexcept;

  const char* metric() const override { return "kl"; }
  CalibrationScore score(const Checkpoint& variant) const override;
  CalibrationScore score_with(const std::map<std::string, Tensor>& replaced) const override;
  ActivationStats activation_stats(const Checkpoint& ck, bool gram) const override;
  std::vector<float> lookup_row_weights() const override;

  int64_t ctx() const override;
  int64_t tokens() const override;
  const std::vector<int32_t>& ids() const;      // the calibration tokens used (no BOS)
  double reference_nll() const override;
  double seconds_per_score() const override;
  std::string describe() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The calibration of ck's family on the data at `path` (Llama: a text file; the SR UNet: maps
// as sr::read_maps reads them: files, directories or synthetic:N...). Errors name the path.
std::unique_ptr<Calibration> make_calibration(const Checkpoint& ck, const std::string& path,
                                              const CalibrationOptions& opt);

// ---------------------------------------------------------------------------------------------
// The sensitivity map.

struct SensitivityOptions {
  std::vector<DType> formats = {DType::Q2_K, DType::Q3_K, DType::Q4_0, DType::Q4_K,
                                DType::Q5_K, DType::Q6_K, DType::Q8_0};
  QuantizeOptions quant;  // method used for every entry (stats filled in by measure_sensitivity)
  bool measure = true;    // false: proxy only (no per-entry forward passes; kl/dloss are NaN)
  // Anchored (cheap) map: measure only this format for each tensor (the first fitting format of
  // `formats` where it does not fit) and estimate the others' KL and dloss by scaling the
  // tensor's proxy: kl(f) = kl(anchor) * proxy(f) / proxy(anchor). One pass per tensor instead
  // of one per (tensor, format). F32: off (every entry measured).
  DType anchor = DType::F32;
  bool progress = false;
};

// One (tensor, format) measurement. Formats whose block does not divide the tensor's rows have
// no entry (listed in SensitivityMap::notes).
struct SensitivityEntry {
  std::string tensor;
  DType format = DType::F32;
  int64_t bytes = 0;      // packed size of the tensor in this format
  double bpw = 0;         // bytes * 8 / elements
  double kl = 0;          // mean KL(ref || model with only this tensor quantized), nats/token
  double dloss = 0;       // mean NLL change (nats/token); may be negative
  double proxy = 0;       // sum_i mean_sq[i] * ||W[:, i] - W_hat[:, i]||^2 (activation-weighted error)
  bool measured = true;   // false: kl and dloss are estimated from the anchor (anchored maps)
};

struct SensitivityTensor {
  std::string name;
  int layer = -1;           // -1 for the embedding and the output head
  std::string kind;         // q, k, v, o, gate, up, down, embed, head
  int64_t elements = 0;
  DType source_dtype = DType::F32;
  int64_t source_bytes = 0;
};

struct SensitivityMap {
  std::string model, calib;
  std::string metric = "kl";      // what the entries' kl measures (Calibration::metric)
  std::string method = "rtn";     // quantizer used for the entries (quant_method_name)
  int64_t ctx = 0, tokens = 0;
  double reference_nll = 0;
  std::vector<DType> formats;
  std::vector<SensitivityTensor> tensors;  // quantizable tensors, in quantizable_tensors() order
  std::vector<SensitivityEntry> entries;   // tensor-major, formats in `formats` order
  int64_t total_source_bytes = 0;          // every weight of the source checkpoint
  bool measured = true;                    // false when only the proxy was computed
  std::string anchor;                      // anchored maps: the anchor format's name, else ""
  // Spearman rank correlation between proxy and measured KL: over all measured entries, and per
  // format (anchored maps: across tensors at their anchor).
  double spearman = 0;
  std::map<std::string, double> spearman_by_format;  // format name -> rho
  std::vector<std::string> notes;
  double seconds = 0;

  const SensitivityTensor* find_tensor(const std::string& name) const;
  int64_t quantizable_elements() const;
  int64_t quantizable_source_bytes() const;
  int64_t other_bytes() const { return total_source_bytes - quantizable_source_bytes(); }
};

// Measures the map: one quantization per (tensor, format), then one pass over the calibration
// windows with only that tensor replaced; activation statistics (for the proxy and the
// imatrix method) come from collect_activation_stats on the same tokens.
SensitivityMap measure_sensitivity(const Checkpoint& ck, const Calibration& ref,
                                   const SensitivityOptions& opt);

// Spearman's rank correlation (ties get their average rank); NaN when fewer than 2 pairs or a
// side is constant.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Reads a map's PREFIX.json (written by sensitivity_json, genperf/report.h); errors name the file.
SensitivityMap read_sensitivity_json(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Allocation.

// Seconds of one decode step per tensor and format (genperf/decode_latency.h measures or models
// them): t(plan) = fixed + the sum of the chosen formats' seconds.
struct TensorSeconds {
  // The step without its quantizable tensors' products (may be negative where the products run
  // faster inside the step than timed alone: an offset, genperf/decode_latency.h)
  double fixed = 0;
  std::map<std::string, std::map<DType, double>> seconds;  // tensor -> format -> seconds
  // The seconds of `tensor` in `format`; throws "[allocate] no decode time for ..." when absent.
  double of(const std::string& tensor, DType format) const;
};

struct Budget {
  enum class Kind { Bpw, Bytes, MaxKl, Latency };
  Kind kind = Kind::Bpw;
  double value = 0;
  static Budget bpw(double x) { return {Kind::Bpw, x}; }          // over the quantizable elements
  static Budget bytes(double b) { return {Kind::Bytes, b}; }      // total weight bytes of the model
  static Budget max_kl(double k) { return {Kind::MaxKl, k}; }     // predicted KL (sum of entries)
  static Budget latency(double s) { return {Kind::Latency, s}; }  // seconds per decode step
};

struct AllocationOptions {
  bool use_proxy = false;   // predict with the proxy instead of the measured KL
  bool allow_keep = true;   // keeping a tensor in its source type (degradation 0) is an option
  // Decode seconds of each option: needed by a Latency budget, which then minimizes the predicted
  // degradation under fixed + the sum of seconds; with any other budget they are only reported.
  const TensorSeconds* latency = nullptr;
};

struct AllocationReport {
  std::string method;             // "dp" (exact knapsack) or "dp-rounded" (sizes rounded up)
  std::string metric = "kl";      // what `predicted` sums: the map's metric, or "proxy"
  double predicted = 0;           // sum of the chosen entries' KL (or proxy with use_proxy)
  double predicted_dloss = 0;     // sum of the chosen entries' dloss (measured maps only)
  double lagrangian_bound = 0;    // a lower bound on the optimum (MaxKl: not used)
  int64_t quantizable_bytes = 0;  // predicted bytes of the quantizable tensors
  int64_t total_bytes = 0;        // + the other weights
  double bpw = 0;                 // quantizable_bytes * 8 / quantizable elements
  int64_t budget_bytes = 0;       // the quantizable-byte budget (Bpw, Bytes)
  double predicted_seconds = 0;   // with AllocationOptions::latency: the step's predicted seconds
  double budget_seconds = 0;      // the Latency budget
  std::map<std::string, int64_t> format_counts;  // format name -> tensors
  std::string summary() const;    // one line
};

// An option of one tensor, after Pareto pruning.
struct AllocationOption {
  DType format = DType::F32;  // the source type for "keep"
  int64_t bytes = 0;
  double cost = 0;            // predicted degradation
  double dloss = 0;
  bool keep = false;          // the tensor stays as it is (absent from the plan)
  double seconds = 0;         // decode seconds (AllocationOptions::latency), else 0
};

// Per-tensor Pareto-optimal options (bytes strictly increasing, cost strictly decreasing; under a
// Latency budget seconds strictly increasing instead of bytes).
std::vector<std::vector<AllocationOption>> allocation_options(const SensitivityMap& m, const AllocationOptions& o);

// The multiple-choice knapsack on explicit options (exposed for tests): for each group one option
// index, minimizing the sum of costs with the sum of bytes <= budget; errors when infeasible.
// Exact dynamic programming over bytes in units of their greatest common divisor (rounded up to
// at most max_cells cells, then exact for the rounded sizes); `rounded` says which.
std::vector<int> knapsack_min_cost(const std::vector<std::vector<AllocationOption>>& groups, int64_t budget,
                                   int64_t max_cells = 1 << 22, bool* rounded = nullptr);
// The fewest bytes with sum of costs <= max_cost; errors when even the lowest costs exceed it.
std::vector<int> knapsack_min_bytes(const std::vector<std::vector<AllocationOption>>& groups, double max_cost,
                                    int64_t max_cells = 1 << 22, bool* rounded = nullptr);
// The Lagrangian dual bound max_lambda [sum_g min_o (cost + lambda bytes) - lambda budget].
double lagrangian_lower_bound(const std::vector<std::vector<AllocationOption>>& groups, int64_t budget);

// The plan for a budget. Infeasible budgets throw, naming the smallest achievable (every tensor
// at its smallest option) or, for MaxKl, the lowest predicted KL.
QuantPlan plan_for_budget(const SensitivityMap& m, const Budget& b, AllocationReport* report = nullptr,
                          const AllocationOptions& o = {});

// ---------------------------------------------------------------------------------------------
// `quantize --recipe auto` as a library call: the allocation under one budget, on a map read from
// `sensitivity` (a PREFIX.json of measure_sensitivity) or measured on the text `calib`. With
// calibration text, `ref` holds the windows on which the achieved KL is scored after
// quantization: those the map was measured on (as far as the text has them), so that achieved and
// predicted KL compare; otherwise `ref_note` says why there is none or how the windows differ.

struct AutoPlanOptions {
  Budget budget;
  bool proxy = false;        // allocate by the activation-weighted error proxy, not measured KL
  std::string sensitivity;   // a map's path, or "" to measure one on calib
  std::string calib;         // calibration text's path, or ""
  int64_t ctx = 512;         // tokens per calibration window (when the map does not say)
  int64_t calib_tokens = 4096;
  bool progress = false;
  QuantizeOptions quant;     // the method the model will be quantized with
  // Decode seconds per option (AllocationOptions::latency), from the map once it is read or
  // measured (its formats are the candidates); needed by a Latency budget.
  std::function<TensorSeconds(const SensitivityMap&)> latency;
};

struct AutoPlan {
  QuantPlan plan;
  AllocationReport report;
  bool proxy = false;  // allocated by the proxy (AutoPlanOptions::proxy)
  std::unique_ptr<Calibration> ref;
  std::optional<TensorSeconds> latency;  // AutoPlanOptions::latency's answer
  std::string ref_note;
  std::vector<std::string> notes;  // the map's notes and the allocation's summary
};

AutoPlan plan_auto(const Checkpoint& ck, const AutoPlanOptions& o);

}  // namespace genperf
