// genperf sr upscale end to end on a small model: the output's size, blanks, second HDU, unit
// and provenance; its WCS checked by astropy (tests/io/fits_ref.py check); the same bytes for a
// seed at any thread count (the pixels); and bad input (a scale the model was not trained for, a truncated
// file, a map smaller than one tile) giving a clear error, a non-zero exit and no output file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "genperf/diffusion.h"
#include "genperf/fileio.h"
#include "genperf/fits.h"
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
  bool object = false, history = false;
  for (const std::string& card : mean.cards) {
    object |= card.rfind("OBJECT  = 'test field'", 0) == 0;
    history |= card.rfind("HISTORY genperf sr upscale", 0) == 0;
  }
  EXPECT_TRUE(object);
  EXPECT_TRUE(history);
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

}  // namespace
