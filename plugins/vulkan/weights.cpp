// Weight pieces and their upload through the staging slots. See weights.h.
#include "plugins/vulkan/weights.h"

#include <algorithm>

namespace llmcpu::vk {

void WeightStore::release() {
  for (Buffer& b : pieces_) dev_.destroy(b);
  pieces_.clear();
  piece_floats_.clear();
}

void WeightStore::set(const float* host, size_t count) {
  // L: the largest binding, a multiple of 256 bytes; V: up to 1 Mi floats (4 MiB) of overlap.
  const size_t L = dev_.max_binding_bytes() / 256 * 256 / sizeof(float);
  const size_t V = std::min<size_t>(L / 2, size_t(1) << 20);
  const size_t S = L - V;
  const size_t n = count <= L ? 1 : 1 + (count - L + S - 1) / S;
  std::vector<size_t> need(n);
  for (size_t k = 0; k < n; ++k) need[k] = std::min(count, k * S + L) - k * S;
  bool fits = pieces_.size() >= n;
  for (size_t k = 0; fits && k < n; ++k) fits = piece_floats_[k] >= need[k];
  if (!fits) {
    LLMCPU_VK(vkDeviceWaitIdle(dev_.device()));
    release();
    for (size_t k = 0; k < n; ++k) {
      pieces_.push_back(dev_.create_buffer(need[k] * sizeof(float), MemoryKind::kDevice));
      piece_floats_.push_back(need[k]);
    }
  }
  host_ = host, count_ = count, used_ = n;
  piece_len_ = L, overlap_ = V, step_ = S;
  refresh();
}

void WeightStore::refresh() {
  if (!host_) return;
  // Every piece in chunks of one staging slot.
  const size_t chunk = stream_.capacity() / sizeof(float);
  struct Part {
    size_t piece, first, count;  // floats of piece `piece` from `first`
  };
  std::vector<Part> parts;
  for (size_t k = 0; k < used_; ++k) {
    const size_t len = std::min(count_, k * step_ + piece_len_) - k * step_;
    for (size_t f = 0; f < len; f += chunk) parts.push_back({k, f, std::min(chunk, len - f)});
  }
  stream_.run(parts.size(), [&](size_t i, Chunk& c) {
    const Part& p = parts[i];
    c.uploads.push_back({host_ + p.piece * step_ + p.first, p.count * sizeof(float),
                         pieces_[p.piece].buffer, p.first * sizeof(float)});
  });
}

bool WeightStore::contains(const float* p, size_t count) const {
  if (!host_) return false;
  const std::less_equal<const float*> le;
  return le(host_, p) && le(p + count, host_ + count_);
}

WeightStore::Window WeightStore::rows(const float* p, size_t cols, size_t row, size_t nrows) const {
  if (cols > overlap_) {
    throw VulkanError("a weight row of " + std::to_string(cols) + " floats is longer than the " +
                      std::to_string(overlap_) + " floats two binding pieces share on " +
                      dev_.name());
  }
  const size_t start = size_t(p - host_) + row * cols;
  const size_t k = std::min(start / step_, used_ - 1);
  const size_t end = std::min(count_, k * step_ + piece_len_);
  const size_t fit = (end - start) / cols;
  return Window{pieces_[k].buffer, piece_floats_[k] * sizeof(float), uint32_t(start - k * step_),
                std::min(nrows, fit)};
}

}  // namespace llmcpu::vk
