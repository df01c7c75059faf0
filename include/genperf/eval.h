// How models are judged: perplexity on a text, multiple-choice accuracy on JSONL tasks (as
// lm-evaluation-harness scores them), and the KL divergence of a model's next-token
// distribution from a reference model's (how quantized models are compared with their source).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "genperf/llama.h"

namespace genperf {

struct PerplexityResult {
  double nll = 0;      // mean negative log-likelihood per scored token (nats)
  double ppl = 0;      // exp(nll)
  int64_t tokens = 0;  // scored tokens
  int64_t windows = 0;
};

// The text is tokenized once without BOS and cut into consecutive windows of ctx tokens; each is
// fed as [BOS] + window (without its last token) and every window token is scored. Without a BOS
// token the first token of each window is context only.
PerplexityResult perplexity(const LlamaModel& m, const std::string& text, int64_t ctx, bool progress = false);

struct McTask {
  std::string context;
  std::vector<std::string> choices;
  int gold = 0;
};
// Reads one JSON object a line: {"context": str, "choices": [str, ...], "gold": int}.
// Errors name the file and line.
std::vector<McTask> read_mc_tasks(const std::string& path);

struct McResult {
  double acc = 0, acc_norm = 0;  // fraction correct by summed log-prob / by log-prob per byte
  double acc_pmi = 0;            // by log P(choice | context) - log P(choice | BOS)
  int64_t n = 0;
  std::vector<int> predictions, predictions_norm, predictions_pmi;
};
// Each choice is scored by the summed log-probability of its tokens given the context; acc_norm
// divides by the choice's length in bytes; acc_pmi subtracts the same tokens' log-probability
// after BOS alone (pointwise mutual information with the context, Holtzman et al. 2021's
// "domain-conditional PMI" with BOS as the domain premise): it asks which choice the context
// makes more likely, not which choice is likelier text. Without a BOS token acc_pmi equals acc.
McResult multiple_choice(const LlamaModel& m, const std::vector<McTask>& tasks, bool progress = false);

struct KlResult {
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;  // KL(P_ref || P_model) per token, nats
  double top1_agreement = 0;                   // fraction of tokens where the argmaxes agree
  double ppl_model = 0, ppl_ref = 0;
  double ppl_delta() const { return ppl_model - ppl_ref; }
  int64_t tokens = 0;
};
// Compares the two models' next-token distributions over the same windows as perplexity().
// The models must share a tokenizer (the reference's is used) and vocabulary size.
KlResult kl_divergence(const LlamaModel& m, const LlamaModel& ref, const std::string& text, int64_t ctx,
                       bool progress = false);

// log_softmax of one row of logits, in double.
void log_softmax(const float* logits, int64_t n, std::vector<double>& out);

}  // namespace genperf
