#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

#include "genperf/error.h"
#include "genperf/json.h"

namespace genperf {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB, as the reference implementation

struct DtypeName {
  const char* name;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", DType::F32},         {"F16", DType::F16},        {"BF16", DType::BF16},
    {"I32", DType::I32},         {"F8_E4M3", DType::F8_E4M3}, {"F8_E5M2", DType::F8_E5M2}};

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// Metadata key prefix of genperf's quantized tensors: "genperf.quant.<name>" = "<format> <dims>".
constexpr std::string_view kQuantPrefix = "genperf.quant.";

// A type with a safetensors dtype name, or nullptr.
const char* native_name(DType t) {
  for (const auto& k : kDtypes)
    if (k.dtype == t) return k.name;
  return nullptr;
}

class HeaderReader {
 public:
  HeaderReader(const MmapFile& f) : f_(f) {}

  template <typename... Args>
  [[noreturn]] void error(Args&&... what) const {
    fail("[safetensors] ", f_.name(), ": ", std::forward<Args>(what)...);
  }

  // Header length and the parsed JSON object.
  Json parse_header(uint64_t& header_bytes) const {
    if (f_.size() < 8) error("file is ", f_.size(), " bytes, too short for the 8-byte header length");
    uint64_t n;
    std::memcpy(&n, f_.data(), 8);  // little-endian, as is the host (checked in read_safetensors)
    if (n > f_.size() - 8) error("header length ", n, " exceeds the file size ", f_.size(), " minus 8");
    if (n > kMaxHeaderBytes) error("header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
    header_bytes = n;
    const std::string_view text(reinterpret_cast<const char*>(f_.data()) + 8, size_t(n));
    Json j;
    try {
      j = Json::parse(text, f_.name() + " (header)");
    } catch (const Error& e) {
      error("bad JSON header: ", e.what());
    }
    if (!j.is_object()) error("header is a JSON ", j.type_name(), ", expected an object");
    return j;
  }

  std::map<std::string, std::string> metadata(const Json& m) const {
    if (!m.is_object()) error("__metadata__ is a ", m.type_name(), ", expected an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : m.as_object()) {
      if (!v.is_string()) error("__metadata__ value '", k, "' is a ", v.type_name(), ", expected a string");
      out[k] = v.as_string();
    }
    return out;
  }

  // `quant` holds the "genperf.quant.<name>" metadata value of this tensor, or null.
  Entry entry(const std::string& name, const Json& e, uint64_t data_bytes, const std::string* quant) const {
    if (!e.is_object()) error("tensor '", name, "' is a JSON ", e.type_name(), ", expected an object");
    Entry out;
    out.name = name;
    const bool bytes = dtype(name, field(name, e, "dtype"), out.dtype);
    out.shape = shape(name, field(name, e, "shape"));
    offsets(name, field(name, e, "data_offsets"), out);
    if (out.end > data_bytes)
      error("tensor '", name, "' data_offsets [", out.begin, ", ", out.end, "] exceed the data size ",
            data_bytes);
    if (bytes != (quant != nullptr))
      error("tensor '", name, "' ", bytes ? "has dtype U8 but no" : "is not U8 but has", " '", kQuantPrefix, name,
            "' metadata (genperf stores quantized tensors as U8 bytes described there)");
    const uint64_t expect = byte_size(name, out.shape, bytes ? 1 : traits(out.dtype).block_bytes);
    if (expect != out.end - out.begin)
      error("tensor '", name, "' of dtype ", bytes ? "U8" : safetensors_dtype_name(out.dtype), " and shape ",
            shape_text(out.shape), " needs ", expect, " bytes, but data_offsets span ", out.end - out.begin);
    if (bytes) quantized(name, *quant, out);
    if (out.shape.empty()) out.shape = {1};  // genperf tensors have rank 1..4
    return out;
  }

 private:
  const Json& field(const std::string& name, const Json& e, const char* key) const {
    const Json* v = e.find(key);
    if (!v) error("tensor '", name, "' has no '", key, "'");
    return *v;
  }

  // Sets `out` and returns false for a native dtype; returns true for U8 (quantized bytes).
  bool dtype(const std::string& name, const Json& d, DType& out) const {
    if (!d.is_string()) error("tensor '", name, "' dtype is a ", d.type_name(), ", expected a string");
    if (d.as_string() == "U8") return true;
    for (const auto& k : kDtypes)
      if (d.as_string() == k.name) {
        out = k.dtype;
        return false;
      }
    error("tensor '", name, "' has unsupported dtype '", d.as_string(),
          "' (genperf reads F32, F16, BF16, I32, F8_E4M3, F8_E5M2, and U8 bytes of its quantized formats)");
  }

  // A U8 tensor of quantized bytes: `spec` is "<format> <d0> <d1> ..." (the logical shape); the
  // stored shape must be [d0, ..., d_last / block * block_bytes]. On success e takes the format
  // and the logical shape.
  void quantized(const std::string& name, const std::string& spec, Entry& e) const {
    std::vector<std::string> words(1);
    for (char ch : spec) {
      if (ch == ' ') words.emplace_back();
      else words.back() += ch;
    }
    auto bad = [&](const auto&... why) {
      error("tensor '", name, "': metadata '", kQuantPrefix, name, "' = '", spec, "' ", why...,
            " (expected '<format> <dim> ...')");
    };
    if (words.size() < 2 || words.size() > size_t(kMaxDims) + 1) bad("needs a format and 1 to ", kMaxDims, " dims");
    DType f = DType::F32;
    try {
      f = parse_dtype(words[0]);
    } catch (const Error&) {
      bad("names an unknown format");
    }
    if (native_name(f)) bad("names ", dtype_name(f), ", which safetensors stores natively");
    std::vector<int64_t> logical;
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w.empty() || w.size() > 15 || w.find_first_not_of("0123456789") != std::string::npos)
        bad("has dim '", w, "', not a non-negative integer");
      logical.push_back(std::stoll(w));
    }
    const TypeTraits& tr = traits(f);
    const int64_t last = logical.back();
    if (last % tr.block_size != 0)
      bad("has rows of ", last, " elements, not a multiple of the ", tr.name, " block size ", tr.block_size);
    std::vector<int64_t> stored = logical;
    if (__builtin_mul_overflow(last / tr.block_size, int64_t(tr.block_bytes), &stored.back()))
      bad("overflows a 64-bit byte count");
    if (stored != e.shape)
      error("tensor '", name, "': ", tr.name, " of shape ", shape_text(logical), " is stored as U8 ",
            shape_text(stored), ", but the file has U8 ", shape_text(e.shape));
    byte_size(name, logical, tr.block_bytes);  // no partial product of the logical shape overflows
    e.dtype = f;
    e.shape = logical;
  }

  static bool is_uint(const Json& v) {
    return v.is_number() && v.as_number() >= 0 && v.as_number() <= 9007199254740992.0 &&
           v.as_number() == double(int64_t(v.as_number()));
  }

  std::vector<int64_t> shape(const std::string& name, const Json& s) const {
    if (!s.is_array()) error("tensor '", name, "' shape is a ", s.type_name(), ", expected an array");
    if (s.as_array().size() > size_t(kMaxDims))
      error("tensor '", name, "' has rank ", s.as_array().size(), ", genperf supports at most ", kMaxDims);
    std::vector<int64_t> out;
    for (const Json& d : s.as_array()) {
      if (!is_uint(d)) error("tensor '", name, "' shape entry ", d.dump(), " is not a non-negative integer");
      out.push_back(int64_t(d.as_number()));
    }
    return out;
  }

  void offsets(const std::string& name, const Json& o, Entry& e) const {
    if (!o.is_array() || o.as_array().size() != 2 || !is_uint(o.as_array()[0]) || !is_uint(o.as_array()[1]))
      error("tensor '", name, "' data_offsets ", o.dump(), " is not a pair of non-negative integers");
    e.begin = uint64_t(o.as_array()[0].as_number());
    e.end = uint64_t(o.as_array()[1].as_number());
    if (e.begin > e.end) error("tensor '", name, "' data_offsets [", e.begin, ", ", e.end, "] are reversed");
  }

  // Zero dimensions count as 1 in the overflow check, so that no partial product of the shape
  // (in any order, as Tensor computes them) can overflow even when the tensor is empty.
  // (For a block format, the elements' product bounds the blocks' one, so it is checked too.)
  uint64_t byte_size(const std::string& name, const std::vector<int64_t>& shape, size_t elem_bytes) const {
    int64_t span = int64_t(elem_bytes);
    bool empty = false;
    for (int64_t d : shape) {
      empty = empty || d == 0;
      if (__builtin_mul_overflow(span, d == 0 ? int64_t(1) : d, &span))
        error("tensor '", name, "' shape ", shape_text(shape), " overflows a 64-bit byte count");
    }
    return empty ? 0 : uint64_t(span);
  }

  static std::string shape_text(const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += cat(i ? ", " : "", s[i]);
    return t + "]";
  }

  const MmapFile& f_;
};

void check_no_overlap(const HeaderReader& r, std::vector<Entry> entries) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      r.error("tensors '", entries[i - 1].name, "' and '", entries[i].name, "' overlap");
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& k : kDtypes)
    if (k.dtype == t) return k.name;
  fail("[safetensors] type ", dtype_name(t), " cannot be stored (expected f32, f16, bf16 or i32)");
}

SafetensorsFile read_safetensors(const std::string& path) { return read_safetensors(MmapFile::open(path)); }

SafetensorsFile read_safetensors(std::shared_ptr<MmapFile> file) {
  static_assert(std::endian::native == std::endian::little,
                "safetensors reading assumes a little-endian host");
  HeaderReader r(*file);
  uint64_t header_bytes = 0;
  const Json header = r.parse_header(header_bytes);
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file->size() - data_start;

  SafetensorsFile out;
  std::vector<Entry> entries;
  std::set<std::string_view> seen;
  for (const auto& [name, value] : header.as_object()) {
    if (!seen.insert(name).second) r.error("key '", name, "' appears twice in the header");
    if (name == "__metadata__") out.metadata = r.metadata(value);
  }
  std::set<std::string> described;  // tensors that genperf.quant.* metadata describes
  for (const auto& [key, v] : out.metadata)
    if (key.compare(0, kQuantPrefix.size(), kQuantPrefix) == 0) described.insert(key.substr(kQuantPrefix.size()));
  for (const auto& [name, value] : header.as_object()) {
    if (name == "__metadata__") continue;
    const auto q = out.metadata.find(std::string(kQuantPrefix) + name);
    entries.push_back(r.entry(name, value, data_bytes, q == out.metadata.end() ? nullptr : &q->second));
    described.erase(name);
  }
  if (!described.empty())
    r.error("metadata '", kQuantPrefix, *described.begin(), "' describes a tensor the file does not have");
  check_no_overlap(r, entries);
  for (const Entry& e : entries) {
    out.names.push_back(e.name);
    out.tensors.emplace(e.name, tensor_from_file(file, size_t(data_start + e.begin), e.shape, e.dtype));
  }
  out.file = std::move(file);
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::Object{};
  if (!metadata.empty()) {
    Json m = Json::Object{};
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::vector<Tensor> data;
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string context = cat("[safetensors] ", path, ": tensor '", name, "'");
    GP_CHECK(!name.empty() && name != "__metadata__", context, ": invalid name");
    GP_CHECK(seen.insert(name).second, context, " given twice");
    Tensor c = contiguous_cpu(t, context);
    Json shape = Json::Array{};
    const bool bytes = !native_name(c.dtype());  // a quantized format: U8 bytes plus metadata
    for (int i = 0; i < c.ndim(); ++i)
      shape.push_back(Json(bytes && i == c.ndim() - 1 ? int64_t(bytes_for(c.dtype(), c.size(i))) : c.size(i)));
    if (bytes) {
      const std::string key = std::string(kQuantPrefix) + name;
      GP_CHECK(!metadata.count(key), context, ": the metadata already has a '", key, "' entry");
      std::string spec = dtype_name(c.dtype());
      for (int64_t d : c.shape()) spec += cat(" ", d);
      if (!header.find("__metadata__")) header["__metadata__"] = Json::Object{};
      header["__metadata__"][key] = spec;
    }
    Json e = Json::Object{};
    e["dtype"] = bytes ? "U8" : safetensors_dtype_name(c.dtype());
    e["shape"] = std::move(shape);
    e["data_offsets"] = Json::Array{Json(int64_t(offset)), Json(int64_t(offset + c.nbytes()))};
    header.as_object().emplace_back(name, std::move(e));  // names checked unique above
    offset += c.nbytes();
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const uint64_t n = text.size();

  OutputFile out(path);
  out.write(&n, 8);
  out.write(text);
  for (const Tensor& t : data) out.write(t.raw(), t.nbytes());
  out.commit();
}

}  // namespace genperf
