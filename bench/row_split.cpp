// What precision by row could gain over one format per tensor, measured.
//
// The output head's row v makes token v's logit, and a logit's error moves the KL in proportion
// to that token's probability; the embedding's row v is read only where token v occurs. Both
// matter mostly for the frequent tokens, so a head or embedding whose frequent rows take a
// precise format and the rest a coarse one might cost less KL per bit than any single format.
// genperf's allocation (and GGUF, and llama.cpp) give a tensor one format, so this tool measures
// the lever before anything is built on it:
//   - rows are ranked (--rank frequency, for [vocab, hidden] tensors) by their token's count in
//     the calibration text (the first --tokens), or (--rank error, any matrix) by how much their
//     squared error, weighted by the inputs' mean squares, falls from the coarse format to the
//     precise one;
//   - each listed tensor is quantized whole to each format (the quantizer of --method, with
//     statistics from the calibration text), and the decoded rows are mixed: the top fraction
//     of rows from format hi, the rest from format lo (rows are quantized independently by
//     every method here, so this equals quantizing the two row sets separately);
//   - every variant, with all other tensors unquantized, is scored on held-out text (--heldout,
//     its first --tokens tokens, windows of --ctx), so that rows ranked on one text are judged on
//     another.
// --tensors all measures every quantizable matrix; --max-step S pairs only formats at most S
// apart in the sorted --formats. Writes OUT (JSON): per tensor, the whole-tensor formats and
// every split with its bits per weight, bytes, and held-out KL. bench/allocation_bound.py --row-split OUT adds them to a map's
// options and predicts what the allocation would reach with them.
//
//   build/bench/row_split --model models/default --calib calib.txt --heldout heldout_ppl.txt
//       --method gptq --out row_split.json
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "genperf/checkpoint.h"
#include "genperf/dtype.h"
#include "genperf/error.h"
#include "genperf/fileio.h"
#include "genperf/json.h"
#include "genperf/quantize.h"
#include "genperf/sensitivity.h"
#include "genperf/tensor.h"

using namespace genperf;

namespace {

struct Args {
  std::string model, calib, heldout, out, method = "gptq";
  std::string tensors = "lm_head.weight,model.embed_tokens.weight";
  std::string formats = "q2_k,q3_k,q4_k,q5_k,q6_k,q8_0";
  std::string fracs = "0.03125,0.0625,0.125,0.25,0.5";
  std::string rank = "frequency";
  int64_t tokens = 8192, ctx = 256, max_step = 0;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = std::min(s.find(',', a), s.size());
    if (b > a) v.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string*> str = {
      {"--model", &a.model},     {"--calib", &a.calib},     {"--heldout", &a.heldout},
      {"--out", &a.out},         {"--method", &a.method},   {"--tensors", &a.tensors},
      {"--formats", &a.formats}, {"--fracs", &a.fracs},
      {"--rank", &a.rank}};
  std::map<std::string, int64_t*> num = {{"--tokens", &a.tokens}, {"--ctx", &a.ctx}, {"--max-step", &a.max_step}};
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    GP_CHECK(i + 1 < argc, "row_split: ", k, " needs a value");
    if (auto it = str.find(k); it != str.end())
      *it->second = argv[i + 1];
    else if (auto jt = num.find(k); jt != num.end())
      *jt->second = std::stoll(argv[i + 1]);
    else
      GP_CHECK(false, "row_split: unknown option ", k);
  }
  GP_CHECK(!a.model.empty() && !a.calib.empty() && !a.heldout.empty() && !a.out.empty(),
           "usage: row_split --model M --calib FILE --heldout FILE --out OUT.json [--method gptq] "
           "[--tensors a,b|all] [--formats f1,f2,...] [--fracs x,y,...] [--rank frequency|error] "
           "[--max-step S] [--tokens N] [--ctx C]");
  GP_CHECK(a.rank == "frequency" || a.rank == "error", "row_split: --rank is frequency or error, not ", a.rank);
  return a;
}

// The rows of a quantized [N, K] matrix decoded to f32.
Tensor decode(const Tensor& q) {
  const int64_t N = q.size(0), K = q.size(1);
  Tensor f = Tensor::zeros({N, K});
  for (int64_t r = 0; r < N; ++r) traits(q.dtype()).to_f32(q.row(r), f.data<float>() + r * K, K);
  return f;
}

double bits_per_weight(DType f) { return 8.0 * double(traits(f).block_bytes) / double(traits(f).block_size); }

int run(const Args& a) {
  const Checkpoint ck = load_checkpoint(a.model);
  CalibrationOptions co;
  co.ctx = a.ctx;
  co.max_tokens = a.tokens;
  co.source = a.calib;
  const CalibrationReference calib(ck, read_text_file(a.calib), co);
  co.source = a.heldout;
  const CalibrationReference held(ck, read_text_file(a.heldout), co);

  QuantizeOptions qo;
  qo.method = parse_quant_method(a.method);
  const ActivationStats stats =
      collect_activation_stats(ck, calib.ids(), a.ctx, qo.method == QuantMethod::Gptq);
  qo.stats = &stats;

  // --rank frequency: rows by their token's count in the calibration tokens (ties by id).
  const int64_t V = ck.config.vocab_size;
  std::vector<double> count(size_t(V), 0.0);
  for (int32_t t : calib.ids()) count[size_t(t)] += 1;
  std::vector<int64_t> by_count(static_cast<size_t>(V));
  std::iota(by_count.begin(), by_count.end(), 0);
  std::stable_sort(by_count.begin(), by_count.end(),
                   [&](int64_t x, int64_t y) { return count[size_t(x)] > count[size_t(y)]; });

  std::vector<DType> formats;
  for (const std::string& f : split_list(a.formats)) formats.push_back(parse_dtype(f));
  std::sort(formats.begin(), formats.end(),
            [](DType x, DType y) { return bits_per_weight(x) < bits_per_weight(y); });
  std::vector<double> fracs;
  for (const std::string& f : split_list(a.fracs)) fracs.push_back(std::stod(f));
  const std::vector<std::string> names =
      a.tensors == "all" ? quantizable_tensors(ck) : split_list(a.tensors);

  Json::Array out_tensors;
  for (const std::string& name : names) {
    auto it = ck.tensors.find(name);
    GP_CHECK(it != ck.tensors.end() && it->second.ndim() == 2, "row_split: ", a.model,
             " has no matrix ", name);
    const Tensor& w = it->second;
    const int64_t N = w.size(0), K = w.size(1);
    const bool by_token = a.rank == "frequency";
    GP_CHECK(!by_token || N == V, "row_split: --rank frequency needs [vocab, hidden] tensors; ", name,
             " has ", N, " rows");
    // --rank error: the rows' squared errors weighted by their inputs' mean squares (ones for
    // the embedding, a lookup), per format; a split takes the rows whose error falls most.
    const Tensor wf = w.dtype() == DType::F32 ? w : w.to(DType::F32);
    const auto ms = stats.mean_sq.find(name);
    std::vector<Tensor> dec;
    std::vector<std::vector<double>> err;
    Json::Array opts;
    // Variants are decoded to f32, whose matmul keeps f32 activations where a bf16 or quantized
    // weight's rounds them: the tensor converted to f32 unquantized scores this floor (up to
    // 1.6e-5 here), which is subtracted from every variant.
    const double floor_kl = held.score_with({{name, wf}}).kl;
    auto option = [&](const std::string& hi, const std::string& lo, double frac, double bpw,
                      double mass, const Tensor& t) {
      const double kl = std::max(0.0, held.score_with({{name, t}}).kl - floor_kl);
      Json::Object o = {{"hi", hi}, {"lo", lo}, {"frac", frac}, {"bpw", bpw},
                        {"bytes", double(int64_t(bpw * double(w.numel()) / 8))},
                        {"calib_mass", mass}, {"kl", kl}};
      std::printf("%-40s %-6s top %-8.5f %-6s rest: %.3f bpw, held-out KL %.7f", name.c_str(),
                  hi.c_str(), frac, lo.c_str(), bpw, kl);
      if (by_token) std::printf(" (calib mass %.3f)", mass);
      std::printf("\n");
      std::fflush(stdout);
      opts.push_back(Json(std::move(o)));
    };
    for (DType f : formats) {
      GP_CHECK(format_fits(f, K), "row_split: ", dtype_name(f), " does not fit rows of ", K, " in ", name);
      dec.push_back(decode(quantize_matrix(w, f, qo, name)));
      std::vector<double> e(size_t(N), 0.0);
      for (int64_t r = 0; r < N; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const double d = double(wf.data<float>()[r * K + k]) - dec.back().data<float>()[r * K + k];
          e[size_t(r)] += (ms == stats.mean_sq.end() ? 1.0 : double(ms->second[size_t(k)])) * d * d;
        }
      err.push_back(std::move(e));
      option(dtype_name(f), dtype_name(f), 1.0, bits_per_weight(f), 1.0, dec.back());
    }
    const double total = double(calib.ids().size());
    for (size_t hi = 1; hi < formats.size(); ++hi)
      for (size_t lo = 0; lo < hi; ++lo) {
        if (a.max_step > 0 && hi - lo > size_t(a.max_step)) continue;
        std::vector<int64_t> order = by_token ? by_count : std::vector<int64_t>(static_cast<size_t>(N));
        if (!by_token) {
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
            return err[lo][size_t(x)] - err[hi][size_t(x)] > err[lo][size_t(y)] - err[hi][size_t(y)];
          });
        }
        for (double frac : fracs) {
          Tensor m = dec[lo].clone();
          const int64_t top = int64_t(frac * double(N));
          double mass = 0;
          for (int64_t j = 0; j < top; ++j) {
            const int64_t r = order[size_t(j)];
            std::copy_n(dec[hi].data<float>() + r * K, K, m.data<float>() + r * K);
            if (by_token) mass += count[size_t(r)];
          }
          const double bpw = frac * bits_per_weight(formats[hi]) + (1 - frac) * bits_per_weight(formats[lo]);
          option(dtype_name(formats[hi]), dtype_name(formats[lo]), frac, bpw, mass / total, m);
        }
      }
    out_tensors.push_back(
        Json(Json::Object{{"name", name}, {"floor_kl", floor_kl}, {"options", Json(std::move(opts))}}));
  }
  const Json doc(Json::Object{{"model", a.model},
                              {"calib", a.calib},
                              {"heldout", a.heldout},
                              {"method", a.method},
                              {"rank", a.rank},
                              {"tokens", double(a.tokens)},
                              {"ctx", double(a.ctx)},
                              {"tensors", Json(std::move(out_tensors))}});
  write_file_atomic(a.out, doc.dump(1));
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
