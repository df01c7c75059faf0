// genperf plan: memory per rank and predicted step time of a job, for each shard mode, on this
// machine (measured now) or a catalogued device (figures labelled modeled), and which to run.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "genperf/bench.h"
#include "genperf/checkpoint.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/llama.h"
#include "genperf/plan.h"

namespace genperf::cli {
namespace {

std::string figure(const Figure& f, double scale, const char* unit) {
  std::ostringstream os;
  os.precision(5);
  os << f.value * scale << " " << unit << " [" << figure_kind_name(f.kind) << "]";
  return os.str();
}

void print_device(const PlanResult& r) {
  const DeviceSpec& d = r.device;
  std::string peaks;
  for (const auto& [name, f] : d.peaks())
    if (*f) peaks += cat(peaks.empty() ? "" : ", ", name, " ", figure(**f, 1, "TFLOPS"));
  std::printf("device     %s (%s): memory %s at %s\n", d.name.c_str(), d.id.c_str(),
              figure(d.memory_bytes, 1e-9, "GB").c_str(), figure(d.memory_gbs, 1, "GB/s").c_str());
  std::printf("           dense peaks %s\n", peaks.empty() ? "none published" : peaks.c_str());
  std::printf("           link %s a direction (%s)\n", figure(d.link_gbs, 1, "GB/s").c_str(), d.link.c_str());
  if (const auto& k = d.collectives)
    std::printf("           collectives at %d ranks, measured (%s): all-reduce %.2f, reduce-scatter %.2f, all-gather "
                "%.2f GB/s bus bandwidth\n",
                k->ranks, k->source.c_str(), k->all_reduce_gbs, k->reduce_scatter_gbs, k->all_gather_gbs);
  if (r.capacity.kind == FigureKind::Given)
    std::printf("           memory per rank capped at %s (--mem-gb)\n", figure(r.capacity, 1e-9, "GB").c_str());
  std::printf("source     %s\n", d.source.c_str());
  if (!d.note.empty()) std::printf("note       %s\n", d.note.c_str());
}

void print_plans(const PlanResult& r, const std::string& chosen) {
  const PlanOptions& o = r.options;
  // The compute model: the job's step timed (over an efficiency only where given), or a rate
  // (the matmuls' timed, or the peak) times the efficiency.
  const std::string compute =
      o.rank_step ? (o.efficiency_given ? cat("the step timed [measured] over ", o.efficiency * 100, "% [given]")
                                        : std::string("the step timed [measured]"))
                  : cat(o.efficiency * 100, "% of ", o.rank_gemm_gflops ? "the matmuls' timed rate" : "the peak", " [",
                        o.efficiency_given ? "given" : "modeled", "]");
  std::printf("plan       %d %s x batch %lld x seq %lld, %s, %s attention, %s, %s%% of the link, "
              "overlap %s, bucket %.0f MiB\n",
              o.ranks, o.ranks == 1 ? "rank" : "ranks", (long long)o.batch, (long long)o.seq,
              precision_name(o.train.precision), attention_mode_name(o.train.attention), compute.c_str(),
              cat(o.comm_efficiency * 100).c_str(), plan_overlap_name(o.overlap), double(o.bucket_bytes) / (1 << 20));
  if (o.lora)
    std::printf("LoRA       rank %d on %s: weights, grads and optimizer are the adapters'; frozen is the base's\n",
                o.lora->rank, joined(o.lora->targets, ',').c_str());
  std::printf("%-12s %-4s %9s %9s %9s%s %9s %9s %9s  %-4s %10s %10s %12s   (GB per rank; every figure modeled)\n",
              "shard", "ckpt", "weights", "grads", "optimizer", o.lora ? "    frozen" : "",
              "activ", "comm buf", "total", "fits", "step s", "comm s", "tokens/s");
  auto row = [&](const ShardPlan& p) {
    const bool rec = r.recommended && r.recommended->shard == p.shard &&
                     r.recommended->checkpoint_layers == p.checkpoint_layers;
    std::string name = cat(shard_mode_name(p.shard), rec ? " *" : "", chosen == shard_mode_name(p.shard) && p.checkpoint_layers == o.train.checkpoint_layers ? " <" : "");
    std::printf("%-12s %-4s %9.3f %9.3f %9.3f", name.c_str(), p.checkpoint_layers ? "yes" : "no",
                double(p.state.params) / 1e9, double(p.state.grads) / 1e9, double(p.state.optimizer) / 1e9);
    if (o.lora) std::printf(" %9.3f", double(p.state.frozen) / 1e9);
    std::printf(" %9.3f %9.3f %9.3f  %-4s", double(p.activations.total()) / 1e9, double(p.comm_buffers) / 1e9,
                double(p.total()) / 1e9, p.fits ? "yes" : "no");
    if (p.timed) std::printf(" %10.4g %10.4g %12.1f\n", p.step_s, p.exposed_comm_s + p.comm_core_s, p.tokens_per_s);
    else std::printf(" %10s %10s %12s\n", "-", "-", "-");
  };
  for (const ShardPlan& p : r.plans) row(p);
  for (const ShardPlan& p : r.alternative) row(p);
  if (!chosen.empty())
    for (const ShardPlan& p : r.plans)
      if (chosen == shard_mode_name(p.shard)) std::printf("--shard    %s: %s\n", chosen.c_str(), p.verdict.c_str());
  std::printf("recommend  %s\n", r.recommendation.c_str());
}

void print_inference(const PlanResult& r) {
  const PlanOptions& o = r.options;
  const InferencePlan& p = *r.inference;
  std::printf("plan       inference, %d %s x %lld sequences x %lld tokens of context, weights %s, KV cache %s "
              "(every figure modeled)\n",
              o.ranks, o.ranks == 1 ? "rank" : "ranks", (long long)o.batch, (long long)o.seq, dtype_name(o.weight_dtype),
              dtype_name(o.kv_dtype));
  std::printf("memory     weights %.3f GB + KV cache %.3f GB = %.3f GB per rank: %s\n", double(p.weights) / 1e9,
              double(p.kv_cache) / 1e9, double(p.total()) / 1e9, p.verdict.c_str());
  if (p.timed)
    std::printf("speed      prefill %.4g s (compute at %s%% of the peak), decode %.4g s a step at a full cache "
                "(memory-bound): %.1f tokens/s across ranks\n",
                p.prefill_s, cat(o.efficiency * 100).c_str(), p.decode_s, p.decode_tokens_per_s);
  std::printf("recommend  %s\n", r.recommendation.c_str());
}

}  // namespace

int cmd_plan(int argc, char** argv) {
  std::string devices;
  for (const std::string& n : device_names()) devices += cat(devices.empty() ? "" : ", ", n);
  Args a("plan",
         {{"model", "random:<shape> (110m, default, tiny) or a HF directory (its config is used)"},
          {"device", "cpu (this machine, measured now) or a catalogued device: " + devices, "cpu"},
          {"ranks", "ranks (devices) of the job", "1"},
          {"batch", "sequences per rank and step (inference: sequences per rank)", "1"},
          {"seq", "tokens per sequence (training)", "512"},
          {"shard", "the shard mode you mean to run (none, optimizer, grads, full): its verdict is printed; "
                    "every mode is planned", "", false, true},
          {"precision", "f32, or bf16 mixed precision (f32 master weights and optimizer state)", "f32"},
          {"checkpoint-layers", "recompute each layer's forward in backward (the other setting is planned too)", "", true},
          {"attn", "attention: flash or naive", "flash"},
          {"efficiency", "fraction of the device's peak (on this machine: of the rate the job's matmuls reach, timed) "
                         "the step reaches (default 0.7, an assumption; 1 with the step timed)", "", false, true},
          {"comm-efficiency", "fraction of the link bandwidth a collective reaches", "1"},
          {"overlap", "communication hidden behind backward: buckets or none (default: buckets on a catalogued "
                      "device, none on this machine)", "", false, true},
          {"bucket-mb", "gradient bucket in MiB", "25"},
          {"lora-rank", "LoRA fine-tuning at this rank (0: full training)", "0"},
          lora_targets_option("projections with LoRA adapters"),
          {"mem-gb", "memory per rank at most this many GB (1e9 bytes)", "", false, true},
          {"peak-gflops", "this machine: its GEMM peak (GFLOP/s, all threads) from an earlier measurement", "", false, true},
          {"core-peak-gflops", "with --peak-gflops: the same GEMM's peak on one thread (ranks then get what their threads reach)", "", false, true},
          {"bandwidth-gbs", "this machine: its read bandwidth (GB/s) from an earlier measurement", "", false, true},
          {"probe", "this machine: how compute is planned: step (the job's step timed at its shapes, a layer and the "
                    "rest, and AdamW; where the probe's models do not fit half the memory, matmuls), matmuls (the "
                    "job's matmuls timed, over an efficiency) or none (the ranks' share of the 2048^3 GEMM peak)",
           "step"},
          {"comm", "this machine: `genperf bench comm --out` records (comma-separated), each used for jobs of its "
                   "rank count in place of the modeled link", "", false, true},
          {"inference", "plan inference instead: weights and KV cache", "", true},
          {"ctx", "inference: tokens of context per sequence", "2048"},
          {"dtype", "inference: weight type (f32, f16, bf16, q8_0, q4_k, ...)", "bf16"},
          kKvType,
          {"sweep", "plan 1, 2 and 4 ranks", "", true},
          kOut, kThreads, kJson},
         argc, argv, 2);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  const std::string spec = a.str("model");
  const bool random = spec.rfind("random:", 0) == 0;
  const LlamaConfig c = random ? preset_config(spec.substr(7)) : read_hf_config(spec + "/config.json");
  const std::string device = a.str("device");
  const bool cpu = device == "cpu";
  PlanOptions o;
  o.ranks = int(a.integer("ranks"));
  o.batch = a.integer("batch");
  o.inference = a.flag("inference");
  o.seq = o.inference ? a.integer("ctx") : a.integer("seq");
  o.train.precision = parse_precision(a.str("precision"));
  o.train.attention = parse_attention_mode(a.str("attn"));
  o.train.checkpoint_layers = a.flag("checkpoint-layers");
  GP_CHECK(a.integer("lora-rank") >= 0, "[plan] --lora-rank must be >= 0, got ", a.str("lora-rank"));
  if (a.integer("lora-rank") > 0) {
    LoraConfig lc;
    lc.rank = int(a.integer("lora-rank"));
    lc.targets = cli::split(a.str("lora-targets"), ',');
    lc.validate();
    o.lora = lc;
  }
  if (a.has("efficiency")) {
    o.efficiency = a.number("efficiency");
    o.efficiency_given = true;
  }
  o.comm_efficiency = a.number("comm-efficiency");
  o.overlap = a.has("overlap") ? parse_plan_overlap(a.str("overlap")) : cpu ? PlanOverlap::None : PlanOverlap::Buckets;
  GP_CHECK(a.number("bucket-mb") > 0, "[plan] --bucket-mb must be positive, got ", a.str("bucket-mb"));
  o.bucket_bytes = size_t(a.number("bucket-mb") * 1024 * 1024);
  if (a.has("mem-gb")) o.memory_cap_bytes = a.number("mem-gb") * 1e9;
  o.weight_dtype = parse_dtype(a.str("dtype"));
  o.kv_dtype = parse_dtype(a.str("kv-type"));
  const std::string chosen = a.has("shard") ? shard_mode_name(parse_shard_mode(a.str("shard"))) : "";
  std::vector<int> ranks = {o.ranks};
  if (a.flag("sweep")) ranks = {1, 2, 4};
  for (int n : ranks) {
    o.ranks = n;
    o.validate();  // before a measurement of seconds
  }
  const bool json = a.flag("json");
  const std::string probe = a.str("probe");
  GP_CHECK(probe == "step" || probe == "matmuls" || probe == "none", "[plan] unknown --probe '", probe,
           "' (known: step, matmuls, none)");
  DeviceSpec d;
  if (cpu) {
    // This machine runs the precision its CPU has (bf16 falls back to f32 without AVX512-BF16).
    o.train.precision = effective_precision(o.train.precision);
    GP_CHECK(a.has("peak-gflops") == a.has("bandwidth-gbs"), "[plan] give both --peak-gflops and --bandwidth-gbs, or neither");
    GP_CHECK(!a.has("core-peak-gflops") || a.has("peak-gflops"), "[plan] --core-peak-gflops goes with --peak-gflops (the all-thread peak)");
    MachineFigures m;
    if (a.has("peak-gflops")) {
      m.precision = o.train.precision;
      m.gemm_peak_gflops = a.number("peak-gflops");
      m.cores = num_threads();
      if (a.has("core-peak-gflops")) m.core_peak_gflops = a.number("core-peak-gflops");
      m.memory_gbs = a.number("bandwidth-gbs");
      m.memory_bytes = double(available_memory_bytes());
      m.kind = FigureKind::Given;
    } else {
      if (!json) std::fprintf(stderr, "measuring this machine: %s GEMM peak, read bandwidth ...\n",
                              precision_name(o.train.precision));
      m = measure_this_machine(o.train.precision);
    }
    d = this_machine(m);
  } else {
    GP_CHECK(!a.has("comm"), "[plan] --comm gives this machine's measured collectives: it needs --device cpu");
    d = catalog_device(device);
  }
  std::vector<CollectiveFigures> measured;
  if (a.has("comm"))
    for (const std::string& f : split(a.str("comm"), ',')) measured.push_back(collective_figures(Json::parse_file(f), f));
  Json::Array records;
  for (int n : ranks) {
    o.ranks = n;
    d.collectives.reset();
    for (const CollectiveFigures& f : measured)
      if (f.ranks == n) d.collectives = f;
    // This machine: the job's matmuls timed at its shapes, with the threads a rank runs.
    o.rank_gemm_gflops.reset();
    o.rank_step.reset();
    if (cpu && !o.inference && probe == "step") {
      if (rank_step_probe_bytes(c, o, num_threads()) <= 0.5 * double(available_memory_bytes()))
        o.rank_step = measure_rank_step(c, o, num_threads());
      else if (!json)
        std::fprintf(stderr, "[plan] the step probe's models need more than half the free memory: timing the "
                             "matmuls instead\n");
    }
    if (cpu && !o.inference && probe != "none" && !o.rank_step)
      o.rank_gemm_gflops = measure_rank_gemm_gflops(c, o, num_threads());
    PlanResult r = plan_job(c, d, o);
    r.model = spec;
    if (!json) {
      if (n == ranks.front()) {
        std::printf("model      %s (%.1fM parameters, %s)\n", spec.c_str(), double(r.parameters) / 1e6,
                    o.inference ? "inference" : "training, AdamW, f32 master weights");
        print_device(r);
      }
      std::printf("\n");
      if (o.inference) print_inference(r);
      else print_plans(r, chosen);
      for (const std::string& note : r.notes) std::printf("note       %s\n", note.c_str());
    }
    Json j = r.to_json();
    j["provenance"] = provenance(g_command).to_json();
    records.push_back(std::move(j));
  }
  const Json out = records.size() == 1 ? records.front() : Json(Json::Object{{"sweep", Json(std::move(records))}});
  if (a.has("out")) write_file_atomic(a.str("out"), out.dump(2) + "\n");
  if (json) print_json(out);
  return 0;
}

}  // namespace genperf::cli
