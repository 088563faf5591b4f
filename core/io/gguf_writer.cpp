// GgufWriter (core/io/gguf.h) and GgufValue's constructors: the container's bytes as ggml's
// gguf.md lays them out, version 3.
#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "core/io/gguf.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

// Bytes appended to a buffer in the file's little-endian layout.
class Bytes {
 public:
  template <class T>
  void put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
  }
  void string(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }
  // A number of type t from GgufValue's bits.
  void number(GgufType t, uint64_t bits) {
    switch (t) {
      case GgufType::kU8:
      case GgufType::kI8:
      case GgufType::kBool:
        return put<uint8_t>(uint8_t(bits));
      case GgufType::kU16:
      case GgufType::kI16:
        return put<uint16_t>(uint16_t(bits));
      case GgufType::kU32:
      case GgufType::kI32:
      case GgufType::kF32:
        return put<uint32_t>(uint32_t(bits));
      default:
        return put<uint64_t>(bits);  // u64, i64, f64
    }
  }
  void value(const GgufValue& v) {
    put<uint32_t>(uint32_t(v.type));
    if (v.type == GgufType::kString) return string(v.str);
    if (v.type != GgufType::kArray) return number(v.type, v.bits);
    put<uint32_t>(uint32_t(v.elem));
    put<uint64_t>(v.size());
    if (v.elem == GgufType::kString) {
      for (const std::string& s : v.strings) string(s);
    } else {
      for (uint64_t bits : v.numbers) number(v.elem, bits);
    }
  }
  void pad_to(size_t alignment) {
    b_.resize((b_.size() + alignment - 1) / alignment * alignment, 0);
  }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

}  // namespace

GgufValue GgufValue::scalar(GgufType t, uint64_t bits) {
  GgufValue g;
  g.type = t, g.bits = bits;
  return g;
}
GgufValue GgufValue::u32(uint32_t v) { return scalar(GgufType::kU32, v); }
GgufValue GgufValue::i32(int32_t v) { return scalar(GgufType::kI32, uint64_t(int64_t(v))); }
GgufValue GgufValue::u64(uint64_t v) { return scalar(GgufType::kU64, v); }
GgufValue GgufValue::f32(float v) { return scalar(GgufType::kF32, std::bit_cast<uint32_t>(v)); }
GgufValue GgufValue::boolean(bool v) { return scalar(GgufType::kBool, v ? 1 : 0); }
GgufValue GgufValue::string(std::string v) {
  GgufValue g;
  g.type = GgufType::kString, g.str = std::move(v);
  return g;
}
GgufValue GgufValue::strings_array(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::kArray, g.elem = GgufType::kString, g.strings = std::move(v);
  return g;
}
GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  GgufValue g;
  g.type = GgufType::kArray, g.elem = GgufType::kF32;
  for (float x : v) g.numbers.push_back(std::bit_cast<uint32_t>(x));
  return g;
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  GgufValue g;
  g.type = GgufType::kArray, g.elem = GgufType::kI32;
  for (int32_t x : v) g.numbers.push_back(uint64_t(int64_t(x)));
  return g;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw Error("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (alignment != kGgufDefaultAlignment) set("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<uint64_t> ne, GgmlType type) {
  for (const GgufTensor& t : tensors_) {
    if (t.name == name) throw Error("GgufWriter: tensor '" + name + "' added twice");
  }
  if (ne.empty() || ne.size() > size_t(kGgufMaxDims)) {
    throw Error("GgufWriter: tensor '" + name + "' has " + std::to_string(ne.size()) +
                " dimensions, expected 1.." + std::to_string(kGgufMaxDims));
  }
  GgufTensor t;
  t.name = name;
  t.type = type;
  t.count = 1;
  for (uint64_t n : ne) t.count *= n;
  const uint64_t block = ggml_block_elements(type);
  if (ne[0] % block != 0) {
    throw Error("GgufWriter: tensor '" + name + "' has rows of " + std::to_string(ne[0]) +
                " elements, not whole " + ggml_type_name(type) + " blocks of " +
                std::to_string(block));
  }
  t.ne = std::move(ne);
  t.bytes = t.count / block * ggml_block_bytes(type);
  t.offset = data_bytes_;
  data_bytes_ = (data_bytes_ + t.bytes + alignment_ - 1) / alignment_ * alignment_;
  tensors_.push_back(std::move(t));
}

void GgufWriter::write(const std::string& path,
                       const std::function<void(size_t, uint8_t*)>& fill) const {
  Bytes head;
  head.put<uint32_t>(kGgufMagic);
  head.put<uint32_t>(kGgufVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    head.string(key);
    head.value(value);
  }
  for (const GgufTensor& t : tensors_) {
    head.string(t.name);
    head.put<uint32_t>(uint32_t(t.ne.size()));
    for (uint64_t n : t.ne) head.put<uint64_t>(n);
    head.put<uint32_t>(uint32_t(t.type));
    head.put<uint64_t>(t.offset);
  }
  head.pad_to(alignment_);
  AtomicFileWriter out(path, "gguf-write");
  out.write(head.bytes().data(), head.bytes().size());
  std::vector<uint8_t> buffer;
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const GgufTensor& t = tensors_[i];
    buffer.assign(t.bytes, 0);
    fill(i, buffer.data());
    out.write(buffer.data(), buffer.size());
    const uint64_t end = t.offset + t.bytes;
    const uint64_t next = i + 1 < tensors_.size() ? tensors_[i + 1].offset : end;
    out.write(zeros.data(), size_t(next - end));
  }
  out.commit();
}

}  // namespace llmcpu
