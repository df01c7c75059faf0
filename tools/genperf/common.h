// What the verbs of the genperf CLI share: common options, the command line for provenance,
// and small helpers. Each verb file parses its arguments and calls the library.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "genperf/comm.h"
#include "genperf/dist.h"
#include "genperf/error.h"
#include "genperf/json.h"
#include "genperf/runtime.h"
#include "genperf/train.h"

namespace genperf::cli {

extern std::string g_command;  // the exact command line, for provenance

inline const OptionSpec kThreads{"threads", "worker threads (default: GENPERF_THREADS, OMP_NUM_THREADS or all cores)", "", false, true};
inline const OptionSpec kJson{"json", "print one JSON record instead of text", "", true};
inline const OptionSpec kModel{"model", "HF directory, .gguf file, or random:<shape> (shapes: 110m, default, tiny)"};
inline const OptionSpec kDtype{"dtype", "weight type of a random:<shape> model (f32, f16, bf16)", "bf16"};
// Data parallel across ranks (mpirun -np N), for the training verbs; read by dist_options.
inline const OptionSpec kShard{"shard", "across ranks (mpirun -np N): none (data parallel), optimizer (ZeRO-1), grads (ZeRO-2) or full (ZeRO-3, FSDP)", "none"};
inline const OptionSpec kBucketMb{"bucket-mb", "gradient bucket in MiB, reduced while backward runs (PyTorch DDP's 25)", "25"};
inline const OptionSpec kCommOverlap{"comm-overlap", "reduce gradient buckets during backward: on, off, or auto (on "
                                     "for --shard grads and full, whose windows rely on it; otherwise on where the "
                                     "ranks' threads leave this node a core for communication, off where they fill "
                                     "its cores)", "auto"};
inline bool comm_overlap(const Args& a, ShardMode s) {
  return resolve_comm_overlap(parse_comm_overlap(a.str("comm-overlap")), s, launcher_local_ranks(), num_threads(),
                              node_cores(), affinity_cores());
}
inline DistOptions dist_options(const Args& a) {
  DistOptions d;
  d.comm = &world();
  d.shard = parse_shard_mode(a.str("shard"));
  const double mb = a.number("bucket-mb");
  GP_CHECK(mb > 0 && mb <= 4096, "[train] --bucket-mb must lie in (0, 4096], got ", mb);
  d.bucket_bytes = size_t(mb * 1024 * 1024);
  d.overlap = comm_overlap(a, d.shard);
  return d;
}
inline const OptionSpec kKvType{"kv-type", "KV cache type: f32, f16 / bf16 (half the bytes, llama.cpp's default f16) or q8_0", "f32"};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == sep) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

inline std::string joined(const std::vector<std::string>& v, char sep = ',') {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) (i ? s += sep : s) += v[i];
  return s;
}

// --lora-targets, with the model family's projection names.
inline OptionSpec lora_targets_option(const std::string& help) {
  return {"lora-targets", help + ": " + joined(lora_target_names()), joined(default_lora_targets())};
}

inline void apply_common(const Args& a) {
  if (a.has("threads")) set_num_threads(int(a.integer("threads")));
}

inline bool run_help(const Args& a) {
  if (a.help()) std::fputs(a.usage().c_str(), stdout);
  return a.help();
}

inline void print_json(const Json& j) { std::printf("%s\n", j.dump(2).c_str()); }

// --out FILE of the verbs that write a JSON record (bench, eval, sr eval; genperf study imports
// them). check_record_path runs before the work, so that a directory that does not exist fails at
// once rather than after the run; write_record stamps the record's provenance (the machine, the
// code, this command line) and writes it whole or not at all.
inline const OptionSpec kOut{"out", "also write the JSON record to this file", "", false, true};
void check_record_path(const Args& a);
void write_record(const Args& a, Json& record);

// Verbs defined outside main.cpp.
int cmd_train(int argc, char** argv);
int cmd_finetune(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_sensitivity(int argc, char** argv);
int cmd_test_ops(int argc, char** argv);
int cmd_test_comm(int argc, char** argv);
int cmd_sr(int argc, char** argv);
int cmd_bench_sr(int argc, char** argv);
int cmd_bench_comm(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_study(int argc, char** argv);
int cmd_report(int argc, char** argv);

}  // namespace genperf::cli
