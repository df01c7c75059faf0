// The planner (genperf/plan.h): the device catalogue, this machine's measured figures, memory per
// rank by shard mode and the step-time model. Every catalogue figure is a vendor's, with its
// source; a figure the vendor does not publish stays absent.
#include "genperf/plan.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <thread>

#include "bench/peaks.h"
#include "genperf/bench.h"
#include "genperf/error.h"
#include "genperf/ops_train.h"
#include "genperf/rng.h"
#include "genperf/runtime.h"

namespace genperf {

const char* figure_kind_name(FigureKind k) {
  switch (k) {
    case FigureKind::Measured: return "measured";
    case FigureKind::Modeled: return "modeled";
    case FigureKind::Given: return "given";
  }
  return "?";
}

Json Figure::to_json() const { return Json::Object{{"value", value}, {"kind", figure_kind_name(kind)}}; }

std::optional<Figure> DeviceSpec::peak_tflops(Precision p) const { return p == Precision::Bf16 ? bf16 : fp32; }

std::vector<std::pair<const char*, const std::optional<Figure>*>> DeviceSpec::peaks() const {
  return {{"fp32", &fp32}, {"tf32", &tf32}, {"bf16", &bf16}, {"fp16", &fp16}, {"fp8", &fp8}};
}

Json DeviceSpec::to_json() const {
  Json::Object by_type;
  for (const auto& [type, f] : peaks()) by_type.emplace_back(type, *f ? (*f)->to_json() : Json());
  return Json::Object{{"id", id},
                      {"name", name},
                      {"memory_bytes", memory_bytes.to_json()},
                      {"memory_gbs", memory_gbs.to_json()},
                      {"peak_tflops", Json(std::move(by_type))},
                      {"link_gbs", link_gbs.to_json()},
                      {"link", link},
                      {"source", source},
                      {"note", note},
                      {"shared_by_ranks", shared_by_ranks},
                      {"cores", cores},
                      {"one_core_share", one_core_share},
                      {"collectives", collectives ? collectives->to_json() : Json()}};
}

Json CollectiveFigures::to_json() const {
  return Json::Object{{"ranks", ranks},
                      {"message_bytes", message_bytes},
                      {"all_reduce_gbs", Figure{all_reduce_gbs, FigureKind::Measured}.to_json()},
                      {"reduce_scatter_gbs", Figure{reduce_scatter_gbs, FigureKind::Measured}.to_json()},
                      {"all_gather_gbs", Figure{all_gather_gbs, FigureKind::Measured}.to_json()},
                      {"source", source}};
}

CollectiveFigures collective_figures(const Json& record, const std::string& path) {
  const Json* c = record.find("collectives");
  const Json* n = record.find("ranks");
  GP_CHECK(c && n && c->is_object() && n->is_number(), "[plan] ", path,
           ": not a `genperf bench comm` record (no ranks and collectives)");
  CollectiveFigures f;
  f.ranks = int(n->as_int());
  f.source = path;
  if (const Json* m = record.find("message_bytes")) f.message_bytes = m->as_number();
  auto bus = [&](const char* name) {
    const Json* k = c->find(name);
    const Json* g = k ? k->find("bus_gbs") : nullptr;
    GP_CHECK(g && g->is_number() && g->as_number() > 0, "[plan] ", path, ": no positive bus_gbs for ", name);
    return g->as_number();
  };
  f.all_reduce_gbs = bus("all_reduce"), f.reduce_scatter_gbs = bus("reduce_scatter"), f.all_gather_gbs = bus("all_gather");
  GP_CHECK(f.ranks >= 2, "[plan] ", path, ": measured on ", f.ranks, " rank(s): collectives need 2 or more");
  return f;
}

namespace {

// A catalogue row: capacity in GB and bandwidths in GB/s as the vendor prints them (1e9), peaks in
// dense TFLOPS (NaN: not published).
struct CatalogRow {
  const char *id, *name;
  double memory_gb, memory_gbs;
  double fp32, tf32, bf16, fp16, fp8;
  double link_gbs;
  const char *link, *source, *note;
};

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// NVLink's published figure counts both directions; a collective's send rate is one of them.
// Gaudi's RoCE ports are counted at line rate per direction, those that join the cards of one
// 8-device node (the rest go to the scale-out network).
const CatalogRow kCatalog[] = {
    {"v100", "NVIDIA V100 SXM2 32GB", 32, 900, 15.7, kNone, kNone, 125, kNone, 150,
     "NVLink 2: 300 GB/s both directions",
     "NVIDIA V100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/v100/",
     "no bf16 or fp8: Volta's tensor cores run fp16 (125 TFLOPS)"},
    {"a100", "NVIDIA A100 SXM4 80GB", 80, 2039, 19.5, 156, 312, 312, kNone, 300,
     "NVLink 3: 600 GB/s both directions",
     "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/"
     "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
     "no fp8 on Ampere; the datasheet's tensor figures without sparsity"},
    {"h100", "NVIDIA H100 SXM5 80GB", 80, 3350, 67, 494.7, 989.4, 989.4, 1978.9, 450,
     "NVLink 4: 900 GB/s both directions",
     "NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/ (tensor "
     "figures dense: half the datasheet's with-sparsity ones, as the NVIDIA H100 Tensor Core GPU "
     "Architecture whitepaper lists them)",
     ""},
    {"h200", "NVIDIA H200 SXM 141GB", 141, 4800, 67, 494.7, 989.4, 989.4, 1978.9, 450,
     "NVLink 4: 900 GB/s both directions",
     "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/ (tensor "
     "figures dense: half the datasheet's with-sparsity ones)",
     "the H100's compute with more and faster memory"},
    {"gaudi1", "Intel Gaudi (first generation, HL-205)", 32, 900, kNone, kNone, kNone, kNone, kNone, 87.5,
     "10x 100 GbE RoCE; 7 join the cards of a node: 87.5 GB/s a direction",
     "Intel, Gaudi 3 AI Accelerator (Hot Chips 2024): 32 GB, 900 GB/s; Habana docs, Distributed "
     "Training Overview, https://docs.habana.ai/en/latest/ (7 of 10 ports for scale-up)",
     "no dense bf16 peak: the Hot Chips 2024 slide lists 'Peak Compute (BF16) 60 TFLOPs' without "
     "the engine or density, and no datasheet gives one, so step time is not predicted"},
    {"gaudi2", "Intel Gaudi 2 (HL-225)", 96, 2450, kNone, kNone, 432, kNone, 865, 262.5,
     "24x 100 GbE RoCE; 21 join the cards of a node: 262.5 GB/s a direction",
     "Habana Gaudi 2 white paper (2022), https://habana.ai/products/gaudi2/; Intel, Gaudi 3 AI "
     "Accelerator (Hot Chips 2024): BF16 432, FP8 865 matrix TFLOPS",
     "no fp32 matrix peak published"},
    {"gaudi3", "Intel Gaudi 3 (OAM)", 128, 3700, kNone, kNone, 1835, kNone, 1835, 525,
     "24x 200 GbE RoCE; 21 join the cards of a node: 525 GB/s a direction",
     "Intel Gaudi 3 AI Accelerator white paper (2024), https://www.intel.com/content/www/us/en/"
     "products/details/processors/ai-accelerators/gaudi-overview.html: BF16 and FP8 matrix 1835 "
     "TFLOPS, 128 GB HBM2e, 3.7 TB/s",
     "no fp32 matrix peak published"},
};

std::optional<Figure> modeled(double v) {
  if (std::isnan(v)) return std::nullopt;
  return Figure{v, FigureKind::Modeled};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

std::string gb(double bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(bytes < 10e9 ? 3 : 1);
  os << bytes / 1e9 << " GB";
  return os.str();
}

// Four significant digits, for seconds and rates in sentences.
std::string sig(double v) {
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

size_t ceil_div(int64_t a, int64_t b) { return size_t((a + b - 1) / b); }

}  // namespace

const std::vector<DeviceSpec>& device_catalog() {
  static const std::vector<DeviceSpec> catalog = [] {
    std::vector<DeviceSpec> v;
    for (const CatalogRow& r : kCatalog) {
      DeviceSpec d;
      d.id = r.id;
      d.name = r.name;
      d.memory_bytes = {r.memory_gb * 1e9, FigureKind::Modeled};
      d.memory_gbs = {r.memory_gbs, FigureKind::Modeled};
      d.fp32 = modeled(r.fp32);
      d.tf32 = modeled(r.tf32);
      d.bf16 = modeled(r.bf16);
      d.fp16 = modeled(r.fp16);
      d.fp8 = modeled(r.fp8);
      d.link_gbs = {r.link_gbs, FigureKind::Modeled};
      d.link = r.link;
      d.source = r.source;
      d.note = r.note;
      v.push_back(std::move(d));
    }
    return v;
  }();
  return catalog;
}

std::vector<std::string> device_names() {
  std::vector<std::string> names = {"cpu"};
  for (const DeviceSpec& d : device_catalog()) names.push_back(d.id);
  return names;
}

const DeviceSpec& catalog_device(std::string_view id) {
  const std::string key = lower(id);
  for (const DeviceSpec& d : device_catalog())
    if (d.id == key) return d;
  std::string known;
  for (const std::string& n : device_names()) known += cat(known.empty() ? "" : ", ", n);
  fail("[plan] unknown device '", id, "' (known: ", known, ")");
}

size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (in >> key >> kb) {
    std::getline(in, unit);  // " kB"
    if (key == "MemAvailable:") return size_t(kb * 1024);
  }
  fail("[plan] cannot read MemAvailable from /proc/meminfo: give the memory with --mem-gb");
}

MachineFigures measure_this_machine(Precision p) {
  MachineFigures m;
  m.precision = effective_precision(p);
  const DType type = m.precision == Precision::Bf16 ? DType::BF16 : DType::F32;
  m.gemm_peak_gflops = bench::measure_gemm_peak_gflops(type);
  m.cores = num_threads();
  if (m.cores > 1) {
    set_num_threads(1);
    m.core_peak_gflops = bench::measure_gemm_peak_gflops(type);
    set_num_threads(m.cores);
  }
  m.memory_gbs = bench::measure_bandwidth_gbs();
  m.memory_bytes = double(available_memory_bytes());
  return m;
}

namespace {

// A rank's threads (genperf's default: cores / ranks) and how many ranks run at once on `cores`
// (the others wait for a core). The probes time the ranks that run at once in step with each
// other, so that each figure is what a rank gets beside them (memory bandwidth and cache
// shared), not alone.
struct RankThreads {
  int threads, together;
};
RankThreads rank_threads(const PlanOptions& o, int cores) {
  const int threads = std::max(1, cores / o.ranks);
  return {threads, std::min(o.ranks, std::max(1, cores / threads))};
}

}  // namespace

double measure_rank_gemm_gflops(const LlamaConfig& c, const PlanOptions& o, int cores) {
  o.validate();
  GP_CHECK(cores >= 1, "[plan] cores must be positive, got ", cores);
  const RankThreads rt = rank_threads(o, cores);  // plain names: lambdas below capture them
  const int threads = rt.threads, together = rt.together;
  const int64_t N = o.batch * o.seq, C = c.hidden_size, FF = c.intermediate_size;
  const bool frozen = o.lora.has_value();  // LoRA: no gradient of the base weights
  const bool bf16 = o.train.precision == Precision::Bf16;
  struct Shape {
    int64_t in, out, count;
  };
  const Shape shapes[] = {{C, c.q_dim() + 2 * c.kv_dim(), c.num_hidden_layers},
                          {c.q_dim(), C, c.num_hidden_layers},
                          {C, 2 * FF, c.num_hidden_layers},
                          {FF, C, c.num_hidden_layers},
                          {C, c.vocab_size, 1}};
  constexpr int kReps = 3;
  double flops = 0;
  int64_t most_in = 0, most_out = 0, most_w = 0;  // each rank's operands fit every shape
  for (const Shape& s : shapes) {
    flops += 2.0 * double(N) * double(s.in) * double(s.out) * (frozen ? 2.0 : 3.0) * double(s.count);
    most_in = std::max(most_in, s.in);
    most_out = std::max(most_out, s.out);
    most_w = std::max(most_w, s.in * s.out);
  }
  std::vector<double> seconds(size_t(together), 0.0);
  std::barrier sync(together);
  auto rank = [&](int r) {
    set_num_threads(threads);  // OpenMP's thread count is each thread's own
    // Values of no consequence to the time (no denormals, no NaN).
    std::vector<float> inp(size_t(N * most_in), 0.01f), dout(size_t(N * most_out), 0.01f), w(size_t(most_w), 0.01f);
    std::vector<float> out(static_cast<size_t>(N * most_out)), dinp(static_cast<size_t>(N * most_in)),
        dw(static_cast<size_t>(most_w));
    std::vector<uint16_t> b_inp, b_dout, b_w;
    ops::Bf16Scratch scratch;
    if (bf16) {
      b_inp.resize(size_t(N * most_in));
      b_dout.resize(size_t(N * most_out));
      b_w.resize(size_t(most_w));
      scratch = {b_inp, b_dout, b_w};
    }
    for (const Shape& s : shapes) {
      auto run = [&] {
        ops::matmul_forward(out.data(), inp.data(), w.data(), static_cast<const float*>(nullptr), N, s.in, s.out,
                            bf16 ? &scratch : nullptr);
        ops::matmul_backward(dinp.data(), frozen ? nullptr : dw.data(), static_cast<float*>(nullptr), dout.data(),
                             inp.data(), w.data(), N, s.in, s.out, bf16 ? &scratch : nullptr);
      };
      run();  // warm-up: oneDNN's primitive for the shape, first touch of the operands
      double t[kReps];
      for (double& x : t) {
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        run();
        x = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      std::sort(t, t + kReps);
      seconds[size_t(r)] += t[kReps / 2] * double(s.count);
    }
  };
  const int before = num_threads();
  {
    std::vector<std::jthread> others;
    for (int r = 1; r < together; ++r) others.emplace_back(rank, r);
    rank(0);
  }
  set_num_threads(before);
  // Ranks beyond those that run at once take turns on the cores.
  const double shared = double(together) / double(o.ranks);
  const double mean_s = std::accumulate(seconds.begin(), seconds.end(), 0.0) / double(together);
  return flops / mean_s / 1e9 * shared;
}

namespace {

// The probe's model: the job's widths with `layers` decoder layers.
LlamaConfig probe_config(const LlamaConfig& c, int64_t layers) {
  LlamaConfig p = c;
  p.num_hidden_layers = layers;
  return p;
}

constexpr int64_t kProbeLayers[2] = {1, 4};

double median_of(std::vector<double> v) { return Stats::of(std::move(v)).median; }

}  // namespace

Json RankStepFigures::to_json() const {
  auto f = [](double v) { return Figure{v, FigureKind::Measured}.to_json(); };
  return Json::Object{{"layer_forward_s", f(layer_forward_s)},
                      {"layer_backward_s", f(layer_backward_s)},
                      {"rest_forward_s", f(rest_forward_s)},
                      {"rest_backward_s", f(rest_backward_s)},
                      {"adamw_s_per_param", f(adamw_s_per_param)},
                      {"zero_s_per_param", f(zero_s_per_param)},
                      {"norm_s_per_param", f(norm_s_per_param)}};
}

double rank_step_probe_bytes(const LlamaConfig& c, const PlanOptions& o, int cores) {
  const int together = rank_threads(o, cores).together;
  const LlamaConfig p = probe_config(c, kProbeLayers[1]);
  TrainOptions t = o.train;
  t.checkpoint_layers = false;
  const LoraConfig* lora = o.lora ? &*o.lora : nullptr;
  const double P = double(p.num_parameters()), trained = lora ? double(lora_parameters(p, *lora)) : P;
  // Weights, the trained parameters' gradients and AdamW's two moments, and one step's activations.
  const double bytes = 4 * P + 12 * trained + double(TrainModel::activation_memory(p, t, o.batch, o.seq, lora).total());
  return bytes * together;
}

RankStepFigures measure_rank_step(const LlamaConfig& c, const PlanOptions& o, int cores) {
  o.validate();
  GP_CHECK(cores >= 1, "[plan] cores must be positive, got ", cores);
  const RankThreads rt = rank_threads(o, cores);  // plain names: lambdas below capture them
  const int threads = rt.threads, together = rt.together;
  // Timed steps per model: at least 5, and enough for a second (at most 41), so that
  // a short step's median is not one burst of a busy machine's.
  constexpr int kMinReps = 5, kMaxReps = 41, kAdamReps = 3;
  constexpr double kProbeSeconds = 1.0;
  std::vector<double> warm(static_cast<size_t>(together));
  struct Times {
    double forward[2] = {0, 0}, backward[2] = {0, 0}, adamw_per_param = 0, zero_per_param = 0, norm_per_param = 0;
  };
  std::vector<Times> times(static_cast<size_t>(together));
  std::barrier sync(together);
  auto rank = [&](int r) {
    set_num_threads(threads);  // OpenMP's thread count is each thread's own
    TrainOptions t = o.train;
    t.checkpoint_layers = false;  // the plan adds the recompute from the layers' forward
    const int64_t n = o.batch * o.seq;
    std::vector<int32_t> tokens(static_cast<size_t>(n)), targets(static_cast<size_t>(n));
    Rng rng(uint64_t(r) + 1);  // any tokens: the time does not depend on them
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = int32_t(rng.next() % uint64_t(c.vocab_size));
      targets[i] = int32_t(rng.next() % uint64_t(c.vocab_size));
    }
    for (int k = 0; k < 2; ++k) {
      TrainModel m(probe_config(c, kProbeLayers[k]), /*seed=*/1, t);
      if (o.lora) m.enable_lora(*o.lora);
      std::vector<double> fwd, bwd;
      int reps = kMinReps;
      for (int rep = -1; rep < reps; ++rep) {  // rep -1: the warm-up (oneDNN's primitives, first touch)
        m.zero_grad();
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        m.forward(tokens, targets, o.batch, o.seq);
        const auto t1 = std::chrono::steady_clock::now();
        m.backward();
        const auto t2 = std::chrono::steady_clock::now();
        if (rep < 0) {  // every rank takes the same count, from the slowest warm-up
          warm[size_t(r)] = std::chrono::duration<double>(t2 - t0).count();
          sync.arrive_and_wait();
          const double slowest = *std::max_element(warm.begin(), warm.end());
          reps = std::clamp(int(std::ceil(kProbeSeconds / std::max(slowest, 1e-6))), kMinReps, kMaxReps);
          continue;
        }
        fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
        bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
      }
      times[size_t(r)].forward[k] = median_of(fwd);
      times[size_t(r)].backward[k] = median_of(bwd);
      if (k == 1) {  // the passes over the parameters, in the order a step makes them
        const std::span<float> params = m.trainable_params();
        const std::vector<ParamSegment> segments = m.trainable_segments();
        AdamW opt(params.size());
        std::vector<double> zero, norm, adam;
        auto timed = [&](std::vector<double>& into, auto&& pass, int rep) {
          sync.arrive_and_wait();
          const auto t0 = std::chrono::steady_clock::now();
          pass();
          if (rep >= 0) into.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        };
        for (int rep = -1; rep < kAdamReps; ++rep) {
          timed(zero, [&] { m.zero_grad(); }, rep);
          timed(norm, [&] { clip_grad_norm(m.trainable_grads(), 1.0); }, rep);
          timed(adam, [&] { opt.step(params, m.trainable_grads(), segments, 1e-6f); }, rep);
        }
        const double n = double(params.size());
        times[size_t(r)].zero_per_param = median_of(zero) / n;
        times[size_t(r)].norm_per_param = median_of(norm) / n;
        times[size_t(r)].adamw_per_param = median_of(adam) / n;
      }
    }
  };
  const int before = num_threads();
  {
    std::vector<std::jthread> others;
    for (int r = 1; r < together; ++r) others.emplace_back(rank, r);
    rank(0);
  }
  set_num_threads(before);
  // The mean over the ranks that ran at once; ranks beyond them take turns on the cores.
  const double turns = double(o.ranks) / double(together);
  auto mean = [&](auto get) {
    double sum = 0;
    for (const Times& t : times) sum += get(t);
    return sum / double(together) * turns;
  };
  const double span = double(kProbeLayers[1] - kProbeLayers[0]);
  RankStepFigures f;
  f.layer_forward_s = std::max(0.0, mean([](const Times& t) { return t.forward[1] - t.forward[0]; }) / span);
  f.layer_backward_s = std::max(0.0, mean([](const Times& t) { return t.backward[1] - t.backward[0]; }) / span);
  f.rest_forward_s = std::max(0.0, mean([](const Times& t) { return t.forward[0]; }) - f.layer_forward_s);
  f.rest_backward_s = std::max(0.0, mean([](const Times& t) { return t.backward[0]; }) - f.layer_backward_s);
  f.adamw_s_per_param = mean([](const Times& t) { return t.adamw_per_param; });
  f.zero_s_per_param = mean([](const Times& t) { return t.zero_per_param; });
  f.norm_s_per_param = mean([](const Times& t) { return t.norm_per_param; });
  return f;
}

DeviceSpec this_machine(const MachineFigures& m) {
  GP_CHECK(m.gemm_peak_gflops > 0 && m.memory_gbs > 0 && m.memory_bytes > 0,
           "[plan] this machine's figures must be positive, got GEMM peak ", m.gemm_peak_gflops,
           " GFLOP/s, bandwidth ", m.memory_gbs, " GB/s, memory ", m.memory_bytes, " bytes");
  DeviceSpec d;
  d.id = "cpu";
  d.name = "this machine";
  d.memory_bytes = {m.memory_bytes, FigureKind::Measured};
  d.memory_gbs = {m.memory_gbs, m.kind};
  const Figure peak{m.gemm_peak_gflops / 1e3, m.kind};
  (m.precision == Precision::Bf16 ? d.bf16 : d.fp32) = peak;
  d.link_gbs = {m.memory_gbs / kShmPassesPerByte, FigureKind::Modeled};
  d.link = cat("shared-memory MPI between the ranks of this node: the measured read bandwidth / ",
               kShmPassesPerByte, " (copy in, copy out)");
  d.source = m.kind == FigureKind::Given
                 ? std::string("peak and bandwidth given (--peak-gflops, --bandwidth-gbs), MemAvailable of /proc/meminfo")
                 : cat("measured in this run: oneDNN ", precision_name(m.precision),
                       " GEMM 2048^3 (median of 5), read bandwidth over memory_probe_bytes (median of 5), "
                       "MemAvailable of /proc/meminfo");
  d.note = "only the peak of the precision asked for is measured";
  d.shared_by_ranks = true;
  d.cores = m.cores;
  if (m.cores > 1 && m.core_peak_gflops > 0) {
    d.one_core_share = std::min(1.0, m.core_peak_gflops / m.gemm_peak_gflops);
    d.note += cat("; one core reaches ", m.core_peak_gflops, " GFLOP/s alone, ", d.one_core_share,
                  " of the ", m.cores, "-core peak");
  }
  return d;
}

double DeviceSpec::rank_peak_share(int ranks) const {
  if (!shared_by_ranks || ranks <= 1) return 1.0;
  if (cores <= 1 || one_core_share <= 0) return 1.0 / double(ranks);
  if (ranks > cores) return one_core_share * double(cores) / double(ranks);
  const double threads = double(cores / ranks);
  return one_core_share + (1.0 - one_core_share) * (threads - 1.0) / double(cores - 1);
}

const char* plan_overlap_name(PlanOverlap o) { return o == PlanOverlap::Buckets ? "buckets" : "none"; }

PlanOverlap parse_plan_overlap(std::string_view s) {
  if (s == "buckets") return PlanOverlap::Buckets;
  if (s == "none") return PlanOverlap::None;
  fail("[plan] unknown overlap '", s, "' (known: buckets, none)");
}

ModelStateBytes planned_model_state(int64_t P, ShardMode s, int ranks) {
  GP_CHECK(P > 0 && ranks >= 1, "[plan] parameters and ranks must be positive, got ", P, " and ", ranks);
  const size_t full = size_t(P) * sizeof(float), shard = ceil_div(P, ranks) * sizeof(float);
  ModelStateBytes b;
  b.params = s == ShardMode::Full ? shard : full;
  b.grads = s == ShardMode::Grads || s == ShardMode::Full ? shard : full;
  b.optimizer = 2 * (s == ShardMode::None ? full : shard);  // AdamW's two moments
  return b;
}

double planned_comm_bytes(int64_t P, ShardMode s, int ranks) {
  const double passes = s == ShardMode::Full ? 3 : 2;
  return passes * double(P) * double(ranks - 1) / double(ranks) * sizeof(float);
}

namespace {

int64_t layer_params(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, FF = c.intermediate_size;
  int64_t layer = C * (c.q_dim() + 2 * c.kv_dim()) + c.q_dim() * C + 3 * C * FF + 2 * C;
  if (c.attention_bias) layer += c.q_dim() + 2 * c.kv_dim();
  return layer;
}

}  // namespace

int64_t largest_unit_params(const LlamaConfig& c) {
  return std::max(layer_params(c), c.vocab_size * c.hidden_size);
}

size_t planned_comm_buffer_bytes(const LlamaConfig& c, ShardMode s, int ranks, size_t bucket_bytes,
                                 const LoraConfig* lora) {
  if (ranks <= 1 || s == ShardMode::None || s == ShardMode::Optimizer) return 0;
  // The flat buffer, in floats: the embedding, the layers, the final norm, the head (untied);
  // fully sharded, units 0 (embedding), 1 + l (layer l) and L + 1 (norm and head, or with tied
  // embeddings the norm and the embedding's range) are gathered one at a time.
  const int64_t L = c.num_hidden_layers;
  const double E = double(c.vocab_size * c.hidden_size), layer = double(layer_params(c));
  const double P = double(c.num_parameters()), f = sizeof(float);
  // Each unit's ranges, and the values of the units held at once (the union of their ranges:
  // with tied embeddings the head's range is the embedding's). Counted in values, as the
  // system's 4 KiB pages hold them; where the kernel backs a window with 2 MiB pages, up to a
  // page more at each edge of a held range.
  auto ranges = [&](int64_t u) -> std::vector<std::pair<double, double>> {
    if (u == 0) return {{0, E}};
    if (u <= L) return {{E + double(u - 1) * layer, E + double(u) * layer}};
    if (c.tie_word_embeddings) return {{E + double(L) * layer, P}, {0, E}};
    return {{E + double(L) * layer, P}};
  };
  auto held = [&](std::initializer_list<int64_t> units) {
    std::vector<std::pair<double, double>> r;
    for (int64_t u : units)
      for (const auto& range : ranges(u)) r.push_back(range);
    std::sort(r.begin(), r.end());
    double bytes = 0, end = 0;
    for (const auto& [lo, hi] : r) {
      bytes += std::max(0.0, hi - std::max(lo, end));
      end = std::max(end, hi);
    }
    return bytes;
  };
  // The parameter window's peak in forward: a unit and the next one (prefetched).
  double params_fwd = held({L + 1});
  for (int64_t u = 0; u <= L; ++u) params_fwd = std::max(params_fwd, held({u, u + 1}));
  if (lora) {
    // The adapters' windows hold at most all adapters each; fully sharded, the frozen base's
    // window holds what the parameter window does (no gradients).
    const double adapters = f * double(lora_parameters(c, *lora));
    return size_t(s == ShardMode::Full ? 2 * adapters + f * params_fwd : adapters);
  }
  // The gradient window, replayed as DataParallel runs it: buckets laid from the end of the
  // buffer (inner edges on 2 MiB pages); backward finishes the head, then each layer from the
  // last, then the embedding; each time the buckets now final start, and backward goes on once
  // at most K = DistOptions::inflight_buckets are still reducing. At its fullest (a link slower
  // than backward) the window then holds, when a unit is finished, the gradients from that
  // unit's start up to the top of the K lowest buckets started before (tied, the embedding's
  // too: the head writes them first, the last bucket takes them).
  const auto buckets = gradient_buckets(size_t(c.num_parameters()), bucket_bytes);
  const size_t K = DistOptions{}.inflight_buckets;
  auto top = [&](double from) {  // of the K lowest buckets that start at or after `from`
    const size_t started =
        size_t(std::count_if(buckets.begin(), buckets.end(), [&](const auto& b) { return double(b.first) >= from; }));
    return started <= K ? P : double(buckets[started - K - 1].first);
  };
  const double tied = c.tie_word_embeddings ? E : 0.0;
  double peak = 0, before = P;  // `before`: where the gradients were final at the previous point
  for (int64_t u = L + 1; u >= 0; --u) {
    // Unit u's gradients are final from `from`: the norm's start for the head, the layer's start.
    const double from = u == 0 ? 0.0 : u == L + 1 ? E + double(L) * layer : E + double(u - 1) * layer;
    const double grads =
        std::min(P, top(before) - from + (u > 0 ? tied : 0.0));
    // Fully sharded, the unit's parameters are still held and the next unit's prefetched (the
    // embedding's gradient reads no parameters; layer 0 prefetches nothing).
    const double params = s != ShardMode::Full || u == 0 ? 0.0 : u >= 2 ? held({u, u - 1}) : held({u});
    peak = std::max(peak, grads + params);
    before = from;
  }
  if (s == ShardMode::Full) peak = std::max(peak, params_fwd);
  return size_t(f * peak);
}

double planned_step_flops(const LlamaConfig& c, int64_t batch, int64_t seq, bool checkpoint_layers,
                          const LoraConfig* lora) {
  const double step = train_step_flops(c, batch, seq, lora);
  if (!checkpoint_layers) return step;
  // Full training's step is 3x the forward (LoRA's forward is the same); the output head
  // (2 V d per token) is not recomputed.
  const double head = 2.0 * double(c.vocab_size) * double(c.hidden_size) * double(batch * seq);
  return step + train_step_flops(c, batch, seq) / 3.0 - head;
}

void PlanOptions::validate() const {
  GP_CHECK(ranks >= 1, "[plan] --ranks must be at least 1, got ", ranks);
  GP_CHECK(batch >= 1 && seq >= 1, "[plan] --batch and --seq must be positive, got ", batch, " and ", seq);
  GP_CHECK(efficiency > 0 && efficiency <= 1, "[plan] --efficiency must be in (0, 1], got ", efficiency);
  GP_CHECK(comm_efficiency > 0 && comm_efficiency <= 1, "[plan] --comm-efficiency must be in (0, 1], got ",
           comm_efficiency);
  GP_CHECK(bucket_bytes > 0, "[plan] the gradient bucket must be positive");
  GP_CHECK(!rank_gemm_gflops || *rank_gemm_gflops > 0, "[plan] a rank's GEMM rate must be positive, got ",
           rank_gemm_gflops ? *rank_gemm_gflops : 0.0);
  GP_CHECK(!rank_step || (rank_step->layer_forward_s >= 0 && rank_step->layer_backward_s >= 0 &&
                          rank_step->rest_forward_s >= 0 && rank_step->rest_backward_s >= 0 &&
                          rank_step->adamw_s_per_param >= 0 && rank_step->zero_s_per_param >= 0 &&
                          rank_step->norm_s_per_param >= 0 &&
                          rank_step->forward_s(1) + rank_step->backward_s(1, false) > 0),
           "[plan] a timed step's seconds must be non-negative and the step positive");
  GP_CHECK(!memory_cap_bytes || *memory_cap_bytes > 0, "[plan] --mem-gb must be positive, got ",
           memory_cap_bytes ? *memory_cap_bytes / 1e9 : 0.0);
}

Json ShardPlan::to_json() const {
  Json j = Json::Object{
      {"shard", shard_mode_name(shard)},
      {"checkpoint_layers", checkpoint_layers},
      {"memory", Json::Object{{"weights", int64_t(state.params)},
                              {"grads", int64_t(state.grads)},
                              {"optimizer", int64_t(state.optimizer)},
                              {"frozen", int64_t(state.frozen)},
                              {"activations", int64_t(activations.total())},
                              {"activations_detail", activations.to_json()},
                              {"comm_buffers", int64_t(comm_buffers)},
                              {"total", int64_t(total())}}},
      {"fits", fits},
      {"verdict", verdict},
      {"flops_per_rank", flops},
      {"comm_bytes_per_rank", comm_bytes},
      {"timed", timed},
      {"kind", "modeled"}};
  if (timed) {
    j["compute_s"] = compute_s;
    j["optimizer_s"] = optimizer_s;
    j["window_fill_s"] = window_fill_s;
    j["comm_core_s"] = comm_core_s;
    j["comm_s"] = comm_s;
    j["exposed_comm_s"] = exposed_comm_s;
    j["step_s"] = step_s;
    j["tokens_per_s"] = tokens_per_s;
  }
  return j;
}

Json InferencePlan::to_json() const {
  Json j = Json::Object{{"memory", Json::Object{{"weights", int64_t(weights)},
                                                {"kv_cache", int64_t(kv_cache)},
                                                {"total", int64_t(total())}}},
                        {"fits", fits},
                        {"verdict", verdict},
                        {"timed", timed},
                        {"kind", "modeled"}};
  if (timed) {
    j["prefill_s"] = prefill_s;
    j["decode_s"] = decode_s;
    j["decode_tokens_per_s"] = decode_tokens_per_s;
  }
  return j;
}

Json PlanResult::to_json() const {
  const PlanOptions& o = options;
  Json j = Json::Object{
      {"model", model},
      {"parameters", parameters},
      {"mode", o.inference ? "inference" : "train"},
      {"ranks", int64_t(o.ranks)},
      {"batch_per_rank", o.batch},
      {"seq", o.seq},
      {"precision", precision_name(o.train.precision)},
      {"device", device.to_json()},
      {"capacity_bytes", capacity.to_json()},
      {"assumptions",
       Json::Object{{"efficiency", Figure{o.efficiency, o.efficiency_given ? FigureKind::Given : FigureKind::Modeled}.to_json()},
                    {"comm_efficiency", o.comm_efficiency},
                    {"rank_gemm_gflops", o.rank_gemm_gflops ? Figure{*o.rank_gemm_gflops, FigureKind::Measured}.to_json() : Json()},
                    {"rank_step", o.rank_step ? o.rank_step->to_json() : Json()},
                    {"overlap", plan_overlap_name(o.overlap)},
                    {"bucket_bytes", int64_t(o.bucket_bytes)},
                    {"adamw_bytes_per_param", kAdamWBytesPerParam},
                    {"prefer_unsharded_within", kPreferUnshardedWithin}}}};
  if (o.inference) {
    j["weight_dtype"] = dtype_name(o.weight_dtype);
    j["kv_dtype"] = dtype_name(o.kv_dtype);
    j["inference"] = inference ? inference->to_json() : Json();
  } else {
    j["attention"] = attention_mode_name(o.train.attention);
    j["checkpoint_layers"] = o.train.checkpoint_layers;
    if (o.lora) {
      Json::Array targets(o.lora->targets.begin(), o.lora->targets.end());
      j["lora"] = Json::Object{{"rank", int64_t(o.lora->rank)}, {"targets", Json(std::move(targets))}};
    }
    Json::Array a, b;
    for (const ShardPlan& p : plans) a.push_back(p.to_json());
    for (const ShardPlan& p : alternative) b.push_back(p.to_json());
    j["plans"] = Json(std::move(a));
    j["plans_other_checkpointing"] = Json(std::move(b));
    j["recommended"] = recommended ? recommended->to_json() : Json();
  }
  j["recommendation"] = recommendation;
  j["notes"] = Json::Array(notes.begin(), notes.end());
  return j;
}

namespace {

std::string verdict(size_t need, double has) {
  return double(need) <= has ? cat("fits: ", gb(double(need)), " of ", gb(has))
                             : cat("does not fit: needs ", gb(double(need)), ", has ", gb(has));
}

// Seconds of a communication phase that stay exposed: the part that cannot overlap (`unhidden`),
// and whatever of the rest does not fit under the phase's compute.
double exposed(double comm_s, double unhidden_s, double compute_s, PlanOverlap o) {
  if (o == PlanOverlap::None) return comm_s;
  return unhidden_s + std::max(0.0, comm_s - unhidden_s - compute_s);
}

}  // namespace

ShardPlan plan_memory(const LlamaConfig& c, const PlanOptions& o, double capacity, ShardMode s, bool checkpoint) {
  ShardPlan p;
  p.shard = s;
  p.checkpoint_layers = checkpoint;
  const int64_t F = c.num_parameters();
  const int64_t P = o.lora ? lora_parameters(c, *o.lora) : F;
  p.state = planned_model_state(P, s, o.ranks);
  const bool gathered = s == ShardMode::Full && o.ranks > 1;
  if (o.lora) p.state.frozen = (gathered ? ceil_div(F, o.ranks) : size_t(F)) * sizeof(float);
  TrainOptions t = o.train;
  t.checkpoint_layers = checkpoint;
  // The precision the device runs: callers planning this machine pass its effective one.
  p.activations = TrainModel::activation_memory(c, t, o.batch, o.seq, o.lora ? &*o.lora : nullptr, /*as_requested=*/true);
  p.comm_buffers = planned_comm_buffer_bytes(c, s, o.ranks, o.bucket_bytes, o.lora ? &*o.lora : nullptr);
  p.fits = double(p.total()) <= capacity;
  p.verdict = verdict(p.total(), capacity);
  return p;
}

double planned_window_fill_bytes(int64_t P, int64_t F, ShardMode s, int ranks, bool lora) {
  if (ranks <= 1) return 0;
  if (s == ShardMode::Grads) return 4.0 * double(P);
  if (s == ShardMode::Full) return 12.0 * double(P) + (lora ? 8.0 * double(F) : 0.0);
  return 0;
}

namespace {

ShardPlan plan_shard(const LlamaConfig& c, const DeviceSpec& d, const PlanOptions& o, double capacity,
                     ShardMode s, bool checkpoint) {
  const int N = o.ranks;
  // With LoRA the collectives move the adapters, and full sharding also gathers the frozen base.
  const int64_t F = c.num_parameters(), P = o.lora ? lora_parameters(c, *o.lora) : F;
  const LoraConfig* lora = o.lora ? &*o.lora : nullptr;
  ShardPlan p = plan_memory(c, o, capacity, s, checkpoint);
  p.flops = planned_step_flops(c, o.batch, o.seq, checkpoint, lora);
  const double frozen_gather_bytes =
      lora && s == ShardMode::Full ? 2 * double(F) * double(N - 1) / double(N) * sizeof(float) : 0;
  p.comm_bytes = planned_comm_bytes(P, s, N) + frozen_gather_bytes;
  const std::optional<Figure> peak = d.peak_tflops(o.train.precision);
  if (!peak) return p;
  p.timed = true;
  const double owned = double(s == ShardMode::None ? size_t(P) : ceil_div(P, N));
  double forward_s, backward_s;
  if (o.rank_step) {  // the job's step, timed on this machine
    const double e = o.efficiency_given ? o.efficiency : 1.0;
    forward_s = o.rank_step->forward_s(c.num_hidden_layers) / e;
    backward_s = o.rank_step->backward_s(c.num_hidden_layers, checkpoint) / e;
    p.compute_s = forward_s + backward_s;
    // The step's passes over the parameters (DataParallel::step): AdamW over the rank's own;
    // the gradient norm over its shard where sharded, else over all; zero_grad over all unless
    // the gradients are a window (ZeRO-2 and -3 refill it as zeros: window_fill_s), where the
    // shard's gradients are zeroed instead.
    const bool sharded = s != ShardMode::None && N > 1;
    const bool window = (s == ShardMode::Grads || s == ShardMode::Full) && N > 1;
    const RankStepFigures& t = *o.rank_step;
    p.optimizer_s = owned * t.adamw_s_per_param + (sharded ? owned : double(P)) * t.norm_s_per_param +
                    (window ? owned : double(P)) * t.zero_s_per_param;
  } else {
    // FLOP/s of the step: the matmuls' rate at this job's shapes where it was timed, else the peak.
    const double rate = (o.rank_gemm_gflops ? *o.rank_gemm_gflops * 1e9 : peak->value * 1e12) * o.efficiency;
    p.compute_s = p.flops / rate;
    // Forward is a third of full training's step (LoRA's forward is the same); backward the rest
    // (and the recompute).
    forward_s = train_step_flops(c, o.batch, o.seq) / 3.0 / rate;
    backward_s = p.compute_s - forward_s;
    p.optimizer_s = kAdamWBytesPerParam * owned / (d.memory_gbs.value * 1e9);
  }
  double beside_compute_s = 0;  // of the collectives that run while compute does
  if (N > 1) {
    // Seconds of each collective over all P parameters: at the measured bus bandwidths (plan
    // --comm, a job of this rank count), else at the link's (an all-reduce sends two passes).
    const double pass_bytes = double(P) * double(N - 1) / double(N) * sizeof(float);  // one P (N-1)/N
    double all_reduce_s, reduce_scatter_s, all_gather_s, gather_gbs;
    if (d.collectives && d.collectives->ranks == N) {
      all_reduce_s = 2 * pass_bytes / (d.collectives->all_reduce_gbs * 1e9);
      reduce_scatter_s = pass_bytes / (d.collectives->reduce_scatter_gbs * 1e9);
      gather_gbs = d.collectives->all_gather_gbs;
    } else {
      gather_gbs = d.link_gbs.value * o.comm_efficiency;
      reduce_scatter_s = pass_bytes / (gather_gbs * 1e9);
      all_reduce_s = 2 * reduce_scatter_s;
    }
    // Full sharding with LoRA gathers the frozen base with the adapters (once each way).
    all_gather_s = (pass_bytes + frozen_gather_bytes / 2) / (gather_gbs * 1e9);
    const double bucket = std::min(1.0, double(o.bucket_bytes) / (double(P) * sizeof(float)));
    // The share of a pass that the largest unit is (with LoRA fully sharded the pass gathers the
    // base too).
    const double gathered = double(P) + (frozen_gather_bytes > 0 ? double(F) : 0.0);
    const double unit = std::min(1.0, double(largest_unit_params(c)) / gathered);
    switch (s) {
      case ShardMode::None:  // all-reduce of the buckets during backward
        p.comm_s = all_reduce_s;
        p.exposed_comm_s = exposed(all_reduce_s, all_reduce_s * bucket, backward_s, o.overlap);
        break;
      case ShardMode::Optimizer:
      case ShardMode::Grads:  // reduce-scatter during backward, all-gather after the update
        p.comm_s = reduce_scatter_s + all_gather_s;
        beside_compute_s = reduce_scatter_s;
        p.exposed_comm_s = exposed(reduce_scatter_s, reduce_scatter_s * bucket, backward_s, o.overlap) + all_gather_s;
        break;
      case ShardMode::Full: {  // gather in forward; gather and reduce-scatter in backward
        const double back = all_gather_s + reduce_scatter_s;
        p.comm_s = all_gather_s + back;
        beside_compute_s = p.comm_s;
        p.exposed_comm_s = exposed(all_gather_s, all_gather_s * unit, forward_s, o.overlap) +
                           exposed(back, back * unit, backward_s, o.overlap);
        break;
      }
    }
  }
  if (d.shared_by_ranks)  // a catalogued accelerator's memory would be a caching allocator's: no faults
    p.window_fill_s = planned_window_fill_bytes(P, F, s, N, lora != nullptr) / (d.memory_gbs.value * 1e9);
  // This machine, grads and full: their buckets reduce during backward (--comm-overlap auto keeps
  // it, the windows drain so), and with the ranks filling the cores the communication threads'
  // copies and additions run on the cores compute uses. Nothing hides: the collectives' seconds
  // are exposed, and the core time of those that run beside compute is taken from it besides:
  // their seconds times the share of a core a rank has (1 while each rank has a core;
  // collectives at more ranks than cores ran time-shared, so their seconds hold less core time).
  // Beside compute run grads' reduce-scatter (its all-gather follows the update, with compute
  // idle) and all of full's collectives (gathers in forward and backward, the reduce-scatter).
  if (d.shared_by_ranks && N > 1 && (s == ShardMode::Grads || s == ShardMode::Full)) {
    p.exposed_comm_s = p.comm_s;
    p.comm_core_s = beside_compute_s *
                    (d.cores > 0 ? std::min(1.0, double(d.cores) / double(N)) : 1.0 / double(N));
  }
  p.step_s = p.compute_s + p.optimizer_s + p.exposed_comm_s + p.window_fill_s + p.comm_core_s;
  p.tokens_per_s = double(N) * double(o.batch * o.seq) / p.step_s;
  return p;
}

InferencePlan plan_inference(const LlamaConfig& c, const DeviceSpec& d, const PlanOptions& o, double capacity) {
  InferencePlan p;
  const TypeTraits &w = traits(o.weight_dtype), &kv = traits(o.kv_dtype);
  p.weights = size_t(std::ceil(double(c.num_parameters()) * double(w.block_bytes) / double(w.block_size)));
  p.kv_cache = size_t(std::ceil(2.0 * double(c.num_hidden_layers) * double(c.kv_dim()) * double(o.seq) *
                                double(o.batch) * double(kv.block_bytes) / double(kv.block_size)));
  p.fits = double(p.total()) <= capacity;
  p.verdict = verdict(p.total(), capacity);
  const std::optional<Figure> peak = d.peak_tflops(o.train.precision);
  if (!peak) return p;
  p.timed = true;
  p.prefill_s = train_step_flops(c, o.batch, o.seq) / 3.0 / (peak->value * 1e12 * o.efficiency);
  // Each decode step reads every weight and the whole cache once.
  p.decode_s = double(p.total()) / (d.memory_gbs.value * 1e9);
  p.decode_tokens_per_s = double(o.ranks) * double(o.batch) / p.decode_s;
  return p;
}

// Whether a beats b as a recommendation: faster, or as fast (to rounding: recomputation that only
// hides more communication gives the same step) with less sharding and no recompute.
bool faster(const ShardPlan& a, const ShardPlan& b) {
  if (std::abs(a.step_s - b.step_s) > 1e-9 * std::max(a.step_s, b.step_s)) return a.step_s < b.step_s;
  if (a.shard != b.shard) return a.shard < b.shard;
  return !a.checkpoint_layers && b.checkpoint_layers;
}

void recommend(PlanResult& r) {
  const PlanOptions& o = r.options;
  std::vector<const ShardPlan*> fit;
  for (const auto* set : {&r.plans, &r.alternative})
    for (const ShardPlan& p : *set)
      if (p.fits) fit.push_back(&p);
  const std::string where = cat(o.ranks, o.ranks == 1 ? " rank" : " ranks", " of ", r.device.name);
  auto how = [&](const ShardPlan& p) {
    return cat("--shard ", shard_mode_name(p.shard), p.checkpoint_layers ? " with --checkpoint-layers" : "");
  };
  if (fit.empty()) {
    const ShardPlan* least = &r.plans.back();
    for (const ShardPlan& p : r.alternative)
      if (p.total() < least->total()) least = &p;
    r.recommendation = cat("nothing fits on ", where, ": even ", how(*least), " needs ", gb(double(least->total())),
                           " per rank, has ", gb(r.capacity.value), "; use more ranks or a smaller batch");
    return;
  }
  if (!fit.front()->timed) {
    // No peak for the precision: by memory alone, the least sharding, without recompute if it fits.
    const ShardPlan* best = *std::min_element(fit.begin(), fit.end(), [](const ShardPlan* a, const ShardPlan* b) {
      return a->shard != b->shard ? a->shard < b->shard : (!a->checkpoint_layers && b->checkpoint_layers);
    });
    r.recommended = *best;
    r.recommendation = cat(how(*best), ": the least sharding that fits (", best->verdict, "); no step time: ",
                           r.device.name, " publishes no dense ", precision_name(o.train.precision), " peak");
    return;
  }
  const ShardPlan* best = *std::min_element(fit.begin(), fit.end(), [](const ShardPlan* a, const ShardPlan* b) {
    return faster(*a, *b);
  });
  const ShardPlan* unsharded = nullptr;
  for (const ShardPlan* p : fit)
    if (p->shard == ShardMode::None && (!unsharded || faster(*p, *unsharded))) unsharded = p;
  if (unsharded && unsharded != best && unsharded->step_s <= best->step_s * (1 + kPreferUnshardedWithin)) {
    r.recommended = *unsharded;
    r.recommendation = cat(how(*unsharded), ": unsharded fits (", unsharded->verdict, ") and is within ",
                           int(kPreferUnshardedWithin * 100), "% of the fastest (", how(*best), ", ",
                           sig(best->step_s), " s against ", sig(unsharded->step_s),
                           " s a step): sharding buys no speed worth its complexity");
    return;
  }
  r.recommended = *best;
  std::string why = best->shard == ShardMode::None ? "unsharded fits and is the fastest" : "the fastest plan that fits";
  if (!unsharded) why += cat("; unsharded ", r.plans.front().verdict);
  if (best->checkpoint_layers != o.train.checkpoint_layers)
    why += best->checkpoint_layers ? "; layer checkpointing makes it fit" : "; it fits without layer checkpointing";
  r.recommendation = cat(how(*best), ": ", why, "; ", sig(best->step_s), " s a step, ", sig(best->tokens_per_s),
                         " tokens/s (", best->verdict, ")");
}

}  // namespace

PlanResult plan_job(const LlamaConfig& c, const DeviceSpec& d, const PlanOptions& o) {
  o.validate();
  c.validate("[plan]");
  PlanResult r;
  r.config = c;
  r.parameters = c.num_parameters();
  r.options = o;
  r.device = d;
  // What one rank gets of the device: all of a catalogued one, 1/N of a shared one.
  DeviceSpec share = d;
  if (d.shared_by_ranks && o.ranks > 1) {
    const double n = double(o.ranks);
    for (Figure* f : {&share.memory_bytes, &share.memory_gbs, &share.link_gbs}) f->value /= n;
    const double peak = d.rank_peak_share(o.ranks);
    for (auto* f : {&share.fp32, &share.tf32, &share.bf16, &share.fp16, &share.fp8})
      if (*f) (*f)->value *= peak;
    // The peak's share matters only where the job's matmuls were not timed.
    std::string of_peak;
    if (!o.rank_gemm_gflops) {
      const int threads = std::max(1, d.cores / o.ranks);
      of_peak = cat(", and ", peak, " of its peak");
      if (d.one_core_share > 0)
        of_peak += cat(" (", threads, threads > 1 ? " threads" : " thread", " a rank; one core alone reaches ",
                       d.one_core_share, " of the all-core peak)");
    }
    r.notes.push_back(cat("the ", o.ranks, " ranks share ", d.name, ": each gets 1/", o.ranks,
                          " of its memory bandwidth, link and memory", of_peak));
  }
  if (o.rank_step && !o.inference)
    r.notes.push_back(cat("compute and AdamW from this job's step, timed at its shapes on this machine (measured): a "
                          "layer ", sig(1e3 * o.rank_step->forward_s(1) - 1e3 * o.rank_step->rest_forward_s), " + ",
                          sig(1e3 * (o.rank_step->backward_s(1, false) - o.rank_step->rest_backward_s)),
                          " ms forward + backward, the rest ", sig(1e3 * o.rank_step->rest_forward_s), " + ",
                          sig(1e3 * o.rank_step->rest_backward_s), " ms, AdamW ",
                          sig(1e9 * o.rank_step->adamw_s_per_param), " ns a parameter (zeroing the gradients ",
                          sig(1e9 * o.rank_step->zero_s_per_param), ", their norm ",
                          sig(1e9 * o.rank_step->norm_s_per_param), ")",
                          o.efficiency_given ? cat(", over an efficiency of ", o.efficiency) : std::string()));
  else if (o.rank_gemm_gflops && !o.inference)
    r.notes.push_back(cat("compute at ", sig(*o.rank_gemm_gflops), " GFLOP/s a rank x ", o.efficiency,
                          ": the rate this job's matmuls reached, timed at its shapes on this machine (measured)"));
  r.capacity = share.memory_bytes;
  if (o.memory_cap_bytes && *o.memory_cap_bytes < r.capacity.value) r.capacity = {*o.memory_cap_bytes, FigureKind::Given};
  if (o.inference) {
    r.inference = plan_inference(c, share, o, r.capacity.value);
    r.recommendation = r.inference->fits
                           ? cat("fits: each of ", o.ranks, " ranks holds the weights and its sequences' cache (",
                                 r.inference->verdict, ")")
                           : cat(r.inference->verdict,
                                 "; genperf splits no weights across ranks: a smaller --dtype, --kv-type, --seq or "
                                 "--batch");
    if (!r.inference->timed)
      r.notes.push_back(cat(d.name, " publishes no dense ", precision_name(o.train.precision),
                            " peak: no prefill time"));
    return r;
  }
  for (ShardMode s : kShardModes) {
    r.plans.push_back(plan_shard(c, share, o, r.capacity.value, s, o.train.checkpoint_layers));
    r.alternative.push_back(plan_shard(c, share, o, r.capacity.value, s, !o.train.checkpoint_layers));
  }
  recommend(r);
  if (!d.shared_by_ranks && o.ranks > 8)
    r.notes.push_back(cat("more than one 8-device node: the scale-out network, slower than ", d.link,
                          ", bounds communication between nodes; the model counts the node's links only"));
  if (d.shared_by_ranks && o.ranks > 1 && o.overlap == PlanOverlap::Buckets)
    r.notes.push_back("overlap on this machine: DISTRIBUTED.md measured that it takes its core time from "
                      "backward when the ranks fill the cores");
  return r;
}

}  // namespace genperf
