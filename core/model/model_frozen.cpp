// Model's frozen base (model.h: freeze_base, restore_master): the layers' matmul weights held
// quantized or in the bf16 copy alone, their fp32 master given back to the system.
#include <algorithm>
#include <vector>

#include "core/model/model.h"
#include "simd/error.h"

namespace llmcpu {

void Model::begin_freeze(QuantFormat format, const std::vector<int>& keep) {
  if (base_gradients_) {
    throw Error("Model::freeze_base: this model trains its base (it keeps gradients for it)");
  }
  if (base_frozen_ || freezing_) throw Error("Model::freeze_base: the base is frozen already");
  if (device_ || copies_.master_released() || copies_.memory_shared_by_ranks()) {
    throw Error("Model::freeze_base: only a model that holds its whole master and no device");
  }
  if (format != QuantFormat::kNone) quant_ = std::make_unique<QuantizedBase>(format, layout_);
  freezing_ = std::make_unique<Freezing>();
  // The layers' matmul weights, quantized or (bf16) in the copy alone; in bf16 the embedding and
  // the head in the copy alone too. An fp32 model computes with its master otherwise.
  if (quant_ || bf16_) freezing_->spans = QuantizedBase::spans(layout_);
  if (bf16_) {
    for (int role : {kWte, kLmHead}) {
      if (std::find(keep.begin(), keep.end(), role) != keep.end()) continue;
      if (layout_.size(role) > 0)
        freezing_->spans.push_back({layout_.offset(role), layout_.size(role), role, -1});
    }
  }
  std::sort(freezing_->spans.begin(), freezing_->spans.end(),
            [](const ParameterSpan& a, const ParameterSpan& b) { return a.offset < b.offset; });
  for (const ParameterSpan& s : freezing_->spans) freezing_->remaining.push_back(s.count);
}

// Span i into its frozen form, then its master's pages given back: at the peak the master's
// unfrozen part and the frozen forms.
void Model::freeze_span(size_t i) {
  const ParameterSpan& s = freezing_->spans[i];
  if (quant_ && ParameterLayout::matmul_weight(s.tensor)) {
    quant_->quantize(s, params_data_);
    if (bf16_) bf16_->release(s.offset, s.count);  // a copy of it touched before, if any
  } else {
    bf16_->refresh(s.offset, s.count);
  }
  released_bytes_ += release_pages(params_data_ + s.offset, s.count * sizeof(float));
  freezing_->remaining[i] = 0;
}

void Model::base_written(size_t offset, size_t count) {
  if (!freezing_) return;
  std::vector<ParameterSpan>& spans = freezing_->spans;
  // The first span that ends after offset, then every one that starts before offset + count.
  auto it = std::upper_bound(spans.begin(), spans.end(), offset,
                             [](size_t o, const ParameterSpan& s) { return o < s.offset + s.count; });
  for (; it != spans.end() && it->offset < offset + count; ++it) {
    const size_t i = size_t(it - spans.begin());
    if (freezing_->remaining[i] == 0) continue;
    const size_t lo = std::max(offset, it->offset);
    const size_t hi = std::min(offset + count, it->offset + it->count);
    freezing_->remaining[i] -= std::min(freezing_->remaining[i], hi - lo);
    if (freezing_->remaining[i] == 0) freeze_span(i);
  }
}

void Model::finish_freeze() {
  if (!freezing_) throw Error("Model::finish_freeze: no begin_freeze before it");
  const std::vector<ParameterSpan>& spans = freezing_->spans;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (freezing_->remaining[i] != 0) freeze_span(i);
  }
  if (bf16_) {  // every other tensor's copy
    size_t at = 0;
    for (const ParameterSpan& s : spans) {
      if (s.offset > at) bf16_->refresh(at, s.offset - at);
      at = s.offset + s.count;
    }
    if (at < layout_.total()) bf16_->refresh(at, layout_.total() - at);
    bf16_->quant = quant_.get();
    copy_only_.clear();
    for (const ParameterSpan& s : spans) {
      if (s.tensor == kWte || s.tensor == kLmHead) copy_only_.push_back(s.tensor);
    }
    // The embedding's rows come from the copy, unless the master keeps it.
    bf16_->gather_embedding_from_copy(std::count(copy_only_.begin(), copy_only_.end(), kWte) > 0);
    copies_.bf16_refreshed();
  }
  if (!spans.empty()) copies_.master_memory_released();
  freezing_.reset();
  base_frozen_ = true;
}

void Model::restore_master() {
  if (!base_frozen_) return;
  for (const ParameterSpan& s : QuantizedBase::spans(layout_)) {
    float* w = params_data_ + s.offset;
    if (quant_) {
      const QuantMatrix* q = quant_->find(w);
      decode_quant_panel(*q, 0, q->rows, 0, q->cols, w);
    } else if (bf16_) {
      bf16_->bf16_kernels().to_f32(w, bf16_->copy() + s.offset, s.count);
    }
  }
  for (int role : copy_only_) {  // the embedding and the head held in the copy alone, widened
    const size_t o = layout_.offset(role), n = layout_.size(role);
    bf16_->bf16_kernels().to_f32(params_data_ + o, bf16_->copy() + o, n);
  }
  copy_only_.clear();
  if (bf16_) {
    bf16_->quant = nullptr;
    bf16_->gather_embedding_from_copy(false);
  }
  quant_.reset();
  released_bytes_ = 0;
  if (copies_.master_released()) copies_.master_memory_restored();
  base_frozen_ = false;
}

}  // namespace llmcpu
