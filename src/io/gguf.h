// GGUF (versions 2 and 3, little-endian): header, typed metadata key/values, tensor infos, then
// the aligned tensor data. GgufFile validates every count, length and offset against the bytes
// that remain before it allocates or reads, so a hostile file yields an Error, never a crash or a
// huge allocation. Metadata stays in the mapped file and is decoded on request; tensors borrow
// the mapping (zero-copy). GGUF lists dimensions innermost first; genperf shapes are outermost
// first, so shapes here are the file's dimensions reversed.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genperf/tensor.h"
#include "io/mmap_file.h"

namespace genperf {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GgufType t);  // "u32", "string", ...

// One metadata value, owned and fully decoded (scalars, strings, arrays, nested arrays).
class GgufValue {
 public:
  GgufValue() = default;  // u8 0
  static GgufValue u8(uint8_t v) { return scalar_int(GgufType::U8, v); }
  static GgufValue i8(int8_t v) { return scalar_int(GgufType::I8, uint64_t(int64_t(v))); }
  static GgufValue u16(uint16_t v) { return scalar_int(GgufType::U16, v); }
  static GgufValue i16(int16_t v) { return scalar_int(GgufType::I16, uint64_t(int64_t(v))); }
  static GgufValue u32(uint32_t v) { return scalar_int(GgufType::U32, v); }
  static GgufValue i32(int32_t v) { return scalar_int(GgufType::I32, uint64_t(int64_t(v))); }
  static GgufValue u64(uint64_t v) { return scalar_int(GgufType::U64, v); }
  static GgufValue i64(int64_t v) { return scalar_int(GgufType::I64, uint64_t(v)); }
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v) { return scalar_int(GgufType::BOOL, v ? 1 : 0); }
  static GgufValue string(std::string s);
  // An array whose items all have type `elem` (for nested arrays, elem is ARRAY and each item
  // has its own element type). Throws when an item's type differs.
  static GgufValue array(GgufType elem, std::vector<GgufValue> items);
  static GgufValue strings(const std::vector<std::string>& v);
  static GgufValue f32s(const std::vector<float>& v);
  static GgufValue i32s(const std::vector<int32_t>& v);

  GgufType type() const { return type_; }
  GgufType elem_type() const { return elem_; }  // arrays only
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::F32 || type_ == GgufType::F64; }
  // Typed access; throws "[gguf] expected X, found Y" on a mismatch or when out of range.
  int64_t as_int() const;    // any integer type that fits in int64
  uint64_t as_uint() const;  // any non-negative integer
  double as_float() const;   // f32/f64
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<GgufValue>& items() const;  // arrays

  bool operator==(const GgufValue& o) const;
  bool operator!=(const GgufValue& o) const { return !(*this == o); }

 private:
  static GgufValue scalar_int(GgufType t, uint64_t bits) {
    GgufValue v;
    v.type_ = t;
    v.bits_ = bits;
    return v;
  }
  GgufType type_ = GgufType::U8;
  GgufType elem_ = GgufType::U8;
  uint64_t bits_ = 0;  // integers (two's complement) and bools
  double float_ = 0;   // f32 (exactly representable) and f64
  std::string str_;
  std::vector<GgufValue> items_;
};

// ggml tensor types as GGUF stores them: id, name, elements per block, bytes per block.
struct GgmlType {
  uint32_t id;
  const char* name;
  int64_t block_size;
  uint64_t block_bytes;
};
// The row for a ggml type id, or nullptr when the id is unknown (or was removed from GGUF).
const GgmlType* ggml_type(uint32_t id);
// The ggml id for a genperf type: traits(t).ggml_type (F32 0, F16 1, BF16 30, I32 26, Q4_0 2,
// Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14); Error for the types
// ggml does not have (the FP8 ones, ggml_type -1).
uint32_t ggml_type_id(DType t);

// general.quantization_version: the revision of ggml's quantized block layouts that genperf's
// formats match (llama.cpp's GGML_QNT_VERSION).
inline constexpr uint32_t kGgufQuantizationVersion = 2;
// general.file_type (llama.cpp's enum llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, ...,
// MOSTLY_Q4_K_M 15, MOSTLY_BF16 32) of a model whose matrices have these types and element
// counts. The type holding the most elements names the file, as llama.cpp guesses a file type
// (ties go to the type listed first in DType). A K-quant mix gets the Medium name (Q3_K_M, Q4_K_M,
// Q5_K_M) when some matrices are in a format of more bits per weight, the Small name when none
// is. No matrices: ALL_F32. Error for a type that no llama.cpp file type names.
uint32_t gguf_file_type(const std::vector<std::pair<DType, int64_t>>& weights);
// The type a file type says most matrices have (MOSTLY_Q4_K_M: Q4_K), or false when genperf
// does not know the value.
bool gguf_file_type_dtype(uint32_t file_type, DType* out);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // outermost first (the file's dimensions reversed)
  uint32_t type_id = 0;        // ggml type id
  uint64_t offset = 0;         // from the start of the file
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  static GgufFile open(const std::string& path);
  static GgufFile parse(std::shared_ptr<MmapFile> file);  // the same checks on any bytes

  const std::string& name() const { return file_->name(); }
  const std::shared_ptr<MmapFile>& file() const { return file_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  // Metadata. Errors name the key and the file: "[gguf] f.gguf: key 'llama.block_count' is a
  // string, expected an integer".
  const std::vector<std::string>& keys() const { return keys_; }  // file order
  bool has(std::string_view key) const { return find_kv(key) != nullptr; }
  GgufType type(std::string_view key) const;
  GgufType elem_type(std::string_view key) const;  // arrays
  uint64_t array_size(std::string_view key) const;
  GgufValue value(std::string_view key) const;  // the whole value, decoded
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;
  int64_t get_int(std::string_view key) const;  // any integer type; range-checked
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;  // f32, f64 or an integer
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;  // float or integer elements

  // Tensors.
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A zero-copy tensor of type F32, F16, BF16, I32 or one of the quantized DTypes (Q8_0, Q4_0,
  // Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: the blocks as stored). Other ggml types are an Error saying
  // genperf cannot read them yet; so is a missing name.
  Tensor tensor(std::string_view name) const;

 private:
  struct Kv {
    std::string key;
    GgufType type;
    size_t offset;  // of the value's bytes (after the type tag) in the file
  };
  const Kv* find_kv(std::string_view key) const;
  const Kv& kv(std::string_view key) const;
  friend class GgufParser;

  std::shared_ptr<MmapFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> keys_;
  std::vector<Kv> kvs_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF file: metadata in insertion order (general.alignment first), then tensor infos,
// then the data, each tensor aligned. Writes path + ".tmp" and renames it.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);
  // Adds or replaces a key. Setting general.alignment (a u32 power of two) changes the alignment.
  void set(const std::string& key, GgufValue v);
  void set_string(const std::string& key, std::string v) { set(key, GgufValue::string(std::move(v))); }
  void set_u32(const std::string& key, uint32_t v) { set(key, GgufValue::u32(v)); }
  void set_f32(const std::string& key, float v) { set(key, GgufValue::f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, GgufValue::boolean(v)); }
  // Adds a tensor (any type ggml_type_id accepts, on the CPU; copied when not contiguous). Names are
  // unique and at most 63 bytes (ggml's limit).
  void add_tensor(const std::string& name, const Tensor& t);
  void write(const std::string& path) const;

 private:
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

}  // namespace genperf
