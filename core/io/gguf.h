// The GGUF container (ggml's model file, which llama.cpp, ollama and LM Studio read), version 3 as
// ggml's docs/gguf.md defines it, little-endian:
//   "GGUF" (u32 0x46554747), version u32, tensor_count u64, kv_count u64,
//   kv_count metadata pairs:  key (string), value type (u32), value,
//   tensor_count tensor infos: name (string), n_dims (u32), ne[n_dims] (u64, ne[0] the innermost,
//                              contiguous dimension), ggml type (u32), offset (u64, from the
//                              start of the data section, a multiple of the alignment),
//   padding to the alignment (general.alignment, a u32 power of two, else 32), the data section.
// A string is a u64 byte count and its bytes (no terminating NUL). An array value is its element
// type (u32), a u64 count and the elements; arrays of arrays are refused here.
// Reading maps the file and checks every count, length, dimension and offset against the bytes
// the file has before anything is allocated from them (a GGUF reader is an attack surface):
// keys and tensor names unique, tensors inside the data section, aligned and apart, their types
// known and their rows whole blocks. Version 2, the same layout, is read too.
// Deliberately not here: what the keys and tensors mean for a model, and what the quantized
// blocks hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/util/file.h"

namespace llmcpu {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;  // GGML_MAX_DIMS

// Metadata value types (gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* gguf_type_name(GgufType t);  // "u32", "string", ...; "unknown type" for another

// Tensor types (ggml_type) that llmcpu reads or writes.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBf16 = 30,
};
// Its name as llama.cpp prints it ("F32", "Q4_K"), elements per block and bytes per block; false
// for a type llmcpu does not know.
bool ggml_type_known(uint32_t t);
const char* ggml_type_name(GgmlType t);
size_t ggml_block_elements(GgmlType t);
size_t ggml_block_bytes(GgmlType t);

// One metadata value. A scalar's number is kept in 64 bits: the unsigned types and bool as u64,
// the signed ones as i64, f32 and f64 as their own bits (a NaN's payload kept); an array's
// elements likewise in `numbers`, or in `strings`.
struct GgufValue {
  GgufType type = GgufType::kU32;
  GgufType elem = GgufType::kU8;  // an array's element type
  uint64_t bits = 0;              // a scalar number, in the form above
  std::string str;                // a string
  std::vector<uint64_t> numbers;  // an array of numbers or bools, as `bits`
  std::vector<std::string> strings;

  // A scalar of type t whose `bits` are already in the form above.
  static GgufValue scalar(GgufType t, uint64_t bits);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue strings_array(std::vector<std::string> v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);

  bool is_array() const { return type == GgufType::kArray; }
  size_t size() const { return elem == GgufType::kString ? strings.size() : numbers.size(); }
  // A number's value, whatever its integer or float type (an array's element i with `at`).
  int64_t as_int() const { return number_as_int(type, bits); }
  double as_double() const { return number_as_double(type, bits); }
  int64_t int_at(size_t i) const { return number_as_int(elem, numbers[i]); }
  double double_at(size_t i) const { return number_as_double(elem, numbers[i]); }

  static int64_t number_as_int(GgufType t, uint64_t bits);
  static double number_as_double(GgufType t, uint64_t bits);
};

// One tensor of a mapped file.
struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // ne[0] innermost: a (rows, cols) matrix is ne = {cols, rows}
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;            // from the start of the data section
  uint64_t count = 0;             // elements: the product of ne
  uint64_t bytes = 0;             // count / block elements * block bytes
  const uint8_t* data = nullptr;  // inside the mapping

  std::string shape_string() const;  // "[896, 151936]", ne's order
};

class GgufFile {
 public:
  // Maps and checks the file; throws FileError naming the file, the key or tensor and the problem.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  // The metadata in file order, and by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }  // in file order
  const GgufTensor* find_tensor(const std::string& name) const;
  uint64_t data_offset() const { return data_offset_; }  // the data section's start in the file
  void let_go(const GgufTensor& t) const { file_.let_go(t.data, t.bytes); }

 private:
  void place_tensors();  // data pointers, after checking each inside the data section and apart

  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// A GGUF file written in one pass: the metadata and tensor infos as added, each tensor's data at
// the next multiple of the alignment, through an AtomicFileWriter (an existing file is replaced
// only by a whole new one). Tensor data comes from `fill`, called once per tensor in order with a
// buffer of its byte count, so a caller converts one tensor at a time.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);
  void set(const std::string& key, GgufValue value);  // a key set twice keeps its first place
  void add_tensor(const std::string& name, std::vector<uint64_t> ne, GgmlType type);
  // Writes `path`; fill(i, out) writes tensor i's bytes (its `bytes`) into out.
  void write(const std::string& path, const std::function<void(size_t, uint8_t*)>& fill) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }  // offsets as they will be

 private:
  uint32_t alignment_;
  uint64_t data_bytes_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace llmcpu
