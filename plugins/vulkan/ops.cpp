// The offloaded ops: chunk plans and the dispatches of each chunk. See ops.h and stream.h.
#include "plugins/vulkan/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace llmcpu::vk {
namespace {

constexpr size_t kAlign = 256;  // >= minStorageBufferOffsetAlignment on every known device
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
uint32_t groups(size_t n, size_t per) { return uint32_t((n + per - 1) / per); }
constexpr size_t F = sizeof(float);

// llvmpipe (lavapipe) ends all loops of one shader invocation, silently, after 65535 iterations in
// total (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS); gemm.comp spends about 23 per 16-wide slice of k, so a
// reduction over more than ~45000 terms would stop short there. Every GEMM's k range is therefore
// dispatched in pieces of at most kMaxGemmK terms, each after the first adding into C (and the bias
// only once). Other devices lose nothing but a few dispatches on the longest sums (the lm_head's
// dinp over V).
constexpr uint32_t kMaxGemmK = 32768;

void dispatch_gemm(Kernels& kernels, VkCommandBuffer cb, const Binding& a, const Binding& b,
                   const Binding& c, const Binding& bias, const GemmPush& pc) {
  for (uint32_t k0 = 0; k0 < pc.K; k0 += kMaxGemmK) {
    GemmPush piece = pc;
    piece.K = std::min(kMaxGemmK, pc.K - k0);
    piece.a_off += k0 * pc.a_sk;
    piece.b_off += k0 * pc.b_sk;
    if (k0 > 0) {
      piece.flags = (pc.flags & ~kGemmBias) | kGemmAccumulate;
      Stream::compute_barrier(cb);  // the previous piece's C is read
    }
    kernels.dispatch(cb, Kernel::kGemm, {a, b, c, bias}, &piece, sizeof piece,
                     groups(pc.N, kGemmTile), groups(pc.M, kGemmTile), 1);
  }
}

}  // namespace

Engine::Engine(int device_index, bool verbose)
    : dev_(device_index, verbose),
      kernels_(dev_),
      stream_(dev_),
      resident_(dev_, stream_),
      scratch_weight_(dev_, stream_),
      scratch_bias_(dev_, stream_) {
  if (const char* env = std::getenv("LLMCPU_VK_CHUNKS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v < 1)
      throw VulkanError("LLMCPU_VK_CHUNKS='" + std::string(env) + "': expected a positive count");
    target_chunks_ = size_t(v), chunks_forced_ = true;
  }
}

Engine::~Engine() {
  vkDeviceWaitIdle(dev_.device());
  for (Buffer& b : acc_) dev_.destroy(b);
  dev_.destroy(acc_bias_);
}

const WeightStore& Engine::weights_for(const float* p, size_t count, WeightStore& scratch) {
  if (resident_.contains(p, count)) return resident_;
  scratch.set(p, count);
  return scratch;
}

size_t Engine::plan_units(size_t units, size_t in_bytes, size_t out_bytes, size_t min_units) {
  size_t per = (units + target_chunks_ - 1) / target_chunks_;
  if (!chunks_forced_) per = std::max(per, min_units);
  per = std::min(per, units);
  const size_t unit = std::max(in_bytes, out_bytes);
  const size_t limit = dev_.max_binding_bytes() - 2 * kAlign * 4;
  if (unit > limit) {
    throw VulkanError("one row (or batch element) needs " + std::to_string(unit) +
                      " bytes, more than maxStorageBufferRange of " + dev_.name());
  }
  per = std::min(per, limit / unit);
  stream_.reserve(per * unit + 4 * kAlign);
  return per;
}

void Engine::ensure_accumulators(size_t C, size_t OC) {
  const size_t rows = dev_.max_binding_bytes() / (C * F);
  if (rows == 0)
    throw VulkanError("a dweight row of " + std::to_string(C) +
                      " floats exceeds maxStorageBufferRange");
  const size_t floats = std::min(rows, OC) * C;
  const size_t pieces = (OC + rows - 1) / rows;
  if (acc_.size() < pieces || acc_floats_ < floats) {
    LLMCPU_VK(vkDeviceWaitIdle(dev_.device()));
    for (Buffer& b : acc_) dev_.destroy(b);
    acc_.clear();
    for (size_t j = 0; j < pieces; ++j)
      acc_.push_back(dev_.create_buffer(floats * F, MemoryKind::kDevice));
    acc_floats_ = floats;
  }
  acc_rows_ = rows;
  if (acc_bias_.size < OC * F) {
    dev_.destroy(acc_bias_);
    acc_bias_ = dev_.create_buffer(OC * F, MemoryKind::kDevice);
  }
}

void Engine::matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                            size_t N, int C_, int OC_) {
  if (N == 0) return;
  const size_t C = size_t(C_), OC = size_t(OC_);
  kernels_.reset_sets();
  const WeightStore& W = weights_for(weight, OC * C, scratch_weight_);
  const WeightStore* Bs = bias ? &weights_for(bias, OC, scratch_bias_) : nullptr;
  const size_t nr = plan_units(N, C * F, OC * F, 64);
  stream_.run((N + nr - 1) / nr, [&](size_t i, Chunk& c) {
    const size_t n0 = i * nr, rows = std::min(nr, N - n0);
    c.uploads.push_back({inp + n0 * C, rows * C * F, VK_NULL_HANDLE, 0});
    c.downloads.push_back({out + n0 * OC, rows * OC * F, VK_NULL_HANDLE, 0, false});
    c.compute = [&, rows](VkCommandBuffer cb, const SlotBuffers& s) {
      // out[:, o0:o0+w.rows] for each window of weight rows that one binding holds.
      for (size_t o0 = 0; o0 < OC;) {
        const WeightStore::Window w = W.rows(weight, C, o0, OC - o0);
        Binding bb{w.buffer, 0, w.range};
        uint32_t bias_off = 0;
        if (Bs) {
          const WeightStore::Window bw = Bs->rows(bias, OC, 0, 1);
          bb = {bw.buffer, 0, bw.range}, bias_off = bw.elem_off + uint32_t(o0);
        }
        const GemmPush pc{uint32_t(rows),     uint32_t(w.rows),
                          uint32_t(C),        0,
                          uint32_t(C),        1,
                          w.elem_off,         1,
                          uint32_t(C),        uint32_t(o0),
                          uint32_t(OC),       bias_off,
                          Bs ? kGemmBias : 0u};
        dispatch_gemm(kernels_, cb, {s.in, 0, rows * C * F}, {w.buffer, 0, w.range},
                      {s.out, 0, rows * OC * F}, bb, pc);
        o0 += w.rows;
      }
    };
  });
}

void Engine::matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, size_t N, int C_, int OC_) {
  if (N == 0) return;
  const size_t C = size_t(C_), OC = size_t(OC_);
  kernels_.reset_sets();
  const WeightStore* W = dinp ? &weights_for(weight, OC * C, scratch_weight_) : nullptr;
  ensure_accumulators(C, OC);
  // In slot: dout rows, then inp rows; out slot: dinp rows.
  const size_t nr = plan_units(N, OC * F + C * F + kAlign, C * F, 64);
  stream_.run((N + nr - 1) / nr, [&](size_t i, Chunk& c) {
    const size_t n0 = i * nr, rows = std::min(nr, N - n0);
    const size_t inp_off = align_up(rows * OC * F);
    c.uploads.push_back({dout + n0 * OC, rows * OC * F, VK_NULL_HANDLE, 0});
    c.uploads.push_back({inp + n0 * C, rows * C * F, VK_NULL_HANDLE, inp_off});
    if (dinp) c.downloads.push_back({dinp + n0 * C, rows * C * F, VK_NULL_HANDLE, 0, false});
    c.compute = [&, i, rows, inp_off](VkCommandBuffer cb, const SlotBuffers& s) {
      const Binding d_b{s.in, 0, rows * OC * F}, x_b{s.in, inp_off, rows * C * F};
      // dinp = sum over windows of weight rows o: dout[:, o0:o1] W[o0:o1, :]
      for (size_t o0 = 0; W && o0 < OC;) {
        const WeightStore::Window w = W->rows(weight, C, o0, OC - o0);
        const GemmPush pc{uint32_t(rows),
                          uint32_t(C),
                          uint32_t(w.rows),
                          uint32_t(o0),
                          uint32_t(OC),
                          1,
                          w.elem_off,
                          uint32_t(C),
                          1,
                          0,
                          uint32_t(C),
                          0,
                          o0 > 0 ? kGemmAccumulate : 0u};
        dispatch_gemm(kernels_, cb, d_b, {w.buffer, 0, w.range}, {s.out, 0, rows * C * F}, d_b,
                      pc);
        Stream::compute_barrier(cb);
        o0 += w.rows;
      }
      // dW[o0:o1, :] (+)= dout[:, o0:o1]^T inp, one accumulator buffer per window of rows.
      for (size_t j = 0; j * acc_rows_ < OC; ++j) {
        const size_t o0 = j * acc_rows_, m = std::min(acc_rows_, OC - o0);
        const GemmPush pc{uint32_t(m),
                          uint32_t(C),
                          uint32_t(rows),
                          uint32_t(o0),
                          1,
                          uint32_t(OC),
                          0,
                          uint32_t(C),
                          1,
                          0,
                          uint32_t(C),
                          0,
                          i > 0 ? kGemmAccumulate : 0u};
        dispatch_gemm(kernels_, cb, d_b, x_b, {acc_[j].buffer, 0, m * C * F}, d_b, pc);
      }
      if (dbias) {
        const ColsumPush pc{uint32_t(rows), uint32_t(OC), uint32_t(OC), 0, i > 0 ? 1u : 0u};
        kernels_.dispatch(cb, Kernel::kColsum, {d_b, {acc_bias_.buffer, 0, OC * F}}, &pc, sizeof pc,
                          groups(OC, 64), 1, 1);
      }
    };
  });
  // dweight += the accumulators, dbias += its sums: downloaded in slot-sized parts, added on the
  // host in fp32.
  struct Part {
    VkBuffer src;
    size_t off;  // bytes into src
    float* host;
    size_t bytes;
  };
  std::vector<Part> parts;
  const size_t part = stream_.capacity() / kAlign * kAlign;
  for (size_t j = 0; j * acc_rows_ < OC; ++j) {
    const size_t bytes = std::min(acc_rows_, OC - j * acc_rows_) * C * F;
    for (size_t o = 0; o < bytes; o += part) {
      parts.push_back(
          {acc_[j].buffer, o, dweight + j * acc_rows_ * C + o / F, std::min(part, bytes - o)});
    }
  }
  if (dbias) parts.push_back({acc_bias_.buffer, 0, dbias, OC * F});
  stream_.run(parts.size(), [&](size_t i, Chunk& c) {
    c.downloads.push_back({parts[i].host, parts[i].bytes, parts[i].src, parts[i].off, true});
  });
}

void Engine::attention_forward(float* out, float* att, const float* qkv, int B_, int T_, int C_,
                               int NH_) {
  const size_t B = size_t(B_), T = size_t(T_), C = size_t(C_), NH = size_t(NH_);
  if (B == 0 || T == 0) return;
  kernels_.reset_sets();
  const size_t in = T * 3 * C * F, y = T * C * F, a = NH * T * T * F;
  const size_t nb = plan_units(B, in, align_up(y) + a, 1);
  const size_t hs = C / NH;
  const AttentionPush pc{
      uint32_t(T), uint32_t(C), uint32_t(NH), uint32_t(hs), 1.0f / std::sqrt(float(hs)), 0};
  stream_.run((B + nb - 1) / nb, [&](size_t i, Chunk& c) {
    const size_t b0 = i * nb, n = std::min(nb, B - b0);
    const size_t att_off = align_up(n * y);
    c.uploads.push_back({qkv + b0 * T * 3 * C, n * in, VK_NULL_HANDLE, 0});
    c.downloads.push_back({out + b0 * T * C, n * y, VK_NULL_HANDLE, 0, false});
    c.downloads.push_back({att + b0 * NH * T * T, n * a, VK_NULL_HANDLE, att_off, false});
    c.compute = [&, n, att_off](VkCommandBuffer cb, const SlotBuffers& s) {
      kernels_.dispatch(cb, Kernel::kAttentionForward,
                        {{s.in, 0, n * in}, {s.out, 0, n * y}, {s.out, att_off, n * a}}, &pc, 20,
                        uint32_t(T), uint32_t(NH), uint32_t(n));
    };
  });
}

void Engine::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                                int B_, int T_, int C_, int NH_) {
  const size_t B = size_t(B_), T = size_t(T_), C = size_t(C_), NH = size_t(NH_);
  if (B == 0 || T == 0) return;
  kernels_.reset_sets();
  const size_t dy = T * C * F, x = T * 3 * C * F, a = NH * T * T * F;
  // In slot: dout, qkv, att; out slot: dqkv, then the ds scratch (never downloaded).
  const size_t nb = plan_units(B, align_up(dy) + align_up(x) + a, align_up(x) + a, 1);
  const size_t hs = C / NH;
  stream_.run((B + nb - 1) / nb, [&](size_t i, Chunk& c) {
    const size_t b0 = i * nb, n = std::min(nb, B - b0);
    const size_t qkv_off = align_up(n * dy), att_off = qkv_off + align_up(n * x);
    const size_t ds_off = align_up(n * x);
    c.uploads.push_back({dout + b0 * T * C, n * dy, VK_NULL_HANDLE, 0});
    c.uploads.push_back({qkv + b0 * T * 3 * C, n * x, VK_NULL_HANDLE, qkv_off});
    c.uploads.push_back({att + b0 * NH * T * T, n * a, VK_NULL_HANDLE, att_off});
    c.downloads.push_back({dqkv + b0 * T * 3 * C, n * x, VK_NULL_HANDLE, 0, false});
    c.compute = [&, n, qkv_off, att_off, ds_off](VkCommandBuffer cb, const SlotBuffers& s) {
      for (uint32_t pass = 0; pass < 2; ++pass) {
        const AttentionPush pc{
            uint32_t(T), uint32_t(C), uint32_t(NH), uint32_t(hs), 1.0f / std::sqrt(float(hs)),
            pass};
        kernels_.dispatch(cb, Kernel::kAttentionBackward,
                          {{s.in, 0, n * dy},
                           {s.in, qkv_off, n * x},
                           {s.in, att_off, n * a},
                           {s.out, 0, n * x},
                           {s.out, ds_off, n * a}},
                          &pc, sizeof pc, uint32_t(T), uint32_t(NH), uint32_t(n));
        Stream::compute_barrier(cb);
      }
    };
  });
}

}  // namespace llmcpu::vk
