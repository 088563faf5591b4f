#include "core/io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include "simd/error.h"

namespace llmcpu {

namespace {

// The smallest encodings, which bound a count by the bytes left: a metadata pair is at least an
// empty key and a value type and one byte of value; a tensor info an empty name, n_dims, one
// dimension, its type and offset.
constexpr uint64_t kMinPairBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

size_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;  // string, array, unknown
  }
}

bool known_value_type(uint32_t t) { return t <= uint32_t(GgufType::kF64); }

// A cursor over the mapped bytes; every read checks what is left and, if it is short, names what
// it was reading: `where` is a string, or a callable that makes one (built only on failure, so that
// the elements of a 150k-entry array cost no string each).
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, size_t size)
      : path_(path), p_(data), begin_(data), end_(data + size) {}

  uint64_t left() const { return uint64_t(end_ - p_); }
  uint64_t at() const { return uint64_t(p_ - begin_); }

  template <class T, class Where>
  T read(Where&& where) {
    need(sizeof(T), where);
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  template <class Where>
  std::string string(Where&& where) {
    const uint64_t n = read<uint64_t>(where);
    need(n, where);
    std::string s(reinterpret_cast<const char*>(p_), size_t(n));
    p_ += n;
    return s;
  }
  // A number of type t in GgufValue::bits' form.
  template <class Where>
  uint64_t number(GgufType t, Where&& where) {
    switch (t) {
      case GgufType::kU8:
        return read<uint8_t>(where);
      case GgufType::kI8:
        return uint64_t(int64_t(read<int8_t>(where)));
      case GgufType::kU16:
        return read<uint16_t>(where);
      case GgufType::kI16:
        return uint64_t(int64_t(read<int16_t>(where)));
      case GgufType::kU32:
      case GgufType::kF32:
        return read<uint32_t>(where);
      case GgufType::kI32:
        return uint64_t(int64_t(read<int32_t>(where)));
      case GgufType::kBool: {
        const uint8_t b = read<uint8_t>(where);
        if (b > 1)
          fail(text(where) + " is a bool of value " + std::to_string(b) + ", expected 0 or 1");
        return b;
      }
      default:
        return read<uint64_t>(where);  // u64, i64, f64
    }
  }
  [[noreturn]] void fail(const std::string& problem) const { throw FileError(path_, problem); }

 private:
  template <class Where>
  static std::string text(Where&& where) {
    if constexpr (std::is_invocable_v<Where>)
      return where();
    else
      return std::string(where);
  }
  template <class Where>
  void need(uint64_t n, Where&& where) const {
    if (n > left()) {
      fail(text(where) + " at byte " + std::to_string(at()) + " needs " + std::to_string(n) +
           " bytes, but the file has " + std::to_string(left()) + " left (truncated?)");
    }
  }

  const std::string& path_;
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
};

GgufValue read_value(Reader& r, uint32_t type, const std::string& key) {
  const std::string where = "the value of '" + key + "'";
  if (!known_value_type(type)) r.fail(where + " has unknown type " + std::to_string(type));
  GgufValue v;
  v.type = GgufType(type);
  if (v.type == GgufType::kString) {
    v.str = r.string(where);
  } else if (v.type != GgufType::kArray) {
    v.bits = r.number(v.type, where);
  } else {
    const uint32_t elem = r.read<uint32_t>(where + "'s element type");
    if (!known_value_type(elem))
      r.fail(where + " is an array of unknown type " + std::to_string(elem));
    if (GgufType(elem) == GgufType::kArray) r.fail(where + " is an array of arrays (not read)");
    v.elem = GgufType(elem);
    const uint64_t n = r.read<uint64_t>(where + "'s element count");
    // Each element takes at least its own size (8, a string's length, at least): n is bounded by
    // the bytes left before anything is reserved for it.
    const uint64_t min_bytes = v.elem == GgufType::kString ? 8 : scalar_bytes(v.elem);
    if (n > r.left() / min_bytes) {
      r.fail(where + " has " + std::to_string(n) + " elements of " + gguf_type_name(v.elem) +
             ", more than the " + std::to_string(r.left()) + " bytes left can hold (truncated?)");
    }
    uint64_t i = 0;
    const auto element = [&] { return where + "[" + std::to_string(i) + "]"; };
    if (v.elem == GgufType::kString) {
      v.strings.reserve(size_t(n));
      for (; i < n; ++i) v.strings.push_back(r.string(element));
    } else {
      v.numbers.reserve(size_t(n));
      for (; i < n; ++i) v.numbers.push_back(r.number(v.elem, element));
    }
  }
  return v;
}

// One tensor info after its name: n_dims, ne, the type, the offset; each checked as it is read.
GgufTensor read_tensor_info(Reader& r, std::string name, uint32_t alignment) {
  GgufTensor t;
  t.name = std::move(name);
  const std::string where = "tensor '" + t.name + "'";
  const uint32_t n_dims = r.read<uint32_t>(where + "'s n_dims");
  if (n_dims < 1 || n_dims > uint32_t(kGgufMaxDims)) {
    r.fail(where + " has " + std::to_string(n_dims) + " dimensions, expected 1.." +
           std::to_string(kGgufMaxDims));
  }
  t.count = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t n = r.read<uint64_t>(where + "'s ne[" + std::to_string(d) + "]");
    if (n == 0 || __builtin_mul_overflow(t.count, n, &t.count) ||
        t.count > uint64_t(std::numeric_limits<int64_t>::max())) {
      r.fail(where + "'s ne[" + std::to_string(d) + "] = " + std::to_string(n) +
             (n == 0 ? " (an empty dimension)" : " makes it more than 2^63 elements"));
    }
    t.ne.push_back(n);
  }
  const uint32_t type = r.read<uint32_t>(where + "'s type");
  if (!ggml_type_known(type)) {
    r.fail(where + " has ggml type " + std::to_string(type) +
           ", which llmcpu does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  }
  t.type = GgmlType(type);
  const uint64_t block = ggml_block_elements(t.type);
  if (t.ne[0] % block != 0) {
    r.fail(where + " is " + ggml_type_name(t.type) + " with rows of " + std::to_string(t.ne[0]) +
           " elements, not whole blocks of " + std::to_string(block));
  }
  // count / block * block bytes: at most 2^63 / 1 * 4 would overflow, so it is checked.
  if (__builtin_mul_overflow(t.count / block, uint64_t(ggml_block_bytes(t.type)), &t.bytes)) {
    r.fail(where + " would be more than 2^64 bytes");
  }
  t.offset = r.read<uint64_t>(where + "'s offset");
  if (t.offset % alignment != 0) {
    r.fail(where + " starts at data offset " + std::to_string(t.offset) +
           ", not a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  return known_value_type(uint32_t(t)) ? names[uint32_t(t)] : "unknown type";
}

bool ggml_type_known(uint32_t t) {
  switch (GgmlType(t)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kBf16:
      return true;
  }
  return false;
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return "F32";
    case GgmlType::kF16:
      return "F16";
    case GgmlType::kQ4_0:
      return "Q4_0";
    case GgmlType::kQ8_0:
      return "Q8_0";
    case GgmlType::kQ4_K:
      return "Q4_K";
    case GgmlType::kQ6_K:
      return "Q6_K";
    case GgmlType::kBf16:
      return "BF16";
  }
  return "unknown";
}

// Blocks as ggml-common.h lays them out: Q8_0 {f16 d; i8 qs[32]}, Q4_0 {f16 d; u8 qs[16]},
// Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]} and Q6_K {u8 ql[128], qh[64]; i8 scales[16]; f16 d}
// over 256 elements.
size_t ggml_block_elements(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
      return 32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return 256;
    default:
      return 1;
  }
}

size_t ggml_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 4;
    case GgmlType::kF16:
    case GgmlType::kBf16:
      return 2;
    case GgmlType::kQ4_0:
      return 2 + 16;
    case GgmlType::kQ8_0:
      return 2 + 32;
    case GgmlType::kQ4_K:
      return 2 + 2 + 12 + 128;
    case GgmlType::kQ6_K:
      return 128 + 64 + 16 + 2;
  }
  return 0;
}

int64_t GgufValue::number_as_int(GgufType t, uint64_t bits) {
  if (t == GgufType::kF32 || t == GgufType::kF64) {
    const double v = number_as_double(t, bits);  // truncated toward zero, NaN as 0, saturated
    if (!(v == v)) return 0;
    if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
    if (v <= -0x1p63) return std::numeric_limits<int64_t>::min();
    return int64_t(v);
  }
  return int64_t(bits);
}

double GgufValue::number_as_double(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kF32:
      return double(std::bit_cast<float>(uint32_t(bits)));
    case GgufType::kF64:
      return std::bit_cast<double>(bits);
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return double(int64_t(bits));
    default:
      return double(bits);
  }
}

std::string GgufTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  Reader r(path, file_.data(), file_.size());
  const uint32_t magic = r.read<uint32_t>("the magic");
  if (magic != kGgufMagic) {
    std::string text(4, '?');
    for (int i = 0; i < 4; ++i) {
      const char c = char(magic >> (8 * i));
      if (c >= 32 && c < 127) text[size_t(i)] = c;
    }
    r.fail("bad magic '" + text + "', expected 'GGUF' (not a GGUF file)");
  }
  version_ = r.read<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) {
    r.fail("unsupported GGUF version " + std::to_string(version_) + ", expected 3 (or 2)");
  }
  const uint64_t num_tensors = r.read<uint64_t>("the tensor count");
  const uint64_t num_kv = r.read<uint64_t>("the metadata count");
  if (num_kv > r.left() / kMinPairBytes) {
    r.fail(std::to_string(num_kv) + " metadata pairs, more than the " + std::to_string(r.left()) +
           " bytes left can hold (truncated?)");
  }
  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key = r.string("metadata key " + std::to_string(i));
    if (kv_index_.count(key)) r.fail("metadata key '" + key + "' appears twice");
    const uint32_t type = r.read<uint32_t>("the type of '" + key + "'");
    GgufValue value = read_value(r, type, key);
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->bits == 0 || (a->bits & (a->bits - 1)) != 0) {
      r.fail(std::string("general.alignment is ") + gguf_type_name(a->type) + " " +
             std::to_string(a->as_int()) + ", expected a u32 power of two");
    }
    alignment_ = uint32_t(a->bits);
  }
  if (num_tensors > r.left() / kMinTensorInfoBytes) {
    r.fail(std::to_string(num_tensors) + " tensors, more than the " + std::to_string(r.left()) +
           " bytes left can describe (truncated?)");
  }
  tensors_.reserve(size_t(num_tensors));
  for (uint64_t i = 0; i < num_tensors; ++i) {
    std::string name = r.string("tensor name " + std::to_string(i));
    if (tensor_index_.count(name)) r.fail("tensor '" + name + "' appears twice");
    tensor_index_[name] = tensors_.size();
    tensors_.push_back(read_tensor_info(r, std::move(name), alignment_));
  }
  data_offset_ = (r.at() + alignment_ - 1) / alignment_ * alignment_;
  place_tensors();
}

// Each tensor inside the data section, and apart from the others: sorted by offset, each ends
// before the next begins.
void GgufFile::place_tensors() {
  const uint64_t data_bytes = data_offset_ <= file_.size() ? file_.size() - data_offset_ : 0;
  std::vector<const GgufTensor*> by_offset;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset) {
      throw FileError(path(), "tensor '" + t.name + "' (" + ggml_type_name(t.type) + " " +
                                  t.shape_string() + ", " + std::to_string(t.bytes) +
                                  " bytes at data offset " + std::to_string(t.offset) +
                                  ") runs past the end of the file: the data section has " +
                                  std::to_string(data_bytes) + " bytes (truncated?)");
    }
    t.data = file_.data() + data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& a = *by_offset[i - 1];
    const GgufTensor& b = *by_offset[i];
    if (a.offset + a.bytes > b.offset) {
      throw FileError(path(),
                      "tensors '" + a.name + "' and '" + b.name + "' overlap in the data section");
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace llmcpu
