// Activation statistics for quantization: LlamaModel's forward pass over f32 copies of the
// weights, on calibration windows, with a hook (MatmulInputHook) that accumulates, for each
// distinct matmul input, the per-column sums of squares and (for GPTQ) X^T X. q/k/v share one
// input and gate/up another, so each input is accumulated once and its statistics are copied to
// every weight that multiplies it.
#include <algorithm>
#include <cmath>
#include <memory>

#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/model_family.h"
#include "genperf/progress.h"
#include "genperf/quantize.h"
#include "genperf/ops.h"
#include "quant/quantize_internal.h"

namespace genperf {
namespace {

// The checkpoint's weights as f32 (the statistics are those of the unquantized model, whatever
// the stored type), for a LlamaModel: its forward pass then runs the f32 kernels throughout.
Checkpoint f32_copy(const Checkpoint& ck) {
  Checkpoint out = share_weights(ck);
  for (const auto& [name, t] : ck.tensors)
    out.tensors[name] = t.dtype() == DType::F32 && t.is_contiguous() ? t : t.to(DType::F32);
  return out;
}

}  // namespace

namespace {

// One matmul input's running sums: x_i^2 per column and, optionally, X^T X.
struct InputSums {
  std::vector<std::string> weights;
  std::vector<double> sum_sq, gram;
  int64_t rows = 0;

  void add(const Tensor& x, bool with_gram) {
    const int64_t T = x.size(0), K = x.size(1);
    if (sum_sq.empty()) {
      sum_sq.assign(size_t(K), 0.0);
      if (with_gram) gram.assign(size_t(K * K), 0.0);
    }
    for (int64_t t = 0; t < T; ++t) {
      const float* r = x.row<float>(t);
      for (int64_t i = 0; i < K; ++i) sum_sq[size_t(i)] += double(r[i]) * double(r[i]);
    }
    rows += T;
    if (!with_gram) return;
    // X^T X with the f32 GEMM: xt [K, T] times itself transposed. One window's sum of T products
    // in f32 is accurate to ~1e-6 relative; windows are summed in double.
    Tensor xt = Tensor::zeros({K, T}), g = Tensor::zeros({K, K});
    for (int64_t t = 0; t < T; ++t) {
      const float* r = x.row<float>(t);
      for (int64_t i = 0; i < K; ++i) xt.data<float>()[i * T + t] = r[i];
    }
    ops::linear(xt, xt, nullptr, g);
    const float* gp = g.data<float>();
    for (int64_t i = 0; i < K * K; ++i) gram[size_t(i)] += double(gp[i]);
  }
};

}  // namespace

ActivationStats collect_activation_stats(const Checkpoint& ck, const std::vector<int32_t>& tokens, int64_t ctx,
                                         bool with_gram, int64_t min_tokens, bool progress) {
  GP_CHECK(int64_t(tokens.size()) >= min_tokens, "[quantize] calibration needs at least ", min_tokens,
           " tokens, got ", tokens.size());
  GP_CHECK(!tokens.empty(), "[quantize] calibration needs at least one token");
  const LlamaModel model(f32_copy(ck));
  const auto& c = model.config();
  GP_CHECK(ctx >= 2 && ctx <= c.max_position_embeddings, "[quantize] calibration context ", ctx,
           " is outside 2..", c.max_position_embeddings, " (max_position_embeddings)");
  for (size_t i = 0; i < tokens.size(); ++i)
    GP_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, "[quantize] calibration token ", tokens[i], " at ", i,
             " is outside the vocabulary of ", c.vocab_size);
  const int32_t bos = ck.tokenizer ? ck.tokenizer->bos_id() : -1;
  const int64_t per_window = bos >= 0 ? ctx - 1 : ctx;

  std::map<std::string, InputSums> sums;  // one per matmul input, keyed by its first weight
  const MatmulInputHook observe = [&](std::span<const std::string> weights, const Tensor& x) {
    InputSums& s = sums[weights.front()];
    if (s.weights.empty()) s.weights.assign(weights.begin(), weights.end());
    s.add(x, with_gram);
  };
  Session session(model, ctx);
  const int64_t n = int64_t(tokens.size());
  const int64_t windows = (n + per_window - 1) / per_window;
  std::unique_ptr<Progress> bar;
  if (progress) bar = std::make_unique<Progress>("calibration", windows);
  std::vector<int32_t> input;
  for (int64_t w = 0; w < windows; ++w) {
    const int64_t b = w * per_window, e = std::min(n, b + per_window);
    input.clear();
    if (bos >= 0) input.push_back(bos);
    input.insert(input.end(), tokens.begin() + b, tokens.begin() + e);
    session.reset();
    model.forward(session, input, LogitsFor::All, &observe);
    if (bar) bar->update(w + 1);
  }
  if (bar) bar->finish();

  ActivationStats st;
  for (const auto& [key, s] : sums) {
    std::vector<float> ms(s.sum_sq.size());
    for (size_t i = 0; i < ms.size(); ++i) ms[i] = float(s.sum_sq[i] / double(s.rows));
    std::vector<double> g = s.gram;
    for (double& v : g) v /= double(s.rows);
    for (const std::string& name : s.weights) {
      st.mean_sq[name] = ms;
      if (with_gram) st.gram[name] = g;
    }
    st.tokens = s.rows;
  }
  for (const TensorRole& r : family_of(ck).quantizable(ck))
    if (r.lookup)  // rows looked up, never multiplied: uniform importance (see quantize.h)
      st.mean_sq[r.name].assign(size_t(ck.tensors.at(r.name).size(1)), 1.f);
  return st;
}

}  // namespace genperf
