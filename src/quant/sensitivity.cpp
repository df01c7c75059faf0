// The sensitivity map: calibration reference, one measurement per (tensor, format), the
// activation-weighted proxy, Spearman correlation, and reading the JSON map back (the CSV / JSON /
// SVG writers are in the report layer, src/report/sensitivity_report.cpp).
//
// Cost: one reference pass, one activation-statistics pass, then one pass over the calibration
// windows per (tensor, format). A pass needs only the quantized model's logits: the reference
// side is precomputed once per scored token (its probabilities p as f32, sum_i p_i log p_i and
// sum_i p_i), so KL(p || q) = sum p log p - (sum p z - lse(z) * sum p) costs one log-sum-exp and
// one dot product per token (z the model's logits).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/llama.h"
#include "genperf/model_family.h"
#include "genperf/progress.h"
#include "genperf/runtime.h"
#include "genperf/sensitivity.h"

namespace genperf {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---------------------------------------------------------------------------------------------
// Calibration reference.

struct CalibrationReference::Impl {
  std::string source, format;
  std::string source_text;  // the calibration text's name
  LlamaConfig config;
  RopeStyle rope = RopeStyle::Neox;
  std::map<std::string, Tensor> tensors;
  int64_t ctx = 0, V = 0;
  std::vector<int32_t> ids;
  std::vector<std::vector<int32_t>> inputs, targets;  // per window
  int64_t rows = 0;
  std::vector<float> p;                   // [rows, V] reference probabilities
  std::vector<double> negent, psum;       // sum p log p, sum p (per row)
  std::vector<int32_t> target, argmax;    // per row
  double ref_nll = 0, ref_seconds = 0;

  Checkpoint variant(const std::map<std::string, Tensor>* replaced) const {
    Checkpoint c;
    c.source = source;
    c.format = format;
    c.config = config;
    c.rope_style = rope;
    c.tensors = tensors;
    if (replaced)
      for (const auto& [n, t] : *replaced) {
        GP_CHECK(c.tensors.count(n), "[calibration] ", source, " has no tensor ", n, " to replace");
        c.tensors[n] = t;
      }
    return c;
  }

  // Runs every window through m; fn(row, logits) for each scored row, in parallel within a window.
  template <typename Fn>
  void each_row(const LlamaModel& m, Fn fn) const {
    Session s(m, ctx);
    int64_t row0 = 0;
    for (size_t w = 0; w < inputs.size(); ++w) {
      s.reset();
      const Tensor logits = m.forward(s, inputs[w], LogitsFor::All);
      const int64_t T = int64_t(targets[w].size());
      GP_CHECK(logits.size(1) == V, "[calibration] model gives ", logits.size(1), " logits, expected ", V);
#pragma omp parallel for num_threads(num_threads()) schedule(static)
      for (int64_t t = 0; t < T; ++t) fn(row0 + t, logits.row<float>(t));
      row0 += T;
    }
  }

  void init(const Checkpoint& ck, std::vector<int32_t> all, int32_t bos, const CalibrationOptions& opt) {
    source = ck.source;
    source_text = opt.source;
    format = ck.format;
    config = ck.config;
    rope = ck.rope_style;
    tensors = ck.tensors;
    ctx = opt.ctx;
    V = config.vocab_size;
    const char* op = "[calibration] ";
    GP_CHECK(ctx >= 2, op, "--ctx must be at least 2, got ", ctx);
    GP_CHECK(ctx <= config.max_position_embeddings, op, "--ctx ", ctx, " exceeds the model's context of ",
             config.max_position_embeddings, " tokens");
    const int64_t have = int64_t(all.size());
    GP_CHECK(have >= ctx, op, opt.source, ": ", have, " tokens with the model's tokenizer, fewer than one window of --ctx ",
             ctx, " tokens; use a longer calibration text or a smaller --ctx");
    if (opt.max_tokens > 0) {
      GP_CHECK(opt.max_tokens >= ctx, op, "--tokens ", opt.max_tokens, " is fewer than one window of --ctx ", ctx);
      GP_CHECK(have >= opt.max_tokens, op, opt.source, ": ", have, " tokens with the model's tokenizer, but --tokens ",
               opt.max_tokens, " were requested; use a longer calibration text or fewer --tokens");
      all.resize(size_t(opt.max_tokens));
    }
    for (int32_t id : all)
      GP_CHECK(id >= 0 && id < V, op, opt.source, ": token id ", id, " is outside the model's vocabulary of ", V);
    ids = std::move(all);
    for (size_t start = 0; start < ids.size(); start += size_t(ctx)) {
      const size_t end = std::min(ids.size(), start + size_t(ctx));
      std::vector<int32_t> in, tg;
      if (bos >= 0) {
        in.push_back(bos);
        in.insert(in.end(), ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end) - 1);
        tg.assign(ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end));
      } else {
        if (end - start < 2) continue;
        in.assign(ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end) - 1);
        tg.assign(ids.begin() + ptrdiff_t(start) + 1, ids.begin() + ptrdiff_t(end));
      }
      rows += int64_t(tg.size());
      target.insert(target.end(), tg.begin(), tg.end());
      inputs.push_back(std::move(in));
      targets.push_back(std::move(tg));
    }
    const double gb = double(rows) * double(V) * 4 / 1e9;
    GP_CHECK(gb <= 8, op, rows, " tokens x ", V, " vocabulary need ", gb,
             " GB of reference probabilities; use fewer --tokens");
    p.assign(size_t(rows) * size_t(V), 0.f);
    negent.assign(size_t(rows), 0);
    psum.assign(size_t(rows), 0);
    argmax.assign(size_t(rows), 0);
    std::vector<double> nll(static_cast<size_t>(rows));
    const auto t0 = Clock::now();
    LlamaModel m(variant(nullptr));
    each_row(m, [&](int64_t r, const float* z) {
      double mx = -INFINITY;
      int32_t am = 0;
      for (int64_t i = 0; i < V; ++i)
        if (z[i] > mx) mx = z[i], am = int32_t(i);
      double sum = 0;
      for (int64_t i = 0; i < V; ++i) sum += std::exp(double(z[i]) - mx);
      const double lse = mx + std::log(sum);
      float* pr = &p[size_t(r) * size_t(V)];
      double ne = 0, ps = 0;
      for (int64_t i = 0; i < V; ++i) {
        const double lp = double(z[i]) - lse;
        pr[i] = float(std::exp(lp));
        ps += pr[i];
        ne += double(pr[i]) * lp;
      }
      negent[size_t(r)] = ne;
      psum[size_t(r)] = ps;
      argmax[size_t(r)] = am;
      nll[size_t(r)] = lse - double(z[target[size_t(r)]]);
    });
    ref_seconds = since(t0);
    ref_nll = std::accumulate(nll.begin(), nll.end(), 0.0) / double(rows);
  }

  CalibrationScore score(const LlamaModel& m) const {
    std::vector<double> kl(static_cast<size_t>(rows)), nll(static_cast<size_t>(rows));
    std::vector<uint8_t> agree(static_cast<size_t>(rows));
    each_row(m, [&](int64_t r, const float* z) {
      double mx = -INFINITY;
      int32_t am = 0;
      for (int64_t i = 0; i < V; ++i)
        if (z[i] > mx) mx = z[i], am = int32_t(i);
      double sum = 0, dot = 0;
      const float* pr = &p[size_t(r) * size_t(V)];
      for (int64_t i = 0; i < V; ++i) {
        sum += std::exp(double(z[i]) - mx);
        dot += double(pr[i]) * double(z[i]);
      }
      const double lse = mx + std::log(sum);
      kl[size_t(r)] = std::max(0.0, negent[size_t(r)] - (dot - lse * psum[size_t(r)]));
      nll[size_t(r)] = lse - double(z[target[size_t(r)]]);
      agree[size_t(r)] = am == argmax[size_t(r)];
    });
    CalibrationScore s;
    s.tokens = rows;
    for (int64_t r = 0; r < rows; ++r) {
      s.kl += kl[size_t(r)];
      s.kl_max = std::max(s.kl_max, kl[size_t(r)]);
      s.nll += nll[size_t(r)];
      s.top1 += agree[size_t(r)];
    }
    s.kl /= double(rows);
    s.nll /= double(rows);
    s.top1 /= double(rows);
    s.dloss = s.nll - ref_nll;
    return s;
  }
};

CalibrationReference::CalibrationReference(const Checkpoint& ck, const std::string& text, const CalibrationOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  GP_CHECK(ck.tokenizer != nullptr, "[calibration] ", ck.source, " has no tokenizer to encode ", opt.source);
  impl_->init(ck, ck.tokenizer->encode(text, false), ck.tokenizer->bos_id(), opt);
}

CalibrationReference::CalibrationReference(const Checkpoint& ck, const std::vector<int32_t>& ids, int32_t bos,
                                           const CalibrationOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->init(ck, ids, bos, opt);
}

CalibrationReference::~CalibrationReference() = default;
CalibrationReference::CalibrationReference(CalibrationReference&&) noexcept = default;

CalibrationScore CalibrationReference::score(const Checkpoint& v) const {
  GP_CHECK(v.config.vocab_size == impl_->V && v.config.hidden_size == impl_->config.hidden_size &&
               v.config.num_hidden_layers == impl_->config.num_hidden_layers,
           "[calibration] ", v.source, " does not have the reference model's shape (", impl_->source, ")");
  return impl_->score(LlamaModel(share_weights(v)));
}

CalibrationScore CalibrationReference::score_with(const std::map<std::string, Tensor>& replaced) const {
  return impl_->score(LlamaModel(impl_->variant(&replaced)));
}

int64_t CalibrationReference::ctx() const { return impl_->ctx; }
int64_t CalibrationReference::tokens() const { return impl_->rows; }
const std::vector<int32_t>& CalibrationReference::ids() const { return impl_->ids; }
double CalibrationReference::reference_nll() const { return impl_->ref_nll; }
double CalibrationReference::seconds_per_score() const { return impl_->ref_seconds; }

ActivationStats CalibrationReference::activation_stats(const Checkpoint& ck, bool gram) const {
  return collect_activation_stats(ck, impl_->ids, impl_->ctx, gram, std::min<int64_t>(256, int64_t(impl_->ids.size())));
}

// The embedding's "input" is one-hot, so its mean squares are the token frequencies.
std::vector<float> CalibrationReference::lookup_row_weights() const {
  std::vector<float> freq(size_t(impl_->V), 0.f);
  for (int32_t id : impl_->ids) freq[size_t(id)] += 1.f / float(impl_->ids.size());
  return freq;
}

std::string CalibrationReference::describe() const {
  return cat(impl_->source_text, ": ", impl_->rows, " tokens in windows of ", impl_->ctx, ", reference ppl ",
             std::exp(impl_->ref_nll));
}

// ---------------------------------------------------------------------------------------------
// Measurement.

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  GP_CHECK(a.size() == b.size(), "[spearman] ", a.size(), " values against ", b.size());
  const size_t n = a.size();
  if (n < 2) return kNaN;
  auto ranks = [n](const std::vector<double>& x) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && x[idx[j + 1]] == x[idx[i]]) ++j;
      const double avg = 0.5 * double(i + j) + 1.0;  // ranks from 1; ties share their mean
      for (size_t k = i; k <= j; ++k) r[idx[k]] = avg;
      i = j + 1;
    }
    return r;
  };
  const auto ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / double(n);
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

namespace {

void fill_correlations(SensitivityMap& m) {
  m.spearman = kNaN;
  m.spearman_by_format.clear();
  if (!m.measured) return;
  std::vector<double> kl, px;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;
  for (const auto& e : m.entries) {
    if (!e.measured || !std::isfinite(e.kl) || !std::isfinite(e.proxy)) continue;
    kl.push_back(e.kl);
    px.push_back(e.proxy);
    auto& f = by[dtype_name(e.format)];
    f.first.push_back(e.kl);
    f.second.push_back(e.proxy);
  }
  m.spearman = spearman(px, kl);
  for (const auto& [f, v] : by) m.spearman_by_format[f] = spearman(v.second, v.first);
}

// sum_i w[i] * sum_n (a[n, i] - b[n, i])^2 over [N, K] row-major f32 matrices (w null: all 1).
double weighted_error(const float* a, const float* b, int64_t N, int64_t K, const float* w) {
  std::vector<double> col(size_t(K), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < K; ++i) {
      const double d = double(a[n * K + i]) - double(b[n * K + i]);
      col[size_t(i)] += d * d;
    }
  double s = 0;
  for (int64_t i = 0; i < K; ++i) s += (w ? double(w[i]) : 1.0) * col[size_t(i)];
  return s;
}

}  // namespace

SensitivityMap measure_sensitivity(const Checkpoint& ck, const Calibration& ref, const SensitivityOptions& opt) {
  const auto t0 = Clock::now();
  GP_CHECK(!opt.formats.empty(), "[sensitivity] no candidate formats");
  for (DType f : opt.formats)
    GP_CHECK(!traits(f).is_float || f == DType::F16 || f == DType::BF16, "[sensitivity] ", dtype_name(f),
             " is not a quantization format");
  SensitivityMap m;
  m.model = ck.source;
  m.method = quant_method_name(opt.quant.method);
  m.metric = ref.metric();
  m.ctx = ref.ctx();
  m.tokens = ref.tokens();
  m.reference_nll = ref.reference_nll();
  m.formats = opt.formats;
  m.measured = opt.measure;
  const bool anchored = opt.measure && opt.anchor != DType::F32;
  if (anchored) m.anchor = dtype_name(opt.anchor);
  for (const auto& [n, t] : ck.tensors) m.total_source_bytes += int64_t(t.nbytes());

  std::map<std::string, TensorRole> roles;
  std::vector<std::string> names;
  for (TensorRole& r : family_of(ck).quantizable(ck)) {
    names.push_back(r.name);
    roles.emplace(r.name, std::move(r));
  }
  GP_CHECK(!names.empty(), "[sensitivity] ", ck.source, " has no quantizable tensors");
  const ActivationStats stats = ref.activation_stats(ck, opt.quant.method == QuantMethod::Gptq);
  GP_CHECK(opt.quant.method == QuantMethod::Rtn || !stats.mean_sq.empty(), "[sensitivity] the ",
           quant_method_name(opt.quant.method), " method needs activation statistics, which the calibration of ",
           ck.source, " does not collect; use rtn");
  if (stats.mean_sq.empty())
    m.notes.push_back("the calibration collects no activation statistics: each proxy is the unweighted squared error");
  QuantizeOptions q = opt.quant;
  q.stats = &stats;
  const std::vector<float> freq = ref.lookup_row_weights();  // the lookup table's rows, if any

  auto fits = [](DType f, int64_t K) { return K % traits(f).block_size == 0; };
  // The format measured for each tensor in an anchored map.
  auto anchor_of = [&](int64_t K) {
    if (fits(opt.anchor, K)) return opt.anchor;
    for (DType f : opt.formats)
      if (fits(f, K)) return f;
    return DType::F32;
  };
  int64_t total = 0;
  for (const auto& n : names) {
    const Tensor& w = ck.tensors.at(n);
    if (anchored) total += anchor_of(w.size(1)) != DType::F32;
    else
      for (DType f : opt.formats) total += fits(f, w.size(1));
  }
  Progress bar("sensitivity", total);
  int64_t done = 0;
  for (const auto& n : names) {
    const Tensor& src = ck.tensors.at(n);
    GP_CHECK(src.ndim() == 2, "[sensitivity] ", n, " is ", src.describe(), ", expected a matrix");
    SensitivityTensor st;
    st.name = n;
    const TensorRole& role = roles.at(n);
    st.layer = role.layer;
    st.kind = role.kind;
    st.elements = src.numel();
    st.source_dtype = src.dtype();
    st.source_bytes = int64_t(src.nbytes());
    m.tensors.push_back(st);
    const int64_t N = src.size(0), K = src.size(1);
    const Tensor w32 = src.dtype() == DType::F32 ? src.clone() : src.to(DType::F32);

    // Input weights for the proxy: the matrix's input mean squares; for the embedding (a lookup,
    // its input one-hot) the token frequencies over its rows, plus its head role when tied.
    const float* colw = nullptr;
    auto ms = stats.mean_sq.find(n);
    const bool have_ms = ms != stats.mean_sq.end() && int64_t(ms->second.size()) == K;
    if (have_ms) colw = ms->second.data();
    if (st.kind != "embed" && !have_ms && !stats.mean_sq.empty())
      m.notes.push_back(cat(n, ": no activation statistics; its proxy is the unweighted squared error"));

    // Anchored: the anchor first (measured), then the other formats (estimated from it).
    std::vector<DType> order = opt.formats;
    const DType anchor = anchored ? anchor_of(K) : DType::F32;
    if (anchored && anchor != DType::F32) {
      if (anchor != opt.anchor)
        m.notes.push_back(cat(n, ": anchor ", dtype_name(opt.anchor), " does not fit rows of ", K, "; measured ",
                              dtype_name(anchor), " instead"));
      order.erase(std::remove(order.begin(), order.end(), anchor), order.end());
      order.insert(order.begin(), anchor);
    }
    const size_t first_entry = m.entries.size();
    double anchor_kl = kNaN, anchor_dloss = kNaN, anchor_proxy = kNaN;
    for (DType f : order) {
      if (K % traits(f).block_size != 0) {
        m.notes.push_back(cat(n, ": ", dtype_name(f), " skipped (rows of ", K, " are not a multiple of its block of ",
                              traits(f).block_size, ")"));
        continue;
      }
      bar.update(done, cat(n, " ", dtype_name(f)));
      SensitivityEntry e;
      e.tensor = n;
      e.format = f;
      const Tensor wq = quantize_matrix(w32, f, q, n);
      e.bytes = int64_t(wq.nbytes());
      e.bpw = double(e.bytes) * 8.0 / double(st.elements);
      const Tensor deq = wq.to(DType::F32);
      const float* a = w32.data<float>();
      const float* b = deq.data<float>();
      if (st.kind == "embed" && int64_t(freq.size()) == N) {
        double s = 0;
        for (int64_t r = 0; r < N; ++r) {
          if (freq[size_t(r)] == 0) continue;
          double row = 0;
          for (int64_t i = 0; i < K; ++i) {
            const double d = double(a[r * K + i]) - double(b[r * K + i]);
            row += d * d;
          }
          s += double(freq[size_t(r)]) * row;
        }
        // Tied: the same matrix is the output head, whose input statistics the map may hold.
        if (have_ms && ck.config.tie_word_embeddings) s += weighted_error(a, b, N, K, colw);
        e.proxy = s;
      } else {
        e.proxy = weighted_error(a, b, N, K, colw);
      }
      if (opt.measure && (!anchored || f == anchor)) {
        const CalibrationScore sc = ref.score_with({{n, wq}});
        e.kl = sc.kl;
        e.dloss = sc.dloss;
        if (anchored) anchor_kl = e.kl, anchor_dloss = e.dloss, anchor_proxy = e.proxy;
        bar.update(++done, cat(n, " ", dtype_name(f), " KL ", e.kl));
      } else if (anchored) {
        // The proxy's ratio between formats of one tensor tracks the KL's (both are second
        // order in the weight error); its scale across tensors does not, hence the anchor.
        const double r = anchor_proxy > 0 ? e.proxy / anchor_proxy : 1.0;
        e.kl = anchor_kl * r;
        e.dloss = anchor_dloss * r;
        e.measured = false;
      } else {
        e.kl = e.dloss = kNaN;
        e.measured = false;
        bar.update(++done, cat(n, " ", dtype_name(f)));
      }
      m.entries.push_back(e);
    }
    // Entries in the order of `formats` whatever was measured first.
    std::stable_sort(m.entries.begin() + ptrdiff_t(first_entry), m.entries.end(),
                     [&](const SensitivityEntry& a, const SensitivityEntry& b) {
                       auto pos = [&](DType f) { return std::find(opt.formats.begin(), opt.formats.end(), f) - opt.formats.begin(); };
                       return pos(a.format) < pos(b.format);
                     });
  }
  bar.finish();
  fill_correlations(m);
  m.seconds = since(t0);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Files: the map read back (quant's auto plan consumes it). Its writers, CSV, JSON and SVG,
// are in the report layer (src/report/sensitivity_report.cpp).

namespace {

double jget(const Json& j) { return j.is_null() ? kNaN : j.as_number(); }

}  // namespace

SensitivityMap read_sensitivity_json(const std::string& path) {
  const Json j = Json::parse_file(path);
  const Json* kind = j.find("kind");
  GP_CHECK(kind && kind->is_string() && kind->as_string() == "genperf-sensitivity", "[sensitivity] ", path,
           ": not a genperf sensitivity map (kind must be \"genperf-sensitivity\")");
  GP_CHECK(j.at("version").as_int() == 1, "[sensitivity] ", path, ": unsupported version ", j.at("version").as_int());
  SensitivityMap m;
  m.model = j.at("model").as_string();
  m.calib = j.at("calib").as_string();
  m.method = j.at("method").as_string();
  if (const Json* metric = j.find("metric")) m.metric = metric->as_string();  // maps before it was written: kl
  m.ctx = j.at("ctx").as_int();
  m.tokens = j.at("tokens").as_int();
  m.reference_nll = j.at("reference_nll").as_number();
  m.measured = j.at("measured").as_bool();
  m.anchor = j.at("anchor").as_string();
  m.total_source_bytes = j.at("total_source_bytes").as_int();
  m.seconds = j.at("seconds").as_number();
  for (const Json& f : j.at("formats").as_array()) m.formats.push_back(parse_dtype(f.as_string()));
  for (const Json& n : j.at("notes").as_array()) m.notes.push_back(n.as_string());
  // The map feeds the allocation and the writers, which take it as measure_sensitivity makes it:
  // check what they rely on, so that a damaged or hand-edited file is an error naming it.
  auto check = [&](bool ok, const auto&... what) { GP_CHECK(ok, "[sensitivity] ", path, ": ", what...); };
  check(m.ctx >= 0 && m.tokens >= 0, "ctx ", m.ctx, " and tokens ", m.tokens, " must not be negative");
  check(!m.formats.empty(), "no formats");
  for (size_t i = 0; i < m.formats.size(); ++i)
    for (size_t k = 0; k < i; ++k) check(m.formats[i] != m.formats[k], "format ", dtype_name(m.formats[i]), " listed twice");
  std::set<std::string> names;
  std::set<std::pair<int, std::string>> places;
  std::set<std::string> kinds_in_blocks;
  int64_t source_bytes = 0;
  for (const Json& t : j.at("tensors").as_array()) {
    SensitivityTensor st;
    st.name = t.at("name").as_string();
    const int64_t layer = t.at("layer").as_int();
    st.kind = t.at("kind").as_string();
    st.elements = t.at("elements").as_int();
    st.source_dtype = parse_dtype(t.at("source_dtype").as_string());
    st.source_bytes = t.at("source_bytes").as_int();
    check(st.elements > 0 && st.source_bytes > 0, "tensor ", st.name, " has no size");
    check(st.source_bytes <= (int64_t(1) << 50) - source_bytes, "tensor ", st.name, " has ", st.source_bytes,
          " bytes, more than any model");
    source_bytes += st.source_bytes;
    check(st.elements <= st.source_bytes * 8, "tensor ", st.name, " has ", st.elements, " elements in ",
          st.source_bytes, " bytes");
    // Tensors outside the blocks have layer -1 (the embedding and the head always); a kind is
    // either always outside or always in the blocks.
    const bool outside = st.kind == "embed" || st.kind == "head";
    check(outside ? layer == -1 : layer >= -1 && layer < (1 << 20), "tensor ", st.name, " of kind '", st.kind,
          "' has layer ", layer,
          outside ? " (the embedding and the head have -1)" : " (expected 0 to 1048575 in the blocks, -1 outside)");
    st.layer = int(layer);
    if (layer >= 0) kinds_in_blocks.insert(st.kind);
    check(names.insert(st.name).second, "tensor ", st.name, " listed twice");
    check(places.insert({st.layer, st.kind}).second, "two tensors of kind '", st.kind, "' in layer ", st.layer);
    m.tensors.push_back(st);
  }
  for (const SensitivityTensor& st : m.tensors)  // a kind is either outside the blocks or in them
    check(st.layer >= 0 || !kinds_in_blocks.count(st.kind), "tensor ", st.name, " of kind '", st.kind,
          "' has layer -1, but other tensors of that kind are in the blocks");
  check(m.total_source_bytes >= source_bytes, "total_source_bytes ", m.total_source_bytes,
        " is less than its quantizable tensors' ", source_bytes);
  std::set<std::pair<std::string, DType>> seen;
  for (const Json& x : j.at("entries").as_array()) {
    SensitivityEntry e;
    e.tensor = x.at("tensor").as_string();
    const SensitivityTensor* t = m.find_tensor(e.tensor);
    check(t, "entry for unknown tensor ", e.tensor);
    e.format = parse_dtype(x.at("format").as_string());
    const std::string what = cat("entry ", e.tensor, " ", dtype_name(e.format));
    check(std::find(m.formats.begin(), m.formats.end(), e.format) != m.formats.end(), what, ": format not in \"formats\"");
    check(seen.insert({e.tensor, e.format}).second, what, " listed twice");
    e.bytes = x.at("bytes").as_int();
    e.bpw = x.at("bpw").as_number();
    e.kl = jget(x.at("kl"));
    e.dloss = jget(x.at("dloss"));
    e.proxy = jget(x.at("proxy"));
    e.measured = x.at("measured").as_bool();
    check(e.bytes > 0 && e.bytes <= t->source_bytes * 8, what, " has ", e.bytes, " bytes (tensor of ", t->source_bytes,
          " source bytes)");
    check(std::isfinite(e.bpw) && e.bpw > 0, what, " has bpw ", e.bpw);
    m.entries.push_back(e);
  }
  const Json& c = j.at("correlation");
  m.spearman = jget(c.at("all"));
  for (const auto& [f, r] : c.at("by_format").as_object()) m.spearman_by_format[f] = jget(r);
  return m;
}

}  // namespace genperf
