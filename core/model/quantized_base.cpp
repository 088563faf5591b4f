#include "core/model/quantized_base.h"

#include <algorithm>
#include <string>

#include "simd/error.h"

namespace llmcpu {

std::vector<ParameterSpan> QuantizedBase::spans(const ParameterLayout& layout) {
  std::vector<ParameterSpan> out;
  for (const ParameterSpan& s : layout.spans()) {
    if (s.tensor >= 0 && s.layer >= 0 && ParameterLayout::matmul_weight(s.tensor) && s.count > 0)
      out.push_back(s);
  }
  return out;
}

namespace {

// A layer's slice of a matmul weight: (OC, C) rows of C, as nn.Linear.
std::pair<size_t, size_t> rows_cols(const ParameterLayout& layout, int tensor) {
  const std::vector<size_t>& d = layout.dims(tensor);  // (L, OC, C)
  return {d[1], d[2]};
}

}  // namespace

size_t QuantizedBase::bytes(QuantFormat format, const ParameterLayout& layout) {
  if (format == QuantFormat::kNone) return 0;
  size_t total = 0;
  for (const ParameterSpan& s : spans(layout)) {
    const auto [rows, cols] = rows_cols(layout, s.tensor);
    total += quantized_bytes(format, rows, cols);
  }
  return total;
}

QuantizedBase::QuantizedBase(QuantFormat format, const ParameterLayout& layout)
    : format_(format), spans_(spans(layout)) {
  if (format == QuantFormat::kNone) throw Error("QuantizedBase: no format to quantize to");
  size_t codes = 0, scales = 0;
  for (const ParameterSpan& s : spans_) {
    const auto [rows, cols] = rows_cols(layout, s.tensor);
    if (rows * cols != s.count) throw Error("QuantizedBase: a matmul weight is not (L, OC, C)");
    places_.push_back({codes, scales, rows, cols});
    codes += rows * quant_code_bytes_per_row(format, cols);
    scales += rows * quant_blocks_per_row(cols);
  }
  codes_ = AlignedBuffer<uint8_t>(codes);
  scales_ = AlignedBuffer<float>(scales);
}

void QuantizedBase::quantize(const ParameterSpan& s, const float* master) {
  const auto it = std::find_if(spans_.begin(), spans_.end(), [&](const ParameterSpan& t) {
    return t.offset == s.offset && t.count == s.count;
  });
  if (it == spans_.end()) throw Error("QuantizedBase::quantize: not a layer's matmul weight");
  const Place& p = places_[size_t(it - spans_.begin())];
  const float* w = master + s.offset;
  QuantMatrix q{format_, p.rows, p.cols, codes_.data() + p.codes, scales_.data() + p.scales};
  try {
    quantize_rows(format_, w, p.rows, p.cols, codes_.data() + p.codes, scales_.data() + p.scales);
  } catch (const Error& e) {
    throw Error(std::string(ParameterLayout::name(s.tensor)) + " of layer " +
                std::to_string(s.layer) + ": " + e.what());
  }
  const auto at = std::lower_bound(entries_.begin(), entries_.end(), w,
                                   [](const Entry& e, const float* x) { return e.weight < x; });
  if (at != entries_.end() && at->weight == w) {
    at->q = q;
  } else {
    entries_.insert(at, Entry{w, q});
  }
}

const QuantMatrix* QuantizedBase::find(const float* weight) const {
  const auto at = std::lower_bound(entries_.begin(), entries_.end(), weight,
                                   [](const Entry& e, const float* x) { return e.weight < x; });
  return at != entries_.end() && at->weight == weight ? &at->q : nullptr;
}

QuantFormat parse_base_quant(const std::string& word, const std::string& flag) {
  QuantFormat f = QuantFormat::kNone;
  if (!parse_quant_format(word, f)) {
    throw UsageError(flag + " '" + word + "' is not a base format; expected none, int8 or nf4");
  }
  return f;
}

}  // namespace llmcpu
