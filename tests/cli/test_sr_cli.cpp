// genperf sr upscale end to end on a small model: the output's size, blanks, second HDU, unit
// and provenance; its WCS checked by astropy (tests/io/fits_ref.py check); the same bytes for a
// seed at any thread count (the pixels); and bad input (a scale the model was not trained for, a truncated
// file, a map smaller than one tile) giving a clear error, a non-zero exit and no output file.
// genperf sr eval --out on the committed default model: the record's workload, its figures (the
// mean over the maps of each map's row) and provenance; a missing directory refused at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "genperf/diffusion.h"
#include "genperf/fileio.h"
#include "genperf/fits.h"
#include "genperf/json.h"
#include "genperf/png.h"
#include "genperf/rng.h"

using namespace genperf;
using genperf::testing::CliResult;
using genperf::testing::run_command;
using genperf::testing::run_genperf;
using genperf::testing::TempDir;
namespace fs = std::filesystem;

namespace {

TEST(SrCli, UpscaleWritesMeanSdWcsAndBlanks) {
  TempDir tmp("srcli");
  sr::UNetConfig c;
  c.base = 8, c.mults = {1, 2}, c.attention_levels = {1}, c.head_channels = 8, c.groups = 4, c.scale = 2;
  c.timesteps = 20, c.transform = "log";
  sr::UNet<float> net(c);
  net.init(3, false);
  sr::save_sr_model(tmp / "model", net);

  // A 20 x 12 positive map in Jy/pixel with a CD-matrix WCS and two blank pixels.
  FitsImage in;
  in.width = 20, in.height = 12, in.bitpix = -32, in.bunit = "Jy/pixel";
  Rng rng(4);
  for (int64_t i = 0; i < in.width * in.height; ++i) in.pixels.push_back(double(float(1.5 + std::sin(0.3 * double(i)) + 0.1 * rng.uniform())));
  in.pixels[5] = in.pixels[3 * 20 + 7] = std::nan("");
  in.has_wcs = true;
  in.wcs.ctype[0] = "RA---TAN", in.wcs.ctype[1] = "DEC--TAN";
  in.wcs.crpix[0] = 10.5, in.wcs.crpix[1] = 6.25, in.wcs.crval[0] = 83.6, in.wcs.crval[1] = -5.4;
  in.wcs.form = FitsWcs::Form::Cd;
  in.wcs.cd[0][0] = -0.001, in.wcs.cd[0][1] = 0.0002, in.wcs.cd[1][0] = 0.0001, in.wcs.cd[1][1] = 0.001;
  in.cards.push_back("OBJECT  = 'test field'");
  write_fits(tmp / "in.fits", {in});

  const std::string common = " --model " + (tmp / "model") + " --steps 3 --samples 2 --tile 16 --seed 7";
  CliResult r = run_genperf("sr upscale " + (tmp / "in.fits") + " " + (tmp / "out.fits") + common +
                                " --threads 1 --preview " + (tmp / "preview.png"),
                            tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const PngImage preview = read_png(tmp / "preview.png");
  EXPECT_EQ(preview.w, 40);
  EXPECT_EQ(preview.h, 24);
  const FitsImage mean = read_fits(tmp / "out.fits");
  ASSERT_EQ(mean.width, 40);
  ASSERT_EQ(mean.height, 24);
  EXPECT_EQ(mean.bunit, "Jy/pixel");
  int blanks = 0;
  for (double v : mean.pixels) blanks += std::isnan(v);
  EXPECT_EQ(blanks, 8);  // each blank input pixel is 2 x 2 output pixels
  EXPECT_TRUE(std::isnan(mean.pixels[size_t((3 * 2) * 40 + 7 * 2 + 1)]));
  // Per-pixel units: the total flux of a region is kept, each output pixel holds about a quarter.
  double s_in = 0, s_out = 0;
  for (double v : in.pixels) s_in += std::isnan(v) ? 0 : v;
  for (double v : mean.pixels) s_out += std::isnan(v) ? 0 : v;
  EXPECT_NEAR(s_out / s_in, 1.0, 0.2);
  bool object = false, history = false, project = false;
  for (const std::string& card : mean.cards) {
    object |= card.rfind("OBJECT  = 'test field'", 0) == 0;
    history |= card.rfind("HISTORY genperf sr upscale", 0) == 0;
    project |= card.rfind("GPPROJ  = 'end", 0) == 0;  // samples back-projected onto the input by default
  }
  EXPECT_TRUE(object);
  EXPECT_TRUE(history);
  EXPECT_TRUE(project);
  // The second HDU: the samples' standard deviation.
  std::string out;
  ASSERT_EQ(run_command(std::string(GENPERF_PYTHON) +
                            " -c \"from astropy.io import fits; h = fits.open('" + (tmp / "out.fits") +
                            "'); print(h[1].header['EXTNAME'], h[1].data.shape, (h[1].data[h[1].data == h[1].data] >= 0).all())\"",
                        &out),
            0);
  EXPECT_EQ(out, "STDDEV (24, 40) True\n");
  // The WCS: output pixel centres see the sky of the input coordinates they cover.
  ASSERT_EQ(run_command(std::string(GENPERF_PYTHON) + " " + GENPERF_TEST_DIR + "/io/fits_ref.py check " + (tmp / "in.fits") +
                            " " + (tmp / "out.fits") + " 2",
                        &out),
            0)
      << out;
  // The same bytes with two threads.
  r = run_genperf("sr upscale " + (tmp / "in.fits") + " " + (tmp / "out2.fits") + common + " --threads 2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const FitsImage mean2 = read_fits(tmp / "out2.fits");
  ASSERT_EQ(mean2.pixels.size(), mean.pixels.size());
  EXPECT_EQ(std::memcmp(mean2.pixels.data(), mean.pixels.data(), mean.pixels.size() * sizeof(double)), 0);

  // A PNG input (its luminance; values in (0, 1], positive for the log transform).
  std::vector<double> gray(size_t(12 * 20));
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = 0.2 + 0.6 * std::abs(std::sin(0.1 * double(i)));
  write_png_gray(tmp / "in.png", 12, 20, gray, 16);
  r = run_genperf("sr upscale " + (tmp / "in.png") + " " + (tmp / "png.fits") + common, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_fits(tmp / "png.fits").width, 40);

  // Bad input: a clear error, a non-zero exit, no output.
  r = run_genperf("sr upscale " + (tmp / "in.fits") + " " + (tmp / "bad.fits") + common + " --scale 4", tmp);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("trained for 2"), std::string::npos) << r.err;
  const std::string bytes = genperf::testing::read_bytes(tmp / "in.fits");
  write_file_atomic(tmp / "cut.fits", bytes.substr(0, 4000));
  r = run_genperf("sr upscale " + (tmp / "cut.fits") + " " + (tmp / "bad.fits") + common, tmp);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("cut.fits"), std::string::npos) << r.err;
  r = run_genperf("sr upscale " + (tmp / "in.fits") + " " + (tmp / "bad.fits") + " --model " + (tmp / "model") +
                      " --tile 32",
                  tmp);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("smaller than one tile"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "bad.fits"));
}

TEST(SrCli, EvalWritesARecordOfTheMeansOverTheMaps) {
  TempDir tmp("srcli-eval");
  const std::string model = std::string(GENPERF_TEST_DIR) + "/../models/sr-default";
  // Two 64 x 64 held-out fields, one tile each, two samples of two steps: seconds, not quality.
  const std::string args = "sr eval --model " + model + " --data synthetic:2:64:2001 --steps 2 --samples 2 --tile 64 "
                           "--seed 3 --threads 2";
  CliResult r = run_genperf(args + " --json --out " + (tmp / "eval.json"), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse_file(tmp / "eval.json");
  EXPECT_EQ(Json::parse(r.out, "stdout").dump(), j.dump());  // --json prints the record
  EXPECT_EQ(j.at("model").as_string(), model);
  EXPECT_EQ(j.at("data").as_string(), "synthetic:2:64:2001");
  EXPECT_EQ(j.at("weight_types").as_string(), "f32");
  EXPECT_EQ(j.at("weights_bytes").as_int(), 4 * j.at("parameters").as_int());
  EXPECT_EQ(j.at("scale").as_int(), 4);
  EXPECT_EQ(j.at("steps").as_int(), 2);
  EXPECT_EQ(j.at("sampler").as_string(), "dpm++2m");
  EXPECT_EQ(j.at("eta").as_number(), 0);
  EXPECT_EQ(j.at("samples").as_int(), 2);
  EXPECT_EQ(j.at("seed").as_int(), 3);
  EXPECT_EQ(j.at("tile").as_int(), 64);
  EXPECT_EQ(j.at("blur").as_number(), -1);
  EXPECT_EQ(j.at("noise").as_number(), 0);
  // The samples are back-projected onto the input by default: two steps leave a rough map, the
  // projection a consistent one.
  EXPECT_EQ(j.at("project").as_string(), "end");
  EXPECT_EQ(j.at("project_iters").as_int(), 10);
  EXPECT_LT(j.at("consistency").as_number(), 0.01);
  EXPECT_NE(j.at("provenance").at("command").as_string().find("sr eval"), std::string::npos);
  EXPECT_FALSE(j.at("provenance").at("cpu").as_string().empty());
  const Json::Array& maps = j.at("maps").as_array();
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].at("map").as_string(), "synthetic-64-seed2001");
  EXPECT_EQ(maps[1].at("size").as_int(), 64);
  for (const char* key : {"psnr_mean", "psnr_one", "psnr_bicubic", "ssim_mean", "ssim_bicubic", "min_corr",
                          "min_corr_bicubic", "w1", "w1_bicubic", "consistency", "consistency_bicubic", "coverage",
                          "coverage_predictive", "minkowski"}) {
    const double mean = (maps[0].at(key).as_number() + maps[1].at(key).as_number()) / 2;
    EXPECT_NEAR(j.at(key).as_number(), mean, 1e-12 * (1 + std::abs(mean))) << key;
    EXPECT_TRUE(std::isfinite(mean)) << key;
  }
  EXPECT_GT(j.at("coverage").as_number(), 0);  // two samples have a spread
  EXPECT_GT(j.at("coverage_predictive").as_number(), j.at("coverage").as_number());
  // Maps of one side pool their spectra: the set's R(k) is a weighted mean of the maps' (weights
  // P_hr), so it lies between them in every band, and so does its worst |R - 1|.
  EXPECT_TRUE(j.at("spectrum_pooled").as_bool());
  for (const char* key : {"spectrum_ratio", "spectrum_ratio_bicubic"}) {
    const Json::Array& set = j.at(key).as_array();
    ASSERT_EQ(set.size(), 33u) << key;
    for (size_t k = 1; k < set.size(); ++k) {
      const double a = maps[0].at(key).as_array()[k].as_number(), b = maps[1].at(key).as_array()[k].as_number();
      EXPECT_GE(set[k].as_number(), std::min(a, b) * (1 - 1e-12)) << key << " " << k;
      EXPECT_LE(set[k].as_number(), std::max(a, b) * (1 + 1e-12)) << key << " " << k;
    }
  }
  // The mean R is the pooled R's over the bands the input lacks, 8 < k <= 25.
  for (const char* key : {"spectrum_mean", "spectrum_mean_bicubic"}) {
    const Json::Array& ratio = j.at(std::string(key) == "spectrum_mean" ? "spectrum_ratio" : "spectrum_ratio_bicubic").as_array();
    double mean = 0;
    for (size_t k = 9; k <= 25; ++k) mean += ratio[k].as_number() / 17;
    EXPECT_NEAR(j.at(key).as_number(), mean, 1e-12) << key;
  }
  // The wide bands (four to an octave of k over 8 < k <= 25): their worst |R - 1| is the record's,
  // and pooled, each lies between the maps' (weighted by their truths' power).
  const Json::Array& bands = j.at("spectrum_wide_bands").as_array();
  ASSERT_EQ(bands.size(), 7u);
  EXPECT_EQ(bands[0].as_array()[0].as_int(), 9);
  EXPECT_EQ(bands[6].as_array()[1].as_int(), 25);
  for (const char* key : {"spectrum_ratio_wide", "spectrum_ratio_wide_bicubic"}) {
    const Json::Array& set = j.at(key).as_array();
    ASSERT_EQ(set.size(), bands.size()) << key;
    double worst = 0;
    for (size_t b = 0; b < set.size(); ++b) {
      const double a = maps[0].at(key).as_array()[b].as_number(), c = maps[1].at(key).as_array()[b].as_number();
      EXPECT_GE(set[b].as_number(), std::min(a, c) * (1 - 1e-12)) << key << " " << b;
      EXPECT_LE(set[b].as_number(), std::max(a, c) * (1 + 1e-12)) << key << " " << b;
      worst = std::max(worst, std::abs(set[b].as_number() - 1));
    }
    const std::string w = std::string(key) == "spectrum_ratio_wide" ? "spectrum_worst_wide" : "spectrum_worst_wide_bicubic";
    EXPECT_NEAR(j.at(w).as_number(), worst, 1e-12) << w;
  }
  for (const char* key : {"spectrum_worst", "spectrum_worst_bicubic"})
    EXPECT_LE(j.at(key).as_number(),
              std::max(maps[0].at(key).as_number(), maps[1].at(key).as_number()) * (1 + 1e-12)) << key;
  const Json& seconds = j.at("seconds_per_map");
  ASSERT_EQ(seconds.at("n").as_int(), 2);
  EXPECT_EQ(seconds.at("samples").as_array()[1].as_number(), maps[1].at("seconds").as_number());
  EXPECT_GT(seconds.at("min").as_number(), 0);

  // --out into a directory that does not exist: refused before the evaluation, nothing written.
  r = run_genperf(args + " --out " + (tmp / "missing/eval.json"), tmp);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("[sr eval] --out " + (tmp / "missing/eval.json") + ": the directory " + (tmp / "missing") +
                       " does not exist"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(tmp / "missing"));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(tmp / ""))) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"eval.json", "stderr.txt"}));  // no temporary left
}

}  // namespace
