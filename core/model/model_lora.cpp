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
  switch (role) {
    case kQkvw:
      return kLoraQkv;
    case kAttprojw:
      return kLoraAttproj;
    case kFcw:
      return kLoraFc;
    case kFcprojw:
      return kLoraFcproj;
    default:
      throw Error("attach_lora: a module on a tensor that is not a layer's matmul weight");
  }
}

// The adapters' activations and scratch for BT rows (lora_activation_floats): each module's u,
// then t (the forward's) sharing with g (the backward's), gB and dx.
struct LoraSizes {
  size_t u = 0, t = 0, gB = 0, dx = 0, xd = 0;
  size_t total() const { return u + t + gB + dx + xd; }
};
LoraSizes lora_sizes(const LoraParams& lora, size_t BT) {
  LoraSizes s;
  size_t rows = 0, in = 0;
  for (const LoraModuleParams& m : lora.modules) {
    s.u += BT * size_t(lora.r);
    rows = std::max(rows, m.rows), in = std::max(in, m.in);
  }
  s.t = BT * rows, s.gB = BT * size_t(lora.r), s.dx = BT * in;
  s.xd = lora.dropout > 0 ? BT * in : 0;
  return s;
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
  lora_ = lora;
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
  lora_acts_ = AlignedBuffer<float>();
  lora_views_ = LoraViews{};
  if (arena_.batch() > 0) plan_lora();
}

void Model::detach_lora() {
  lora_ = LoraParams{};
  lora_views_ = LoraViews{};
  lora_acts_ = AlignedBuffer<float>();
  lora_a16_ = AlignedBuffer<bf16>();
}

const LoraViews* Model::lora_views() const {
  if (!lora_attached()) return nullptr;
  if (lora_views_.r == 0) throw Error("LoRA adapters attached, but no batch planned for them");
  return &lora_views_;
}

size_t Model::lora_activation_bytes(int B, int T) const {
  if (!lora_attached()) return 0;
  return lora_activation_floats(lora_.r, shapes_of(lora_), size_t(B) * T, lora_.dropout > 0) *
         sizeof(float);
}

void Model::plan_lora() {
  const size_t BT = size_t(arena_.batch()) * arena_.seq_len();
  const size_t r = size_t(lora_.r);
  const LoraSizes sizes = lora_sizes(lora_, BT);
  lora_acts_ = AlignedBuffer<float>(sizes.total());
  float* u = lora_acts_.data();
  bf16* a16 = lora_a16_.data();
  LoraViews v;
  v.r = lora_.r, v.scale = lora_.scale, v.seed = lora_views_.seed;
  v.sites.assign(size_t(config_.num_layers), {});
  for (const LoraModuleParams& m : lora_.modules) {
    auto& range = v.sites[size_t(m.layer)][size_t(lora_site(m.role))];
    if (range[0] == range[1]) range = {v.modules.size(), v.modules.size()};
    ++range[1];
    v.modules.push_back({m, bf16_ ? a16 : nullptr, u});
    u += BT * r;
    if (bf16_) a16 += r * m.in;
  }
  v.t = v.g = u;
  v.gB = u + sizes.t;
  v.dx = v.gB + sizes.gB;
  v.dropout = lora_.dropout;
  v.xd = sizes.xd > 0 ? v.dx + sizes.dx : nullptr;
  lora_views_ = std::move(v);
}

}  // namespace llmcpu
