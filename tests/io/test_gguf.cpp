#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

#include "common/test_util.h"
#include "genperf/error.h"
#include "io/gguf.h"
#include "io_test_util.h"

using namespace genperf;
using genperf::testing::Bytes;
using genperf::testing::TempDir;

namespace {

constexpr uint32_t kU32 = uint32_t(GgufType::U32);

Bytes gguf_header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  Bytes b;
  b.raw("GGUF").put(version).put(n_tensors).put(n_kv);
  return b;
}

// The Error message of parsing `bytes` (named hostile.gguf); "" when it parses.
std::string parse_error(const std::string& bytes) {
  try {
    const GgufFile g = GgufFile::parse(MmapFile::from_bytes("hostile.gguf", bytes.data(), bytes.size()));
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[gguf] hostile.gguf: ", 0), 0u) << e.what();
    return e.what();
  }
  return "";
}

// One tensor info with the given ggml dims (innermost first), type and offset, after a header.
std::string one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset, size_t data_bytes) {
  Bytes b = gguf_header(1, 0);
  b.str("w").put(uint32_t(dims.size()));
  for (uint64_t d : dims) b.put(d);
  b.put(type).put(offset).pad(32);
  b.s.append(data_bytes, '\0');
  return b.s;
}

// Reads every value and tensor of a parsed file (what a fuzzer would touch).
void touch_everything(const GgufFile& g) {
  for (const std::string& k : g.keys()) (void)g.value(k);
  for (const GgufTensorInfo& t : g.tensor_infos()) {
    try {
      const Tensor x = g.tensor(t.name);
      volatile uint8_t sum = 0;
      for (size_t i = 0; i < x.nbytes(); ++i) sum = uint8_t(sum + x.data<uint8_t>()[i]);
    } catch (const Error&) {
    }
  }
}

std::vector<std::pair<std::string, GgufValue>> every_type() {
  using V = GgufValue;
  return {
      {"t.u8", V::u8(200)},
      {"t.i8", V::i8(-100)},
      {"t.u16", V::u16(60000)},
      {"t.i16", V::i16(-30000)},
      {"t.u32", V::u32(4000000000u)},
      {"t.i32", V::i32(-2000000000)},
      {"t.f32", V::f32(1.25f)},
      {"t.bool", V::boolean(true)},
      {"t.str", V::string("h\xc3\xa9llo")},
      {"t.u64", V::u64((uint64_t(1) << 63) + 5)},
      {"t.i64", V::i64(-(int64_t(1) << 62))},
      {"t.f64", V::f64(1e-300)},
      {"a.u8", V::array(GgufType::U8, {V::u8(1), V::u8(255)})},
      {"a.i8", V::array(GgufType::I8, {V::i8(-1)})},
      {"a.u16", V::array(GgufType::U16, {V::u16(7), V::u16(65535)})},
      {"a.i16", V::array(GgufType::I16, {V::i16(-7)})},
      {"a.u32", V::array(GgufType::U32, {V::u32(1), V::u32(2), V::u32(3)})},
      {"a.i32", V::i32s({-1, 0, 1})},
      {"a.f32", V::f32s({0.5f, -0.25f})},
      {"a.bool", V::array(GgufType::BOOL, {V::boolean(true), V::boolean(false)})},
      {"a.str", V::strings({"a", "", "long string \xe2\x82\xac"})},
      {"a.u64", V::array(GgufType::U64, {V::u64(1)})},
      {"a.i64", V::array(GgufType::I64, {V::i64(-5)})},
      {"a.f64", V::array(GgufType::F64, {V::f64(3.5)})},
      {"a.empty", V::array(GgufType::F32, {})},
      {"a.nested", V::array(GgufType::ARRAY, {V::strings({"x", "y"}), V::strings({}), V::i32s({4})})},
      {"a.deep", V::array(GgufType::ARRAY, {V::array(GgufType::ARRAY, {V::strings({"z"})})})},
  };
}

}  // namespace

TEST(Gguf, WriterMatchesHandEncodedBytes) {
  TempDir dir("gguf");
  Tensor t = Tensor::zeros({2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = float(i) + 0.5f;
  GgufWriter w;
  w.set_u32("a.b", 7);
  w.add_tensor("t", t);
  w.write(dir / "x.gguf");
  Bytes want = gguf_header(1, 2);
  want.str("general.alignment").put(kU32).put(uint32_t(32));
  want.str("a.b").put(kU32).put(uint32_t(7));
  want.str("t").put(uint32_t(2)).put(uint64_t(3)).put(uint64_t(2)).put(uint32_t(0)).put(uint64_t(0));
  want.pad(32).raw(std::string(static_cast<const char*>(t.raw()), 24)).pad(32);
  EXPECT_EQ(genperf::testing::read_bytes(dir / "x.gguf"), want.s);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf.tmp"));
}

TEST(Gguf, WriteReadEveryTypeBitExact) {
  const unsigned seed = 31337;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("gguf");
  const auto kvs = every_type();
  GgufWriter w(64);
  for (const auto& [k, v] : kvs) w.set(k, v);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w.f32", genperf::testing::random_bits({3, 5}, DType::F32, rng)},
      {"w.f16", genperf::testing::random_bits({7}, DType::F16, rng)},
      {"w.bf16", genperf::testing::random_bits({2, 3, 4, 5}, DType::BF16, rng)},
      {"w.i32", genperf::testing::random_bits({4, 1}, DType::I32, rng)},
      {"w.empty", Tensor::zeros({0, 2})},
  };
  for (const auto& [n, t] : tensors) w.add_tensor(n, t);
  const Tensor base = genperf::testing::random_bits({4, 6}, DType::BF16, rng);
  w.add_tensor("w.transposed", base.transpose(0, 1));
  const std::string path = dir / "m.gguf";
  w.write(path);

  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 64u);
  ASSERT_EQ(g.keys().size(), kvs.size() + 1);
  EXPECT_EQ(g.keys()[0], "general.alignment");
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(g.keys()[i + 1], kvs[i].first);
    EXPECT_TRUE(g.value(kvs[i].first) == kvs[i].second) << kvs[i].first;
    EXPECT_EQ(g.type(kvs[i].first), kvs[i].second.type());
  }
  EXPECT_EQ(g.get_int("t.u32"), 4000000000LL);
  EXPECT_EQ(g.get_int("t.i8"), -100);
  EXPECT_EQ(g.get_int("t.i64"), -(int64_t(1) << 62));
  EXPECT_EQ(g.get_float("t.f32"), 1.25);
  EXPECT_EQ(g.get_float("t.f64"), 1e-300);
  EXPECT_EQ(g.get_float("t.i16"), -30000.0);
  EXPECT_TRUE(g.get_bool("t.bool"));
  EXPECT_EQ(g.get_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(g.get_string("missing", "dflt"), "dflt");
  EXPECT_EQ(g.get_int("missing", 9), 9);
  EXPECT_EQ(g.get_string_array("a.str"), (std::vector<std::string>{"a", "", "long string \xe2\x82\xac"}));
  EXPECT_EQ(g.get_int_array("a.u16"), (std::vector<int64_t>{7, 65535}));
  EXPECT_EQ(g.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(g.get_float_array("a.f32"), (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(g.get_float_array("a.i8"), (std::vector<double>{-1.0}));
  EXPECT_EQ(g.array_size("a.nested"), 3u);
  EXPECT_EQ(g.elem_type("a.nested"), GgufType::ARRAY);
  EXPECT_TRUE(g.get_float_array("a.empty").empty());

  auto message = [&](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([&] { g.get_string("t.u32"); }),
            "[gguf] " + path + ": key 't.u32' is a u32, expected a string");
  EXPECT_NE(message([&] { g.get_int("t.u64"); }).find("does not fit in int64"), std::string::npos);
  EXPECT_NE(message([&] { g.get_int("t.str"); }).find("key 't.str' is a string, expected an integer"),
            std::string::npos);
  EXPECT_NE(message([&] { g.get_bool("t.u8"); }).find("expected a bool"), std::string::npos);
  EXPECT_NE(message([&] { g.get_string_array("a.u8"); }).find("array of u8, expected strings"),
            std::string::npos);
  EXPECT_NE(message([&] { g.get_float_array("a.str"); }).find("expected numbers"), std::string::npos);
  EXPECT_NE(message([&] { g.get_int("nope"); }).find("missing key 'nope'"), std::string::npos);
  EXPECT_NE(message([&] { g.tensor("nope"); }).find("no tensor named 'nope'"), std::string::npos);

  for (const auto& [n, t] : tensors) {
    const Tensor r = g.tensor(n);
    EXPECT_TRUE(genperf::testing::same_bytes(r, t)) << n;
    const GgufTensorInfo* info = g.find_tensor(n);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ((info->offset - g.data_offset()) % 64, 0u);
    EXPECT_EQ(r.storage()->owner.get(), static_cast<void*>(g.file().get()));  // zero-copy
  }
  EXPECT_TRUE(genperf::testing::same_bytes(g.tensor("w.transposed"), base.transpose(0, 1)));
  EXPECT_EQ(g.find_tensor("w.bf16")->shape, (std::vector<int64_t>{2, 3, 4, 5}));
}

TEST(Gguf, ReadsVersion2AndDefaultAlignment) {
  Bytes b = gguf_header(1, 1, 2);
  b.str("k").put(uint32_t(GgufType::STRING)).str("v");
  b.str("w").put(uint32_t(1)).put(uint64_t(2)).put(uint32_t(0)).put(uint64_t(0)).pad(32);
  b.put(1.0f).put(2.0f);
  const GgufFile g = GgufFile::parse(MmapFile::from_bytes("v2.gguf", b.s.data(), b.s.size()));
  EXPECT_EQ(g.version(), 2u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.get_string("k"), "v");
  EXPECT_EQ(g.tensor("w").data<float>()[1], 2.0f);
}

TEST(Gguf, HostileHeaders) {
  auto has = [](const std::string& e, const char* what) {
    EXPECT_NE(e.find(what), std::string::npos) << "'" << e << "' lacks '" << what << "'";
  };
  has(parse_error(""), "not a GGUF file");
  has(parse_error("GGUX\3\0\0\0"), "not a GGUF file");
  has(parse_error("GGUF"), "version");
  has(parse_error(gguf_header(0, 0, 1).s), "version 1 is not supported");
  has(parse_error(gguf_header(0, 0, 4).s), "unsupported GGUF version 4");
  has(parse_error(gguf_header(0, 0, 0x03000000).s), "big-endian");
  has(parse_error(gguf_header(uint64_t(1) << 60, 0).s), "tensor count");
  has(parse_error(gguf_header(0, uint64_t(1) << 60).s), "key/value count");
  const std::string filler(16, '\0');  // so that the key/value count itself fits
  has(parse_error(gguf_header(0, 1).put(uint64_t(1) << 40).raw("ab").raw(filler).s), "the limit is 65535");
  has(parse_error(gguf_header(0, 1).put(uint64_t(100)).raw("ab").raw(filler).s), "needs 100 bytes");
  has(parse_error(gguf_header(0, 1).str("k").put(uint32_t(GgufType::STRING)).put(uint64_t(1) << 50).s),
      "needs");
  has(parse_error(gguf_header(0, 1).str("k").put(uint32_t(13)).s), "unknown value type 13");
  has(parse_error(gguf_header(0, 1).str("k").put(uint32_t(GgufType::BOOL)).put(uint8_t(2)).s),
      "bool value is 2");
  has(parse_error(
          gguf_header(0, 1).str("k").put(uint32_t(GgufType::ARRAY)).put(kU32).put(uint64_t(1) << 61).s),
      "cannot fit");
  has(parse_error(gguf_header(0, 1)
                      .str("k")
                      .put(uint32_t(GgufType::ARRAY))
                      .put(uint32_t(GgufType::STRING))
                      .put(uint64_t(1) << 40)
                      .str("a")
                      .s),
      "cannot fit");
  has(parse_error(gguf_header(0, 1)
                      .str("k")
                      .put(uint32_t(GgufType::ARRAY))
                      .put(uint32_t(GgufType::ARRAY))
                      .put(uint64_t(1) << 40)
                      .s),
      "cannot fit");
  Bytes deep = gguf_header(0, 1);
  deep.str("k").put(uint32_t(GgufType::ARRAY));
  for (int i = 0; i < 20; ++i) deep.put(uint32_t(GgufType::ARRAY)).put(uint64_t(1));
  deep.put(kU32).put(uint64_t(0));
  has(parse_error(deep.s), "nested deeper than 16");
  has(parse_error(
          gguf_header(0, 2).str("k").put(kU32).put(uint32_t(1)).str("k").put(kU32).put(uint32_t(1)).s),
      "key 'k' appears twice");
  has(parse_error(gguf_header(0, 1).str("general.alignment").put(kU32).put(uint32_t(24)).s),
      "not a power of two");
  has(parse_error(
          gguf_header(0, 1).str("general.alignment").put(uint32_t(GgufType::U64)).put(uint64_t(32)).s),
      "expected a u32");
  has(parse_error(gguf_header(0, 1).str("").put(kU32).put(uint32_t(1)).s), "empty key");
}

TEST(Gguf, HostileTensorInfos) {
  auto has = [](const std::string& e, const char* what) {
    EXPECT_NE(e.find(what), std::string::npos) << "'" << e << "' lacks '" << what << "'";
  };
  EXPECT_EQ(parse_error(one_tensor({4, 2}, 0, 0, 32)), "");
  has(parse_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32)), "5 dimensions");
  has(parse_error(one_tensor({}, 0, 0, 32)), "0 dimensions");
  has(parse_error(one_tensor({uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0, 32)), "overflow");
  has(parse_error(one_tensor({uint64_t(1) << 63}, 0, 0, 32)), "overflow");
  has(parse_error(one_tensor({uint64_t(1) << 62}, 0, 0, 32)), "byte size overflows");
  // Found by fuzz_gguf: an empty tensor whose other dimensions multiply past 2^63.
  has(parse_error(one_tensor({0, uint64_t(1) << 62, uint64_t(1) << 40}, 0, 0, 32)), "overflow");
  EXPECT_EQ(parse_error(one_tensor({0, 1000}, 0, 0, 32)), "");
  has(parse_error(one_tensor({4}, 4, 0, 32)), "unknown type id 4");
  has(parse_error(one_tensor({4}, 99, 0, 32)), "unknown type id 99");
  has(parse_error(one_tensor({100}, 12, 0, 256)), "not a multiple of the Q4_K block size 256");
  has(parse_error(one_tensor({4}, 0, 4, 64)), "offset 4 is not a multiple of the alignment 32");
  has(parse_error(one_tensor({4, 2}, 0, 0, 31)), "past the end of the data section");
  has(parse_error(one_tensor({4}, 0, uint64_t(1) << 63, 32)), "past the end");
  Bytes dup = gguf_header(2, 0);
  for (int i = 0; i < 2; ++i)
    dup.str("w").put(uint32_t(1)).put(uint64_t(1)).put(uint32_t(0)).put(uint64_t(0));
  has(parse_error(dup.pad(32).raw(std::string(32, '\0')).s), "tensor 'w' appears twice");
  // Data section start past the end of a file that has tensors.
  Bytes short_file = gguf_header(1, 0);
  short_file.str("w").put(uint32_t(1)).put(uint64_t(0)).put(uint32_t(0)).put(uint64_t(0));
  has(parse_error(short_file.s), "past the end of the file");

  // A known type genperf cannot read yet: the file opens, the tensor is a named error.
  const std::string iq2 = one_tensor({256, 2}, 16, 0, 132);  // IQ2_XXS: 66 bytes per 256
  const GgufFile g = GgufFile::parse(MmapFile::from_bytes("q.gguf", iq2.data(), iq2.size()));
  EXPECT_EQ(g.tensor_infos()[0].bytes, 132u);
  EXPECT_EQ(g.tensor_infos()[0].shape, (std::vector<int64_t>{2, 256}));
  try {
    g.tensor("w");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[gguf] q.gguf: tensor w has type IQ2_XXS (id 16) which genperf cannot read yet");
  }
}

TEST(Gguf, TruncationsAndMutationsNeverCrash) {
  const unsigned seed = 2718;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("gguf");
  GgufWriter w;
  for (const auto& [k, v] : every_type()) w.set(k, v);
  w.add_tensor("a", genperf::testing::random_bits({3, 4}, DType::F16, rng));
  w.add_tensor("b", genperf::testing::random_bits({5}, DType::F32, rng));
  w.write(dir / "ok.gguf");
  const std::string good = genperf::testing::read_bytes(dir / "ok.gguf");
  const GgufFile whole = GgufFile::parse(MmapFile::from_bytes("ok", good.data(), good.size()));
  const size_t data_start = size_t(whole.data_offset());
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string cut = good.substr(0, n);
    try {
      const GgufFile g = GgufFile::parse(MmapFile::from_bytes("cut", cut.data(), cut.size()));
      EXPECT_GE(n, data_start);  // only a cut in the trailing padding can still parse
      touch_everything(g);
    } catch (const Error&) {
    }
  }
  int parsed = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string m = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % data_start;  // the header, where the structure is
      m[at] = rng() % 3 == 0 ? char(0xFF) : char(rng());
    }
    try {
      const GgufFile g = GgufFile::parse(MmapFile::from_bytes("mut", m.data(), m.size()));
      touch_everything(g);
      ++parsed;
    } catch (const Error&) {
    }
  }
  std::printf("%d of 4000 mutated files parsed\n", parsed);
}

TEST(Gguf, WriterRejectsBadInput) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor(std::string(64, 'x'), Tensor::zeros({1})), Error);
  w.add_tensor("a", Tensor::zeros({1}));
  EXPECT_THROW(w.add_tensor("a", Tensor::zeros({1})), Error);
  EXPECT_THROW(w.set("general.alignment", GgufValue::u32(3)), Error);
  EXPECT_THROW(w.set("general.alignment", GgufValue::u64(32)), Error);
  EXPECT_THROW(w.set("", GgufValue::u8(1)), Error);
  EXPECT_THROW(GgufValue::array(GgufType::U8, {GgufValue::i8(1)}), Error);
  EXPECT_THROW(GgufWriter(12), Error);
  EXPECT_THROW(GgufFile::open("/nonexistent/genperf.gguf"), Error);
}

// general.file_type from the matrices' types: the type holding the most elements names the file
// (llama.cpp's enum llama_ftype values); a K-quant beside a format of more bits per weight is a
// Medium mix, alone a Small one.
TEST(Gguf, FileTypeFromTheMatrices) {
  using W = std::vector<std::pair<DType, int64_t>>;
  EXPECT_EQ(gguf_file_type({}), 0u);  // ALL_F32
  EXPECT_EQ(gguf_file_type(W{{DType::F32, 10}}), 0u);
  EXPECT_EQ(gguf_file_type(W{{DType::F16, 10}, {DType::F32, 4}}), 1u);  // MOSTLY_F16
  EXPECT_EQ(gguf_file_type(W{{DType::BF16, 10}}), 32u);                 // MOSTLY_BF16
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_0, 10}, {DType::Q8_0, 9}}), 2u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_1, 10}}), 3u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q8_0, 10}, {DType::F32, 9}}), 7u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q5_0, 10}}), 8u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q5_1, 10}}), 9u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q2_K, 10}, {DType::Q4_K, 3}}), 10u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q3_K, 10}}), 11u);                    // Q3_K_S
  EXPECT_EQ(gguf_file_type(W{{DType::Q3_K, 10}, {DType::Q5_K, 1}}), 12u);  // Q3_K_M
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_K, 10}}), 14u);                    // Q4_K_S
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_K, 10}, {DType::Q2_K, 5}}), 14u);  // fewer bits beside: still Small
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_K, 6}, {DType::Q6_K, 2}, {DType::Q6_K, 3}}), 15u);  // Q4_K_M
  // Counted by elements, not by tensors.
  EXPECT_EQ(gguf_file_type(W{{DType::Q4_K, 1}, {DType::Q4_K, 1}, {DType::Q4_K, 1}, {DType::Q6_K, 4}}), 18u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q5_K, 10}}), 16u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q5_K, 10}, {DType::Q8_0, 1}}), 17u);
  EXPECT_EQ(gguf_file_type(W{{DType::Q6_K, 10}, {DType::F16, 1}}), 18u);
  EXPECT_THROW(gguf_file_type(W{{DType::F8_E4M3_B32, 10}}), Error);  // not a ggml type
  EXPECT_THROW(gguf_file_type(W{{DType::I32, 10}}), Error);          // no file type names it
  // Back from the value to the type it names; values genperf does not know are refused.
  DType t = DType::F32;
  ASSERT_TRUE(gguf_file_type_dtype(15, &t));
  EXPECT_EQ(t, DType::Q4_K);
  ASSERT_TRUE(gguf_file_type_dtype(32, &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_FALSE(gguf_file_type_dtype(4, &t));  // MOSTLY_Q4_1_SOME_F16, long removed
  EXPECT_FALSE(gguf_file_type_dtype(1024, &t));
}
