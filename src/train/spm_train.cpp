// SentencePiece tokenizer training through libsentencepiece's trainer (the same code spm_train
// runs), so `genperf train` makes its own tokenizer from the corpus.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <unordered_map>

#include "genperf/error.h"
#include "genperf/train_data.h"

// Exported by libsentencepiece but declared only in its private headers: the trainer's
// INFO lines would bury genperf's own output.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
int GetMinLogLevel();
}  // namespace sentencepiece::logging

namespace genperf {

void train_sentencepiece(const std::vector<std::string>& inputs, const std::string& model_path,
                         int vocab_size, uint64_t seed, int64_t max_sentences) {
  namespace fs = std::filesystem;
  GP_CHECK(!inputs.empty(), "[tokenizer] no input text to train on");
  GP_CHECK(vocab_size >= 64, "[tokenizer] vocabulary size ", vocab_size, " is too small (at least 64)");
  std::string joined;
  for (const std::string& in : inputs) {
    std::error_code ec;
    GP_CHECK(fs::is_regular_file(in, ec) && fs::file_size(in, ec) > 0, "[tokenizer] ", in,
             ": not a readable, non-empty text file");
    GP_CHECK(in.find(',') == std::string::npos, "[tokenizer] ", in,
             ": file names with commas cannot be passed to the SentencePiece trainer");
    joined += (joined.empty() ? "" : ",") + in;
  }
  // The trainer writes <prefix>.model and <prefix>.vocab; both go to temporary names and the
  // model is renamed into place only when training succeeded.
  const std::string prefix = model_path + ".tmp" + std::to_string(::getpid());
  sentencepiece::SetRandomGeneratorSeed(unsigned(seed));
  const std::unordered_map<std::string, std::string> args = {
      {"input", joined},
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", "bpe"},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"input_sentence_size", std::to_string(max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "1"},  // deterministic merges
  };
  const int level = sentencepiece::logging::GetMinLogLevel();
  sentencepiece::logging::SetMinLogLevel(1);  // warnings and errors only
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  sentencepiece::logging::SetMinLogLevel(level);
  std::error_code ec;
  fs::remove(prefix + ".vocab", ec);
  if (!status.ok()) {
    fs::remove(prefix + ".model", ec);
    fail("[tokenizer] training on ", joined, " failed: ", status.message());
  }
  fs::rename(prefix + ".model", model_path, ec);
  GP_CHECK(!ec, "[tokenizer] cannot write ", model_path, ": ", ec.message());
}

}  // namespace genperf
