// Perplexity, multiple choice and KL divergence over a Llama model.
#include <algorithm>
#include <cmath>
#include <fstream>

#include "genperf/error.h"
#include "genperf/eval.h"
#include "genperf/json.h"
#include "genperf/progress.h"

namespace genperf {

void log_softmax(const float* x, int64_t n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
}

namespace {

const Tokenizer& need_tokenizer(const LlamaModel& m, const char* op) {
  GP_CHECK(m.tokenizer() != nullptr, "[", op, "] ", m.source(), " has no tokenizer");
  return *m.tokenizer();
}

// One evaluation window: the tokens fed and, for each fed position, the token it predicts
// (-1 where nothing is scored).
struct Window {
  std::vector<int32_t> input, target;
};

std::vector<Window> make_windows(const Tokenizer& tok, const std::string& text, int64_t ctx,
                                 int64_t max_ctx, const char* op) {
  GP_CHECK(ctx >= 2, "[", op, "] --ctx must be at least 2, got ", ctx);
  GP_CHECK(ctx <= max_ctx, "[", op, "] --ctx ", ctx, " exceeds the model's context of ", max_ctx,
           " tokens (max_position_embeddings)");
  const std::vector<int32_t> ids = tok.encode(text, false);
  const int32_t bos = tok.bos_id();
  std::vector<Window> w;
  for (size_t start = 0; start < ids.size(); start += size_t(ctx)) {
    const size_t end = std::min(ids.size(), start + size_t(ctx));
    Window win;
    if (bos >= 0) {
      win.input.push_back(bos);
      win.input.insert(win.input.end(), ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end) - 1);
      win.target.assign(ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end));
    } else {
      if (end - start < 2) continue;
      win.input.assign(ids.begin() + ptrdiff_t(start), ids.begin() + ptrdiff_t(end) - 1);
      win.target.assign(ids.begin() + ptrdiff_t(start) + 1, ids.begin() + ptrdiff_t(end));
    }
    w.push_back(std::move(win));
  }
  GP_CHECK(!w.empty(), "[", op, "] the text gives no tokens to score");
  return w;
}

}  // namespace

PerplexityResult perplexity(const LlamaModel& m, const std::string& text, int64_t ctx, bool progress) {
  const auto windows = make_windows(need_tokenizer(m, "ppl"), text, ctx, m.config().max_position_embeddings, "ppl");
  Session s(m, ctx);
  PerplexityResult r;
  double total = 0;
  std::vector<double> lp;
  Progress bar("ppl", int64_t(windows.size()));
  for (const auto& w : windows) {
    s.reset();
    Tensor logits = m.forward(s, w.input, LogitsFor::All);
    for (size_t t = 0; t < w.target.size(); ++t) {
      log_softmax(logits.row<float>(int64_t(t)), logits.size(1), lp);
      total -= lp[size_t(w.target[t])];
      ++r.tokens;
    }
    ++r.windows;
    if (progress) bar.update(r.windows, cat("ppl ", std::exp(total / double(r.tokens))));
  }
  r.nll = total / double(r.tokens);
  r.ppl = std::exp(r.nll);
  return r;
}

std::vector<McTask> read_mc_tasks(const std::string& path) {
  std::ifstream in(path);
  GP_CHECK(in.good(), "[mc] cannot open ", path);
  std::vector<McTask> tasks;
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = cat(path, ":", no);
    const Json j = Json::parse(line, where);
    GP_CHECK(j.is_object(), "[mc] ", where, ": expected a JSON object");
    McTask t;
    const Json* c = j.find("context");
    const Json* ch = j.find("choices");
    const Json* g = j.find("gold");
    GP_CHECK(c && c->is_string(), "[mc] ", where, ": 'context' must be a string");
    GP_CHECK(ch && ch->is_array() && ch->as_array().size() >= 2, "[mc] ", where,
             ": 'choices' must be an array of at least two strings");
    GP_CHECK(g && g->is_number(), "[mc] ", where, ": 'gold' must be an integer");
    t.context = c->as_string();
    for (const Json& x : ch->as_array()) {
      GP_CHECK(x.is_string() && !x.as_string().empty(), "[mc] ", where, ": every choice must be a non-empty string");
      t.choices.push_back(x.as_string());
    }
    const int64_t gold = g->as_int();
    GP_CHECK(gold >= 0 && gold < int64_t(t.choices.size()), "[mc] ", where, ": gold ", gold,
             " is not a valid choice index");
    t.gold = int(gold);
    tasks.push_back(std::move(t));
  }
  GP_CHECK(!tasks.empty(), "[mc] ", path, ": no tasks");
  return tasks;
}

namespace {

// Summed log-probability of tokens w[from..] given the session's prefix w[..from), where `logits`
// holds the prediction for w[from] in row `row` (the rest is computed by continuing the session).
double continuation_logprob(const LlamaModel& m, Session& s, const Tensor& logits, int64_t row,
                            const std::vector<int32_t>& w, size_t from, std::vector<double>& lp) {
  log_softmax(logits.row<float>(row), logits.size(1), lp);
  double score = lp[size_t(w[from])];
  if (from + 1 < w.size()) {
    s.truncate(int64_t(from));
    Tensor l = m.forward(s, std::span(w).subspan(from, w.size() - from - 1), LogitsFor::All);
    for (size_t i = from + 1; i < w.size(); ++i) {
      log_softmax(l.row<float>(int64_t(i - from - 1)), l.size(1), lp);
      score += lp[size_t(w[i])];
    }
  }
  return score;
}

}  // namespace

McResult multiple_choice(const LlamaModel& m, const std::vector<McTask>& tasks, bool progress) {
  const Tokenizer& tok = need_tokenizer(m, "mc");
  const int64_t max_ctx = m.config().max_position_embeddings;
  const int32_t bos = tok.bos_id();
  McResult r;
  std::vector<double> lp;
  Progress bar("mc", int64_t(tasks.size()));
  int64_t correct = 0, correct_norm = 0, correct_pmi = 0;
  for (const McTask& t : tasks) {
    // The context is run once; each choice continues from the longest prefix it shares with
    // the context's tokens (tokenizing context + choice together, as lm-evaluation-harness does).
    const std::vector<int32_t> ctx = tok.encode(t.context, true);
    GP_CHECK(!ctx.empty(), "[mc] a task's context encodes to no tokens and the tokenizer has no BOS");
    std::vector<std::vector<int32_t>> whole;
    size_t longest = 0;
    for (const auto& ch : t.choices) {
      whole.push_back(tok.encode(t.context + ch, true));
      longest = std::max(longest, whole.back().size());
    }
    Session s(m, std::min<int64_t>(max_ctx, int64_t(std::max(longest, ctx.size()))));
    GP_CHECK(int64_t(longest) <= max_ctx, "[mc] a task of ", longest, " tokens exceeds the model's context of ", max_ctx);
    Tensor ctx_logits = m.forward(s, ctx, LogitsFor::All);
    // For the PMI score: the same choice tokens after BOS alone.
    Session su(m, std::min<int64_t>(max_ctx, int64_t(longest) + 1));
    Tensor bos_logits;
    if (bos >= 0) {
      const int32_t b = bos;
      bos_logits = m.forward(su, std::span<const int32_t>(&b, 1), LogitsFor::All);
    }
    double best = -INFINITY, best_norm = -INFINITY, best_pmi = -INFINITY;
    int pick = 0, pick_norm = 0, pick_pmi = 0;
    for (size_t c = 0; c < t.choices.size(); ++c) {
      const auto& w = whole[c];
      size_t n = 0;
      while (n < ctx.size() && n < w.size() && ctx[n] == w[n]) ++n;
      n = std::max<size_t>(n, 1);  // the first token is always context (BOS or the first piece)
      GP_CHECK(n < w.size(), "[mc] choice '", t.choices[c], "' adds no tokens to its context");
      const double score = continuation_logprob(m, s, ctx_logits, int64_t(n) - 1, w, n, lp);
      const double norm = score / double(t.choices[c].size());
      double pmi = score;
      if (bos >= 0) {
        std::vector<int32_t> u = {bos};
        u.insert(u.end(), w.begin() + int64_t(n), w.end());
        pmi -= continuation_logprob(m, su, bos_logits, 0, u, 1, lp);
      }
      if (score > best) best = score, pick = int(c);
      if (norm > best_norm) best_norm = norm, pick_norm = int(c);
      if (pmi > best_pmi) best_pmi = pmi, pick_pmi = int(c);
    }
    r.predictions.push_back(pick);
    r.predictions_norm.push_back(pick_norm);
    r.predictions_pmi.push_back(pick_pmi);
    correct += pick == t.gold;
    correct_norm += pick_norm == t.gold;
    correct_pmi += pick_pmi == t.gold;
    ++r.n;
    if (progress) bar.update(r.n, cat("acc ", double(correct) / double(r.n)));
  }
  r.acc = double(correct) / double(r.n);
  r.acc_norm = double(correct_norm) / double(r.n);
  r.acc_pmi = double(correct_pmi) / double(r.n);
  return r;
}

KlResult kl_divergence(const LlamaModel& m, const LlamaModel& ref, const std::string& text, int64_t ctx,
                       bool progress) {
  GP_CHECK(m.config().vocab_size == ref.config().vocab_size, "[kl] ", m.source(), " has ",
           m.config().vocab_size, " tokens in its vocabulary, the reference ", ref.source(), " has ",
           ref.config().vocab_size);
  const int64_t max_ctx = std::min(m.config().max_position_embeddings, ref.config().max_position_embeddings);
  const auto windows = make_windows(need_tokenizer(ref, "kl"), text, ctx, max_ctx, "kl");
  Session sm(m, ctx), sr(ref, ctx);
  std::vector<double> kls, lpm, lpr;
  double nll_m = 0, nll_r = 0;
  int64_t agree = 0;
  Progress bar("kl", int64_t(windows.size()));
  int64_t done = 0;
  for (const auto& w : windows) {
    sm.reset();
    sr.reset();
    Tensor lm = m.forward(sm, w.input, LogitsFor::All);
    Tensor lr = ref.forward(sr, w.input, LogitsFor::All);
    const int64_t V = lm.size(1);
    for (size_t t = 0; t < w.target.size(); ++t) {
      log_softmax(lm.row<float>(int64_t(t)), V, lpm);
      log_softmax(lr.row<float>(int64_t(t)), V, lpr);
      double kl = 0;
      for (int64_t i = 0; i < V; ++i) kl += std::exp(lpr[size_t(i)]) * (lpr[size_t(i)] - lpm[size_t(i)]);
      kls.push_back(std::max(kl, 0.0));
      agree += std::max_element(lpm.begin(), lpm.end()) - lpm.begin() ==
               std::max_element(lpr.begin(), lpr.end()) - lpr.begin();
      nll_m -= lpm[size_t(w.target[t])];
      nll_r -= lpr[size_t(w.target[t])];
    }
    if (progress) bar.update(++done);
  }
  KlResult r;
  r.tokens = int64_t(kls.size());
  double sum = 0;
  for (double k : kls) sum += k;
  r.kl_mean = sum / double(r.tokens);
  std::vector<double> sorted = kls;
  std::sort(sorted.begin(), sorted.end());
  // 99th percentile by linear interpolation between order statistics.
  const double pos = 0.99 * double(sorted.size() - 1);
  const size_t lo = size_t(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  r.kl_p99 = sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
  r.kl_max = sorted.back();
  r.top1_agreement = double(agree) / double(r.tokens);
  r.ppl_model = std::exp(nll_m / double(r.tokens));
  r.ppl_ref = std::exp(nll_r / double(r.tokens));
  return r;
}

}  // namespace genperf
