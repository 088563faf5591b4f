// The device's part of the model: its memory plan, its buffers, and the set-up, state and optimizer
// paths (the passes are passes.cpp). See model.h.
#include "plugins/vulkan/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace llmcpu::vk {
namespace {

constexpr size_t F = sizeof(float);
constexpr size_t kStagingBytes = 4u << 20;  // set-up and checkpoint copies only
constexpr size_t kLogitsBytes = 64u << 20;  // the head's logits at most, as the CPU's chunk

// The sizes of every buffer a desc needs, in floats (int32 counts as one), in one place for the
// plan and the allocation.
struct Sizes {
  size_t BT, rows;  // rows: of one chunk (nb * T)
  int nb, chunks;
  size_t block_params;     // per owned block
  size_t act;              // bytes of an activation a GEMM reads: 4, or 2 in bf16
  size_t block_act_bytes;  // per owned block, without attention
  size_t att_chunk;        // one chunk's attention state: lse (nb, NH, T), or (nb, NH, T, T)
  size_t wte_rows_per_piece, wte_pieces;
  size_t other_params;  // wpe | lnfw | lnfb
  size_t head_rows;
  size_t scratch;  // the backward's, one chunk
  size_t slot;     // bytes of one stream slot buffer
};

Sizes sizes_of(const llmcpu_model_desc& d, size_t max_binding) {
  Sizes s{};
  const size_t C = size_t(d.channels), T = size_t(d.seq_len), NH = size_t(d.num_heads);
  const size_t Vp = size_t(d.padded_vocab_size);
  s.BT = size_t(d.batch) * T;
  s.nb = chunk_batch(d.batch);
  s.chunks = (d.batch + s.nb - 1) / s.nb;
  s.rows = size_t(s.nb) * T;
  s.block_params = BlockLayout(C).total;
  s.act = d.precision == LLMCPU_PRECISION_BF16 ? 2 : F;
  // fp32: residual2, residual3, the two layernorms' statistics; GEMM inputs: ln1, qkv, atty, ln2,
  // fch, fch_gelu (14 C per token).
  s.block_act_bytes = (2 * s.BT * C + 4 * s.BT) * F + 14 * s.BT * C * s.act;
  s.att_chunk = size_t(s.nb) * NH * T * (flash_head(d) ? 1 : T);
  s.wte_rows_per_piece = wte_rows_per_piece(C, max_binding);
  s.wte_pieces = (Vp + s.wte_rows_per_piece - 1) / s.wte_rows_per_piece;
  s.other_params = size_t(d.max_seq_len) * C + 2 * C;
  s.head_rows = head_rows(Vp, s.rows, max_binding);
  s.scratch = 10 * s.rows * C + (flash_head(d) ? 0 : s.att_chunk);  // + the scores' gradient
  const size_t up = std::max(s.rows * C, 2 * s.rows) * F, down = std::max(s.rows * C, s.rows) * F;
  s.slot = std::max(up, down);
  return s;
}

}  // namespace

BlockLayout::BlockLayout(size_t C) {
  size_t at = 0;
  auto next = [&](size_t n) {
    const size_t o = at;
    at += n;
    return o;
  };
  ln1w = next(C), ln1b = next(C), qkvw = next(3 * C * C), qkvb = next(3 * C);
  attprojw = next(C * C), attprojb = next(C), ln2w = next(C), ln2b = next(C);
  fcw = next(4 * C * C), fcb = next(4 * C), fcprojw = next(4 * C * C), fcprojb = next(C);
  total = at;
}

int chunk_batch(int B) { return (B + 3) / 4; }

size_t wte_rows_per_piece(size_t C, size_t max_binding) {
  return std::max<size_t>(1, max_binding / (C * F));
}

size_t head_rows(size_t Vp, size_t chunk_rows, size_t max_binding) {
  const size_t rows = std::max<size_t>(1, std::min(kLogitsBytes, max_binding) / (Vp * F));
  return std::min(rows, chunk_rows);
}

bool flash_head(const llmcpu_model_desc& d) { return d.channels / d.num_heads <= 128; }

Footprint footprint(const llmcpu_model_desc& d, size_t max_binding) {
  const Sizes s = sizes_of(d, max_binding);
  const size_t blocks = size_t(d.num_layers - d.first_layer);
  const bool embedding = d.flags & LLMCPU_OFFLOAD_EMBEDDING, head = d.flags & LLMCPU_OFFLOAD_HEAD;
  const size_t C = size_t(d.channels), Vp = size_t(d.padded_vocab_size);
  Footprint f;
  size_t params = blocks * s.block_params;
  if (embedding || head) params += Vp * C + s.other_params;
  const bool bf16 = d.precision == LLMCPU_PRECISION_BF16;
  f.weights = 4 * params * F + (bf16 ? params * 2 : 0);  // + the bf16 working copy
  const size_t att =  // all chunks' attention state
      size_t(d.batch) * d.num_heads * size_t(d.seq_len) * (flash_head(d) ? 1 : d.seq_len);
  size_t acts = blocks * (s.block_act_bytes + att * F) + s.BT * C * F;  // + x_in
  if (embedding) acts += s.BT * F;                                                       // tokens
  if (head) {  // targets, lnf, dlnf, lnf's statistics, losses, lse, logits
    acts += s.BT * C * s.act + (s.BT + s.BT * C + 4 * s.BT + s.head_rows * Vp) * F;
  }
  acts += s.scratch * F;
  f.activations = acts;
  const size_t largest_group = std::max({s.block_params, s.wte_rows_per_piece * C, s.other_params});
  // The stream's slots: four buffers each, at least its initial 4 MiB (stream.cpp), 256-aligned.
  const size_t slot = (std::max<size_t>(s.slot, 4u << 20) + 255) / 256 * 256;
  f.other = kStagingBytes + 4 * size_t(kSlots) * slot +
            BlockOps::sum_squares_blocks(uint32_t(largest_group)) * F;
  return f;
}

std::string buffer_over_binding(const llmcpu_model_desc& d, size_t max_binding) {
  const Sizes s = sizes_of(d, max_binding);
  const size_t C = size_t(d.channels);
  struct Need {
    const char* what;
    size_t bytes;
  };
  // The largest buffers that grow with the shape: per chunk (fch and the backward's dfch, the
  // attention matrices), per block (its parameters), and per micro-batch (the head's lnf, dlnf).
  const Need needs[] = {
      {"one chunk's fc activations", 4 * s.rows * C * F},
      {"one chunk's attention state", s.att_chunk * F},
      {"one block's parameters", s.block_params * F},
      {"the micro-batch's final layernorm", s.BT * C * F},
  };
  for (const Need& n : needs) {
    if (n.bytes > max_binding) {
      return std::string(n.what) + " (" + std::to_string(n.bytes) +
             " bytes) exceed maxStorageBufferRange (" + std::to_string(max_binding) +
             " bytes): a smaller --batch (with the same --total-batch) or --seq-len fits";
    }
  }
  return "";
}

llmcpu_memory_plan memory_plan(const llmcpu_model_desc& d, size_t max_binding, uint64_t available) {
  llmcpu_memory_plan p{};
  p.struct_size = sizeof p;
  const Footprint f = footprint(d, max_binding);
  p.weight_bytes = f.weights, p.activation_bytes = f.activations, p.other_bytes = f.other;
  p.total_bytes = f.total();
  p.available_bytes = available;
  p.fits = p.total_bytes <= available;
  llmcpu_model_desc all = d;
  all.first_layer = 0;
  all.flags = LLMCPU_OFFLOAD_EMBEDDING | LLMCPU_OFFLOAD_HEAD;
  p.all_fits = footprint(all, max_binding).total() <= available;
  p.max_layers = 0;
  for (int n = d.num_layers; n >= 1; --n) {
    llmcpu_model_desc blocks = d;
    blocks.first_layer = d.num_layers - n;
    blocks.flags = 0;
    if (footprint(blocks, max_binding).total() <= available) {
      p.max_layers = n;
      break;
    }
  }
  return p;
}

Buffer DeviceModel::make(size_t bytes, const char* what, MemoryKind kind) {
  if (kind == MemoryKind::kDevice && bytes > dev_.max_binding_bytes()) {
    throw VulkanError(std::string(what) + " needs one buffer of " + std::to_string(bytes) +
                      " bytes, more than maxStorageBufferRange (" +
                      std::to_string(dev_.max_binding_bytes()) + " bytes) of " + dev_.name() +
                      "; a smaller --batch or --seq-len fits");
  }
  return dev_.create_buffer(std::max<size_t>(bytes, 16), kind);
}

DeviceModel::Group& DeviceModel::add_group(size_t floats) {
  Group& g = groups_.emplace_back();
  g.floats = floats;
  g.p = make(floats * F, "a parameter group");
  g.g = make(floats * F, "a gradient group");
  g.m = make(floats * F, "a moment group");
  g.v = make(floats * F, "a moment group");
  if (bf16_) g.c = make(floats * 2, "a bf16 weight copy");
  return g;
}

DeviceModel::DeviceModel(Device& dev, Kernels& kernels, Stream& stream,
                         const llmcpu_model_desc& desc)
    : dev_(dev),
      kernels_(kernels),
      ops_(kernels),
      stream_(stream),
      d_(desc),
      L_(desc.num_layers),
      C_(desc.channels),
      NH_(desc.num_heads),
      V_(desc.vocab_size),
      Vp_(desc.padded_vocab_size),
      B_(desc.batch),
      T_(desc.seq_len),
      first_(desc.first_layer),
      embedding_(desc.flags & LLMCPU_OFFLOAD_EMBEDDING),
      head_(desc.flags & LLMCPU_OFFLOAD_HEAD),
      bf16_(desc.precision == LLMCPU_PRECISION_BF16),
      flash_(flash_head(desc)),
      bl_(size_t(desc.channels)) {
  const Sizes s = sizes_of(d_, dev_.max_binding_bytes());
  nb_ = s.nb, chunks_ = s.chunks, head_rows_ = s.head_rows;
  if (bf16_ && !dev_.bf16_storage()) {
    throw VulkanError(std::string(dev_.name()) +
                      " has no 16-bit storage buffers "
                      "(storageBuffer16BitAccess): bf16 cannot run on it, fp32 can");
  }
  groups_.reserve(size_t(L_ - first_) + s.wte_pieces + 1);
  try {
    make_block_groups();
    if (embedding_ || head_) make_embedding_groups(s.wte_rows_per_piece, s.other_params);
    make_kept_activations(s.act);
    make_scratch(s.att_chunk);
    stream_.reserve(s.slot);
    make_commands();
    zero_grad();
    one_shot([&](VkCommandBuffer cb) {
      for (Group& g : groups_) {
        vkCmdFillBuffer(cb, g.m.buffer, 0, VK_WHOLE_SIZE, 0);
        vkCmdFillBuffer(cb, g.v.buffer, 0, VK_WHOLE_SIZE, 0);
      }
    });
  } catch (...) {
    release();
    throw;
  }
}

// Parameters, in groups whose segments map the host's flat arrays: one group per owned block.
void DeviceModel::make_block_groups() {
  const size_t C = size_t(C_);
  for (int l = first_; l < L_; ++l) {
    block_group_.push_back(groups_.size());
    Group& g = add_group(bl_.total);
    const size_t per[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    size_t dev_at = 0;
    for (int i = 0; i < 12; ++i) {
      g.segments.push_back({size_t(d_.tensor_offset[2 + i]) + size_t(l) * per[i], per[i], dev_at});
      dev_at += per[i];
    }
  }
}

// wte in pieces of rows_per_piece rows, then wpe | lnfw | lnfb (other_params floats).
void DeviceModel::make_embedding_groups(size_t rows_per_piece, size_t other_params) {
  const size_t C = size_t(C_);
  wte_first_group_ = groups_.size();
  wte_rows_per_piece_ = rows_per_piece;
  for (size_t r = 0; r < size_t(Vp_); r += wte_rows_per_piece_) {
    const size_t n = std::min(wte_rows_per_piece_, size_t(Vp_) - r) * C;
    Group& g = add_group(n);
    g.segments.push_back({size_t(d_.tensor_offset[0]) + r * C, n, 0});
  }
  other_group_ = groups_.size();
  Group& g = add_group(other_params);
  wpe_off_ = 0, lnfw_off_ = size_t(d_.max_seq_len) * C, lnfb_off_ = lnfw_off_ + C;
  g.segments.push_back({size_t(d_.tensor_offset[1]), lnfw_off_, wpe_off_});
  g.segments.push_back({size_t(d_.tensor_offset[14]), C, lnfw_off_});
  g.segments.push_back({size_t(d_.tensor_offset[15]), C, lnfb_off_});
}

// Activations kept from forward to backward (A: bytes of an element a GEMM reads), per chunk of nb
// batch elements (the last may have fewer): what a pass addresses at once. Then the embedding's
// tokens and the head's buffers, for the whole micro-batch.
void DeviceModel::make_kept_activations(size_t A) {
  const size_t C = size_t(C_), NH = size_t(NH_), Tt = size_t(T_), BT = size_t(B_) * Tt;
  auto chunk_rows = [&](int c) { return size_t(std::min(nb_, B_ - c * nb_)) * Tt; };
  for (int c = 0; c < chunks_; ++c)
    x_in_.push_back(make(chunk_rows(c) * C * F, "the blocks' input"));
  for (int l = first_; l < L_; ++l) {
    std::vector<ChunkActs>& block = acts_.emplace_back();
    for (int c = 0; c < chunks_; ++c) {
      const size_t R = chunk_rows(c), nb = R / Tt;
      ChunkActs& a = block.emplace_back();
      a.ln1 = make(R * C * A, "ln1");
      a.ln1_mean = make(R * F, "ln1 mean");
      a.ln1_rstd = make(R * F, "ln1 rstd");
      a.qkv = make(3 * R * C * A, "qkv");
      a.atty = make(R * C * A, "atty");
      if (flash_) {
        a.lse = make(nb * NH * Tt * F, "attention's log-sum-exp");
      } else {
        a.att = make(nb * NH * Tt * Tt * F, "attention");
      }
      a.residual2 = make(R * C * F, "residual2");
      a.ln2 = make(R * C * A, "ln2");
      a.ln2_mean = make(R * F, "ln2 mean");
      a.ln2_rstd = make(R * F, "ln2 rstd");
      a.fch = make(4 * R * C * A, "fch");
      a.fch_gelu = make(4 * R * C * A, "fch_gelu");
      a.residual3 = make(R * C * F, "residual3");
    }
  }
  if (embedding_) tokens_ = make(BT * F, "tokens");
  if (head_) {
    targets_ = make(BT * F, "targets");
    lnf_ = make(BT * C * A, "lnf");
    lnf_mean_ = make(BT * F, "lnf mean");
    lnf_rstd_ = make(BT * F, "lnf rstd");
    dlnf_ = make(BT * C * F, "dlnf");
    losses_ = make(BT * F, "losses");
    lse_ = make(BT * F, "lse");
    logits_ = make(head_rows_ * size_t(Vp_) * F, "logits");
  }
}

// The backward's scratch for one chunk (att_chunk: floats of its attention state), the partial
// sums of the gradient norm, and the staging buffer of the synchronous copies.
void DeviceModel::make_scratch(size_t att_chunk) {
  const size_t C = size_t(C_), rows = size_t(nb_) * size_t(T_);
  dres_ = make(rows * C * F, "dresidual");
  dln_ = make(rows * C * F, "dln");
  dfch_ = make(4 * rows * C * F, "dfch");
  datty_ = make(rows * C * F, "datty");
  dqkv_ = make(3 * rows * C * F, "dqkv");
  if (!flash_) ds_ = make(att_chunk * F, "dscores");
  size_t largest = 0;
  for (const Group& g : groups_) largest = std::max(largest, g.floats);
  partials_ = make(BlockOps::sum_squares_blocks(uint32_t(largest)) * F, "partial sums",
                   MemoryKind::kDevice);
  staging_ = make(kStagingBytes, "staging", MemoryKind::kDownload);
}

// The command pool, buffer and fence of the synchronous set-up and checkpoint paths.
void DeviceModel::make_commands() {
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = dev_.compute_family();
  LLMCPU_VK(vkCreateCommandPool(dev_.device(), &pci, nullptr, &pool_));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  LLMCPU_VK(vkAllocateCommandBuffers(dev_.device(), &ai, &cb_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  LLMCPU_VK(vkCreateFence(dev_.device(), &fci, nullptr, &fence_));
}

DeviceModel::~DeviceModel() { release(); }

void DeviceModel::release() {
  vkDeviceWaitIdle(dev_.device());
  for (Group& g : groups_) {
    for (Buffer* b : {&g.p, &g.g, &g.m, &g.v, &g.c}) dev_.destroy(*b);
  }
  groups_.clear();
  for (std::vector<ChunkActs>& block : acts_) {
    for (ChunkActs& a : block) {
      for (Buffer* b : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.lse, &a.att, &a.residual2,
                        &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fch, &a.fch_gelu, &a.residual3}) {
        dev_.destroy(*b);
      }
    }
  }
  acts_.clear();
  for (Buffer& b : x_in_) dev_.destroy(b);
  x_in_.clear();
  for (Buffer* b :
       {&tokens_, &targets_, &lnf_, &lnf_mean_, &lnf_rstd_, &dlnf_, &losses_, &lse_,
        &logits_, &dres_, &dln_, &dfch_, &datty_, &dqkv_, &ds_, &partials_, &staging_}) {
    dev_.destroy(*b);
  }
  if (fence_) vkDestroyFence(dev_.device(), fence_, nullptr);
  if (pool_) vkDestroyCommandPool(dev_.device(), pool_, nullptr);
  fence_ = VK_NULL_HANDLE, pool_ = VK_NULL_HANDLE, cb_ = VK_NULL_HANDLE;
}

template <typename Fn>
void DeviceModel::one_shot(Fn&& record) {
  LLMCPU_VK(vkResetCommandBuffer(cb_, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  LLMCPU_VK(vkBeginCommandBuffer(cb_, &bi));
  Stream::compute_barrier(cb_);  // after every earlier submission's writes
  record(cb_);
  // The host reads what the commands wrote (downloads into the staging buffer).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  LLMCPU_VK(vkEndCommandBuffer(cb_));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb_;
  LLMCPU_VK(vkResetFences(dev_.device(), 1, &fence_));
  LLMCPU_VK(vkQueueSubmit(dev_.compute_queue(), 1, &si, fence_));
  LLMCPU_VK(vkWaitForFences(dev_.device(), 1, &fence_, VK_TRUE, UINT64_MAX));
}

void DeviceModel::copy_to_device(const Buffer& dst, size_t dst_off, const float* host,
                                 size_t bytes) {
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    std::memcpy(staging_.mapped, reinterpret_cast<const char*>(host) + done, n);
    one_shot([&](VkCommandBuffer cb) {
      const VkBufferCopy region{0, dst_off + done, n};
      vkCmdCopyBuffer(cb, staging_.buffer, dst.buffer, 1, &region);
    });
  }
}

void DeviceModel::copy_to_host(float* host, const Buffer& src, size_t src_off, size_t bytes) {
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    one_shot([&](VkCommandBuffer cb) {
      const VkBufferCopy region{src_off + done, 0, n};
      vkCmdCopyBuffer(cb, src.buffer, staging_.buffer, 1, &region);
    });
    std::memcpy(reinterpret_cast<char*>(host) + done, staging_.mapped, n);
  }
}

void DeviceModel::upload_state(const float* params, const float* m, const float* v) {
  for (Group& g : groups_) {
    for (const Segment& s : g.segments) {
      if (params) copy_to_device(g.p, s.dev * F, params + s.host, s.count * F);
      if (m) copy_to_device(g.m, s.dev * F, m + s.host, s.count * F);
      if (v) copy_to_device(g.v, s.dev * F, v + s.host, s.count * F);
    }
  }
  if (params) refresh_copies();
}

void DeviceModel::refresh_copies() {
  if (!bf16_) return;
  one_shot([&](VkCommandBuffer cb) {
    for (Group& g : groups_) ops_.to_bf16(cb, ref(g.c), ref(g.p), uint32_t(g.floats));
  });
}

void DeviceModel::download_state(float* params, float* grads, float* m, float* v) {
  for (Group& g : groups_) {
    for (const Segment& s : g.segments) {
      if (params) copy_to_host(params + s.host, g.p, s.dev * F, s.count * F);
      if (grads) copy_to_host(grads + s.host, g.g, s.dev * F, s.count * F);
      if (m) copy_to_host(m + s.host, g.m, s.dev * F, s.count * F);
      if (v) copy_to_host(v + s.host, g.v, s.dev * F, s.count * F);
    }
  }
}

void DeviceModel::zero_grad() {
  one_shot([&](VkCommandBuffer cb) {
    for (Group& g : groups_) vkCmdFillBuffer(cb, g.g.buffer, 0, VK_WHOLE_SIZE, 0);
  });
}

double DeviceModel::grad_sum_squares() {
  double total = 0;
  std::vector<float> partial;
  for (Group& g : groups_) {
    const uint32_t n = BlockOps::sum_squares_blocks(uint32_t(g.floats));
    one_shot([&](VkCommandBuffer cb) {
      ops_.sum_squares(cb, ref(partials_), ref(g.g), uint32_t(g.floats));
      Stream::compute_barrier(cb);
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           0, 1, &mb, 0, nullptr, 0, nullptr);
      const VkBufferCopy region{0, 0, n * F};
      vkCmdCopyBuffer(cb, partials_.buffer, staging_.buffer, 1, &region);
    });
    partial.resize(n);
    std::memcpy(partial.data(), staging_.mapped, n * F);
    for (float x : partial) total += double(x);
  }
  return total;
}

void DeviceModel::adamw(const llmcpu_adamw_args& a) {
  // The constants as simd/scalar/adamw.h computes them (float), so each element's update is the
  // CPU's.
  AdamWConstants k;
  k.decay = float(1.0 - a.lr * a.weight_decay);
  k.beta1 = float(a.beta1), k.beta2 = float(a.beta2);
  k.step_size = float(a.lr / (1.0 - std::pow(a.beta1, double(a.t))));
  k.bc2_sqrt = float(std::sqrt(1.0 - std::pow(a.beta2, double(a.t))));
  k.eps = float(a.eps);
  k.grad_scale = a.grad_scale;
  one_shot([&](VkCommandBuffer cb) {
    for (Group& g : groups_) {
      ops_.adamw(cb, ref(g.p), ref(g.m), ref(g.v), ref(g.g), uint32_t(g.floats), k);
    }
  });
  refresh_copies();  // bf16: the copy of what changed, as the CPU's adamw_update writes it
}

}  // namespace llmcpu::vk
