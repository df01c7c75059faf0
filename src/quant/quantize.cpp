// Quantizing checkpoints: which tensors, which formats (recipes and their fallbacks), the
// quantizers over whole matrices (row chunks in parallel; GPTQ in gptq.cpp), size accounting and
// writing the result. Statistics come from stats.cpp.
#include "genperf/quantize.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "genperf/error.h"
#include "genperf/model_family.h"
#include "genperf/progress.h"
#include "quant/quantize_internal.h"

namespace genperf {
namespace {

namespace fs = std::filesystem;

bool is_gguf_path(const std::string& p) { return p.size() > 5 && p.compare(p.size() - 5, 5, ".gguf") == 0; }

std::string format_list() {
  std::string s;
  for (size_t i = 0; i < size_t(DType::COUNT); ++i)
    if (is_plan_format(DType(i))) s += cat(s.empty() ? "" : ", ", dtype_name(DType(i)));
  return s;
}

// Quantizes rows [N, K] of f32 in chunks of rows, in parallel.
void quantize_rows_parallel(DType format, const float* src, void* dst, int64_t N, int64_t K, const float* importance) {
  constexpr int64_t kRows = 32;
  const size_t row_bytes = bytes_for(format, K);
  const int64_t chunks = (N + kRows - 1) / kRows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = c * kRows, R = std::min(kRows, N - r0);
    quantize_rows(format, src + r0 * K, static_cast<uint8_t*>(dst) + size_t(r0) * row_bytes, R, K, importance);
  }
}

}  // namespace

bool is_quantizable(const std::string& name, const Tensor& t) {
  if (!t.defined() || t.ndim() != 2) return false;
  for (const ModelFamily* f : model_families())
    if (f->role_of(name)) return true;
  return false;
}

std::vector<std::string> quantizable_tensors(const Checkpoint& ck) {
  std::vector<std::string> names;
  for (const TensorRole& r : family_of(ck).quantizable(ck)) names.push_back(r.name);
  return names;
}

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::Rtn: return "rtn";
    case QuantMethod::Weighted: return "imatrix";
    case QuantMethod::Gptq: return "gptq";
  }
  return "?";
}

QuantMethod parse_quant_method(const std::string& s) {
  if (s == "rtn") return QuantMethod::Rtn;
  if (s == "imatrix" || s == "weighted") return QuantMethod::Weighted;
  if (s == "gptq") return QuantMethod::Gptq;
  fail("[quantize] unknown method '", s, "' (expected rtn, imatrix or gptq)");
}

bool is_plan_format(DType f) {
  if (f == DType::I32 || f == DType::F8_E4M3 || f == DType::F8_E5M2 || f >= DType::COUNT) return false;
  return true;
}

bool format_fits(DType format, int64_t row_len) {
  return is_plan_format(format) && row_len > 0 && row_len % traits(format).block_size == 0;
}

DType fallback_format(DType format, int64_t row_len, DType source) {
  if (format_fits(format, row_len)) return format;
  DType f = format;
  switch (format) {
    case DType::Q2_K:
    case DType::Q3_K: f = DType::Q4_0; break;
    case DType::Q4_K: f = DType::Q5_0; break;
    case DType::Q5_K: f = DType::Q5_1; break;
    case DType::Q6_K: f = DType::Q8_0; break;
    default: break;
  }
  if (format_fits(f, row_len)) return f;
  return source == DType::BF16 ? DType::BF16 : DType::F16;
}

QuantPlan recipe_plan(const Checkpoint& ck, const std::string& recipe, std::vector<std::string>* notes) {
  const std::vector<std::string> names = quantizable_tensors(ck);
  QuantPlan plan;
  auto assign = [&](const std::string& name, DType want) {
    const Tensor& t = ck.tensors.at(name);
    const int64_t K = t.size(1);
    const DType got = fallback_format(want, K, t.dtype());
    if (got != want && notes)
      notes->push_back(cat(name, ": rows of ", K, " do not split into ", dtype_name(want), " blocks of ",
                           traits(want).block_size, "; using ", dtype_name(got)));
    plan[name] = got;
  };
  if (recipe.rfind("uniform:", 0) == 0) {
    const std::string f = recipe.substr(8);
    DType format = DType::F32;
    try {
      format = parse_dtype(f);
    } catch (const Error&) {
      fail("[quantize] recipe '", recipe, "': unknown format '", f, "' (formats: ", format_list(), ")");
    }
    GP_CHECK(is_plan_format(format), "[quantize] recipe '", recipe, "': ", dtype_name(format),
             " is not a weight format (formats: ", format_list(), ")");
    for (const std::string& n : names) assign(n, format);
    return plan;
  }
  if (recipe == "q4_k_m") {
    GP_CHECK(family_of(ck).has_gguf(), "[quantize] recipe q4_k_m is llama.cpp's mix for language models; for a ",
             family_of(ck).name(), " model (", ck.source, ") use uniform:<format> or auto");
    // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M (src/llama-quant.cpp, llama_tensor_get_type_impl):
    // default Q4_K; the output head, and the token embedding when it doubles as the head, Q6_K
    // (Q8_0 when the head's rows do not split into 256-blocks); attn_v and ffn_down Q6_K in the
    // layers where use_more_bits(i, n) holds: i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2. An
    // untied token embedding keeps the default. Then the shape fallbacks (fallback_format).
    const int64_t n = ck.config.num_hidden_layers;
    auto use_more_bits = [n](int64_t i) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
    for (const TensorRole& r : family_of(ck).quantizable(ck)) {
      DType want = DType::Q4_K;
      if (r.output) {
        want = ck.tensors.at(r.name).size(1) % traits(DType::Q6_K).block_size == 0 ? DType::Q6_K : DType::Q8_0;
      } else if (r.layer >= 0 && (r.kind == "v" || r.kind == "down") && use_more_bits(r.layer)) {
        want = DType::Q6_K;
      }
      assign(r.name, want);
    }
    return plan;
  }
  fail("[quantize] unknown recipe '", recipe, "' (expected uniform:<format> or q4_k_m)");
}

Tensor quantize_matrix(const Tensor& w, DType format, const QuantizeOptions& o, const std::string& stats_name) {
  GP_CHECK(w.defined() && w.ndim() == 2, "[quantize] ", stats_name, ": expected a 2-D matrix, got ",
           w.defined() ? w.describe() : std::string("an undefined tensor"));
  const int64_t N = w.size(0), K = w.size(1);
  GP_CHECK(is_plan_format(format), "[quantize] ", stats_name, ": ", dtype_name(format),
           " is not a weight format (formats: ", format_list(), ")");
  GP_CHECK(format_fits(format, K), "[quantize] ", stats_name, " ", w.describe(), ": rows of ", K,
           " do not split into ", dtype_name(format), " blocks of ", traits(format).block_size);
  if (traits(format).is_float) return w.to(format);
  const Tensor src = w.dtype() == DType::F32 && w.is_contiguous() ? w : w.to(DType::F32);
  Tensor out = Tensor::zeros({N, K}, format);
  if (o.method == QuantMethod::Rtn) {
    quantize_rows_parallel(format, src.data<float>(), out.raw(), N, K, nullptr);
    return out;
  }
  const char* method = quant_method_name(o.method);
  GP_CHECK(o.stats, "[quantize] the ", method, " method needs activation statistics (calibration text); ",
           stats_name, " has none");
  if (o.method == QuantMethod::Weighted) {
    const auto it = o.stats->mean_sq.find(stats_name);
    GP_CHECK(it != o.stats->mean_sq.end(), "[quantize] no activation statistics for ", stats_name);
    GP_CHECK(int64_t(it->second.size()) == K, "[quantize] the statistics of ", stats_name, " have ",
             it->second.size(), " columns, the matrix ", K);
    quantize_rows_parallel(format, src.data<float>(), out.raw(), N, K, it->second.data());
    return out;
  }
  const auto it = o.stats->gram.find(stats_name);
  auto is_lookup = [&] {
    for (const ModelFamily* f : model_families())
      if (const auto r = f->role_of(stats_name); r && r->lookup) return true;
    return false;
  };
  if (it == o.stats->gram.end() && is_lookup()) {
    // The untied embedding is a lookup without a Gram matrix: its uniform importance instead.
    QuantizeOptions weighted = o;
    weighted.method = QuantMethod::Weighted;
    return quantize_matrix(src, format, weighted, stats_name);
  }
  GP_CHECK(it != o.stats->gram.end(), "[quantize] GPTQ needs the Gram matrix (X^T X) of ", stats_name,
           "'s input; collect the statistics with the Gram matrices");
  GP_CHECK(int64_t(it->second.size()) == K * K, "[quantize] the Gram matrix of ", stats_name, " has ",
           it->second.size(), " entries, expected ", K, " x ", K);
  quant::gptq_quantize(src.data<float>(), N, K, format, it->second, o.gptq_block, o.gptq_damp, out.raw());
  return out;
}

Checkpoint quantize_checkpoint(const Checkpoint& ck, const QuantPlan& plan, const QuantizeOptions& o) {
  Checkpoint out = share_weights(ck);
  // A Checkpoint owns its tokenizer: rebuild it from the vocabulary. One that states no vocabulary
  // (a test double) cannot be rebuilt and is not carried.
  if (ck.tokenizer && !ck.tokenizer->vocab().tokens.empty()) {
    try {
      out.tokenizer = tokenizer_from_vocab(ck.tokenizer->vocab(), ck.source);
    } catch (const Error& e) {
      fail("[quantize] cannot carry the tokenizer of ", ck.source, " into the quantized checkpoint: ", e.what());
    }
  }
  if (o.method != QuantMethod::Rtn)
    GP_CHECK(o.stats, "[quantize] the ", quant_method_name(o.method),
             " method needs activation statistics (calibration text)");
  Progress bar("quantize", int64_t(plan.size()));
  int64_t done = 0;
  for (const auto& [name, format] : plan) {
    const auto it = out.tensors.find(name);
    GP_CHECK(it != out.tensors.end(), "[quantize] the plan names ", name, ", which ", ck.source, " does not have");
    GP_CHECK(is_quantizable(name, it->second), "[quantize] the plan names ", name, " ", it->second.describe(),
             ", which is not a quantizable matrix");
    if (it->second.dtype() != format) it->second = quantize_matrix(it->second, format, o, name);
    bar.update(++done, name);
  }
  bar.finish();
  return out;
}

double plan_bpw(const Checkpoint& ck, const QuantPlan& plan) {
  int64_t bytes = 0, elements = 0;
  for (const std::string& n : quantizable_tensors(ck)) {
    const Tensor& t = ck.tensors.at(n);
    auto it = plan.find(n);
    bytes += int64_t(it == plan.end() ? t.nbytes() : bytes_for(it->second, t.numel()));
    elements += t.numel();
  }
  return elements ? double(bytes) * 8.0 / double(elements) : 0.0;
}

SizeReport size_report(const Checkpoint& ck) {
  SizeReport r;
  for (const auto& [name, t] : ck.tensors) {
    const int64_t bytes = int64_t(t.nbytes());
    r.total_bytes += bytes;
    r.total_elements += t.numel();
    if (is_quantizable(name, t)) {
      r.quantizable_bytes += bytes;
      r.quantizable_elements += t.numel();
    }
  }
  r.bpw = r.quantizable_elements ? 8.0 * double(r.quantizable_bytes) / double(r.quantizable_elements) : 0;
  return r;
}

void check_quantized_output(const std::string& path, const Checkpoint& ck, const QuantPlan& plan) {
  std::error_code ec;
  if (is_gguf_path(path)) {
    for (const auto& [name, f] : plan)
      GP_CHECK(traits(f).ggml_type >= 0, "[quantize] ", path, ": ", name, " would be ", dtype_name(f),
               ", which GGUF cannot hold; name an output directory instead");
    for (const auto& [name, t] : ck.tensors)
      GP_CHECK(plan.count(name) || traits(t.dtype()).ggml_type >= 0, "[quantize] ", path, ": ", name, " is ",
               dtype_name(t.dtype()), ", which GGUF cannot hold; name an output directory instead");
  } else if (fs::exists(path, ec)) {
    GP_CHECK(fs::is_directory(path, ec) && fs::is_empty(path, ec), "[quantize] ", path,
             " exists; choose a new output path or remove it");
  }
}

void save_quantized(const std::string& path, const Checkpoint& ck) {
  GP_CHECK(!path.empty(), "[quantize] empty output path");
  if (is_gguf_path(path)) {
    GP_CHECK(family_of(ck).has_gguf(), "[quantize] ", path, ": a ", family_of(ck).name(),
             " model has no GGUF form; write a directory (HF safetensors) instead");
    for (const auto& [name, t] : ck.tensors)
      GP_CHECK(traits(t.dtype()).ggml_type >= 0, "[quantize] ", path, ": tensor ", name, " is ",
               dtype_name(t.dtype()), ", which GGUF cannot hold; write a directory (HF safetensors) instead");
    save_gguf_checkpoint(path, ck);  // permutes q/k rows when the checkpoint has HF's layout
    return;
  }
  std::error_code ec;
  const fs::path dir(path);
  if (fs::exists(dir, ec))
    GP_CHECK(fs::is_directory(dir, ec) && fs::is_empty(dir, ec), "[quantize] ", path,
             " exists; choose a new output path or remove it");
  const std::map<std::string, Tensor> tensors = family_of(ck).hf_tensors(ck);
  // Tokenizer files of a source directory travel along; a GGUF's vocabulary has no such file.
  std::vector<std::string> extra;
  if (!ck.source.empty() && fs::is_directory(ck.source, ec))
    for (const char* f : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                          "generation_config.json"})
      if (fs::is_regular_file(fs::path(ck.source) / f, ec)) extra.push_back((fs::path(ck.source) / f).string());
  const std::string tmp = cat(path, ".tmp-", getpid());
  fs::remove_all(tmp, ec);
  try {
    family_of(ck).save_hf(tmp, ck, tensors, extra);
    if (fs::exists(dir, ec)) fs::remove(dir, ec);  // empty, checked above
    fs::rename(tmp, dir, ec);
    GP_CHECK(!ec, "[quantize] cannot rename ", tmp, " to ", path, ": ", ec.message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace genperf
