// Quantizing a model: which tensors can be quantized, activation statistics from calibration
// text (per-input-channel mean squares, like llama.cpp's imatrix, and the Gram matrices GPTQ
// needs), the quantizers (round to nearest, importance-weighted, GPTQ), fixed recipes and
// per-tensor plans, and writing the result (GGUF when every tensor is a ggml type, else an
// HF-style safetensors directory with genperf's quantization metadata).
//
// Every quantizer works row by row along K (the formats' blocks run along a row), so rows are
// independent: permuting the rows of a quantized matrix (GGUF's q/k rotary layout) is exact.
//
// The sensitivity map and the budgeted allocation (sensitivity.h) build on these.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/dtype.h"

namespace genperf {

// The weights a plan may quantize: 2-D matrices of the linear layers (q, k, v, o, gate, up,
// down), the output head and the token embedding. Norm weights and biases stay as they are.
bool is_quantizable(const std::string& name, const Tensor& t);
// Sorted by layer, then kind: the embedding, each layer's q, k, v, o, gate, up, down, the head.
std::vector<std::string> quantizable_tensors(const Checkpoint& ck);

// Statistics of each quantizable matrix's input over calibration tokens. mean_sq[name][i] is the
// mean of x_i^2 over the tokens (x the matrix's input row); gram[name] (only when requested) is
// X^T X / n, [K, K] row-major, for GPTQ. Inputs: attention-norm output for q/k/v, attention
// output for o, FFN-norm output for gate/up, silu(gate)*up for down, final-norm output for the
// head. The embedding is a lookup, not a matmul: its rows are quantized independently, so
// weighting rows by token frequency would change nothing, and a row's columns enter the residual
// stream alike; an untied embedding therefore gets uniform importance (all ones) and no Gram
// matrix. A tied embedding is also the head, and gets the head's statistics.
struct ActivationStats {
  int64_t tokens = 0;  // rows observed (BOS positions included)
  std::map<std::string, std::vector<float>> mean_sq;
  std::map<std::string, std::vector<double>> gram;
};
// Runs the model in f32 (weights of any type are converted) over `tokens` in consecutive
// windows of ctx positions, [BOS] + ctx-1 tokens each when the tokenizer has a BOS (the same
// forward as LlamaModel, checked against it in the tests). Errors when `tokens` has fewer than
// min_tokens tokens.
ActivationStats collect_activation_stats(const Checkpoint& ck, const std::vector<int32_t>& tokens,
                                         int64_t ctx, bool with_gram, int64_t min_tokens = 256,
                                         bool progress = false);

enum class QuantMethod : uint8_t {
  Rtn = 0,      // round to nearest with each format's scale search
  Weighted = 1, // the same search weighted by the input channels' mean squares (imatrix)
  Gptq = 2,     // Hessian-based error compensation, blocked (needs ActivationStats::gram)
};
const char* quant_method_name(QuantMethod m);  // "rtn", "imatrix", "gptq"
QuantMethod parse_quant_method(const std::string& s);  // "rtn", "imatrix" (or "weighted"), "gptq"

struct QuantizeOptions {
  QuantMethod method = QuantMethod::Rtn;
  const ActivationStats* stats = nullptr;  // required by Weighted and Gptq
  int64_t gptq_block = 128;                // columns per lazy batch (rounded up to the format's block)
  double gptq_damp = 0.01;                 // dampening, a fraction of the mean diagonal
};

// tensor name -> target format; tensors absent from a plan keep their type.
using QuantPlan = std::map<std::string, DType>;

// Whether `format` can hold rows of row_len elements (its block divides the row). Formats a plan
// may name: the block formats, the _B32 FP8 formats, f16, bf16 and f32 (plain F8 needs a
// separate scale tensor and I32 is not a weight type).
bool format_fits(DType format, int64_t row_len);
bool is_plan_format(DType format);
// The format a row of row_len elements gets when `format` does not fit: llama.cpp's fallbacks
// (src/llama-quant.cpp, tensor_type_fallback: Q2_K and Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0), then f16 when even a 32-block does not divide the row (bf16 when the source is
// bf16, which f16's range might not hold). Returns `format` when it fits.
DType fallback_format(DType format, int64_t row_len, DType source);

// A fixed recipe: "uniform:<format>" (every quantizable tensor; formats whose block does not
// divide a row fall back as fallback_format says, each reported in `notes`) or "q4_k_m"
// (llama.cpp's rule-based mix, see recipe_plan in quantize.cpp: Q4_K, with Q6_K for the output
// head and for the v_proj and down_proj of the first and last eighth of the layers and every
// third layer between).
QuantPlan recipe_plan(const Checkpoint& ck, const std::string& recipe, std::vector<std::string>* notes = nullptr);

// Quantizes the tensors of the plan (the others are shared, not copied). The result keeps the
// source's config, rope style and tokenizer (rebuilt from its vocabulary; a tokenizer without
// one, such as a test double, is not carried).
Checkpoint quantize_checkpoint(const Checkpoint& ck, const QuantPlan& plan, const QuantizeOptions& o);
// One matrix [N, K] (any float or quantized type; converted to f32 first) to `format`, with the
// options' method; stats_name selects the matrix's statistics. With Gptq, the untied embedding
// (a lookup, no Gram matrix) is quantized with the Weighted method.
Tensor quantize_matrix(const Tensor& w, DType format, const QuantizeOptions& o, const std::string& stats_name);

// Bits per weight of a checkpoint's quantizable tensors (packed bytes * 8 / elements), and its
// total weight bytes (a tied head counted once).
struct SizeReport {
  double bpw = 0;
  int64_t quantizable_bytes = 0, total_bytes = 0, quantizable_elements = 0, total_elements = 0;
  double compression_vs_bf16() const { return total_bytes ? 2.0 * double(total_elements) / double(total_bytes) : 0; }
};
SizeReport size_report(const Checkpoint& ck);
// Bits per weight of the quantizable tensors once `plan` is applied, without quantizing (tensors
// the plan does not name keep their bytes).
double plan_bpw(const Checkpoint& ck, const QuantPlan& plan);

// Writes `path`: a .gguf file (every tensor must be a ggml type; q/k rows are permuted to GGUF's
// rotary layout as save_gguf_checkpoint does) or an HF-style directory (config.json,
// model.safetensors with each quantized tensor stored as U8 bytes [rows..., row bytes] plus
// "genperf.quant.<name>" = "<format> <dim> <dim>..." in __metadata__, and the source directory's
// tokenizer files). The directory is written under a temporary name and renamed into place; an
// existing non-empty directory at `path` is an error. load_checkpoint reads both back.
// Fails before any work when `path` cannot take the result of `plan`: a .gguf file whose formats
// GGUF lacks, or a directory that exists and is not empty.
void check_quantized_output(const std::string& path, const Checkpoint& ck, const QuantPlan& plan);
void save_quantized(const std::string& path, const Checkpoint& ck);

}  // namespace genperf
