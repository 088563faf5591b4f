#include "core/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "simd/bf16.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

using nlohmann::json;

constexpr size_t kLengthBytes = 8;

std::string tensor_problem(const std::string& name, const std::string& problem) {
  return "tensor '" + name + "': " + problem;
}

// A non-negative JSON integer, or throws naming the tensor and the field.
size_t unsigned_field(const json& v, const std::string& path, const std::string& name,
                      const char* field) {
  if (!v.is_number_unsigned()) {
    throw FileError(path, tensor_problem(name, std::string(field) + " holds " + v.dump() +
                                                   ", expected a non-negative integer"));
  }
  return v.get<size_t>();
}

SafeTensor parse_entry(const std::string& path, const std::string& name, const json& entry,
                       const uint8_t* data_section, size_t data_bytes) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    throw FileError(path, tensor_problem(name, "header entry " + entry.dump() +
                                                   " lacks dtype, shape or data_offsets"));
  }
  SafeTensor t;
  t.name = name;
  const json& dtype = entry["dtype"];
  const std::string d = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();
  if (d == "F32") {
    t.dtype = TensorDtype::kF32;
  } else if (d == "F16") {
    t.dtype = TensorDtype::kF16;
  } else if (d == "BF16") {
    t.dtype = TensorDtype::kBf16;
  } else if (d == "I32") {
    t.dtype = TensorDtype::kI32;
  } else if (d == "F64") {
    t.dtype = TensorDtype::kF64;
  } else {
    throw FileError(path, tensor_problem(name, "dtype " + d +
                                                   ", expected F32, F16, BF16 (or F64, I32)"));
  }
  const json& shape = entry["shape"];
  if (!shape.is_array()) {
    throw FileError(path, tensor_problem(name, "shape " + shape.dump() + " is not a list"));
  }
  t.count = 1;
  for (const json& dim : shape) {
    const size_t n = unsigned_field(dim, path, name, "shape");
    if (n != 0 && t.count > std::numeric_limits<size_t>::max() / 16 / n) {
      throw FileError(path, tensor_problem(name, "shape " + shape.dump() + " is too large"));
    }
    t.shape.push_back(n);
    t.count *= n;
  }
  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    throw FileError(
        path, tensor_problem(name, "data_offsets " + offsets.dump() + ", expected [BEGIN, END]"));
  }
  const size_t begin = unsigned_field(offsets[0], path, name, "data_offsets");
  const size_t end = unsigned_field(offsets[1], path, name, "data_offsets");
  if (begin > end) {
    throw FileError(path,
                    tensor_problem(name, "data_offsets [" + std::to_string(begin) + ", " +
                                             std::to_string(end) + "] end before they begin"));
  }
  if (end > data_bytes) {
    throw FileError(
        path,
        tensor_problem(name, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                 "] run past the end of the data section (" +
                                 std::to_string(data_bytes) + " bytes; truncated file?)"));
  }
  const size_t expected = t.count * dtype_bytes(t.dtype);
  if (end - begin != expected) {
    throw FileError(
        path, tensor_problem(
                  name, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                            "] hold " + std::to_string(end - begin) + " bytes, but " + d + " " +
                            t.shape_string() + " is " + std::to_string(expected) + " bytes"));
  }
  t.data = data_section + begin;
  return t;
}

}  // namespace

const char* dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kF32:
      return "F32";
    case TensorDtype::kF16:
      return "F16";
    case TensorDtype::kBf16:
      return "BF16";
    case TensorDtype::kI32:
      return "I32";
    case TensorDtype::kF64:
      return "F64";
  }
  return "?";
}

const char* torch_dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kF16:
      return "float16";
    case TensorDtype::kBf16:
      return "bfloat16";
    default:
      return "float32";
  }
}

size_t dtype_bytes(TensorDtype dtype) {
  if (dtype == TensorDtype::kF64) return 8;
  return dtype == TensorDtype::kF32 || dtype == TensorDtype::kI32 ? 4 : 2;
}

std::string SafeTensor::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < kLengthBytes) {
    throw FileError(path, "is " + std::to_string(size) +
                              " bytes, shorter than a safetensors file's 8-byte header length");
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file_.data(), kLengthBytes);  // little-endian, as the hosts are
  if (header_bytes > size - kLengthBytes) {
    throw FileError(path, "header length " + std::to_string(header_bytes) +
                              " runs past the end of the file (" + std::to_string(size) +
                              " bytes; truncated, or not a safetensors file?)");
  }
  if (header_bytes < 2) {
    throw FileError(path, "header length " + std::to_string(header_bytes) +
                              " is too short for the JSON header (at least \"{}\", 2 bytes)");
  }
  const char* text = reinterpret_cast<const char*>(file_.data() + kLengthBytes);
  json header;
  try {
    header = json::parse(text, text + header_bytes);
  } catch (const json::exception& e) {
    throw FileError(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) {
    throw FileError(path,
                    "header is " + std::string(header.type_name()) + ", expected a JSON object");
  }
  const uint8_t* data_section = file_.data() + kLengthBytes + header_bytes;
  const size_t data_bytes = size - kLengthBytes - header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw FileError(path, "__metadata__ is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
      }
      continue;
    }
    tensors_.push_back(parse_entry(path, name, entry, data_section, data_bytes));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafeTensor& a, const SafeTensor& b) { return a.data < b.data; });
  for (size_t i = 1; i < tensors_.size(); ++i) {
    const SafeTensor& prev = tensors_[i - 1];
    const SafeTensor& t = tensors_[i];
    if (t.data < prev.data + prev.count * dtype_bytes(prev.dtype)) {
      throw FileError(
          path, tensor_problem(t.name, "data at offset " + std::to_string(t.data - data_section) +
                                           " overlaps tensor '" + prev.name + "' (" +
                                           std::to_string(prev.data - data_section) + " to " +
                                           std::to_string(prev.data - data_section +
                                                          prev.count * dtype_bytes(prev.dtype)) +
                                           ")"));
    }
  }
}

const SafeTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafeTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Every fp16 value is an fp32 value.
float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // infinity or NaN
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: mant * 2^-24, normalized for fp32
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to above 65504: infinity
  if (a >= 0x38800000u) {  // normal in fp16 (>= 2^-14): drop 13 bits, nearest even
    const uint32_t rebiased = a - (112u << 23);
    const uint32_t rounded = rebiased + 0xfffu + ((rebiased >> 13) & 1u);
    return uint16_t(sign | (rounded >> 13));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal in fp16: the value is m * 2^-24 with m = (1.mant) * 2^(e - 127 + 24).
  const uint32_t e = a >> 23;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14 .. 24 bits to drop from the 24-bit significand
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rest = mant & ((1u << shift) - 1);
  uint32_t m = mant >> shift;
  if (rest > half || (rest == half && (m & 1u))) ++m;
  return uint16_t(sign | m);
}

void tensor_to_f32(const SafeTensor& t, float* out) {
  const uint8_t* src = t.data;
  const size_t n = t.count;
  switch (t.dtype) {
    case TensorDtype::kI32:
      throw Error("tensor '" + t.name + "' holds I32 integers, not floating-point values");
    case TensorDtype::kF32:
      std::memcpy(out, src, n * 4);
      break;
    case TensorDtype::kF64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        out[i] = float(d);
      }
      break;
    case TensorDtype::kBf16:
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_to_float(h);
      }
      break;
    case TensorDtype::kF16:
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = f16_to_float(h);
      }
      break;
  }
}

void tensor_to_i32(const SafeTensor& t, int32_t* out) {
  if (t.dtype != TensorDtype::kI32) {
    throw Error("tensor '" + t.name + "' holds " + dtype_name(t.dtype) + ", not I32 integers");
  }
  std::memcpy(out, t.data, t.count * 4);
}

void write_safetensors(AtomicFileWriter& out, const std::vector<TensorToWrite>& given,
                       TensorDtype dtype, const std::map<std::string, std::string>& metadata) {
  // As the safetensors library lays a file out: the tensors by dtype (its order of dtypes, the
  // larger first: F32, BF16, F16), then in the order of their names, the header's entries in data
  // order after "__metadata__", each entry's keys as dtype, shape, data_offsets.
  const auto dtype_of = [&](const TensorToWrite& t) { return t.dtype.value_or(dtype); };
  const auto rank = [](TensorDtype d) {
    switch (d) {
      case TensorDtype::kF32:
        return 0;
      case TensorDtype::kBf16:
        return 1;
      case TensorDtype::kF16:
        return 2;
      default:
        throw Error("write_safetensors: tensors are written as F32, F16 or BF16");
    }
  };
  std::vector<TensorToWrite> tensors = given;
  for (const TensorToWrite& t : tensors) rank(dtype_of(t));
  std::stable_sort(tensors.begin(), tensors.end(),
                   [&](const TensorToWrite& a, const TensorToWrite& b) {
                     const int ra = rank(dtype_of(a)), rb = rank(dtype_of(b));
                     return ra != rb ? ra < rb : a.name < b.name;
                   });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    size_t count = 1;
    for (size_t d : t.shape) count *= d;
    const size_t bytes = count * dtype_bytes(dtype_of(t));
    header[t.name] = {{"dtype", dtype_name(dtype_of(t))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  out.write(&length, sizeof length);
  out.write(text.data(), text.size());
  constexpr size_t kChunk = size_t(1) << 20;
  std::vector<uint16_t> half;
  for (const TensorToWrite& t : tensors) {
    size_t count = 1;
    for (size_t d : t.shape) count *= d;
    const TensorDtype dtype = dtype_of(t);
    if (dtype != TensorDtype::kF32) half.resize(kChunk);
    if (dtype == TensorDtype::kF32) {
      out.write(t.data, count * sizeof(float));
      continue;
    }
    if (dtype == TensorDtype::kBf16 && t.bf16) {
      out.write(t.bf16, count * sizeof(uint16_t));
      continue;
    }
    for (size_t i = 0; i < count; i += kChunk) {
      const size_t m = std::min(kChunk, count - i);
      for (size_t j = 0; j < m; ++j) {
        half[j] = dtype == TensorDtype::kBf16 ? float_to_bf16(t.data[i + j])
                                              : float_to_f16(t.data[i + j]);
      }
      out.write(half.data(), m * sizeof(uint16_t));
    }
  }
}

}  // namespace llmcpu
