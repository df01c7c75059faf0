// Fuzzes the files `genperf finetune` and the training API read back: a PEFT LoRA adapter
// directory (adapter_config.json + adapter_model.safetensors, loaded into a fresh tiny model) and
// a trainer state file (--resume). The first byte picks the reader:
//   even: a 2-byte little-endian length n, n bytes of adapter_config.json, then the safetensors;
//   odd:  the state file.
// Every outcome is a loaded file or a genperf::Error. With GENPERF_FUZZ_SEEDS=DIR set, the target
// first writes valid inputs of both kinds there (genperf's own writers), for scripts/fuzz.sh.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_common.h"
#include "genperf/error.h"
#include "genperf/llama.h"
#include "genperf/train.h"
#include "genperf/trainer.h"

namespace {

// The built-in tiny shape: d 64, 2 layers, 4 heads (2 KV), vocabulary 256.
genperf::LlamaConfig tiny_config() { return genperf::preset_config("tiny"); }

genperf::LoraConfig tiny_lora() {
  genperf::LoraConfig l;
  l.rank = 2;
  l.alpha = 4;
  l.targets = {"q_proj", "v_proj", "down_proj"};
  return l;
}

// Eight sequences of 8 tokens, enough for the trainer's batches; no validation set.
const genperf::TokenSequences& tiny_data() {
  static const genperf::TokenSequences data = [] {
    genperf::TokenSequences d;
    d.T = 8;
    for (int i = 0; i < 8; ++i)
      for (int t = 0; t < 8; ++t) {
        d.tokens.push_back((i * 7 + t * 3) % 40);
        d.targets.push_back((i * 7 + t * 3 + 3) % 40);
      }
    return d;
  }();
  return data;
}

const genperf::TokenSequences& no_validation() {
  static const genperf::TokenSequences none;
  return none;
}

genperf::TrainerConfig tiny_trainer() {
  genperf::TrainerConfig tc;
  tc.batch = 2;
  tc.steps = 4;
  return tc;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_seeds(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::string work = genperf_fuzz::scratch_path(".seeds");
  fs::remove_all(work);
  fs::create_directories(work);
  genperf::TrainModel m(tiny_config(), 3);
  m.enable_lora(tiny_lora());
  m.save_lora_adapter(work + "/adapter");
  const std::string cfg = read_all(work + "/adapter/adapter_config.json");
  const std::string st = read_all(work + "/adapter/adapter_model.safetensors");
  std::string adapter = std::string(1, '\0') + char(cfg.size() & 0xFF) + char(cfg.size() >> 8) + cfg + st;
  std::ofstream(dir + "/adapter", std::ios::binary) << adapter;
  genperf::Trainer t(m, tiny_data(), no_validation(), tiny_trainer());
  t.run(2, "", {});
  t.save_state(work + "/state.safetensors");
  std::ofstream(dir + "/state", std::ios::binary) << std::string(1, '\1') << read_all(work + "/state.safetensors");
  fs::remove_all(work);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("GENPERF_FUZZ_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  try {
    genperf::TrainModel m(tiny_config(), 3);
    if (data[0] % 2 == 0) {
      if (size < 3) return 0;
      const size_t n = std::min<size_t>(size_t(data[1]) | size_t(data[2]) << 8, size - 3);
      const std::string dir = genperf_fuzz::scratch_dir();
      genperf_fuzz::write_file(dir + "/adapter_config.json", data + 3, n);
      genperf_fuzz::write_file(dir + "/adapter_model.safetensors", data + 3 + n, size - 3 - n);
      m.load_lora_adapter(dir);
    } else {
      m.enable_lora(tiny_lora());
      genperf::Trainer t(m, tiny_data(), no_validation(), tiny_trainer());
      t.load_state(genperf_fuzz::scratch_file(data + 1, size - 1, ".state"));
    }
  } catch (const genperf::Error&) {
  }
  return 0;
}
