// The safetensors container (Hugging Face): an 8-byte little-endian header length N, N bytes of
// JSON
// {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, ..., "__metadata__":
// {..}}, then the data section, which the offsets index (END exclusive, tensors row-major,
// little-endian). Reading maps the file and checks everything against its length before any tensor
// is read: the header length, each tensor's offsets and byte count against its dtype and shape, and
// that the tensors do not overlap. Only the floating-point dtypes models are stored in (F32, F16,
// BF16), I32 (the token ids of a verify reference) and F64 (a reference's float64 figures, read
// rounded to fp32) are accepted. Deliberately not here: what the tensors mean
// (core/io/hf_gpt2.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/util/file.h"

namespace llmcpu {

enum class TensorDtype { kF32, kF16, kBf16, kI32, kF64 };  // F64: read only

// "F32", "F16", "BF16": the names safetensors uses.
const char* dtype_name(TensorDtype dtype);
size_t dtype_bytes(TensorDtype dtype);
// "float32", "float16", "bfloat16": config.json's torch_dtype for weights stored as `dtype`.
const char* torch_dtype_name(TensorDtype dtype);

// One tensor of a mapped file.
struct SafeTensor {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<size_t> shape;
  size_t count = 0;               // elements: the product of shape
  const uint8_t* data = nullptr;  // count * dtype_bytes(dtype) bytes inside the mapping

  std::string shape_string() const;  // "(768, 2304)"
};

class SafetensorsFile {
 public:
  // Maps and checks the file; throws FileError naming the file, the tensor and the problem.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafeTensor>& tensors() const { return tensors_; }  // in data order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor of that name, or null.
  const SafeTensor* find(const std::string& name) const;
  // A tensor of this file read and no longer needed: its pages leave resident memory
  // (MappedFile::let_go); a tensor of another file is left alone.
  void let_go(const SafeTensor& t) const { file_.let_go(t.data, t.count * dtype_bytes(t.dtype)); }

 private:
  MappedFile file_;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Widens (F16, BF16: exactly), copies (F32) or rounds (F64) the tensor's elements into
// out[0 .. count); Error for I32.
void tensor_to_f32(const SafeTensor& t, float* out);
// Copies an I32 tensor's elements into out[0 .. count); Error for any other dtype.
void tensor_to_i32(const SafeTensor& t, int32_t* out);

// fp32 -> fp16, round to nearest even (overflow to infinity, NaN kept quiet); fp16 -> fp32 exact.
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

// A tensor to be written: fp32 elements (row-major, `shape`) stored as `dtype` (F32, F16, BF16).
// `bf16`, where given, holds the same elements rounded to bf16 already (a bf16 model's working
// copy): a BF16 file takes those bytes as they are.
struct TensorToWrite {
  std::string name;
  std::vector<size_t> shape;
  const float* data;
  const uint16_t* bf16 = nullptr;
  // This tensor's dtype when not the file's (PEFT's copies of base modules keep the base's).
  std::optional<TensorDtype> dtype = std::nullopt;
};

// Writes a safetensors file of `tensors` in `dtype` (a tensor's own dtype where it has one), with
// `metadata` as "__metadata__", into an open writer that the caller finishes and publishes, byte
// for byte as the safetensors library writes it: the tensors by dtype (F32, BF16, F16) and then
// in the order of their names, the header's entries in that order after
// "__metadata__" (keys dtype, shape, data_offsets), padded with spaces to a multiple of 8 bytes.
void write_safetensors(AtomicFileWriter& out, const std::vector<TensorToWrite>& tensors,
                       TensorDtype dtype, const std::map<std::string, std::string>& metadata);

}  // namespace llmcpu
