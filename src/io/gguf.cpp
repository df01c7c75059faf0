#include "io/gguf.h"

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "genperf/error.h"

namespace genperf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF reading assumes a little-endian host");

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr int kMaxArrayDepth = 16;                       // nested arrays; keeps recursion shallow
constexpr uint64_t kMaxDecodedItems = 1ull << 24;        // GgufValue trees are ~100 bytes per item
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, smallest value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

// ggml's type table as stored in GGUF files (ids 4, 5, 31-33 and 36-38 were removed).
// clang-format off
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},       {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 36},       {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},    {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},   {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},   {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136},  {24, "I8", 1, 1},          {25, "I16", 1, 2},
    {26, "I32", 1, 4},         {27, "I64", 1, 8},         {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},    {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},    {39, "MXFP4", 32, 17},
};
// clang-format on

// The genperf type that ggml id `id` reads as: the traits row whose ggml_type is id (the traits
// table is the one place that maps genperf types to ggml ids). False when genperf has none.
bool readable_dtype(uint32_t id, DType* out) {
  for (size_t i = 0; i < size_t(DType::COUNT); ++i)
    if (traits(DType(i)).ggml_type == int64_t(id)) {
      *out = DType(i);
      return true;
    }
  return false;
}

template <typename... Args>
[[noreturn]] void gguf_error(const MmapFile& f, Args&&... what) {
  fail("[gguf] ", f.name(), ": ", std::forward<Args>(what)...);
}

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Bytes of a fixed-size value type; 0 for strings and arrays.
uint64_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    default:
      return 0;
  }
}

bool is_int_type(GgufType t) {
  return t == GgufType::U8 || t == GgufType::I8 || t == GgufType::U16 || t == GgufType::I16 ||
         t == GgufType::U32 || t == GgufType::I32 || t == GgufType::U64 || t == GgufType::I64;
}

bool is_signed(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// An integer of type t at p, as two's-complement bits widened to 64 (sign-extended if signed).
uint64_t load_int_bits(const uint8_t* p, GgufType t) {
  switch (t) {
    case GgufType::U8:
      return load<uint8_t>(p);
    case GgufType::I8:
      return uint64_t(int64_t(load<int8_t>(p)));
    case GgufType::U16:
      return load<uint16_t>(p);
    case GgufType::I16:
      return uint64_t(int64_t(load<int16_t>(p)));
    case GgufType::U32:
      return load<uint32_t>(p);
    case GgufType::I32:
      return uint64_t(int64_t(load<int32_t>(p)));
    case GgufType::U64:
      return load<uint64_t>(p);
    case GgufType::I64:
      return load<uint64_t>(p);
    default:
      return 0;
  }
}

double load_float(const uint8_t* p, GgufType t) {
  return t == GgufType::F32 ? double(load<float>(p)) : load<double>(p);
}

// Bounds-checked reading of the mapped file.
class Cursor {
 public:
  Cursor(const MmapFile& f, size_t pos) : f_(f), pos_(pos) {}
  size_t pos() const { return pos_; }
  uint64_t remaining() const { return f_.size() - pos_; }
  const uint8_t* here() const { return f_.data() + pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      gguf_error(f_, what, " at byte ", pos_, " needs ", n, " bytes, but only ", remaining(), " remain");
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += size_t(n);
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    const T v = load<T>(here());
    pos_ += sizeof(T);
    return v;
  }
  std::string_view string(const char* what, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    const size_t start = pos_;
    const uint64_t n = read<uint64_t>(what);
    if (n > max_len)
      gguf_error(f_, what, " at byte ", start, " is ", n, " bytes long, the limit is ", max_len);
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(here()), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  GgufType value_type(const char* what) {
    const size_t start = pos_;
    const uint32_t t = read<uint32_t>(what);
    if (!valid_type(t)) gguf_error(f_, what, " at byte ", start, ": unknown value type ", t);
    return GgufType(t);
  }
  // Array header: element type and a count proven to fit in the remaining bytes.
  uint64_t array_header(GgufType& elem, const char* what) {
    elem = value_type(what);
    const size_t start = pos_;
    const uint64_t n = read<uint64_t>(what);
    const uint64_t min_item = elem == GgufType::STRING ? 8 : elem == GgufType::ARRAY ? 12 : fixed_size(elem);
    if (n > remaining() / min_item)
      gguf_error(f_, what, " at byte ", start, ": array of ", n, " ", gguf_type_name(elem),
                 " items cannot fit in the ", remaining(), " bytes that remain");
    return n;
  }

 private:
  const MmapFile& f_;
  size_t pos_;
};

// Walks over one value, checking every length against the file.
void skip_value(Cursor& c, const MmapFile& f, GgufType t, int depth, const std::string& key) {
  if (t == GgufType::STRING) {
    c.string("string value");
  } else if (t == GgufType::ARRAY) {
    if (depth >= kMaxArrayDepth) gguf_error(f, "key '", key, "': arrays nested deeper than ", kMaxArrayDepth);
    GgufType elem;
    const uint64_t n = c.array_header(elem, "array");
    if (fixed_size(elem) > 0) {
      if (elem == GgufType::BOOL)
        for (uint64_t i = 0; i < n; ++i)
          if (c.here()[i] > 1)
            gguf_error(f, "key '", key, "': bool array item ", i, " is ", int(c.here()[i]));
      c.skip(n * fixed_size(elem), "array");
    } else {
      for (uint64_t i = 0; i < n; ++i) skip_value(c, f, elem, depth + 1, key);
    }
  } else {
    if (t == GgufType::BOOL && c.remaining() > 0 && c.here()[0] > 1)
      gguf_error(f, "key '", key, "': bool value is ", int(c.here()[0]), " (expected 0 or 1)");
    c.skip(fixed_size(t), "value");
  }
}

// Decodes one value (already validated by skip_value). `budget` caps the items decoded, since
// each costs far more memory as a GgufValue than in the file.
GgufValue decode_value(Cursor& c, const MmapFile& f, std::string_view key, GgufType t, uint64_t& budget) {
  if (budget == 0) gguf_error(f, "key '", key, "' has more than ", kMaxDecodedItems, " items to decode");
  --budget;
  switch (t) {
    case GgufType::STRING:
      return GgufValue::string(std::string(c.string("string")));
    case GgufType::BOOL:
      return GgufValue::boolean(c.read<uint8_t>("bool") != 0);
    case GgufType::F32:
      return GgufValue::f32(c.read<float>("f32"));
    case GgufType::F64:
      return GgufValue::f64(c.read<double>("f64"));
    case GgufType::U8:
      return GgufValue::u8(c.read<uint8_t>("u8"));
    case GgufType::I8:
      return GgufValue::i8(c.read<int8_t>("i8"));
    case GgufType::U16:
      return GgufValue::u16(c.read<uint16_t>("u16"));
    case GgufType::I16:
      return GgufValue::i16(c.read<int16_t>("i16"));
    case GgufType::U32:
      return GgufValue::u32(c.read<uint32_t>("u32"));
    case GgufType::I32:
      return GgufValue::i32(c.read<int32_t>("i32"));
    case GgufType::U64:
      return GgufValue::u64(c.read<uint64_t>("u64"));
    case GgufType::I64:
      return GgufValue::i64(c.read<int64_t>("i64"));
    case GgufType::ARRAY:
      break;
  }
  GgufType elem;
  const uint64_t n = c.array_header(elem, "array");
  if (n > budget) gguf_error(f, "key '", key, "' has more than ", kMaxDecodedItems, " items to decode");
  std::vector<GgufValue> items;
  items.reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) items.push_back(decode_value(c, f, key, elem, budget));
  return GgufValue::array(elem, std::move(items));
}

void encode_value(std::string& out, const GgufValue& v) {
  auto put = [&](const auto& x) { out.append(reinterpret_cast<const char*>(&x), sizeof x); };
  switch (v.type()) {
    case GgufType::U8:
      put(uint8_t(v.as_uint()));
      break;
    case GgufType::I8:
      put(int8_t(v.as_int()));
      break;
    case GgufType::U16:
      put(uint16_t(v.as_uint()));
      break;
    case GgufType::I16:
      put(int16_t(v.as_int()));
      break;
    case GgufType::U32:
      put(uint32_t(v.as_uint()));
      break;
    case GgufType::I32:
      put(int32_t(v.as_int()));
      break;
    case GgufType::U64:
      put(uint64_t(v.as_uint()));
      break;
    case GgufType::I64:
      put(int64_t(v.as_int()));
      break;
    case GgufType::F32:
      put(float(v.as_float()));
      break;
    case GgufType::F64:
      put(double(v.as_float()));
      break;
    case GgufType::BOOL:
      put(uint8_t(v.as_bool() ? 1 : 0));
      break;
    case GgufType::STRING:
      put(uint64_t(v.as_string().size()));
      out += v.as_string();
      break;
    case GgufType::ARRAY:
      put(uint32_t(v.elem_type()));
      put(uint64_t(v.items().size()));
      for (const GgufValue& item : v.items()) encode_value(out, item);
      break;
  }
}

void put_string(std::string& out, std::string_view s) {
  const uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += s;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
  return valid_type(uint32_t(t)) ? kNames[uint32_t(t)] : "unknown";
}

// ---- GgufValue ----

GgufValue GgufValue::f32(float v) {
  GgufValue g;
  g.type_ = GgufType::F32;
  g.float_ = v;
  return g;
}

GgufValue GgufValue::f64(double v) {
  GgufValue g;
  g.type_ = GgufType::F64;
  g.float_ = v;
  return g;
}

GgufValue GgufValue::string(std::string s) {
  GgufValue g;
  g.type_ = GgufType::STRING;
  g.str_ = std::move(s);
  return g;
}

GgufValue GgufValue::array(GgufType elem, std::vector<GgufValue> items) {
  GP_CHECK(valid_type(uint32_t(elem)), "[gguf] array of unknown type ", uint32_t(elem));
  for (const GgufValue& item : items)
    GP_CHECK(item.type_ == elem, "[gguf] array of ", gguf_type_name(elem), " given a ",
             gguf_type_name(item.type_), " item");
  GgufValue g;
  g.type_ = GgufType::ARRAY;
  g.elem_ = elem;
  g.items_ = std::move(items);
  return g;
}

GgufValue GgufValue::strings(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(string(s));
  return array(GgufType::STRING, std::move(items));
}

GgufValue GgufValue::f32s(const std::vector<float>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (float x : v) items.push_back(f32(x));
  return array(GgufType::F32, std::move(items));
}

GgufValue GgufValue::i32s(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(i32(x));
  return array(GgufType::I32, std::move(items));
}

bool GgufValue::is_integer() const { return is_int_type(type_); }

int64_t GgufValue::as_int() const {
  GP_CHECK(is_integer(), "[gguf] expected an integer, found ", gguf_type_name(type_));
  GP_CHECK(is_signed(type_) || bits_ <= uint64_t(std::numeric_limits<int64_t>::max()), "[gguf] u64 value ",
           bits_, " does not fit in int64");
  return int64_t(bits_);
}

uint64_t GgufValue::as_uint() const {
  GP_CHECK(is_integer(), "[gguf] expected an integer, found ", gguf_type_name(type_));
  GP_CHECK(!is_signed(type_) || int64_t(bits_) >= 0, "[gguf] expected a non-negative integer, found ",
           int64_t(bits_));
  return bits_;
}

double GgufValue::as_float() const {
  GP_CHECK(is_float(), "[gguf] expected a float, found ", gguf_type_name(type_));
  return float_;
}

bool GgufValue::as_bool() const {
  GP_CHECK(type_ == GgufType::BOOL, "[gguf] expected a bool, found ", gguf_type_name(type_));
  return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
  GP_CHECK(type_ == GgufType::STRING, "[gguf] expected a string, found ", gguf_type_name(type_));
  return str_;
}

const std::vector<GgufValue>& GgufValue::items() const {
  GP_CHECK(type_ == GgufType::ARRAY, "[gguf] expected an array, found ", gguf_type_name(type_));
  return items_;
}

bool GgufValue::operator==(const GgufValue& o) const {
  return type_ == o.type_ && elem_ == o.elem_ && bits_ == o.bits_ && float_ == o.float_ && str_ == o.str_ &&
         items_ == o.items_;
}

// ---- type table ----

const GgmlType* ggml_type(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

uint32_t ggml_type_id(DType t) {
  const auto& tr = traits(t);
  if (tr.ggml_type < 0)
    fail("[gguf] type ", tr.name, " is not a ggml type, so GGUF cannot hold it (FP8 weights go to safetensors)");
  const GgmlType* g = ggml_type(uint32_t(tr.ggml_type));
  GP_CHECK(g && g->block_size == tr.block_size && g->block_bytes == tr.block_bytes, "[gguf] type ", tr.name,
           ": the traits row and ggml's type ", tr.ggml_type, " disagree on the block geometry");
  return uint32_t(tr.ggml_type);
}

// ---- general.file_type ----

namespace {
// llama.cpp's file types by the type most matrices have: alone (nothing of more bits per weight
// beside it) and mixed (something of more bits beside it). Only the K-quants have both names.
struct FileType {
  DType type;
  uint32_t alone, mixed;
};
constexpr FileType kFileTypes[] = {
    {DType::F32, 0, 0},   {DType::F16, 1, 1},   {DType::BF16, 32, 32}, {DType::Q4_0, 2, 2},
    {DType::Q4_1, 3, 3},  {DType::Q8_0, 7, 7},  {DType::Q5_0, 8, 8},   {DType::Q5_1, 9, 9},
    {DType::Q2_K, 10, 10}, {DType::Q3_K, 11, 12}, {DType::Q4_K, 14, 15}, {DType::Q5_K, 16, 17},
    {DType::Q6_K, 18, 18},
};

double bits_per_weight(DType t) { return 8.0 * double(traits(t).block_bytes) / double(traits(t).block_size); }
}  // namespace

uint32_t gguf_file_type(const std::vector<std::pair<DType, int64_t>>& weights) {
  std::array<int64_t, size_t(DType::COUNT)> elements{};
  for (const auto& [t, n] : weights) elements[size_t(t)] += n;
  size_t most = size_t(DType::F32);
  for (size_t i = 0; i < elements.size(); ++i)
    if (elements[i] > elements[most]) most = i;
  const DType main = DType(most);
  bool wider = false;
  for (size_t i = 0; i < elements.size(); ++i)
    wider = wider || (elements[i] > 0 && bits_per_weight(DType(i)) > bits_per_weight(main));
  for (const FileType& f : kFileTypes)
    if (f.type == main) return wider ? f.mixed : f.alone;
  ggml_type_id(main);  // FP8: GGUF cannot hold it at all, and says so
  fail("[gguf] no llama.cpp file type describes a model whose matrices are mostly ", dtype_name(main));
}

bool gguf_file_type_dtype(uint32_t file_type, DType* out) {
  for (const FileType& f : kFileTypes)
    if (f.alone == file_type || f.mixed == file_type) {
      *out = f.type;
      return true;
    }
  return false;
}

// ---- reading ----

// Fills a GgufFile from its mapped bytes: header, key/values, tensor infos, data offsets.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& g) : g_(g), f_(*g.file_), c_(f_, 0) {}

  void run() {
    header();
    alignment();
    tensor_infos();
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(Args&&... what) const {
    gguf_error(f_, std::forward<Args>(what)...);
  }

  void header() {
    if (f_.size() < 4 || load<uint32_t>(f_.data()) != kMagic) error("not a GGUF file (no 'GGUF' magic)");
    c_.skip(4, "magic");
    const uint32_t v = c_.read<uint32_t>("version");
    if (v == 1) error("GGUF version 1 is not supported (expected 2 or 3)");
    if (v != 2 && v != 3) {
      if ((v & 0xFFFFu) == 0)
        error("looks big-endian (version field ", v, "); genperf reads little-endian GGUF");
      error("unsupported GGUF version ", v, " (expected 2 or 3)");
    }
    g_.version_ = v;
    n_tensors_ = c_.read<uint64_t>("tensor count");
    const uint64_t n_kv = c_.read<uint64_t>("key/value count");
    if (n_kv > c_.remaining() / kMinKvBytes)
      error("key/value count ", n_kv, " cannot fit in the ", c_.remaining(), " bytes that remain");
    if (n_tensors_ > c_.remaining() / kMinTensorInfoBytes)
      error("tensor count ", n_tensors_, " cannot fit in the ", c_.remaining(), " bytes that remain");
    g_.kvs_.reserve(size_t(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) key_value();
  }

  void key_value() {
    const size_t at = c_.pos();
    std::string key(c_.string("key", kMaxKeyBytes));
    if (key.empty()) error("empty key at byte ", at);
    if (g_.kv_index_.count(key)) error("key '", key, "' appears twice");
    const GgufType t = c_.value_type("value type");
    const size_t offset = c_.pos();
    skip_value(c_, f_, t, 0, key);
    g_.kv_index_.emplace(key, g_.kvs_.size());
    g_.keys_.push_back(key);
    g_.kvs_.push_back({std::move(key), t, offset});
  }

  void alignment() {
    const GgufFile::Kv* kv = g_.find_kv("general.alignment");
    if (!kv) return;
    if (kv->type != GgufType::U32)
      error("general.alignment is a ", gguf_type_name(kv->type), ", expected a u32");
    const uint32_t a = load<uint32_t>(f_.data() + kv->offset);
    if (a == 0 || (a & (a - 1)) != 0) error("general.alignment ", a, " is not a power of two");
    g_.alignment_ = a;
  }

  void tensor_infos() {
    g_.tensors_.reserve(size_t(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) g_.tensors_.push_back(tensor_info());
    const uint64_t a = g_.alignment_;
    g_.data_offset_ = (uint64_t(c_.pos()) + a - 1) / a * a;
    if (n_tensors_ == 0) return;
    if (g_.data_offset_ > f_.size())
      error("tensor data would start at byte ", g_.data_offset_, ", past the end of the file (", f_.size(),
            " bytes)");
    const uint64_t data_bytes = f_.size() - g_.data_offset_;
    for (size_t i = 0; i < g_.tensors_.size(); ++i) {
      GgufTensorInfo& t = g_.tensors_[i];
      if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
        error("tensor '", t.name, "' data [", t.offset, ", +", t.bytes,
              ") lies past the end of the data section (", data_bytes, " bytes)");
      t.offset += g_.data_offset_;  // from now on: from the start of the file
      g_.tensor_index_.emplace(t.name, i);
    }
  }

  GgufTensorInfo tensor_info() {
    GgufTensorInfo t;
    const size_t at = c_.pos();
    t.name = std::string(c_.string("tensor name", kMaxKeyBytes));
    if (t.name.empty()) error("empty tensor name at byte ", at);
    if (!seen_names_.insert(t.name).second) error("tensor '", t.name, "' appears twice");
    const uint32_t n_dims = c_.read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > uint32_t(kMaxDims))
      error("tensor '", t.name, "' has ", n_dims, " dimensions, genperf supports 1 to ", kMaxDims);
    // Zero dimensions count as 1 in `span`, so that no partial product of the shape (in any
    // order, as Tensor computes them) can overflow even when the tensor is empty.
    std::vector<int64_t> dims(n_dims);
    int64_t span = 1;
    bool empty = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t v = c_.read<uint64_t>("tensor dimension");
      if (v > uint64_t(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(span, v == 0 ? int64_t(1) : int64_t(v), &span))
        error("tensor '", t.name, "' dimensions overflow 64 bits");
      dims[d] = int64_t(v);
      empty = empty || v == 0;
    }
    t.shape.assign(dims.rbegin(), dims.rend());
    t.type_id = c_.read<uint32_t>("tensor type");
    const GgmlType* type = ggml_type(t.type_id);
    if (!type) error("tensor '", t.name, "' has unknown type id ", t.type_id);
    if (dims[0] % type->block_size != 0)
      error("tensor '", t.name, "' rows of ", dims[0], " elements are not a multiple of the ", type->name,
            " block size ", type->block_size);
    int64_t span_bytes;
    if (__builtin_mul_overflow(span, int64_t(type->block_bytes), &span_bytes))
      error("tensor '", t.name, "' byte size overflows 64 bits");
    t.bytes = empty ? 0 : uint64_t(span / type->block_size) * type->block_bytes;
    t.offset = c_.read<uint64_t>("tensor offset");
    if (t.offset % g_.alignment_ != 0)
      error("tensor '", t.name, "' offset ", t.offset, " is not a multiple of the alignment ", g_.alignment_);
    return t;
  }

  GgufFile& g_;
  const MmapFile& f_;
  Cursor c_;
  uint64_t n_tensors_ = 0;
  std::set<std::string, std::less<>> seen_names_;
};

GgufFile GgufFile::open(const std::string& path) { return parse(MmapFile::open(path)); }

GgufFile GgufFile::parse(std::shared_ptr<MmapFile> file) {
  GgufFile g;
  g.file_ = std::move(file);
  GgufParser(g).run();
  return g;
}

const GgufFile::Kv* GgufFile::find_kv(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufFile::Kv& GgufFile::kv(std::string_view key) const {
  const Kv* kv = find_kv(key);
  if (!kv) gguf_error(*file_, "missing key '", key, "'");
  return *kv;
}

GgufType GgufFile::type(std::string_view key) const { return kv(key).type; }

namespace {
[[noreturn]] void wrong_type(const MmapFile& f, std::string_view key, GgufType t, const char* want) {
  gguf_error(f, "key '", key, "' is a ", gguf_type_name(t), ", expected ", want);
}
}  // namespace

GgufType GgufFile::elem_type(std::string_view key) const {
  const Kv& k = kv(key);
  if (k.type != GgufType::ARRAY) wrong_type(*file_, key, k.type, "an array");
  return GgufType(load<uint32_t>(file_->data() + k.offset));
}

uint64_t GgufFile::array_size(std::string_view key) const {
  const Kv& k = kv(key);
  if (k.type != GgufType::ARRAY) wrong_type(*file_, key, k.type, "an array");
  return load<uint64_t>(file_->data() + k.offset + 4);
}

GgufValue GgufFile::value(std::string_view key) const {
  const Kv& k = kv(key);
  Cursor c(*file_, k.offset);
  uint64_t budget = kMaxDecodedItems;
  return decode_value(c, *file_, key, k.type, budget);
}

std::string GgufFile::get_string(std::string_view key) const {
  const Kv& k = kv(key);
  if (k.type != GgufType::STRING) wrong_type(*file_, key, k.type, "a string");
  Cursor c(*file_, k.offset);
  return std::string(c.string("string"));
}

std::string GgufFile::get_string(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Kv& k = kv(key);
  if (!is_int_type(k.type)) wrong_type(*file_, key, k.type, "an integer");
  const uint64_t bits = load_int_bits(file_->data() + k.offset, k.type);
  if (!is_signed(k.type) && bits > uint64_t(std::numeric_limits<int64_t>::max()))
    gguf_error(*file_, "key '", key, "' value ", bits, " does not fit in int64");
  return int64_t(bits);
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double GgufFile::get_float(std::string_view key) const {
  const Kv& k = kv(key);
  if (k.type == GgufType::F32 || k.type == GgufType::F64) return load_float(file_->data() + k.offset, k.type);
  if (is_int_type(k.type)) return double(get_int(key));
  wrong_type(*file_, key, k.type, "a number");
}

double GgufFile::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool(std::string_view key) const {
  const Kv& k = kv(key);
  if (k.type != GgufType::BOOL) wrong_type(*file_, key, k.type, "a bool");
  return file_->data()[k.offset] != 0;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufType elem = elem_type(key);
  if (elem != GgufType::STRING)
    gguf_error(*file_, "key '", key, "' is an array of ", gguf_type_name(elem), ", expected strings");
  Cursor c(*file_, kv(key).offset);
  GgufType e;
  const uint64_t n = c.array_header(e, "array");
  std::vector<std::string> out;
  out.reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) out.emplace_back(c.string("string"));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufType elem = elem_type(key);
  if (!is_int_type(elem))
    gguf_error(*file_, "key '", key, "' is an array of ", gguf_type_name(elem), ", expected integers");
  Cursor c(*file_, kv(key).offset);
  GgufType e;
  const uint64_t n = c.array_header(e, "array");
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t bits = load_int_bits(c.here() + i * fixed_size(elem), elem);
    if (!is_signed(elem) && bits > uint64_t(std::numeric_limits<int64_t>::max()))
      gguf_error(*file_, "key '", key, "' item ", i, " value ", bits, " does not fit in int64");
    out[size_t(i)] = int64_t(bits);
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufType elem = elem_type(key);
  const bool fl = elem == GgufType::F32 || elem == GgufType::F64;
  if (!fl && !is_int_type(elem))
    gguf_error(*file_, "key '", key, "' is an array of ", gguf_type_name(elem), ", expected numbers");
  Cursor c(*file_, kv(key).offset);
  GgufType e;
  const uint64_t n = c.array_header(e, "array");
  std::vector<double> out(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* p = c.here() + i * fixed_size(elem);
    out[size_t(i)] = fl                ? load_float(p, elem)
                     : is_signed(elem) ? double(int64_t(load_int_bits(p, elem)))
                                       : double(load_int_bits(p, elem));
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) gguf_error(*file_, "no tensor named '", name, "'");
  DType dtype;
  if (readable_dtype(t->type_id, &dtype)) return tensor_from_file(file_, size_t(t->offset), t->shape, dtype);
  gguf_error(*file_, "tensor ", t->name, " has type ", ggml_type(t->type_id)->name, " (id ", t->type_id,
             ") which genperf cannot read yet");
}

// ---- writing ----

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  GP_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "[gguf] alignment ", alignment,
           " is not a power of two");
}

void GgufWriter::set(const std::string& key, GgufValue v) {
  GP_CHECK(!key.empty() && key.size() <= kMaxKeyBytes, "[gguf] invalid key '", key, "'");
  if (key == "general.alignment") {
    GP_CHECK(v.type() == GgufType::U32, "[gguf] general.alignment must be a u32");
    const uint64_t a = v.as_uint();
    GP_CHECK(a > 0 && (a & (a - 1)) == 0, "[gguf] alignment ", a, " is not a power of two");
    alignment_ = uint32_t(a);
    return;  // written first by write()
  }
  for (auto& [k, old] : kvs_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kvs_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  const std::string context = cat("[gguf] tensor '", name, "'");
  GP_CHECK(!name.empty() && name.size() <= 63, context, ": names are 1 to 63 bytes");
  for (const auto& [n, _] : tensors_) GP_CHECK(n != name, context, " added twice");
  GP_CHECK(traits(t.dtype()).ggml_type >= 0, context, ": type ", dtype_name(t.dtype()),
           " is not a ggml type, so GGUF cannot hold it (FP8 weights go to safetensors)");
  Tensor c = contiguous_cpu(t, context);
  ggml_type_id(c.dtype());  // fails early for types GGUF cannot hold here
  tensors_.emplace_back(name, std::move(c));
}

void GgufWriter::write(const std::string& path) const {
  std::string head;
  auto put = [&](const auto& x) { head.append(reinterpret_cast<const char*>(&x), sizeof x); };
  put(kMagic);
  put(uint32_t(3));
  put(uint64_t(tensors_.size()));
  put(uint64_t(kvs_.size() + 1));
  put_string(head, "general.alignment");
  put(uint32_t(GgufType::U32));
  put(alignment_);
  for (const auto& [key, v] : kvs_) {
    put_string(head, key);
    put(uint32_t(v.type()));
    encode_value(head, v);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors_) {
    put_string(head, name);
    put(uint32_t(t.ndim()));
    for (int d = t.ndim() - 1; d >= 0; --d) put(uint64_t(t.size(d)));  // innermost first
    put(ggml_type_id(t.dtype()));
    put(offset);
    offset = (offset + t.nbytes() + alignment_ - 1) / alignment_ * alignment_;
  }
  OutputFile out(path);
  out.write(head);
  out.pad_to(alignment_);
  for (const auto& [name, t] : tensors_) {
    out.write(t.raw(), t.nbytes());
    out.pad_to(alignment_);
  }
  out.commit();
}

}  // namespace genperf
