// Model's LoRA adapters (core/model/lora_views.h): attaching them, and the activations and
// scratch their passes take, laid out when a batch is planned.
#include <algorithm>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

int lora_site(int role) {
  const int site = lora_site_of(role);
  if (site < 0) throw Error("attach_lora: a module on a tensor that is not a layer's matmul weight");
  return site;
}

std::vector<LoraModuleShape> shapes_of(const LoraParams& lora) {
  std::vector<LoraModuleShape> out;
  for (const LoraModuleParams& m : lora.modules) out.push_back({m.rows, m.in});
  return out;
}

}  // namespace

void Model::attach_lora(const LoraParams& lora) {
  if (offload_active()) {
    throw UsageError("LoRA adapters with a device's blocks: the device runs no adapters yet; "
                     "leave --plugin out");
  }
  if (lora.r <= 0 || lora.modules.empty()) throw Error("attach_lora: no rank or no modules");
  for (const TrainedTensorParams& t : lora.tensors) {
    const bool present = layout_.size(t.role) > 0 || (t.role == kLmHead && layout_.size(kWte) > 0);
    if (!trainable_copy_role(t.role) || !present || !t.w) {
      throw Error("attach_lora: a trained copy of a tensor the model cannot take one of");
    }
  }
  const ModelConfig& c = config_;
  const size_t widths[] = {size_t(c.qkv_width()), size_t(c.channels), size_t(c.fc_width()),
                           size_t(c.channels)};
  const size_t inputs[] = {size_t(c.channels), size_t(c.attn_width()), size_t(c.channels),
                           size_t(c.hidden_size())};
  for (const LoraModuleParams& m : lora.modules) {
    const int s = lora_site(m.role);
    if (m.layer < 0 || m.layer >= c.num_layers || m.col0 + m.rows > widths[s] ||
        m.in != inputs[s]) {
      throw ShapeError("attach_lora: a module of layer " + std::to_string(m.layer) +
                       " does not fit the model's " + ParameterLayout::name(m.role));
    }
  }
  detach_lora();
  lora_ = lora;
  std::sort(lora_.tensors.begin(), lora_.tensors.end(),
            [](const TrainedTensorParams& a, const TrainedTensorParams& b) { return a.role < b.role; });
  std::stable_sort(lora_.modules.begin(), lora_.modules.end(),
                   [](const LoraModuleParams& a, const LoraModuleParams& b) {
                     const int sa = lora_site(a.role), sb = lora_site(b.role);
                     if (a.layer != b.layer) return a.layer < b.layer;
                     if (sa != sb) return sa < sb;
                     return a.col0 < b.col0;
                   });
  size_t a_count = 0;
  for (const LoraModuleParams& m : lora_.modules) a_count += size_t(lora_.r) * m.in;
  lora_a16_ = bf16_ ? AlignedBuffer<bf16>(a_count) : AlignedBuffer<bf16>();
  size_t b_count = 0;
  for (const LoraModuleParams& m : lora_.modules) b_count += size_t(lora_.r) * m.rows;
  lora_bt_ = AlignedBuffer<float>(b_count);
  lora_acts_ = AlignedBuffer<float>();
  lora_views_ = LoraViews{};
  carve_views();  // the passes' views at the trained copies
  if (bf16_) {
    embedding_from_copy_ = bf16_->embedding_from_copy();
    if (p_.wte != params_data_ + layout_.offset(kWte)) bf16_->gather_embedding_from_copy(false);
    const float* head = p_.head();
    if (head < params_data_ || head >= params_data_ + layout_.total()) {  // a trained copy
      lora_head16_ = AlignedBuffer<bf16>(layout_.size(kWte));
      bf16_->map_copy(head, lora_head16_.size(), lora_head16_.data());
    }
  }
  if (arena_.batch() > 0) plan_lora();
  else refresh_lora_copies();
}

void Model::detach_lora() {
  const bool copies = !lora_.tensors.empty();
  if (bf16_ && lora_attached()) {
    bf16_->gather_embedding_from_copy(embedding_from_copy_);
    if (lora_head16_.size() > 0) bf16_->map_copy(p_.head(), 0, nullptr);
  }
  lora_ = LoraParams{};
  lora_views_ = LoraViews{};
  lora_acts_ = AlignedBuffer<float>();
  lora_a16_ = AlignedBuffer<bf16>();
  lora_bt_ = AlignedBuffer<float>();
  lora_head16_ = AlignedBuffer<bf16>();
  if (copies) carve_views();  // the base's own tensors again
}

const LoraViews* Model::lora_views() const {
  if (!lora_attached()) return nullptr;
  if (lora_views_.r == 0) throw Error("LoRA adapters attached, but no batch planned for them");
  return &lora_views_;
}

size_t Model::lora_activation_bytes(int B, int T) const {
  if (!lora_attached()) return 0;
  return lora_sizes(lora_.r, shapes_of(lora_), size_t(B) * T, lora_.dropout > 0).total() *
         sizeof(float);
}

void Model::plan_lora() {
  const size_t BT = size_t(arena_.batch()) * arena_.seq_len();
  const size_t r = size_t(lora_.r);
  const LoraSizes sizes = lora_sizes(lora_.r, shapes_of(lora_), BT, lora_.dropout > 0);
  lora_acts_ = AlignedBuffer<float>(sizes.total());
  float* u = lora_acts_.data();
  bf16* a16 = lora_a16_.data();
  float* bt = lora_bt_.data();
  std::vector<LoraModuleView> modules;
  for (const LoraModuleParams& m : lora_.modules) {
    modules.push_back({m, bf16_ ? a16 : nullptr, bt, u, r});
    u += BT * r;
    bt += r * m.rows;
    if (bf16_) a16 += r * m.in;
  }
  LoraViews v = lora_views_of(modules, config_.num_layers, lora_.r, lora_.scale);
  v.seed = lora_views_.seed;
  v.gB = u;
  v.dx = sizes.dx > 0 ? v.gB + sizes.gB : nullptr;
  v.dropout = lora_.dropout;
  v.xd = sizes.xd > 0 ? v.dx + sizes.dx : nullptr;
  if (lora_.dropout == 0) stack_sites(v, v.gB + sizes.gB, v.gB + sizes.gB + sizes.As);
  lora_views_ = std::move(v);
  refresh_lora_copies();
}

// The modules of a site that share its input, stacked (LoraStack): their u side by side in the
// site's u (which their own u's tile), their bf16 A's one above the other in the model's copy
// (which they tile too), their fp32 A's copied to `as` (refresh_lora_copies) and dA's product in
// the shared scratch `das`.
void Model::stack_sites(LoraViews& v, float* as, float* das) {
  v.stacks.assign(size_t(config_.num_layers), {});
  const size_t r = size_t(v.r);
  for (int l = 0; l < config_.num_layers; ++l) {
    for (int s = 0; s < 4; ++s) {
      const auto [begin, end] = v.sites[size_t(l)][size_t(s)];
      const size_t n = end - begin;
      if (n < 2 || n > size_t(kLoraMaxStack)) continue;
      LoraModuleView* first = v.modules.data() + begin;
      const size_t in = first->p.in;
      LoraStack& st = v.stacks[size_t(l)][size_t(s)];
      st.R = int(n * r);
      st.view = *first;
      st.view.p.A = as, st.view.p.dA = first->p.dA ? das : nullptr;
      st.view.p.rows = 0, st.view.p.B = nullptr, st.view.p.dB = nullptr;
      st.view.ldu = size_t(st.R);
      for (size_t i = 0; i < n; ++i) {  // each module's u: its r columns of the site's
        first[i].u = first->u + i * r;
        first[i].ldu = size_t(st.R);
      }
      as += n * r * in;
    }
  }
}

void Model::refresh_lora_copies() {
  if (lora_head16_.size() > 0) {
    bf16_->bf16_kernels().to_bf16(lora_head16_.data(), p_.head(), lora_head16_.size());
  }
  for (const LoraModuleView& m : lora_views_.modules) {
    transpose_into(const_cast<float*>(m.Bt), m.p.B, m.p.rows, size_t(lora_.r));
    if (!bf16_) continue;
    bf16_->bf16_kernels().to_bf16(const_cast<bf16*>(m.A16), m.p.A, size_t(lora_.r) * m.p.in);
  }
  for (size_t l = 0; l < lora_views_.stacks.size(); ++l) {  // the stacks' fp32 A's
    for (int s = 0; s < 4; ++s) {
      const LoraStack& st = lora_views_.stacks[l][size_t(s)];
      if (st.R == 0) continue;
      float* as = const_cast<float*>(st.view.p.A);
      for (const LoraModuleView& m : lora_views_.site(int(l), s)) {
        as = std::copy_n(m.p.A, size_t(lora_.r) * m.p.in, as);
      }
    }
  }
}

}  // namespace llmcpu
