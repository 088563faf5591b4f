// A frozen base's layer matmul weights (qkvw, attprojw, fcw, fcprojw: ParameterLayout's
// matmul_weight roles) held block-quantized (QLoRA: simd/quant/block_quant.h's int8 or nf4), one
// QuantMatrix per layer and tensor, and found by the pointer the passes hand an executor (the
// tensor's place in the fp32 master, whose memory is given back once quantized:
// Model::freeze_base). The codes and scales of all of them live in two arenas. The embedding, the
// head and the norms stay as they were. Deliberately not here: the products (quant_matmul.h), the
// release of the master's memory (the model's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/parameters.h"
#include "core/util/aligned_buffer.h"
#include "simd/quant/quant_matmul.h"

namespace llmcpu {

class QuantizedBase {
 public:
  // Arenas for every layer matmul weight of `layout` in `format` (not kNone), none quantized yet.
  QuantizedBase(QuantFormat format, const ParameterLayout& layout);

  // The layers' matmul weights, one span per layer and tensor, in flat order.
  static std::vector<ParameterSpan> spans(const ParameterLayout& layout);
  // The bytes of codes and scales the layers' matmul weights take in `format` (kNone: 0).
  static size_t bytes(QuantFormat format, const ParameterLayout& layout);

  // Quantizes span s (one of spans()) from `master`, the flat fp32 arena whose tensor at s.offset
  // the passes will name. Throws Error naming the tensor, layer, row and column of a value that is
  // not finite.
  void quantize(const ParameterSpan& s, const float* master);

  QuantFormat format() const { return format_; }
  size_t bytes() const { return codes_.size() + scales_.size() * sizeof(float); }
  // The quantized weight the tensor at `weight` is (null: not one of them, or not quantized yet).
  const QuantMatrix* find(const float* weight) const;

 private:
  struct Entry {
    const float* weight;  // where the passes name it
    QuantMatrix q;
  };
  struct Place {
    size_t codes, scales;  // offsets in the arenas
    size_t rows, cols;
  };

  QuantFormat format_;
  std::vector<ParameterSpan> spans_;
  std::vector<Place> places_;  // by span
  AlignedBuffer<uint8_t> codes_;
  AlignedBuffer<float> scales_;
  std::vector<Entry> entries_;  // sorted by weight
};

// --base-quant's word (none, int8, nf4) as a format; UsageError naming `flag` for another.
QuantFormat parse_base_quant(const std::string& word, const std::string& flag = "--base-quant");

}  // namespace llmcpu
