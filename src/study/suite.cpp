// The study's suites and their runner (genperf/study.h).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/runtime.h"
#include "genperf/study.h"
#include "genperf/study_store.h"

extern char** environ;

namespace genperf {
namespace {

namespace fs = std::filesystem;

std::string str(int64_t v) { return std::to_string(v); }

// The ISA levels this CPU runs, lowest first, as GENPERF_ISA names them.
std::vector<std::string> isa_levels() {
  std::vector<std::string> v = {"generic"};
  const Isa best = cpu_isa();
  if (best >= Isa::Avx2) v.push_back("avx2");
  if (best >= Isa::Avx2 && cpu_features().avx_vnni) v.push_back("avxvnni");
  if (best >= Isa::Avx512) v.push_back("avx512");
  return v;
}

// Runs argv with env added to this process's environment, its output (both streams) to log;
// returns the exit status (-1: it did not start or ended by a signal).
int run_logged(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
               const std::string& log) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const auto& [k, v] : env) replaced = replaced || kv.rfind(k + "=", 0) == 0;
    if (!replaced) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have_mpirun() {
  return run_logged({"mpirun", "--version"}, {}, "/dev/null") == 0;
}

}  // namespace

std::vector<StudyWorkload> study_workloads(const StudyOptions& o) {
  GP_CHECK(o.suite == "quick" || o.suite == "full", "[study] unknown --suite '", o.suite, "' (expected quick or full)");
  const bool full = o.suite == "full";
  const std::string llm = o.models + "/default", sr = o.models + "/sr-default";
  std::vector<StudyWorkload> w;
  auto add = [&w](std::string id, std::vector<std::string> args, int ranks = 1,
                  std::vector<std::pair<std::string, std::string>> env = {}, std::vector<std::string> prepare = {},
                  std::string prepared = "") {
    w.push_back({std::move(id), std::move(args), std::move(env), ranks, std::move(prepare), std::move(prepared)});
  };
  // Inference at every ISA level: prefill and decode of the default model, and the level's floors
  // measured in the same run, which the hardware model costs that level's figures with: the GEMM
  // peak of oneDNN capped at the level (the f32 or bf16 matmul its prefill runs on; peaks.h) and
  // the bandwidth read with the level's own sum kernel.
  for (const std::string& isa : isa_levels())
    add("infer." + isa,
        {"bench", "infer", "--model", llm, "--reps", full ? "7" : "5", "--prefill", full ? "128,512" : "128",
         "--decode-tokens", "32"},
        1, {{"GENPERF_ISA", isa}});
  // Fine-tuning steps, naive and flash attention, by sequence length.
  const std::vector<int64_t> lengths = full ? std::vector<int64_t>{128, 256, 512, 1024} : std::vector<int64_t>{128, 512};
  for (int64_t seq : lengths)
    for (const char* attn : {"naive", "flash"})
      add(cat("train.", attn, ".seq", seq), {"bench", "train", "--model", "random:default", "--attn", attn, "--seq",
                                              str(seq), "--batch", str(std::max<int64_t>(1, 512 / seq)), "--reps",
                                              "5", "--no-peaks"});
  // Scaling and sharding: one thread a rank, the same batch a rank (weak scaling).
  std::vector<int> ranks = {1};
  if (o.mpi) ranks.push_back(2);
  if (o.mpi && full) ranks.push_back(4);
  const std::vector<std::string> modes =
      full ? std::vector<std::string>{"none", "optimizer", "grads", "full"} : std::vector<std::string>{"none", "full"};
  for (int n : ranks)
    for (const std::string& mode : n == 1 ? std::vector<std::string>{"none"} : modes)
      add(cat("train.ranks", n, ".", mode),
          {"bench", "train", "--model", "random:default", "--seq", "256", "--batch", "2", "--reps", "5", "--threads",
           "1", "--no-peaks", "--shard", mode},
          n);
  // The SR model: training and sampling steps; its weak scaling (--batch is the global batch).
  for (int n : ranks)
    add(cat("sr.ranks", n),
        {"bench", "sr", "--model", sr, "--batch", str(4 * n), "--size", "64", "--reps", "5", "--threads", "1", "--no-peaks"},
        n);
  // The SR model's quality beside bicubic's, on held-out dust fields (the model was trained on
  // seeds 1 .. 96 and validated on 1001 .. 1004): the quick suite's two small maps and few steps
  // say the table is built, the full suite's eight 256 x 256 maps are the study's figures.
  add("sr.eval", {"sr", "eval", "--model", sr, "--data", full ? "synthetic:8:256:2001:mixed" : "synthetic:2:128:2001:mixed",
                  "--steps", full ? "25" : "10", "--samples", full ? "8" : "2"});
  // Accuracy against size: the default model as it is and quantized, on held-out text and tasks.
  if (!o.text.empty()) {
    const std::vector<std::string> recipes =
        full ? std::vector<std::string>{"bf16", "q8_0", "q6_k", "q5_k", "q4_k_m", "q4_k", "q4_0", "q3_k", "q2_k"}
             : std::vector<std::string>{"bf16", "q8_0", "q4_k_m", "q4_0"};
    for (const std::string& r : recipes) {
      const bool base = r == "bf16";
      const std::string model = base ? llm : o.dir + "/models/" + r + ".gguf";
      std::vector<std::string> prepare;
      if (!base)
        prepare = {"quantize", "--model", llm, "--out", model, "--recipe", r == "q4_k_m" ? r : "uniform:" + r};
      const std::string made = base ? "" : model;
      // The quick suite scores the text's first 24 kB (about 6k tokens) and the first 200 tasks.
      std::vector<std::string> kl = {"eval", "kl", "--model", model, "--ref", llm, "--text", o.text, "--ctx", "256"};
      std::vector<std::string> mc = {"eval", "mc", "--model", model, "--tasks", o.tasks};
      if (!full) kl.insert(kl.end(), {"--max-bytes", "24000"}), mc.insert(mc.end(), {"--limit", "200"});
      add("quant." + r + ".kl", kl, 1, {}, prepare, made);
      if (!o.tasks.empty()) add("quant." + r + ".mc", mc, 1, {}, prepare, made);
      if (!base)
        add("quant." + r + ".infer",
            {"bench", "infer", "--model", model, "--reps", "5", "--prefill", "128", "--decode-tokens", "32", "--no-peaks"},
            1, {}, prepare, made);
    }
  }
  return w;
}

void run_study(const StudyOptions& o, const std::function<void(const StudyProgress&)>& on_done) {
  GP_CHECK(!o.dir.empty(), "[study] no study directory (--out)");
  GP_CHECK(!o.genperf.empty(), "[study] internal: the genperf binary is not set");
  for (const std::string& f : {o.text, o.tasks})
    GP_CHECK(f.empty() || fs::exists(f), "[study] ", f, " is missing (--text, --tasks)");
  for (const char* m : {"/default/config.json", "/sr-default/config.json"})
    GP_CHECK(fs::exists(o.models + m), "[study] ", o.models + m, " is missing: --models names the directory of the ",
             "embedded default models (the repository's models/)");
  StudyOptions opt = o;
  opt.mpi = o.mpi && have_mpirun();
  const std::vector<StudyWorkload> work = study_workloads(opt);
  fs::create_directories(o.dir + "/records");
  fs::create_directories(o.dir + "/logs");
  ResultsStore store(o.db.empty() ? o.dir + "/study.db" : o.db);
  std::vector<std::pair<std::string, std::string>> mpi_env;
  if (geteuid() == 0) mpi_env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  for (size_t i = 0; i < work.size(); ++i) {
    const StudyWorkload& w = work[i];
    const std::string record = o.dir + "/records/" + w.id + ".json", log = o.dir + "/logs/" + w.id + ".log";
    StudyProgress p{&w, int(i) + 1, int(work.size()), fs::exists(record), 0};
    if (!p.resumed && !w.prepare.empty() && !fs::exists(w.prepared)) {
      fs::create_directories(fs::path(w.prepared).parent_path());
      std::vector<std::string> argv = {o.genperf};
      argv.insert(argv.end(), w.prepare.begin(), w.prepare.end());
      const int rc = run_logged(argv, {}, o.dir + "/logs/" + w.id + ".prepare.log");
      GP_CHECK(rc == 0 && fs::exists(w.prepared), "[study] workload ", w.id, ": preparing ", w.prepared, " failed (exit ",
               rc, "); its output is in ", o.dir, "/logs/", w.id, ".prepare.log");
    }
    if (!p.resumed) {
      std::vector<std::string> argv;
      if (w.ranks > 1) argv = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(w.ranks)};
      argv.push_back(o.genperf);
      argv.insert(argv.end(), w.args.begin(), w.args.end());
      argv.insert(argv.end(), {"--out", record});
      std::vector<std::pair<std::string, std::string>> env = w.env;
      if (w.ranks > 1) env.insert(env.end(), mpi_env.begin(), mpi_env.end());
      const auto t0 = std::chrono::steady_clock::now();
      const int rc = run_logged(argv, env, log);
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string cmd;
      for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
      GP_CHECK(rc == 0 && fs::exists(record), "[study] workload ", w.id, " failed (exit ", rc, "): ", cmd, "; its output is in ",
               log, ". Rerun the study to resume from it");
    }
    import_bench_record(store, Json::parse_file(record), record, o.suite);
    if (on_done) on_done(p);
  }
}

}  // namespace genperf
