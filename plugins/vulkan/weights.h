// Device copies of weight arrays, split into pieces that each fit one storage-buffer binding
// (maxStorageBufferRange; 128 MiB on lavapipe, while GPT-2 124M's wte alone is 147 MiB).
// Piece k holds floats [k*S, k*S + L) of the host array, L = the binding limit in floats and
// S = L - V: consecutive pieces overlap by V floats, so every row of at most V floats lies whole in
// one piece, and a matrix is processed in row windows, each bound within one piece.
// The engine's flat parameter array is one WeightStore (resident, refreshed after each optimizer
// step); a weight from elsewhere goes through a scratch WeightStore, uploaded for each call.
// Not here: what is computed with a window (ops.cpp).
#pragma once

#include <vector>

#include "plugins/vulkan/device.h"
#include "plugins/vulkan/stream.h"

namespace llmcpu::vk {

class WeightStore {
 public:
  WeightStore(Device& dev, Stream& stream) : dev_(dev), stream_(stream) {}
  ~WeightStore() { release(); }
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Takes count floats at host (grows the pieces if needed) and uploads them.
  void set(const float* host, size_t count);
  // Uploads the same host array again (it changed).
  void refresh();
  bool empty() const { return host_ == nullptr; }
  // Whether [p, p + count) lies inside the stored host array.
  bool contains(const float* p, size_t count) const;

  // Rows [row, row + w.rows) of the (*, cols) matrix at host pointer p (inside the array), with
  // w.rows <= nrows as many as lie whole in one piece.
  struct Window {
    VkBuffer buffer;
    size_t range;       // bytes of the binding (the whole piece)
    uint32_t elem_off;  // float index of the window's first element in the piece
    size_t rows;
  };
  Window rows(const float* p, size_t cols, size_t row, size_t nrows) const;

  size_t piece_count() const { return used_; }
  size_t overlap_floats() const { return overlap_; }

 private:
  void release();

  Device& dev_;
  Stream& stream_;
  const float* host_ = nullptr;
  size_t count_ = 0;
  size_t piece_len_ = 0, overlap_ = 0, step_ = 0;  // L, V, S in floats
  size_t used_ = 0;                                // pieces holding the array
  std::vector<Buffer> pieces_;
  std::vector<size_t> piece_floats_;  // allocated size of each piece
};

}  // namespace llmcpu::vk
