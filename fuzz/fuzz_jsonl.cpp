// Fuzzes the JSONL readers users feed genperf. The first byte picks the reader for the rest:
//   0: multiple-choice tasks (genperf eval mc): {"context", "choices", "gold"} a line;
//   1, 2: prompt/response fine-tuning records (genperf finetune), 2 cutting long records;
//   3: a model's config.json (read_hf_config);
//   4: a sensitivity map (genperf quantize --recipe auto --sensitivity FILE.json), then allocated
//      under three budgets and written back as CSV, JSON and SVG.
// Each reads a file, as users give them. Every outcome is a value or a genperf::Error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_common.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/eval.h"
#include "genperf/json.h"
#include "genperf/report.h"
#include "genperf/sensitivity.h"
#include "genperf/tokenizer.h"
#include "genperf/train_data.h"
#include "io/unicode.h"

namespace {

// A byte-level BPE over the 256 byte tokens with a few merges and an end-of-text token.
const genperf::Tokenizer& tokenizer() {
  static const std::unique_ptr<genperf::Tokenizer> tok = [] {
    genperf::TokenizerVocab v;
    v.model = "gpt2";
    v.pre = "default";
    for (int b = 0; b < 256; ++b) {  // GPT-2's byte-to-character map
      std::string s;
      genperf::unicode::append_utf8(s, genperf::unicode::byte_to_code_point(uint8_t(b)));
      v.tokens.push_back(s);
    }
    v.merges = {"t h", "th e", "\xc4\xa0 t", "a n"};
    for (const auto& m : v.merges) v.tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
    v.tokens.push_back("<|endoftext|>");
    v.token_types.assign(v.tokens.size(), 1);
    v.token_types.back() = 3;
    v.bos_id = v.eos_id = int32_t(v.tokens.size() - 1);
    v.add_bos = false;
    return genperf::tokenizer_from_vocab(v, "fuzz-tokenizer");
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 5;
  const std::string path = genperf_fuzz::scratch_file(data + 1, size - 1, mode >= 3 ? ".json" : ".jsonl");
  try {
    if (mode == 0) {
      (void)genperf::read_mc_tasks(path);
    } else if (mode == 3) {
      (void)genperf::read_hf_config(path);
    } else if (mode == 4) {
      const genperf::SensitivityMap m = genperf::read_sensitivity_json(path);
      for (const genperf::Budget& b : {genperf::Budget::bpw(4.0), genperf::Budget::bytes(double(m.total_source_bytes) / 3),
                                       genperf::Budget::max_kl(0.01)}) {
        try {
          genperf::AllocationReport report;
          (void)genperf::plan_for_budget(m, b, &report);
          (void)report.summary();
        } catch (const genperf::Error&) {
        }
      }
      (void)genperf::sensitivity_csv(m);
      (void)genperf::sensitivity_json(m);
      (void)genperf::sensitivity_svg(m);
    } else {
      const auto seqs = genperf::read_prompt_response(tokenizer(), path, 32, mode == 2);
      (void)seqs;
    }
  } catch (const genperf::Error&) {
  }
  return 0;
}
