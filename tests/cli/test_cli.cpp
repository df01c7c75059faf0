// The genperf CLI end to end: every verb on a tiny model with a SentencePiece tokenizer trained
// here on real text (Debian's bible-kjv), JSON output, and bad input giving a clear error that
// names the file, a non-zero exit and no partial output.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/test_util.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/runtime.h"

using namespace genperf;
using genperf::testing::CliResult;
using genperf::testing::kGenperf;
using genperf::testing::run_command;
using genperf::testing::run_genperf;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// One model directory for the whole suite: tiny shape, random weights, a real tokenizer.
class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("cli");
    const std::string kjv = *dir_ / "kjv.txt";
    ASSERT_EQ(run_command("bash " + std::string(GENPERF_TEST_DIR) + "/../scripts/data/kjv.sh " + kjv), 0)
        << "needs Debian's bible-kjv: run scripts/deps.sh";
    ASSERT_EQ(run_command("head -n 4000 " + kjv + " > " + (*dir_ / "train.txt") + " && sed -n '30000,30080p' " + kjv +
                          " > " + (*dir_ / "eval.txt")), 0);
    fs::create_directories(*dir_ / "tok");
    ASSERT_EQ(run_command("spm_train --input=" + (*dir_ / "train.txt") + " --model_prefix=" + (*dir_ / "tok/tokenizer") +
                          " --vocab_size=400 --model_type=bpe --character_coverage=1.0 --byte_fallback=true"
                          " --random_seed=1 --minloglevel=2 >/dev/null 2>&1"), 0)
        << "spm_train failed: run scripts/deps.sh";
    ASSERT_EQ(run_command(kGenperf + " random-model --shape tiny --dtype f32 --seed 5 --tokenizer " +
                          (*dir_ / "tok/tokenizer.model") + " --out " + (*dir_ / "model") + " 2>/dev/null"), 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return *dir_ / "model"; }
  static TempDir* dir_;
  TempDir tmp_{"cli-case"};
};
TempDir* Cli::dir_ = nullptr;

TEST_F(Cli, HelpForEveryVerb) {
  for (const char* v : {"generate", "eval ppl", "eval mc", "eval kl", "bench infer", "convert", "random-model", "info",
                        "train", "finetune", "plan"}) {
    CliResult r = run_genperf(std::string(v) + " --help", tmp_);
    EXPECT_EQ(r.code, 0) << v;
    EXPECT_NE(r.out.find("usage: genperf"), std::string::npos) << v;
  }
  EXPECT_EQ(run_genperf("no-such-verb", tmp_).code, 2);
}

TEST_F(Cli, GenerateJsonIsDeterministic) {
  const std::string args = "generate --model " + model() + " --prompt 'In the beginning' --max-tokens 12 --json";
  CliResult a = run_genperf(args + " --temperature 0", tmp_), b = run_genperf(args + " --temperature 0", tmp_);
  ASSERT_EQ(a.code, 0) << a.err;
  Json ja = Json::parse(a.out), jb = Json::parse(b.out);
  EXPECT_EQ(ja.at("ids").dump(), jb.at("ids").dump());
  EXPECT_LE(ja.at("ids").as_array().size(), 12u);
  EXPECT_TRUE(ja.at("text").is_string());
  CliResult s1 = run_genperf(args + " --temperature 1 --seed 3", tmp_),
            s2 = run_genperf(args + " --temperature 1 --seed 3", tmp_);
  EXPECT_EQ(Json::parse(s1.out).at("ids").dump(), Json::parse(s2.out).at("ids").dump());
}

TEST_F(Cli, EvalPplMcKlAndGguf) {
  CliResult p =
      run_genperf("eval ppl --model " + model() + " --text " + (*dir_ / "eval.txt") + " --ctx 64 --json", tmp_);
  ASSERT_EQ(p.code, 0) << p.err;
  const Json jp = Json::parse(p.out);
  EXPECT_GT(jp.at("ppl").as_number(), 1.0);
  EXPECT_GT(jp.at("tokens").as_int(), 100);

  write_file_atomic(tmp_ / "tasks.jsonl",
                    "{\"context\": \"And God said\", \"choices\": [\", Let there be light\", \" unto Moses\"], \"gold\": 0}\n"
                    "{\"context\": \"In the beginning\", \"choices\": [\" God\", \" was the Word\", \" of days\"], \"gold\": 1}\n");
  CliResult mc = run_genperf("eval mc --model " + model() + " --tasks " + (tmp_ / "tasks.jsonl") + " --json", tmp_);
  ASSERT_EQ(mc.code, 0) << mc.err;
  EXPECT_EQ(Json::parse(mc.out).at("n").as_int(), 2);

  CliResult kl = run_genperf("eval kl --model " + model() + " --ref " + model() + " --text " + (*dir_ / "eval.txt") + " --ctx 64 --json", tmp_);
  ASSERT_EQ(kl.code, 0) << kl.err;
  EXPECT_LT(Json::parse(kl.out).at("kl_mean").as_number(), 1e-9);
  // An f16 cache against the f32 one (the reference's default): close, but not the same.
  CliResult klh = run_genperf("eval kl --model " + model() + " --ref " + model() + " --text " + (*dir_ / "eval.txt") +
                      " --ctx 64 --json --kv-type f16", tmp_);
  ASSERT_EQ(klh.code, 0) << klh.err;
  const double kl16 = Json::parse(klh.out).at("kl_mean").as_number();
  EXPECT_GT(kl16, 1e-12);
  EXPECT_LT(kl16, 1e-4);
  CliResult klhh = run_genperf("eval kl --model " + model() + " --ref " + model() + " --text " + (*dir_ / "eval.txt") +
                       " --ctx 64 --json --kv-type f16 --ref-kv-type f16", tmp_);
  ASSERT_EQ(klhh.code, 0) << klhh.err;
  EXPECT_LT(Json::parse(klhh.out).at("kl_mean").as_number(), 1e-9);

  // The same model as GGUF (tokenizer in its metadata) scores the same.
  CliResult cv = run_genperf("convert --model " + model() + " --out " + (tmp_ / "m.gguf"), tmp_);
  ASSERT_EQ(cv.code, 0) << cv.err;
  CliResult pg = run_genperf("eval ppl --model " + (tmp_ / "m.gguf") + " --text " + (*dir_ / "eval.txt") + " --ctx 64 --json", tmp_);
  ASSERT_EQ(pg.code, 0) << pg.err;
  EXPECT_NEAR(Json::parse(pg.out).at("ppl").as_number(), jp.at("ppl").as_number(), 1e-4 * jp.at("ppl").as_number());
}

TEST_F(Cli, BenchInferJson) {
  CliResult r = run_genperf("bench infer --model random:tiny --dtype bf16 --reps 2 --decode-tokens 4 --prefill 16,48 --decode-prompt 20 --no-peaks --json --out " +
                (tmp_ / "b.json"), tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j.at("prefill").as_array().size(), 2u);
  EXPECT_GT(j.at("decode").at("tokens_per_s").as_number(), 0);
  EXPECT_EQ(j.at("decode").at("seconds_per_token").at("n").as_int(), 2);
  EXPECT_FALSE(j.at("provenance").at("cpu").as_string().empty());
  EXPECT_EQ(Json::parse_file(tmp_ / "b.json").dump(), j.dump());
}

// GENPERF_ISA lowers the kernel path, and the record names the path that ran: avx2 is the AVX2
// level without AVX-VNNI, avxvnni with it where the CPU has it; any other value is an error that
// lists the valid ones.
TEST_F(Cli, IsaSettingIsNamedInTheRecord) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generic", "generic"},
      {"avx2", avx2 ? "avx2" : "generic"},
      {"avxvnni", !avx2 ? "generic" : f.avx_vnni ? "avx2+avxvnni" : "avx2"}};
  for (const auto& [setting, path] : cases) {
    std::string out;
    const std::string err = tmp_ / "isa-err.txt";
    ASSERT_EQ(run_command("GENPERF_ISA=" + setting + " " + kGenperf +
                              " bench infer --model random:tiny --reps 1 --decode-tokens 2 --prefill 16"
                              " --no-peaks --json 2>" + err, &out), 0)
        << setting << ": " << read_text_file(err);
    EXPECT_EQ(Json::parse(out).at("provenance").at("isa_path").as_string(), path) << setting;
  }
  std::string out;
  const std::string err = tmp_ / "isa-err.txt";
  EXPECT_EQ(run_command("GENPERF_ISA=avx3 " + kGenperf + " bench infer --model random:tiny --json 2>" + err, &out), 1);
  EXPECT_NE(read_text_file(err).find("expected generic, avx2, avxvnni or avx512"), std::string::npos)
      << read_text_file(err);
}

// --kv-type: the record names the cache's type, an f16 or bf16 cache takes half the bytes, q8_0
// 34 of 128, and a type the cache cannot hold is refused.
TEST_F(Cli, KvTypeHalvesTheCache) {
  std::map<std::string, int64_t> bytes;
  for (const std::string kv : {"f32", "f16", "bf16"}) {
    std::string out;
    const std::string err = tmp_ / "kv-err.txt";
    ASSERT_EQ(run_command(kGenperf + " bench infer --model random:tiny --reps 1 --decode-tokens 2 --prefill 16"
                              " --no-peaks --json --kv-type " + kv + " 2>" + err, &out), 0)
        << kv << ": " << read_text_file(err);
    const Json r = Json::parse(out);
    EXPECT_EQ(r.at("kv_type").as_string(), kv);
    bytes[kv] = r.at("memory").at("kv_cache_bytes").as_int();
  }
  EXPECT_GT(bytes["f32"], 0);
  EXPECT_EQ(bytes["f16"] * 2, bytes["f32"]);
  EXPECT_EQ(bytes["bf16"] * 2, bytes["f32"]);
  std::string out;
  const std::string err = tmp_ / "kv-err.txt";
  // q8_0 takes 34 bytes per 32 values, where the head dimension is a multiple of 32 (random:default's
  // is 32, random:tiny's 16).
  std::string info;
  ASSERT_EQ(run_command(kGenperf + " info --model random:default --json --kv-type q8_0 2>" + err, &info), 0)
      << read_text_file(err);
  std::string info32;
  ASSERT_EQ(run_command(kGenperf + " info --model random:default --json 2>" + err, &info32), 0);
  EXPECT_EQ(Json::parse(info).at("kv_type").as_string(), "q8_0");
  EXPECT_EQ(Json::parse(info).at("kv_cache_bytes_per_token").as_int() * 128,
            Json::parse(info32).at("kv_cache_bytes_per_token").as_int() * 34);
  EXPECT_EQ(run_command(kGenperf + " bench infer --model random:tiny --json --kv-type q8_0 2>" + err, &out), 1);
  EXPECT_NE(read_text_file(err).find("a KV cache of q8_0 needs a head dimension that is a multiple of 32; this "
                                     "model's is 16"), std::string::npos)
      << read_text_file(err);
  EXPECT_EQ(run_command(kGenperf + " bench infer --model random:tiny --json --kv-type q4_0 2>" + err, &out), 1);
  EXPECT_NE(read_text_file(err).find("a KV cache of q4_0 is not supported (f32, f16, bf16 or q8_0)"), std::string::npos)
      << read_text_file(err);
}

// Copies the model directory so one file can be damaged.
std::string damaged_copy(const std::string& src, const TempDir& tmp) {
  const std::string dst = tmp / "damaged";
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

void expect_clean_failure(const CliResult& r, const std::string& names) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << "error should name " << names << ": " << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

TEST_F(Cli, BadInputGivesClearErrors) {
  const std::string text = *dir_ / "eval.txt";
  {  // truncated safetensors
    const std::string d = damaged_copy(model(), tmp_);
    fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") / 2);
    expect_clean_failure(run_genperf("eval ppl --model " + d + " --text " + text, tmp_), "model.safetensors");
    fs::remove_all(d);
  }
  {  // unknown architecture
    const std::string d = damaged_copy(model(), tmp_);
    std::string cfg = read_text_file(d + "/config.json");
    cfg.replace(cfg.find("LlamaForCausalLM"), 16, "GPTNeoXForCausalLM");
    write_file_atomic(d + "/config.json", cfg);
    expect_clean_failure(run_genperf("info --model " + d, tmp_), "config.json");
    fs::remove_all(d);
  }
  {  // malformed config JSON
    const std::string d = damaged_copy(model(), tmp_);
    write_file_atomic(d + "/config.json", "{\"vocab_size\": 12,");
    expect_clean_failure(run_genperf("info --model " + d, tmp_), "config.json");
    fs::remove_all(d);
  }
  {  // truncated tokenizer
    const std::string d = damaged_copy(model(), tmp_);
    fs::resize_file(d + "/tokenizer.model", 100);
    expect_clean_failure(run_genperf("generate --model " + d + " --prompt hi", tmp_), "tokenizer.model");
    fs::remove_all(d);
  }
  {  // truncated GGUF
    ASSERT_EQ(run_genperf("convert --model " + model() + " --out " + (tmp_ / "t.gguf"), tmp_).code, 0);
    fs::resize_file(tmp_ / "t.gguf", fs::file_size(tmp_ / "t.gguf") - 1000);
    expect_clean_failure(run_genperf("info --model " + (tmp_ / "t.gguf"), tmp_), "t.gguf");
  }
  // --ctx beyond the model's context; missing files; bad option values.
  expect_clean_failure(run_genperf("eval ppl --model " + model() + " --text " + text + " --ctx 100000", tmp_), "--ctx");
  expect_clean_failure(run_genperf("eval ppl --model " + model() + " --text " + (tmp_ / "nope.txt"), tmp_), "nope.txt");
  expect_clean_failure(run_genperf("info --model " + (tmp_ / "missing"), tmp_), "missing");
  expect_clean_failure(run_genperf("generate --model " + model(), tmp_), "--prompt");
  expect_clean_failure(run_genperf("generate --model " + model() + " --prompt x --max-tokens lots", tmp_),
                       "--max-tokens");
  // A failed conversion leaves no output file behind.
  const std::string d = damaged_copy(model(), tmp_);
  fs::resize_file(d + "/model.safetensors", 64);
  EXPECT_EQ(run_genperf("convert --model " + d + " --out " + (tmp_ / "out.gguf"), tmp_).code, 1);
  EXPECT_FALSE(fs::exists(tmp_ / "out.gguf"));
  for (const auto& e : fs::directory_iterator(tmp_.path()))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

// Losses of a train_log.jsonl, by step.
std::vector<std::string> logged_losses(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_text_file(path));
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    if (const Json* l = j.find("loss")) out.push_back(cat(j.at("step").as_number(), " ", l->dump()));
  }
  return out;
}

TEST_F(Cli, TrainStopResumeAndFinetune) {
  const std::string train = *dir_ / "train.txt";
  const std::string common = "train --text " + train + " --vocab-size 400 --shape tiny --seq 32 --batch 4 --steps 6 "
                             "--lr 3e-3 --warmup 1 --eval-every 3 --save-every 2 --threads 2 --dtype f32 --out ";
  // Uninterrupted, and stopped at step 3 then resumed: the same losses, bit for bit.
  CliResult whole = run_genperf(common + (tmp_ / "whole") + " --json", tmp_);
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(Json::parse(whole.out).at("step").as_number(), 6);
  CliResult first = run_genperf(common + (tmp_ / "split") + " --stop-at 3", tmp_);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_FALSE(fs::exists(tmp_ / "split/model.safetensors"));  // not finished: no model yet
  CliResult rest = run_genperf(common + (tmp_ / "split") + " --resume", tmp_);
  ASSERT_EQ(rest.code, 0) << rest.err;
  const auto a = logged_losses(tmp_ / "whole/train_log.jsonl"), b = logged_losses(tmp_ / "split/train_log.jsonl");
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a, b);
  // The exported model serves: perplexity on held-out text, generation.
  CliResult ppl = run_genperf("eval ppl --model " + (tmp_ / "whole") + " --text " + (*dir_ / "eval.txt") + " --ctx 32 --json", tmp_);
  ASSERT_EQ(ppl.code, 0) << ppl.err;
  EXPECT_GT(Json::parse(ppl.out).at("ppl").as_number(), 1.0);

  // Fine-tuning on prompt/response records.
  write_file_atomic(tmp_ / "qa.jsonl", "{\"prompt\": \"Who made the light?\", \"response\": \" God.\"}\n"
                                       "{\"prompt\": \"Where was the garden?\", \"response\": \" In Eden.\"}\n");
  CliResult ft = run_genperf("finetune --model " + (tmp_ / "whole") + " --data " + (tmp_ / "qa.jsonl") +
                     " --seq 32 --batch 2 --steps 3 --lr 1e-3 --json --out " + (tmp_ / "ft"), tmp_);
  ASSERT_EQ(ft.code, 0) << ft.err;
  EXPECT_TRUE(fs::exists(tmp_ / "ft/model.safetensors"));
  EXPECT_TRUE(fs::exists(tmp_ / "ft/tokenizer.model"));
  EXPECT_EQ(logged_losses(tmp_ / "ft/train_log.jsonl").size(), 3u);

  // Bad input: a cut-short state, a malformed record, a missing state, a record too long.
  fs::resize_file(tmp_ / "split/train_state.safetensors", fs::file_size(tmp_ / "split/train_state.safetensors") / 2);
  expect_clean_failure(run_genperf(common + (tmp_ / "split") + " --resume", tmp_), "train_state.safetensors");
  write_file_atomic(tmp_ / "bad.jsonl", "{\"prompt\": \"x\", \"response\": \" y\"}\n{\"prompt\": 3}\n");
  expect_clean_failure(run_genperf("finetune --model " + (tmp_ / "whole") + " --data " + (tmp_ / "bad.jsonl") + " --out " + (tmp_ / "ft2"), tmp_),
                       "bad.jsonl:2");
  expect_clean_failure(run_genperf("finetune --model " + (tmp_ / "whole") + " --data " + (tmp_ / "qa.jsonl") + " --batch 2 --seq 32 --resume --out " + (tmp_ / "ft3"), tmp_),
                       "train_state.safetensors");
  expect_clean_failure(run_genperf("finetune --model " + (tmp_ / "whole") + " --data " + (tmp_ / "qa.jsonl") + " --seq 4 --out " + (tmp_ / "ft4"), tmp_),
                       "qa.jsonl:1");
}

}  // namespace
