// genperf sr train | upscale | eval: the diffusion super-resolution model's verbs.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "backend/cpu/image_ops.h"
#include "bench/peaks.h"
#include "common.h"
#include "genperf/bench.h"
#include "genperf/bench_sr.h"
#include "genperf/checkpoint.h"
#include "genperf/diffusion.h"
#include "genperf/error.h"
#include "genperf/fits.h"
#include "genperf/png.h"
#include "genperf/progress.h"
#include "genperf/sr_eval.h"
#include "genperf/sr_model.h"
#include "genperf/sr_train.h"

namespace genperf::cli {
namespace {

std::vector<int64_t> int_list(const std::string& s) {
  std::vector<int64_t> v;
  if (s.empty() || s == "none") return v;
  for (const std::string& f : split(s, ',')) {
    try {
      v.push_back(std::stoll(f));
    } catch (const std::exception&) {
      fail("'", s, "' is not a comma-separated list of integers");
    }
  }
  return v;
}

std::vector<sr::Map> maps_only(const std::string& spec) {
  std::vector<sr::Map> maps;
  if (spec.empty()) return maps;
  for (auto& [name, m] : sr::read_maps(spec)) maps.push_back(std::move(m));
  return maps;
}

const OptionSpec kSteps{"steps", "sampler steps", "25"};
const OptionSpec kSampler{"sampler",
                          "dpm++2m (second order, deterministic), dpm++2m-sde (its stochastic form), ddim (deterministic "
                          "with --eta 0) or ddpm (ancestral)",
                          "dpm++2m"};
const OptionSpec kEta{"eta", "DDIM's noise (0: deterministic)", "0"};
const OptionSpec kSpacing{"spacing",
                          "the steps among the model's: linspace (even, down to 0) or trailing (the last at T/S - 1)",
                          "linspace"};
const OptionSpec kTile{"tile", "tile side in output pixels", "128"};
const OptionSpec kOverlap{"overlap", "fraction of a tile shared with each neighbour (0 .. 0.5)", "0.25"};
const OptionSpec kBatch{"batch", "tiles per forward pass", "8"};
const OptionSpec kProject{"project",
                          "data consistency: back-project each sample onto the input at the end, at every step, or none",
                          "end"};
const OptionSpec kProjectIters{"project-iters", "back-projection rounds per projection", "10"};
const OptionSpec kPrecision{"precision",
                            "the convolutions' products: f32, or bf16 (operands rounded to bf16, f32 sums, as PyTorch's "
                            "autocast; needs AVX512-BF16, f32 otherwise)",
                            "f32"};

// Whether --precision asks for bf16 convolutions and this CPU runs them (a note when it does not).
bool bf16_convolutions(const Args& a) {
  const Precision want = parse_precision(a.str("precision"));
  const Precision got = effective_precision(want);
  if (want != got)
    std::fprintf(stderr, "note: --precision bf16 needs AVX512-BF16 at the AVX-512 level; running f32\n");
  return got == Precision::Bf16;
}

sr::UpscaleOptions upscale_options(const Args& a) {
  sr::UpscaleOptions o;
  o.sampler.sampler = a.str("sampler");
  o.sampler.steps = a.integer("steps");
  o.sampler.eta = a.number("eta");
  o.sampler.spacing = a.str("spacing");
  o.samples = a.integer("samples");
  o.seed = uint64_t(a.integer("seed"));
  o.tile = a.integer("tile");
  o.overlap = a.number("overlap");
  o.batch = a.integer("batch");
  o.project = a.str("project");
  o.project_iters = a.integer("project-iters");
  return o;
}

int cmd_sr_train(int argc, char** argv) {
  const sr::UNetConfig d;
  Args a("sr train",
         {{"data", "training maps: files, directories or synthetic:N[:size[:seed]]"},
          {"val-data", "validation maps (other images than the training ones)", "", false, true},
          {"out", "run directory (model/, state.safetensors, log.jsonl)"},
          {"resume", "continue the run in --out from its state", "", true},
          {"init", "fine-tune this SR model (its architecture, schedule and units; the architecture options are ignored)",
           "", false, true},
          {"steps", "optimizer steps", "2000"}, {"batch", "crops per step", "8"},
          {"crop", "crop side in high-resolution pixels", "64"}, {"lr", "peak learning rate", "2e-4"},
          {"warmup", "warm-up steps", "100"}, {"ema", "EMA decay of the saved weights", "0.999"},
          {"seed", "seed of the weights, crops and noise", "0"}, {"log-every", "steps per log line", "50"},
          {"save-every", "steps per checkpoint", "500"},
          {"stop-at", "stop after this step with the state saved (to split a run; --resume continues)", "", false, true},
          {"scale", "super-resolution factor", std::to_string(d.scale)},
          {"base", "channels at full resolution", std::to_string(d.base)},
          {"mults", "channel multiplier per level", "1,2,2"},
          {"res-blocks", "residual blocks per level", std::to_string(d.res_blocks)},
          {"attention-levels", "levels with self-attention (or none)", "2"},
          {"head-channels", "channels per attention head", std::to_string(d.head_channels)},
          {"groups", "group norm groups", std::to_string(d.groups)},
          {"prediction", "v or eps", d.prediction}, {"schedule", "cosine or linear", d.schedule},
          {"timesteps", "diffusion steps", std::to_string(d.timesteps)},
          {"transform", "linear, or log for positive maps", d.transform},
          {"blur", "degradation blur sigma in output pixels (-1: 0.5 x scale)", "-1"},
          {"noise", "degradation noise, a fraction of the input's standard deviation", "0"},
          {"grad-accum", "micro-batches per step across all ranks (divides --batch; default: the ranks)", "", false, true},
          kPrecision, kShard, kBucketMb, kCommOverlap, kThreads, kJson},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  sr::UNetConfig c;
  c.scale = a.integer("scale"), c.base = a.integer("base"), c.mults = int_list(a.str("mults"));
  c.res_blocks = a.integer("res-blocks"), c.attention_levels = int_list(a.str("attention-levels"));
  c.head_channels = a.integer("head-channels"), c.groups = a.integer("groups");
  c.prediction = a.str("prediction"), c.schedule = a.str("schedule"), c.timesteps = a.integer("timesteps");
  c.transform = a.str("transform");
  c.validate("the command line");
  sr::SRTrainOptions o;
  o.steps = a.integer("steps"), o.batch = a.integer("batch"), o.crop = a.integer("crop");
  o.lr = float(a.number("lr")), o.min_lr = o.lr / 10, o.warmup = a.integer("warmup"), o.ema = a.number("ema");
  o.seed = uint64_t(a.integer("seed")), o.log_every = a.integer("log-every"), o.save_every = a.integer("save-every");
  o.degradation.scale = c.scale, o.degradation.blur_sigma = a.number("blur"), o.degradation.noise = a.number("noise");
  o.dist = dist_options(a);
  o.grad_accum = a.has("grad-accum") ? a.integer("grad-accum") : world().size();
  if (a.has("stop-at")) o.stop_at = a.integer("stop-at");
  if (a.has("init")) o.init = a.str("init");
  o.bf16 = bf16_convolutions(a);
  const std::vector<sr::Map> train = maps_only(a.str("data"));
  const std::vector<sr::Map> val = a.has("val-data") ? maps_only(a.str("val-data")) : std::vector<sr::Map>{};
  const bool json = a.flag("json");
  // Rank 0 alone reports; its lines name it when there are several ranks.
  const bool lead = world().rank() == 0;
  Progress bar("sr train", lead ? o.steps : 0);
  sr::train_sr(c, train, val, o, a.str("out"), a.flag("resume"), [&](const sr::SRTrainLog& l) {
    if (!lead) return;
    bar.clear();
    std::fputs(rank_prefix().c_str(), stdout);
    if (json) {
      std::printf("{\"step\": %lld, \"loss\": %.6g, \"val_loss\": %.6g, \"lr\": %.3g, \"grad_norm\": %.4g, "
                  "\"images_per_s\": %.4g, \"gflops\": %.4g}\n",
                  (long long)l.step, l.loss, l.val_loss, l.lr, l.grad_norm, l.images_per_s, l.flops_per_s / 1e9);
    } else {
      std::printf("step %6lld  loss %.5f  val %.5f  lr %.2e  |g| %.3f  %.1f images/s  %.1f GFLOP/s\n",
                  (long long)l.step, l.loss, l.val_loss, l.lr, l.grad_norm, l.images_per_s, l.flops_per_s / 1e9);
    }
    std::fflush(stdout);
    bar.update(l.step);
  });
  bar.finish();
  return 0;
}

int cmd_sr_upscale(int argc, char** argv) {
  // genperf sr upscale IN OUT [options]: the two files first.
  std::vector<std::string> pos;
  while (pos.size() < 2 && 3 + int(pos.size()) < argc && std::strncmp(argv[3 + pos.size()], "--", 2) != 0)
    pos.push_back(argv[3 + pos.size()]);
  Args a("sr upscale IN.fits|IN.png OUT.fits",
         {{"model", "SR model directory (config.json, model.safetensors)"},
          {"scale", "the factor expected of the model (an error if it was trained for another)", "", false, true},
          kSteps, kSampler, kSpacing, kEta, {"samples", "samples; their mean is the output, their sd the second HDU", "1"},
          {"seed", "sampling seed", "0"}, kTile, kOverlap, kBatch, kProject, kProjectIters,
          {"blur", "the input's blur sigma in output pixels, for --project (-1: 0.5 x scale)", "-1"},
          {"preview", "also write an asinh-stretched PNG of the mean", "", false, true}, kPrecision, kThreads},
         argc, argv, 3 + int(pos.size()));
  if (run_help(a)) return 0;
  apply_common(a);
  GP_CHECK(pos.size() == 2, "[sr upscale] expected the input and output files first: genperf sr upscale IN.fits|IN.png OUT.fits [options]");
  const std::string in = pos[0], out = pos[1];
  GP_CHECK(out.size() > 5 && (out.ends_with(".fits") || out.ends_with(".fit")), "sr upscale: ", out,
           ": the output must be a .fits file");
  GP_CHECK(!a.has("preview") || a.str("preview").ends_with(".png"), "sr upscale: ", a.str("preview"),
           ": the preview must be a .png file");
  sr::UNet<float> net = sr::load_sr_model(a.str("model"));
  net.set_bf16(bf16_convolutions(a));
  const int64_t s = net.config().scale;
  if (a.has("scale"))
    GP_CHECK(a.integer("scale") == s, "sr upscale: --scale ", a.integer("scale"), ", but the model ", a.str("model"),
             " was trained for ", s);
  FitsImage hdr;
  const sr::Map lr = sr::read_map(in, &hdr);
  sr::UpscaleOptions o = upscale_options(a);
  o.degradation.scale = s, o.degradation.blur_sigma = a.number("blur");
  Progress bar("upscale", 1);
  const sr::Upscaled up = sr::upscale(net, lr, o, in, [&](int64_t done, int64_t total) {
    bar.update(done * 1000 / total);
  });
  bar.finish();
  auto hdu = [&](const sr::Map& m, const char* name) {
    FitsImage img;
    img.width = m.w, img.height = m.h, img.pixels = m.v, img.bitpix = -32;
    img.bunit = hdr.bunit, img.name = name;
    const double k = bunit_scale_factor(hdr.bunit, double(s));
    for (double& v : img.pixels) v *= k;
    if (hdr.has_wcs) img.has_wcs = true, img.wcs = scale_wcs(hdr.wcs, double(s));
    return img;
  };
  std::vector<FitsImage> hdus = {hdu(up.mean, ""), hdu(up.sd, "STDDEV")};
  hdus[0].cards = hdr.cards;
  FitsProvenance prov;
  prov.history.push_back("genperf sr upscale: " + g_command);
  prov.keywords = {{"GPMODEL", a.str("model")}, {"GPSCALE", std::to_string(s)},
                   {"GPSAMPLR", o.sampler.sampler}, {"GPSTEPS", std::to_string(o.sampler.steps)},
                   {"GPSPACE", o.sampler.spacing},
                   {"GPSAMPLS", std::to_string(o.samples)}, {"GPSEED", std::to_string(o.seed)}, {"GPPROJ", o.project},
                   {"GPPREC", net.bf16() ? "bf16" : "f32"}};
  write_fits(out, hdus, prov);
  std::printf("%s: %lld x %lld -> %lld x %lld, %lld tiles x %lld samples x %lld steps, %.1f GFLOP\n", out.c_str(),
              (long long)lr.w, (long long)lr.h, (long long)up.mean.w, (long long)up.mean.h, (long long)up.tiles,
              (long long)o.samples, (long long)o.sampler.steps, up.flops / 1e9);
  if (a.has("preview")) {
    // FITS row 1 is the bottom of the image (as ds9 shows it); a PNG starts at the top.
    std::vector<double> flipped(up.mean.v.size());
    for (int64_t y = 0; y < up.mean.h; ++y)
      std::copy_n(up.mean.v.begin() + y * up.mean.w, up.mean.w, flipped.begin() + (up.mean.h - 1 - y) * up.mean.w);
    write_png_gray(a.str("preview"), up.mean.h, up.mean.w, asinh_stretch(flipped, 0.1), 8);
  }
  return 0;
}

// A score's figures as sr eval's record names them, after `head` (a map's name and side).
Json score_json(const sr::SRMapScore& s, Json head) {
  for (const auto& [key, value] : std::initializer_list<std::pair<const char*, double>>{
           {"psnr_mean", s.psnr_mean}, {"psnr_one", s.psnr_one}, {"psnr_bicubic", s.psnr_bicubic},
           {"spectrum_worst", s.spectrum.worst}, {"spectrum_worst_bicubic", s.spectrum_bicubic.worst},
           {"spectrum_mean", s.spectrum.mean}, {"spectrum_mean_bicubic", s.spectrum_bicubic.mean},
           {"spectrum_worst_wide", s.spectrum.worst_wide}, {"spectrum_worst_wide_bicubic", s.spectrum_bicubic.worst_wide},
           {"min_corr", s.spectrum.min_corr}, {"min_corr_bicubic", s.spectrum_bicubic.min_corr}, {"w1", s.w1},
           {"w1_bicubic", s.w1_bicubic}, {"consistency", s.consistency}, {"consistency_bicubic", s.consistency_bicubic},
           {"coverage", s.coverage}, {"coverage_predictive", s.coverage_predictive}, {"ssim_mean", s.ssim_mean},
           {"ssim_bicubic", s.ssim_bicubic}, {"minkowski", s.minkowski}})
    head[key] = value;
  if (!s.spectrum.ratio.empty()) {
    head["spectrum_ratio"] = Json::Array(s.spectrum.ratio.begin(), s.spectrum.ratio.end());
    head["spectrum_ratio_bicubic"] = Json::Array(s.spectrum_bicubic.ratio.begin(), s.spectrum_bicubic.ratio.end());
    Json::Array bands;
    for (const auto& [first, last] : s.spectrum.wide_bands) bands.push_back(Json::Array{first, last});
    head["spectrum_wide_bands"] = std::move(bands);
    head["spectrum_ratio_wide"] = Json::Array(s.spectrum.wide_ratio.begin(), s.spectrum.wide_ratio.end());
    head["spectrum_ratio_wide_bicubic"] =
        Json::Array(s.spectrum_bicubic.wide_ratio.begin(), s.spectrum_bicubic.wide_ratio.end());
  }
  return head;
}

int cmd_sr_eval(int argc, char** argv) {
  Args a("sr eval",
         {{"model", "SR model directory"}, {"data", "held-out high-resolution maps (files, directories, synthetic:N...)"},
          kSteps, kSampler, kSpacing, kEta, {"samples", "samples per map", "8"}, {"seed", "sampling seed", "0"}, kTile,
          kOverlap, kBatch, kProject, kProjectIters, {"blur", "degradation blur sigma (-1: 0.5 x scale)", "-1"},
          {"noise", "degradation noise", "0"}, kPrecision, kOut, kThreads, kJson},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  Checkpoint files;
  sr::UNet<float> net = sr::load_sr_model(a.str("model"), &files);
  net.set_bf16(bf16_convolutions(a));
  sr::Degradation d;
  d.scale = net.config().scale, d.blur_sigma = a.number("blur"), d.noise = a.number("noise");
  const auto maps = sr::read_maps(a.str("data"));
  const sr::UpscaleOptions o = upscale_options(a);
  Progress bar("sr eval", int64_t(maps.size()));
  const auto scores = sr::evaluate_sr(net, maps, d, o, [&](size_t i, size_t) { bar.update(int64_t(i)); });
  bar.finish();
  const sr::SRMapScore mean = sr::mean_score(scores, d.scale);
  // The record: what defines the workload (the model as stored, the maps, the sampler, the
  // degradation), the mean over maps of each figure, the seconds per map, and each map's row.
  Json record = Json::Object{{"model", a.str("model")},
                             {"weight_types", weight_types(files.tensors)},
                             {"weights_bytes", int64_t(weight_bytes(files.tensors))},
                             {"parameters", int64_t(net.weights().size())},
                             {"scale", d.scale},
                             {"data", a.str("data")},
                             {"steps", o.sampler.steps},
                             {"sampler", o.sampler.sampler},
                             {"spacing", o.sampler.spacing},
                             {"eta", o.sampler.eta},
                             {"samples", o.samples},
                             {"seed", int64_t(o.seed)},
                             {"tile", o.tile},
                             {"overlap", o.overlap},
                             {"batch", o.batch},
                             {"project", o.project},
                             {"project_iters", o.project_iters},
                             {"blur", d.blur_sigma},
                             {"noise", d.noise},
                             {"precision", net.bf16() ? "bf16" : "f32"}};
  record = score_json(mean, std::move(record));
  record["spectrum_pooled"] = mean.pooled;
  std::vector<double> seconds;
  Json rows = Json::Array{};
  for (const auto& s : scores) {
    seconds.push_back(s.seconds);
    Json row = score_json(s, Json::Object{{"map", s.name}, {"size", s.size}});
    row["seconds"] = s.seconds;
    rows.push_back(std::move(row));
  }
  record["seconds_per_map"] = Stats::of(std::move(seconds)).to_json();
  record["maps"] = std::move(rows);
  write_record(a, record);
  if (a.flag("json")) {
    print_json(record);
    return 0;
  }
  std::printf("%-28s %5s %7s %7s %7s %6s %6s %6s %6s %6s %6s %6s %6s %6s %6s %7s %6s %6s\n", "map", "side", "PSNR",
              "one", "bicubic", "SSIM", "bic", "|R-1|", "bic", "wide", "R_mean", "r_min", "W1", "bic", "Mink", "consist",
              "cover", "cov_t");
  auto line = [](const sr::SRMapScore& s, const std::string& name) {
    std::printf("%-28s %5lld %7.2f %7.2f %7.2f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %7.4f %6.3f "
                "%6.3f\n",
                name.size() > 28 ? name.substr(name.size() - 28).c_str() : name.c_str(), (long long)s.size,
                s.psnr_mean, s.psnr_one, s.psnr_bicubic, s.ssim_mean, s.ssim_bicubic, s.spectrum.worst,
                s.spectrum_bicubic.worst, s.spectrum.worst_wide, s.spectrum.mean, s.spectrum.min_corr, s.w1, s.w1_bicubic,
                s.minkowski, s.consistency, s.coverage, s.coverage_predictive);
  };
  for (const auto& s : scores) line(s, s.name);
  if (scores.size() > 1) line(mean, cat(mean.pooled ? "pooled, " : "mean of ", scores.size(), " maps"));
  return 0;
}

// genperf sr degrade MAP OUT.fits: the low-resolution input of a map by the stated degradation,
// to try a model on maps whose truth is known.
int cmd_sr_degrade(int argc, char** argv) {
  std::vector<std::string> pos;
  while (pos.size() < 2 && 3 + int(pos.size()) < argc && std::strncmp(argv[3 + pos.size()], "--", 2) != 0)
    pos.push_back(argv[3 + pos.size()]);
  Args a("sr degrade MAP OUT.fits",
         {{"scale", "block-average factor", "4"}, {"blur", "blur sigma in input pixels (-1: 0.5 x scale)", "-1"},
          {"noise", "noise, a fraction of the output's standard deviation", "0"}, {"seed", "noise seed", "0"},
          {"truth", "also write the (cropped) input map here, as FITS", "", false, true}},
         argc, argv, 3 + int(pos.size()));
  if (run_help(a)) return 0;
  GP_CHECK(pos.size() == 2, "[sr degrade] expected a map (file or synthetic:...) and an output .fits file first");
  const auto maps = sr::read_maps(pos[0]);
  GP_CHECK(maps.size() == 1, "[sr degrade] ", pos[0], " names ", maps.size(), " maps; expected one");
  sr::Degradation d;
  d.scale = a.integer("scale"), d.blur_sigma = a.number("blur"), d.noise = a.number("noise");
  d.seed = uint64_t(a.integer("seed"));
  GP_CHECK(d.scale >= 1, "[sr degrade] --scale must be positive");
  // The largest part whose sides divide by the scale.
  sr::Map hr(maps[0].second.h / d.scale * d.scale, maps[0].second.w / d.scale * d.scale);
  for (int64_t y = 0; y < hr.h; ++y)
    for (int64_t x = 0; x < hr.w; ++x) hr.at(y, x) = maps[0].second.at(y, x);
  auto image = [](const sr::Map& m) {
    FitsImage img;
    img.width = m.w, img.height = m.h, img.pixels = m.v, img.bitpix = -64;
    return img;
  };
  FitsProvenance prov;
  prov.history.push_back("genperf sr degrade: " + g_command);
  if (a.has("truth")) write_fits(a.str("truth"), {image(hr)}, prov);
  const sr::Map lr = sr::degrade(hr, d);
  write_fits(pos[1], {image(lr)}, prov);
  std::printf("%s: %lld x %lld -> %lld x %lld\n", pos[1].c_str(), (long long)hr.w, (long long)hr.h, (long long)lr.w,
              (long long)lr.h);
  return 0;
}

}  // namespace

int cmd_bench_sr(int argc, char** argv) {
  Args a("bench sr",
         {{"model", "SR model directory (its config is used), or default (the built-in config)", "default"},
          {"batch", "images per step", "8"}, {"size", "image side (high-resolution pixels)", "64"},
          {"reps", "timed repetitions after one warm-up", "5"},
          {"no-peaks", "skip measuring the GEMM peak (no MFU)", "", true},
          kOut,
          {"grad-accum", "micro-batches per step across all ranks (divides --batch; default: the ranks)", "", false, true},
          kPrecision, kShard, kBucketMb, kCommOverlap, kThreads, kJson},
         argc, argv, 3);
  if (run_help(a)) return 0;
  apply_common(a);
  check_record_path(a);
  const std::string spec = a.str("model");
  const sr::UNetConfig c = spec == "default" ? sr::UNetConfig{}
                                             : sr::unet_config_from_json(Json::parse_file(spec + "/config.json"),
                                                                         spec + "/config.json");
  sr::SRBenchOptions o;
  o.batch = a.integer("batch"), o.size = a.integer("size"), o.reps = int(a.integer("reps"));
  o.dist = dist_options(a);
  o.grad_accum = a.has("grad-accum") ? a.integer("grad-accum") : 0;
  o.bf16 = bf16_convolutions(a);
  const sr::SRBenchResult r = sr::bench_sr(c, o);
  if (world().rank() != 0) return 0;  // rank 0 reports
  Json j = r.to_json();
  j["model"] = spec;
  j["config"] = sr::unet_config_json(c);
  {
    ops::ConvShape probe;
    probe.IC = probe.OC = c.base, probe.bf16 = o.bf16;
    j["conv3x3"] = cpu::conv2d_uses_winograd(probe) ? "winograd" : o.bf16 ? "direct bf16" : "direct";
  }
  if (!a.flag("no-peaks")) {
    const double peak = bench::measure_gemm_peak_gflops(DType::F32);
    j["gemm_peak_gflops_f32"] = peak;
    j["mfu_train"] = bench::against_floor(r.train_gflops, peak).fraction;
    j["mfu_sample"] = bench::against_floor(r.sample_gflops, peak).fraction;
  }
  write_record(a, j);
  if (a.flag("json")) {
    print_json(j);
    return 0;
  }
  std::printf("model      %s (%.2fM parameters), batch %lld x %lld x %lld, %.2f GFLOP per forward, convolutions %s\n",
              spec.c_str(), double(r.parameters) / 1e6, (long long)o.batch, (long long)o.size, (long long)o.size,
              r.forward_flops / 1e9, o.bf16 ? "bf16" : "f32");
  // MFU counts the model's FLOPs (the direct convolution's); Winograd's convolutions do fewer.
  const bool winograd = j.at("conv3x3").as_string() == "winograd";
  std::printf("train      %.3f s/step median (min %.3f, max %.3f)  %.1f images/s  %.1f GFLOP/s", r.train_step.median,
              r.train_step.min, r.train_step.max, r.train_images_per_s, r.train_gflops);
  if (const Json* m = j.find("mfu_train")) std::printf("  MFU %.0f%%", 100 * m->as_number());
  std::printf("\nsample     %.3f s/step median (min %.3f, max %.3f)  %.1f images/s per step  %.1f GFLOP/s",
              r.sample_step.median, r.sample_step.min, r.sample_step.max, r.sample_images_per_s, r.sample_gflops);
  if (const Json* m = j.find("mfu_sample"))
    std::printf("  MFU %.0f%% of the measured f32 GEMM peak (%.0f GFLOP/s)", 100 * m->as_number(),
                j.at("gemm_peak_gflops_f32").as_number());
  if (winograd)
    std::printf("\n           GFLOP/s and MFU count the model's FLOPs; its 3 x 3 convolutions run Winograd's F(4x4,3x3),\n"
                "           4x fewer products (the op harness holds them to the peak: genperf test-ops --mode perf --op conv2d)");
  std::printf("\nmemory     weights+EMA %.1f MB | grads+optimizer %.1f MB | activations %.1f MB | peak RSS %.1f MB (per rank)\n",
              double(r.weights_bytes) / 1e6, double(r.optimizer_bytes) / 1e6, double(r.activation_bytes) / 1e6,
              double(r.peak_rss) / 1e6);
  if (r.ranks > 1)
    std::printf("ranks      %d, --shard %s: %.2f MB sent per rank and step, %.3f s waiting on it in the last step\n",
                r.ranks, r.shard.c_str(), r.comm_bytes_per_step / 1e6, r.comm_wait_s);
  return 0;
}

int cmd_sr(int argc, char** argv) {
  const std::string kind = argc > 2 ? argv[2] : "";
  if (kind == "train") return cmd_sr_train(argc, argv);
  if (kind == "upscale") return cmd_sr_upscale(argc, argv);
  if (kind == "eval") return cmd_sr_eval(argc, argv);
  if (kind == "degrade") return cmd_sr_degrade(argc, argv);
  std::fputs("usage: genperf sr train|upscale|eval|degrade [options]   (each takes --help)\n", stderr);
  return 2;
}

}  // namespace genperf::cli
