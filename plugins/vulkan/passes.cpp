// The device's forward and backward passes over its blocks (and with "all" the embedding and the
// head), as core/model/transformer.h writes them for the CPU, chunk by chunk of batch elements
// through the copy-compute pipeline. See model.h.
#include <cmath>
#include <cstring>

#include "plugins/vulkan/model.h"

namespace llmcpu::vk {
namespace {

constexpr size_t F = sizeof(float);

// Orders a transfer (vkCmdCopyBuffer, vkCmdFillBuffer) before the compute that follows, and the
// other way round.
void transfer_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

}  // namespace

const Buffer& DeviceModel::block_input(int l, int chunk) const {
  return l == first_ ? x_in_[size_t(chunk)]
                     : acts_[size_t(l - 1 - first_)][size_t(chunk)].residual3;
}

// One block over one chunk of nb batch elements (transformer.h's block_forward). In bf16 the GEMMs
// read the bf16 copy of the weights and bf16 inputs; qkv and fch come out in fp32 into the
// backward's dfch scratch (idle during the forward pass) and are rounded into their bf16 buffers,
// as the CPU's Bf16Executor does.
void DeviceModel::record_block_forward(VkCommandBuffer cb, int l, int nb, int chunk) {
  const ChunkActs& a = acts_[size_t(l - first_)][size_t(chunk)];
  const Group& w = groups_[block_group_[size_t(l - first_)]];
  const uint32_t C = uint32_t(C_), n = uint32_t(size_t(nb) * T_);
  const size_t r0 = 0, rc = 0;  // the chunk's own buffers
  auto P = [&](size_t off) { return ref(w.p, off); };
  const Buffer& in = block_input(l, chunk);
  // out (n, OC) = inp (n, K) . weight^T + bias; `stored` (bf16 only): out rounded into it.
  auto linear = [&](Ref out, Ref inp, size_t weight, size_t bias, uint32_t K, uint32_t OC,
                    const Ref* stored) {
    if (!bf16_) return ops_.matmul_forward(cb, out, inp, P(weight), P(bias), true, n, K, OC);
    ops_.matmul_forward_bf16(cb, stored ? ref(dfch_) : out, inp, ref(w.c, weight), P(bias), true, n,
                             K, OC);
    if (!stored) return;
    Stream::compute_barrier(cb);
    ops_.to_bf16(cb, *stored, ref(dfch_), n * OC);
  };
  auto layernorm = [&](Ref out, Ref mean, Ref rstd, Ref x, size_t weight, size_t bias) {
    if (bf16_) return ops_.layernorm_forward_bf16(cb, out, mean, rstd, x, P(weight), P(bias), n, C);
    ops_.layernorm_forward(cb, out, mean, rstd, x, P(weight), P(bias), n, C);
  };
  layernorm(ref(a.ln1, rc), ref(a.ln1_mean, r0), ref(a.ln1_rstd, r0), ref(in, rc), bl_.ln1w,
            bl_.ln1b);
  Stream::compute_barrier(cb);
  const Ref qkv = ref(a.qkv, 3 * rc);
  linear(qkv, ref(a.ln1, rc), bl_.qkvw, bl_.qkvb, C, 3 * C, bf16_ ? &qkv : nullptr);
  Stream::compute_barrier(cb);
  const uint32_t nbu = uint32_t(nb), Tu = uint32_t(T_), NH = uint32_t(NH_);
  if (flash_ && bf16_) {
    ops_.flash_attention_forward_bf16(cb, ref(a.atty, rc), ref(a.lse), qkv, nbu, Tu, C, NH);
  } else if (flash_) {
    ops_.flash_attention_forward(cb, ref(a.atty, rc), ref(a.lse), qkv, nbu, Tu, C, NH);
  } else if (bf16_) {
    ops_.attention_forward_bf16(cb, ref(a.atty, rc), ref(a.att), qkv, nbu, Tu, C, NH);
  } else {
    ops_.attention_forward(cb, ref(a.atty, rc), ref(a.att), qkv, nbu, Tu, C, NH);
  }
  Stream::compute_barrier(cb);
  linear(ref(a.residual2, rc), ref(a.atty, rc), bl_.attprojw, bl_.attprojb, C, C, nullptr);
  Stream::compute_barrier(cb);
  ops_.residual_forward(cb, ref(a.residual2, rc), ref(a.residual2, rc), ref(in, rc), n * C);
  Stream::compute_barrier(cb);
  layernorm(ref(a.ln2, rc), ref(a.ln2_mean, r0), ref(a.ln2_rstd, r0), ref(a.residual2, rc),
            bl_.ln2w, bl_.ln2b);
  Stream::compute_barrier(cb);
  const Ref fch = ref(a.fch, 4 * rc);
  linear(fch, ref(a.ln2, rc), bl_.fcw, bl_.fcb, C, 4 * C, bf16_ ? &fch : nullptr);
  Stream::compute_barrier(cb);
  if (bf16_) {
    ops_.gelu_forward_bf16(cb, ref(a.fch_gelu, 4 * rc), fch, 4 * n * C);
  } else {
    ops_.gelu_forward(cb, ref(a.fch_gelu, 4 * rc), fch, 4 * n * C);
  }
  Stream::compute_barrier(cb);
  linear(ref(a.residual3, rc), ref(a.fch_gelu, 4 * rc), bl_.fcprojw, bl_.fcprojb, 4 * C, C,
         nullptr);
  Stream::compute_barrier(cb);
  ops_.residual_forward(cb, ref(a.residual3, rc), ref(a.residual3, rc), ref(a.residual2, rc),
                        n * C);
  Stream::compute_barrier(cb);
}

// One block's backward over the chunk's rows; dres_ (the chunk's rows from 0) holds d(output) on
// entry and d(input) on return (transformer.h's block_backward). In bf16 the products take the
// fp32 gradient rounded to bf16 as they read it, the saved bf16 input and the bf16 weight.
void DeviceModel::record_block_backward(VkCommandBuffer cb, int l, int nb, int chunk) {
  const ChunkActs& a = acts_[size_t(l - first_)][size_t(chunk)];
  const Group& w = groups_[block_group_[size_t(l - first_)]];
  const uint32_t C = uint32_t(C_), n = uint32_t(size_t(nb) * T_);
  const size_t r0 = 0, rc = 0;  // the chunk's own buffers
  auto P = [&](size_t off) { return ref(w.p, off); };
  auto G = [&](size_t off) { return ref(w.g, off); };
  const Buffer& in = block_input(l, chunk);
  // dinp = dout . weight; dweight += dout^T inp; dbias += sums of dout.
  auto linear_backward = [&](Ref dinp, Ref dout, Ref inp, size_t weight, size_t bias, uint32_t K,
                             uint32_t OC) {
    if (bf16_) {
      ops_.matmul_backward_input_bf16(cb, dinp, dout, ref(w.c, weight), n, K, OC, false);
      ops_.matmul_backward_weight_bf16(cb, G(weight), G(bias), true, dout, inp, n, K, OC);
    } else {
      ops_.matmul_backward_input(cb, dinp, dout, P(weight), n, K, OC, false);
      ops_.matmul_backward_weight(cb, G(weight), G(bias), true, dout, inp, n, K, OC);
    }
  };
  linear_backward(ref(dfch_), ref(dres_), ref(a.fch_gelu, 4 * rc), bl_.fcprojw, bl_.fcprojb, 4 * C,
                  C);
  Stream::compute_barrier(cb);
  if (bf16_) {
    ops_.gelu_backward_bf16(cb, ref(dfch_), ref(a.fch, 4 * rc), ref(dfch_), 4 * n * C);
  } else {
    ops_.gelu_backward(cb, ref(dfch_), ref(a.fch, 4 * rc), ref(dfch_), 4 * n * C);
  }
  Stream::compute_barrier(cb);
  linear_backward(ref(dln_), ref(dfch_), ref(a.ln2, rc), bl_.fcw, bl_.fcb, C, 4 * C);
  Stream::compute_barrier(cb);
  ops_.layernorm_backward(cb, ref(dres_), G(bl_.ln2w), G(bl_.ln2b), ref(dln_), ref(a.residual2, rc),
                          P(bl_.ln2w), ref(a.ln2_mean, r0), ref(a.ln2_rstd, r0), n, C);
  Stream::compute_barrier(cb);
  linear_backward(ref(datty_), ref(dres_), ref(a.atty, rc), bl_.attprojw, bl_.attprojb, C, C);
  Stream::compute_barrier(cb);
  const uint32_t nbu = uint32_t(nb), Tu = uint32_t(T_), NH = uint32_t(NH_);
  const Ref qkv = ref(a.qkv, 3 * rc), atty = ref(a.atty, rc);
  if (flash_ && bf16_) {
    ops_.flash_attention_backward_bf16(cb, ref(dqkv_), ref(datty_), atty, qkv, ref(a.lse), nbu, Tu,
                                       C, NH);
  } else if (flash_) {
    ops_.flash_attention_backward(cb, ref(dqkv_), ref(datty_), atty, qkv, ref(a.lse), nbu, Tu, C,
                                  NH);
  } else if (bf16_) {
    ops_.attention_backward_bf16(cb, ref(dqkv_), ref(ds_), ref(datty_), qkv, ref(a.att), nbu, Tu, C,
                                 NH);
  } else {
    ops_.attention_backward(cb, ref(dqkv_), ref(ds_), ref(datty_), qkv, ref(a.att), nbu, Tu, C, NH);
  }
  Stream::compute_barrier(cb);
  linear_backward(ref(dln_), ref(dqkv_), ref(a.ln1, rc), bl_.qkvw, bl_.qkvb, C, 3 * C);
  Stream::compute_barrier(cb);
  ops_.layernorm_backward(cb, ref(dres_), G(bl_.ln1w), G(bl_.ln1b), ref(dln_), ref(in, rc),
                          P(bl_.ln1w), ref(a.ln1_mean, r0), ref(a.ln1_rstd, r0), n, C);
  Stream::compute_barrier(cb);
}

// The head over `rows` rows from r0 (Model::head on the CPU): lnf, then per sub-chunk of
// head_rows_ rows the logits against every wte piece, the losses, the requested logits (copied
// into `out` at row chunk_row0's place), and with a gradient dlogits, dlnf and dwte at once.
void DeviceModel::record_head(VkCommandBuffer cb, size_t r0, size_t rows,
                              const llmcpu_forward_args& a, VkBuffer out, int chunk) {
  const Buffer& last = acts_.back()[size_t(chunk)].residual3;
  const uint32_t C = uint32_t(C_), Vp = uint32_t(Vp_);
  const Group& other = groups_[other_group_];
  if (bf16_) {
    ops_.layernorm_forward_bf16(cb, ref(lnf_, r0 * C), ref(lnf_mean_, r0), ref(lnf_rstd_, r0),
                                ref(last), ref(other.p, lnfw_off_), ref(other.p, lnfb_off_),
                                uint32_t(rows), C);
  } else {
    ops_.layernorm_forward(cb, ref(lnf_, r0 * C), ref(lnf_mean_, r0), ref(lnf_rstd_, r0), ref(last),
                           ref(other.p, lnfw_off_), ref(other.p, lnfb_off_), uint32_t(rows), C);
  }
  using E = BlockOps::Elem;
  Stream::compute_barrier(cb);
  const bool grad = have_targets_ && !std::isnan(a.dloss);
  for (size_t s = 0; s < rows; s += head_rows_) {
    const size_t r = r0 + s;
    const uint32_t n = uint32_t(std::min(head_rows_, rows - s));
    for (size_t k = 0; wte_first_group_ + k < other_group_; ++k) {
      const Group& piece = groups_[wte_first_group_ + k];
      const uint32_t lo = uint32_t(k * wte_rows_per_piece_), cols = uint32_t(piece.floats / C);
      // logits[:, lo + j] = lnf_r . wte[lo + j]
      if (bf16_) {
        ops_.gemm_bf16(cb, ref(logits_, lo), ref(lnf_, r * C), E::kBf16, ref(piece.c), E::kBf16, n,
                       cols, C, C, 1, 1, C, Vp, 0);
      } else {
        ops_.gemm(cb, ref(logits_, lo), ref(lnf_, r * C), ref(piece.p), ref(piece.p), n, cols, C, C,
                  1, 1, C, Vp, 0);
      }
    }
    Stream::compute_barrier(cb);
    if (have_targets_) {
      ops_.softmax_xent_forward(cb, ref(losses_, r), ref(lse_, r), ref(logits_), ref(targets_, r),
                                n, uint32_t(V_), Vp);
    }
    if (a.logits_position == LLMCPU_LOGITS_ALL) {
      transfer_barrier(cb);
      const VkBufferCopy region{0, (r - r0) * Vp * F, size_t(n) * Vp * F};  // out: the chunk's
      vkCmdCopyBuffer(cb, logits_.buffer, out, 1, &region);
    } else if (a.logits_position >= 0) {
      transfer_barrier(cb);
      for (size_t i = 0; i < n; ++i) {
        if ((r + i) % size_t(T_) != size_t(a.logits_position)) continue;
        const size_t b = (r + i) / size_t(T_) - r0 / size_t(T_);
        const VkBufferCopy region{i * Vp * F, b * Vp * F, size_t(Vp) * F};
        vkCmdCopyBuffer(cb, logits_.buffer, out, 1, &region);
      }
    }
    transfer_barrier(cb);
    if (!grad) continue;
    ops_.softmax_xent_backward(cb, ref(logits_), ref(lse_, r), ref(targets_, r), a.dloss, n,
                               uint32_t(V_), Vp);
    Stream::compute_barrier(cb);
    for (size_t k = 0; wte_first_group_ + k < other_group_; ++k) {
      const Group& piece = groups_[wte_first_group_ + k];
      const uint32_t lo = uint32_t(k * wte_rows_per_piece_), cols = uint32_t(piece.floats / C);
      // dlnf_r (+)= dlogits[:, lo:] wte_piece;  dwte_piece += dlogits[:, lo:]^T lnf_r
      const uint32_t first_piece = k == 0 ? 0u : kGemmAccumulate;
      if (bf16_) {
        ops_.gemm_bf16(cb, ref(dlnf_, r * C), ref(logits_, lo), E::kF32AsBf16, ref(piece.c),
                       E::kBf16, n, C, cols, Vp, 1, C, 1, C, first_piece);
        ops_.gemm_bf16(cb, ref(piece.g), ref(logits_, lo), E::kF32AsBf16, ref(lnf_, r * C),
                       E::kBf16, cols, C, n, 1, Vp, C, 1, C, kGemmAccumulate);
      } else {
        ops_.gemm(cb, ref(dlnf_, r * C), ref(logits_, lo), ref(piece.p), ref(piece.p), n, C, cols,
                  Vp, 1, C, 1, C, first_piece);
        ops_.gemm(cb, ref(piece.g), ref(logits_, lo), ref(lnf_, r * C), ref(lnf_), cols, C, n, 1,
                  Vp, C, 1, C, kGemmAccumulate);
      }
      Stream::compute_barrier(cb);  // the next piece accumulates into dlnf
    }
  }
}

void DeviceModel::forward(const llmcpu_forward_args& a) {
  const size_t C = size_t(C_);
  if (embedding_ && !a.inputs)
    throw VulkanError("forward: the device owns the embedding, no inputs");
  if (!embedding_ && !a.residual_in)
    throw VulkanError("forward: no residual_in for block " + std::to_string(first_));
  if (!head_ && !a.residual_out) throw VulkanError("forward: no residual_out for the CPU's head");
  if (head_ && a.targets && !a.losses) throw VulkanError("forward: targets without losses");
  if (head_ && a.logits_position != LLMCPU_LOGITS_NONE && !a.logits) {
    throw VulkanError("forward: logits_position without a logits array");
  }
  if (head_ && a.logits_position >= T_) throw VulkanError("forward: logits_position past T");
  have_targets_ = head_ && a.targets;
  have_grad_ = head_ ? (have_targets_ && !std::isnan(a.dloss)) : true;
  const size_t Vp = size_t(Vp_);
  if (head_ && a.logits_position == LLMCPU_LOGITS_ALL) stream_.reserve(size_t(nb_) * T_ * Vp * F);
  if (head_ && a.logits_position >= 0) stream_.reserve(size_t(nb_) * Vp * F);
  kernels_.reset_sets();
  stream_.run(size_t(chunks_), [&](size_t i, Chunk& c) {
    const int b0 = int(i) * nb_, nb = std::min(nb_, B_ - b0);
    const size_t r0 = size_t(b0) * T_, rows = size_t(nb) * T_;
    if (embedding_)
      c.uploads.push_back({a.inputs + r0, rows * 4, tokens_.buffer, r0 * 4});
    else
      c.uploads.push_back({a.residual_in + r0 * C, rows * C * F, x_in_[i].buffer, 0});
    if (have_targets_) c.uploads.push_back({a.targets + r0, rows * 4, targets_.buffer, r0 * 4});
    c.compute = [this, &a, i, nb, r0, rows](VkCommandBuffer cb, const SlotBuffers& slot) {
      if (embedding_) {
        for (size_t k = 0; wte_first_group_ + k < other_group_; ++k) {
          const Group& piece = groups_[wte_first_group_ + k];
          const uint32_t lo = uint32_t(k * wte_rows_per_piece_);
          ops_.encoder_forward(cb, ref(x_in_[i]), ref(tokens_, r0), ref(piece.p),
                               ref(groups_[other_group_].p, wpe_off_), uint32_t(rows), uint32_t(T_),
                               uint32_t(C_), lo, lo + uint32_t(piece.floats / C_));
        }
        Stream::compute_barrier(cb);
      }
      for (int l = first_; l < L_; ++l) record_block_forward(cb, l, nb, int(i));
      if (head_) record_head(cb, r0, rows, a, slot.out, int(i));
    };
    if (head_) {
      if (have_targets_)
        c.downloads.push_back({a.losses + r0, rows * F, losses_.buffer, r0 * F, false});
      if (a.logits_position == LLMCPU_LOGITS_ALL) {
        c.downloads.push_back({a.logits + r0 * Vp, rows * Vp * F, VK_NULL_HANDLE, 0, false});
      } else if (a.logits_position >= 0) {
        c.downloads.push_back(
            {a.logits + size_t(b0) * Vp, size_t(nb) * Vp * F, VK_NULL_HANDLE, 0, false});
      }
    } else {
      c.downloads.push_back(
          {a.residual_out + r0 * C, rows * C * F, acts_.back()[i].residual3.buffer, 0, false});
    }
  });
  schedule_ = "forward: " + stream_.last_order();
  ++passes_;
}

void DeviceModel::backward(const float* dresidual_top, float* dresidual_bottom) {
  if (!have_grad_) {
    throw VulkanError("backward: the last forward pass had no loss gradient (targets and dloss)");
  }
  if (!head_ && !dresidual_top) throw VulkanError("backward: no dresidual_top from the CPU's head");
  if (!embedding_ && !dresidual_bottom)
    throw VulkanError("backward: no dresidual_bottom for the CPU");
  const size_t C = size_t(C_);
  kernels_.reset_sets();
  stream_.run(size_t(chunks_), [&](size_t i, Chunk& c) {
    const int b0 = int(i) * nb_, nb = std::min(nb_, B_ - b0);
    const size_t r0 = size_t(b0) * T_, rows = size_t(nb) * T_;
    if (!head_) c.uploads.push_back({dresidual_top + r0 * C, rows * C * F, VK_NULL_HANDLE, 0});
    c.compute = [this, i, nb, r0, rows](VkCommandBuffer cb, const SlotBuffers& slot) {
      const uint32_t Cu = uint32_t(C_);
      if (head_) {  // d(last block's output) = lnf's backward of dlnf (final_layernorm_backward)
        vkCmdFillBuffer(cb, dres_.buffer, 0, rows * C_ * F, 0);
        transfer_barrier(cb);
        const Group& other = groups_[other_group_];
        ops_.layernorm_backward(cb, ref(dres_), ref(other.g, lnfw_off_), ref(other.g, lnfb_off_),
                                ref(dlnf_, r0 * C_), ref(acts_.back()[i].residual3),
                                ref(other.p, lnfw_off_), ref(lnf_mean_, r0), ref(lnf_rstd_, r0),
                                uint32_t(rows), Cu);
        Stream::compute_barrier(cb);
      } else {
        const VkBufferCopy region{0, 0, rows * C_ * F};
        vkCmdCopyBuffer(cb, slot.in, dres_.buffer, 1, &region);
        transfer_barrier(cb);
      }
      for (int l = L_ - 1; l >= first_; --l) record_block_backward(cb, l, nb, int(i));
      if (embedding_) {
        const Group& other = groups_[other_group_];
        for (size_t k = 0; wte_first_group_ + k < other_group_; ++k) {
          const Group& piece = groups_[wte_first_group_ + k];
          const uint32_t lo = uint32_t(k * wte_rows_per_piece_);
          ops_.encoder_backward(cb, ref(piece.g), ref(other.g, wpe_off_), k == 0, ref(dres_),
                                ref(tokens_, r0), uint32_t(rows), uint32_t(T_), Cu, lo,
                                lo + uint32_t(piece.floats / C_));
        }
        Stream::compute_barrier(cb);
      } else {
        const VkBufferCopy region{0, 0, rows * C_ * F};
        vkCmdCopyBuffer(cb, dres_.buffer, slot.out, 1, &region);
        transfer_barrier(cb);
      }
    };
    if (!embedding_) {
      c.downloads.push_back({dresidual_bottom + r0 * C, rows * C * F, VK_NULL_HANDLE, 0, false});
    }
  });
  schedule_ += "\nbackward: " + stream_.last_order();
  have_grad_ = false;
  ++passes_;
}

}  // namespace llmcpu::vk
