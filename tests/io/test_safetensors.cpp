#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "common/test_util.h"
#include "genperf/error.h"
#include "io/safetensors.h"
#include "io_test_util.h"

using namespace genperf;
using genperf::testing::Bytes;
using genperf::testing::TempDir;

namespace {

// A file with the given header text (length prefix added) and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  Bytes b;
  b.put(uint64_t(header.size())).raw(header);
  b.s.append(data_bytes, '\0');
  return b.s;
}

// The message of the Error read_safetensors throws on `bytes` written to dir/name ("" if none).
std::string error_reading(const TempDir& dir, const std::string& bytes,
                          const std::string& name = "bad.safetensors") {
  const std::string path = dir / name;
  genperf::testing::write_bytes(path, bytes);
  try {
    read_safetensors(path);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, WriteReadBitExact) {
  const unsigned seed = 4242;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("st");
  std::vector<std::pair<std::string, Tensor>> in = {
      {"a.f32", genperf::testing::random_bits({3, 5}, DType::F32, rng)},
      {"b.f16", genperf::testing::random_bits({7}, DType::F16, rng)},
      {"c.bf16", genperf::testing::random_bits({2, 3, 4, 5}, DType::BF16, rng)},
      {"d.i32", genperf::testing::random_bits({4, 1}, DType::I32, rng)},
      {"e.empty", Tensor::zeros({0, 3}, DType::F32)},
      {"f.odd_bf16", genperf::testing::random_bits({3}, DType::BF16, rng)},
      {"g.f32", genperf::testing::random_bits({5, 3}, DType::F32, rng)},
  };
  // Non-contiguous inputs: a transpose and a column slice.
  const Tensor base = genperf::testing::random_bits({6, 4}, DType::F32, rng);
  in.emplace_back("h.transposed", base.transpose(0, 1));
  in.emplace_back("i.sliced", base.slice(1, 1, 2));
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}};
  const std::string path = dir / "m.safetensors";
  write_safetensors(path, in, meta);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.names.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(f.names[i], in[i].first);
    const Tensor& t = f.tensors.at(in[i].first);
    EXPECT_TRUE(genperf::testing::same_bytes(t, in[i].second)) << in[i].first;
  }
  // Header padded so that data starts 8-byte aligned; tensors borrow the mapping.
  uint64_t n;
  std::memcpy(&n, f.file->data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  const Tensor& a = f.tensors.at("a.f32");
  EXPECT_EQ(a.data<uint8_t>(), f.file->data() + 8 + n);
  EXPECT_EQ(a.storage()->owner.get(), static_cast<void*>(f.file.get()));
  // d.i32 follows 14 + 240 bytes of 16-bit data, so it is unaligned in the file: every tensor
  // still comes back aligned to its element size (a copy where needed).
  for (const auto& [name, t] : f.tensors)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % traits(t.dtype()).block_bytes, 0u) << name;
  EXPECT_NE(f.tensors.at("d.i32").storage()->owner.get(), static_cast<void*>(f.file.get()));
}

TEST(Safetensors, TensorsOutliveTheFileObject) {
  const unsigned seed = 5;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("st");
  const Tensor w = genperf::testing::random_bits({16, 16}, DType::BF16, rng);
  write_safetensors(dir / "w.safetensors", {{"w", w}});
  Tensor kept;
  {
    SafetensorsFile f = read_safetensors(dir / "w.safetensors");
    kept = f.tensors.at("w");
  }
  EXPECT_TRUE(genperf::testing::same_bytes(kept, w));
  kept.data<uint16_t>()[0] ^= 1;  // private copy-on-write mapping: writable, file untouched
  EXPECT_TRUE(genperf::testing::same_bytes(read_safetensors(dir / "w.safetensors").tensors.at("w"), w));
}

TEST(Safetensors, MalformedFilesNameTheFile) {
  TempDir dir("st");
  auto err = [&](const std::string& bytes) { return error_reading(dir, bytes); };
  EXPECT_NE(err("").find("too short"), std::string::npos);
  EXPECT_NE(err("\x05\0\0").find("too short"), std::string::npos);
  EXPECT_NE(err(Bytes().put(uint64_t(1000)).raw("{}").s).find("header length 1000 exceeds the file size"),
            std::string::npos);
  EXPECT_NE(err(Bytes().put(uint64_t(1) << 63).raw("{}").s).find("exceeds the file size"), std::string::npos);

  struct Case {
    std::string header;  // JSON text; T(body) is {"t": {body}}
    size_t data_bytes;
    const char* expect;
  };
  const std::string f32 = R"("dtype":"F32",)";
  auto T = [](const std::string& body) { return "{\"t\":{" + body + "}}"; };
  const std::vector<Case> cases = {
      {"{\"t\":", 0, "bad JSON header"},
      {"[1,2]", 0, "expected an object"},
      {T(R"("dtype":"I8","shape":[2],"data_offsets":[0,2])"), 2, "tensor 't' has unsupported dtype 'I8'"},
      {T(R"("dtype":"F64","shape":[1],"data_offsets":[0,8])"), 8, "unsupported dtype 'F64'"},
      {T(f32 + R"("shape":[4],"data_offsets":[0,16])"), 8, "exceed the data size 8"},
      {T(f32 + R"("shape":[3],"data_offsets":[0,16])"), 16, "needs 12 bytes, but data_offsets span 16"},
      {T(f32 + R"("shape":[-1],"data_offsets":[0,0])"), 0, "not a non-negative integer"},
      {T(f32 + R"("shape":[1.5],"data_offsets":[0,0])"), 0, "not a non-negative integer"},
      {T(f32 + R"("shape":[1],"data_offsets":[8,4])"), 8, "reversed"},
      {T(f32 + R"("shape":[1],"data_offsets":[0])"), 8, "not a pair"},
      {T(R"("shape":[1],"data_offsets":[0,4])"), 8, "has no 'dtype'"},
      {T(f32 + R"("shape":[1,1,1,1,1],"data_offsets":[0,4])"), 4, "rank 5"},
      {T(f32 + R"("shape":[4294967296,4294967296],"data_offsets":[0,4])"), 4, "overflows"},
      // An empty tensor whose other dimensions multiply past 2^63 (the case fuzz_gguf found in GGUF).
      {T(f32 + R"("shape":[0,4294967296,4294967296],"data_offsets":[0,0])"), 0, "overflows"},
      {R"({"t":[1]})", 0, "expected an object"},
      {R"({"__metadata__":{"a":1}})", 0, "expected a string"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "tensors 'a' and 'b' overlap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "key 'a' appears twice"},
  };
  for (const Case& c : cases) {
    const std::string e = err(file_with_header(c.header, c.data_bytes));
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.header << " -> '" << e << "'";
  }
}

TEST(Safetensors, HeaderSizeLimit) {
  // A sparse file just over the limit: the header length fits the file but exceeds 100 MB.
  TempDir dir("st");
  const std::string path = dir / "big.safetensors";
  const uint64_t n = (100ull << 20) + 8;
  genperf::testing::write_bytes(path, Bytes().put(n).s);
  std::filesystem::resize_file(path, n + 8);
  try {
    read_safetensors(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limit"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, UnpaddedHeaderAndScalarsFromOtherWriters) {
  TempDir dir("st");
  const float v[2] = {1.5f, -2.0f};
  const std::string header = R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                             R"("v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  ASSERT_NE(header.size() % 4, 0u);  // data unaligned to 4 in the file
  Bytes b;
  b.put(uint64_t(header.size())).raw(header).raw(std::string(reinterpret_cast<const char*>(v), 8));
  const std::string path = dir / "u.safetensors";
  genperf::testing::write_bytes(path, b.s);
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.tensors.at("s").shape(), std::vector<int64_t>{1});
  EXPECT_EQ(f.tensors.at("s").data<float>()[0], 1.5f);
  EXPECT_EQ(f.tensors.at("v").data<float>()[0], -2.0f);
}

TEST(Safetensors, WriterErrorsLeaveNoFile) {
  TempDir dir("st");
  const std::string path = dir / "w.safetensors";
  const Tensor t = Tensor::zeros({2});
  EXPECT_THROW(write_safetensors(path, {{"a", t}, {"a", t}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", t}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"u", Tensor()}}), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_THROW(write_safetensors(dir / "no/such/dir/x.safetensors", {{"a", t}}), Error);
  EXPECT_THROW(read_safetensors(dir / "missing.safetensors"), Error);
  EXPECT_THROW(read_safetensors(dir.path()), Error);  // a directory
}

TEST(Safetensors, FromMemoryMatchesFile) {
  const unsigned seed = 9;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  TempDir dir("st");
  const Tensor t = genperf::testing::random_bits({3, 3}, DType::F16, rng);
  write_safetensors(dir / "x.safetensors", {{"x", t}});
  const std::string bytes = genperf::testing::read_bytes(dir / "x.safetensors");
  const SafetensorsFile f = read_safetensors(MmapFile::from_bytes("mem", bytes.data(), bytes.size()));
  EXPECT_TRUE(genperf::testing::same_bytes(f.tensors.at("x"), t));
  // Every truncation of a valid file is an error, never a crash.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(read_safetensors(MmapFile::from_bytes("mem", bytes.data(), n)), Error) << n;
}
