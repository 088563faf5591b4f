// Model's frozen base (model.h: freeze_base, restore_master): the layers' matmul weights held
// quantized or in the bf16 copy alone, their fp32 master given back to the system.
#include <vector>

#include "core/model/model.h"
#include "simd/error.h"

namespace llmcpu {

void Model::freeze_base(QuantFormat format) {
  if (base_gradients_) {
    throw Error("Model::freeze_base: this model trains its base (it keeps gradients for it)");
  }
  if (base_frozen_) throw Error("Model::freeze_base: the base is frozen already");
  if (device_ || copies_.master_released() || copies_.memory_shared_by_ranks()) {
    throw Error("Model::freeze_base: only a model that holds its whole master and no device");
  }
  base_frozen_ = true;
  if (format == QuantFormat::kNone && !bf16_) return;  // fp32 computes with its master
  const std::vector<ParameterSpan> spans = QuantizedBase::spans(layout_);
  if (format != QuantFormat::kNone) quant_ = std::make_unique<QuantizedBase>(format, layout_);
  // Tensor by tensor into its new form, then the master's pages given back: at the peak the
  // master and one tensor's new form.
  for (const ParameterSpan& s : spans) {
    if (quant_) {
      quant_->quantize(s, params_data_);
      if (bf16_) bf16_->release(s.offset, s.count);  // a copy of it touched before, if any
    } else {
      bf16_->refresh(s.offset, s.count);
    }
    released_bytes_ += release_pages(params_data_ + s.offset, s.count * sizeof(float));
  }
  if (bf16_) {  // every other tensor's copy
    size_t at = 0;
    for (const ParameterSpan& s : spans) {
      if (s.offset > at) bf16_->refresh(at, s.offset - at);
      at = s.offset + s.count;
    }
    if (at < layout_.total()) bf16_->refresh(at, layout_.total() - at);
    bf16_->quant = quant_.get();
    copies_.bf16_refreshed();
    // The embedding and the head: computed with in bf16 (the head's GEMM reads the copy, the
    // embedding's rows are gathered from it), their fp32 master given back too.
    for (int role : {kWte, kLmHead}) {
      const size_t n = layout_.size(role);
      if (n > 0) released_bytes_ += release_pages(params_data_ + layout_.offset(role), n * 4);
    }
    bf16_->gather_embedding_from_copy();
  }
  copies_.master_memory_released();
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
  if (bf16_ && bf16_->embedding_from_copy()) {  // the embedding and the head, widened
    for (int role : {kWte, kLmHead}) {
      const size_t o = layout_.offset(role), n = layout_.size(role);
      if (n > 0) bf16_->bf16_kernels().to_f32(params_data_ + o, bf16_->copy() + o, n);
    }
  }
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
