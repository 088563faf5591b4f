// A model of any family (core/model/config.h): parameters, gradients and activations, the
// executor that runs its ops, and the forward and backward passes with the loss. The computation
// itself is written once in core/model/transformer.h; the executors (core/model/executors.h) decide
// where and in what precision each op runs: fp32 on the CPU or bf16 mixed precision
// (Precision::kBf16). With a device attached (attach_device; core/plugin/offload.h attaches a
// plugin's) the device owns the last blocks, or all of the model, and runs them itself
// (core/model/block_device.h is all the model knows of it); the CPU keeps every op the device does
// not own, and only the residual stream at the boundary crosses. Deliberately not here: the
// optimizer (core/optim, and the device's AdamW is driven by core/train), files (core/io), data and
// the training loop, generation (core/model/generate.h).
//
// In bf16 the model keeps the fp32 master weights and gradients of the fp32 path; its executor
// keeps a bf16 working copy of the whole flat parameter array (only the matmul weights are read
// from it) and stores in bf16 the activations a GEMM reads or the backward recomputes (ln1, qkv,
// atty, ln2, fch, fch_gelu, lnf). The GEMMs and attention take bf16 operands and accumulate in
// fp32; layernorm statistics, attention's softmax and log-sum-exp, the residual stream, the logits
// and the loss stay fp32, and the encoder gathers rows of the fp32 master (exact).
// Backward, the matmuls take the fp32 dout (rounded to bf16 inside), the saved bf16 input and the
// bf16 weight, and give fp32 dinp, dweight and dbias; the other gradients are the fp32 kernels'.
//
// Copies of the weights (the bf16 copy, a device's) follow the master by themselves: a write
// through params_flat() or weights_for_update() marks them stale, and the next forward pass
// refreshes them. The other way round, a device that updated its own parameters (the trainer's
// device AdamW) is ahead of the master for its part until fetch_device_state() copies it back.
// Which copy is current is core/model/weight_copies.h's WeightCopies (its state table).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/model/activations.h"
#include "core/model/block_device.h"
#include "core/model/config.h"
#include "core/model/executors.h"
#include "core/model/lora_views.h"
#include "core/model/parameters.h"
#include "core/model/precision.h"
#include "core/model/quantized_base.h"
#include "core/model/weight_copies.h"
#include "core/util/aligned_buffer.h"
#include "simd/bf16.h"
#include "simd/kernels.h"

namespace llmcpu {

// Told during the backward pass as gradients become final: layer l (L-1 down to 0), then -1 for
// the rest (wte, wpe, lnfw, lnfb). The gradients told of are not written again in this pass.
class GradientHook {
 public:
  virtual ~GradientHook() = default;
  virtual void gradients_ready(int layer) = 0;
};

// What plan_batch lays out besides the shape.
struct BatchOptions {
  Recompute recompute = Recompute::kNone;  // what the backward pass recomputes (--recompute)
  bool keep_logits = false;                // logits() holds every row's after a forward pass
};

class Model {
 public:
  // Parameters start zeroed; load a checkpoint into params_flat() or call init_model(). A bf16
  // model uses `bf16_kernels` for its bf16 ops (null: active_bf16_kernels()). `kernels` run
  // everything else (and everything in fp32).
  // base_gradients false: a frozen base (LoRA): no gradient arena (grads_flat() is null), the
  // matmuls' backward gives their input's gradient alone, and the embedding's backward is skipped;
  // the norms' weight gradients go to a scratch nobody reads.
  explicit Model(const ModelConfig& config, const KernelTable& kernels = active_kernels(),
                 Precision precision = Precision::kFp32, const Bf16Kernels* bf16_kernels = nullptr,
                 bool base_gradients = true);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  size_t num_parameters() const { return layout_.total(); }
  const KernelTable& kernels() const { return kernels_; }  // the CPU's, also with a plugin
  Precision precision() const { return precision_; }
  const Bf16Kernels* bf16_kernels() const;  // null in fp32
  // "fp32, avx512+xsmm kernels", "bf16 (avx512bf16 GEMMs), avx512+xsmm kernels" or, offloading,
  // "fp32, avx512+xsmm+vulkan kernels".
  std::string kernels_summary() const;

  // The fp32 master weights. Writing through the non-const pointer marks the weights' copies (bf16,
  // device) stale; they are refreshed before the next forward pass.
  float* params_flat();
  const float* params_flat() const { return params_data_; }
  // The non-const pointer may be written through: the gradients are no longer known to be zero.
  float* grads_flat() {
    grads_zero_ = false;
    return grads_data_;
  }
  const float* grads_flat() const { return grads_data_; }
  const ParameterViews<float>& params() const { return p_; }
  // The views the passes compute with: params() but for the norm weights of a family whose norms
  // scale by (1 + w) (Gemma), which point at a copy holding w + 1, refreshed here from the
  // master (the gradients still go to w's).
  const ParameterViews<float>& compute_params() const;
  const ParameterViews<float>& grads() const { return g_; }

  // The bf16 working copy of all parameters (null in fp32), current as of the last refresh.
  const bf16* params_bf16_flat() const;
  // A bf16 model whose copy needs no refresh: it equals bf16(master) everywhere.
  bool bf16_copy_current() const { return copies_.bf16_current(); }
  void refresh_bf16_weights();
  // bf16 data parallelism (ZeRO-1): gives the memory of the fp32 master at `runs` (within the
  // layers' matmul weights, ParameterLayout::matmul_weight: the other ranks' parts) back to the
  // system, after bringing the bf16 copy up to date. The model computes with the copy of those
  // weights; whoever updates the master keeps the copy current (Bf16Kernels::adamw_update for the
  // parts it keeps, the others' parts arrive in bf16), because from now on the copy cannot be
  // rebuilt from the master: refresh_bf16_weights() throws, and so does the next forward pass
  // after a write through params_flat(). Generation reads the copy too.
  void release_master(const std::vector<ParameterSpan>& runs);
  bool master_released() const { return copies_.master_released(); }
  // Data parallelism on one machine (GradientSync::share_memory): from now on the model computes
  // with the fp32 weights at `params` and, in bf16, the copy at `copy`, and adds its gradients at
  // `grads`: memory laid out as params_flat(), owned and filled by the caller (weights shared by
  // the ranks of the machine, each of which updates its own parts). The model's own arrays are
  // freed. No one rank can rebuild a shared copy: refresh_bf16_weights() throws from now on, and
  // so does a forward pass after a write through params_flat().
  void use_shared_memory(float* params, float* grads, bf16* copy);
  size_t master_bytes() const;  // the fp32 master's memory still held
  // For an optimizer that updates the master weights and writes their bf16 copy in the same pass
  // (Bf16Kernels::adamw_update): the copy is taken as current afterwards, a device's copy as stale.
  // `copy` is null in fp32.
  struct UpdateSpans {
    float* master;
    bf16* copy;
  };
  UpdateSpans weights_for_update();

  // Whether `device` can run `layers` of this model at its precision and planned shape (or 1 x 1):
  // throws DeviceError with the device's reason when it cannot. Whether the plan fits is
  // attach_device's question.
  void check_device(BlockDevice& device, const OffloadLayers& layers) const;
  // Hands `layers` of the model to `device`, which keeps them (weights, gradients, activations,
  // and for a trainer the AdamW moments); the device is configured for the planned batch shape now
  // or at plan_batch (which refuses a new shape once the device's AdamW ran: configuring drops its
  // moments). A plan that does not fit the device throws UsageError (naming the most layers that
  // fit) and leaves the model on the CPU. `memory_limit`: plan against that many bytes of the
  // device (0: what it has). Replaces any device this model had.
  void attach_device(std::unique_ptr<BlockDevice> device, const OffloadLayers& layers,
                     size_t memory_limit);
  void disable_offload();
  // A device owns part of the model (a plugin with zero blocks counts as none).
  bool offload_active() const { return device_ != nullptr && layers_.any(); }
  const OffloadLayers& offload_layers() const { return layers_; }
  BlockDevice* offload_device() { return offload_active() ? device_.get() : nullptr; }
  // Whether the device owns element(s) of tensor `tensor` in layer `layer` (-1 outside layers).
  bool device_owns(int tensor, int layer) const;
  // The runs of the flat arena the device owns (none without one): what a CPU optimizer skips.
  std::vector<ParameterSpan> device_spans() const;
  // The device's figures since the last call; false without a plugin. Throws DeviceError if the
  // plugin fails.
  bool offload_report(llmcpu_offload_report* out);
  // Copies the device's part of the parameters and/or gradients into params_flat() and
  // grads_flat() (without marking anything stale). The trainer calls it before it writes or
  // samples; verify, before it compares gradients. No-op without a device.
  void fetch_device_state(bool params, bool grads);
  // The device updated its own parameters (its AdamW, after weights_for_update() gave the CPU's
  // optimizer the rest): the master lags for the device's part, and the device's copy is current.
  void device_parameters_changed() { copies_.device_trained(); }

  // LoRA adapters (core/model/lora_views.h) on the layers' matmuls from now on, forward and
  // backward (their gradients added into the modules' dA, dB), and the adapter's trained copies of
  // base tensors (lora.tensors) in place of the base's: memory the caller owns and keeps for as
  // long as they are attached. A bf16 model keeps a bf16 copy of each A and of a trained head,
  // rounded at each pass, and gathers a trained embedding's rows from its fp32 copy. Throws
  // UsageError with a device attached (the device's blocks have no adapters).
  void attach_lora(const LoraParams& lora);
  void detach_lora();
  bool lora_attached() const { return lora_.r > 0; }
  // B^T and (bf16) A's copies from the adapters' current weights: each pass makes them itself;
  // generation, which runs on what the model holds, needs this after the adapters changed.
  void refresh_lora_copies();
  // The adapters' dropout masks in the next training passes come from `seed` (the caller's
  // position in its run: the same seed, the same masks).
  void set_lora_seed(uint64_t seed) { lora_views_.seed = seed; }
  // The adapters as the passes take them, for a pass of at most the planned B x T rows
  // (generation's one row); null without adapters. Throws Error if they are attached but no batch
  // was planned (their activations are sized then).
  const LoraViews* lora_views() const;
  bool base_gradients() const { return base_gradients_; }

  // A frozen base (base_gradients false) computes from now on without the fp32 master of the
  // layers' matmul weights, which it gives back to the system tensor by tensor: it holds them in
  // `format` (int8 or nf4, block-quantized: core/model/quantized_base.h; QLoRA), or (kNone) in its
  // bf16 copy (an fp32 model's master is what it computes with: kNone keeps it). Call it once the
  // base's weights are loaded: the master's matmul weights (and in bf16 the embedding's and the
  // head's, whose rows it then gathers from the copy) read as zeros from then on (the
  // passes, generation and restore_master() read what they were turned into), and a write
  // through params_flat() can no longer reach them. Throws Error for a model that trains its
  // base, has a device, shares its memory or is already frozen; Error naming the tensor, layer,
  // row and column of a weight that is not finite.
  void freeze_base(QuantFormat format) {
    begin_freeze(format);
    finish_freeze();
  }
  // The same in steps, for a writer that fills the master one tensor at a time (init_model): after
  // begin_freeze, each base_written(offset, count) says those elements of the master are final,
  // and every frozen tensor they complete takes its frozen form at once (its fp32 pages given
  // back), so that the whole fp32 master never exists; finish_freeze() freezes what is left and
  // ends it. A frozen model's master is mapped on demand: what is never written takes no memory.
  // base_written is a no-op outside begin_freeze ... finish_freeze.
  // `keep`: TensorRoles (kWte, kLmHead) a bf16 base keeps in its fp32 master too (a LoRA run that
  // trains a copy of them starts it from their fp32 values).
  void begin_freeze(QuantFormat format, const std::vector<int>& keep = {});
  void base_written(size_t offset, size_t count);
  void finish_freeze();
  bool base_frozen() const { return base_frozen_; }
  // A frozen bf16 base gathers its embedding's rows from the bf16 copy (its fp32 master, with the
  // head's, given back too).
  bool embedding_in_bf16() const { return bf16_ && bf16_->embedding_from_copy(); }
  QuantFormat base_format() const { return quant_ ? quant_->format() : QuantFormat::kNone; }
  const QuantizedBase* quantized_base() const { return quant_.get(); }
  // The bytes the quantized base holds (0 without one).
  size_t quantized_base_bytes() const { return quant_ ? quant_->bytes() : 0; }
  // After freeze_base: the master's matmul weights again, as the model computes with them
  // (decoded, or the bf16 copy widened), so that the whole master can be read and written (the
  // merge at the end of a run); the model then computes from the master again (its bf16 copy
  // rebuilt from it, no quantized base).
  void restore_master();
  // What the adapters' activations and scratch take for B x T tokens (0 without adapters).
  size_t lora_activation_bytes(int B, int T) const;

  // Sizes the activations for batches of B x T tokens: the only call that allocates them (a no-op
  // when already that shape with those options). Throws ShapeError if B or T is not positive or
  // T > maxT.
  void plan_batch(int B, int T, const BatchOptions& options = {});
  int batch() const { return arena_.batch(); }
  int seq_len() const { return arena_.seq_len(); }
  // What the activations of B x T tokens would take, without allocating them (on the CPU: a
  // device's blocks keep theirs on the device).
  ActivationBytes activation_bytes(int B, int T, const BatchOptions& options = {}) const;

  // Forward pass over inputs (B, T), for evaluation and generation. With targets it computes the
  // per-token losses and returns the mean over the targets that count (0 when none does); without,
  // it returns NaN. A negative target is masked (PyTorch's ignore_index): no loss, no gradient.
  // The head runs over chunks of rows; the logits of all rows are kept only when planned with
  // keep_logits. Throws ShapeError if
  // B x T is not the planned shape or a token is outside the vocabulary.
  // starts (B, T), or null: packed rows (core/model/packing.h), where starts[b*T + t] is where the
  // example holding token t begins; each example attends to itself alone and its positions
  // (rotary, or GPT-2's table) start at 0. Throws ShapeError for starts that are not a packing,
  // Error with a device attached (a plugin's blocks take no starts).
  float forward(const int* inputs, const int* targets, int B, int T, const int* starts = nullptr);
  // The training pass: forward with targets, then adds d(loss_scale * mean loss)/d(params) into
  // the gradients, the mean over the counted targets; returns that mean loss. A caller averaging
  // over several batches by their counts (transformers' num_items_in_batch) passes loss_scale =
  // this batch's count / the total count (count_targets, core/util/tokens.h). The head and the
  // loss are fused per chunk of rows: each chunk's logits become their gradient and go through the
  // head's two backward GEMMs at once, so the (B, T, Vp) logits never exist whole. With a hook,
  // tells it as each layer's gradients are complete (see GradientHook).
  float forward_backward(const int* inputs, const int* targets, int B, int T,
                         float loss_scale = 1.0f, GradientHook* hook = nullptr,
                         const int* starts = nullptr);
  // Logits of the last forward pass, (B, T, Vp) with the first V of each row meaningful: only when
  // planned with keep_logits (else null).
  const float* logits() const { return arena_.options().keep_logits ? arena_.logits() : nullptr; }
  const ActivationArena& arena() const { return arena_; }
  // How many targets of the last batch counted (were not masked).
  size_t counted_targets() const { return counted_; }

  // Zeroes the gradients (and a device's), the host's only where they are not known to be zero:
  // mark_gradients_zero() says they are, after an update that cleared all of them on its way
  // (GradientUse::clear), and anything that may write them since takes that back (forward_backward,
  // the non-const grads_flat(), a device's state fetched into them).
  void zero_grad();
  void mark_gradients_zero() { grads_zero_ = true; }

 private:
  // Calls f(executor, activation views) with the executor this model runs on.
  template <class F>
  void run(F&& f);
  // Checks the shape and tokens and keeps the batch for the passes.
  void take_batch(const int* inputs, const int* targets, int B, int T, const int* starts);
  // Packed rows: checks and keeps the batch's starts (null: none), the tokens' positions and
  // their rope tables (model_packing.cpp); the buffers sized for B x T.
  void take_starts(const int* starts, int B, int T);
  void plan_packing(int B, int T);
  // The arena's views with the batch's packing (a itself when the batch is not packed).
  template <class A>
  A batch_views(const A& a) const;
  // The head over chunks of rows: logits, with targets the losses, and with dloss (the gradient of
  // each token's loss; NaN: none) the logits' gradient through both head GEMMs (d.dln, g.wte).
  // Returns the mean loss (NaN without targets).
  template <class X, class A>
  float head(X& x, const A& a, bool targets, float dloss);
  void configure_device();
  // Layers of activations the CPU keeps: all of them, or with a device only its own blocks' and
  // one more (the landing place of the device's output); the arena is planned for that many.
  int host_layers() const;
  ModelConfig host_arena_config() const;
  // plan_batch again for the planned shape (the host's layers changed).
  void replan();
  void refresh_weight_copies();
  // p_, g_ and pc_ over the current parameter and gradient arrays.
  void carve_views();
  // forward / forward_backward with a device: dloss NaN is the forward pass only.
  float offloaded_pass(bool targets, float dloss, GradientHook* hook);

  ModelConfig config_;
  ParameterLayout layout_;
  const KernelTable& kernels_;
  Precision precision_;
  AlignedBuffer<float> params_;  // flat, ParameterLayout order (empty once shared)
  AlignedBuffer<float> grads_;   // flat, same layout
  float* params_data_;           // params_, or the shared weights (use_shared_memory)
  float* grads_data_;            // grads_, or this rank's shared block
  bool grads_zero_ = false;      // the host's gradients are all zero (mark_gradients_zero)
  bool base_gradients_ = true;
  AlignedBuffer<float> frozen_sink_;  // a frozen base: the norms' weight gradients, never read
  ParameterViews<float> p_{};
  ParameterViews<float> g_{};
  // compute_params(): p_, or p_ with the norms' weights at norm_weights_ (w + norm_offset).
  ParameterViews<float> pc_{};
  AlignedBuffer<float> norm_weights_;
  std::unique_ptr<Bf16Executor> bf16_;   // bf16 only
  std::unique_ptr<QuantizedBase> quant_;  // a quantized frozen base only
  bool base_frozen_ = false;
  // Between begin_freeze and finish_freeze: the tensors (or layers' slices) that take a frozen
  // form, in flat order, with the elements of each not yet written.
  struct Freezing {
    std::vector<ParameterSpan> spans;
    std::vector<size_t> remaining;
  };
  std::unique_ptr<Freezing> freezing_;
  std::vector<int> copy_only_;  // bf16: kWte, kLmHead where the frozen base holds them in the copy alone
  void freeze_span(size_t i);
  std::unique_ptr<BlockDevice> device_;  // with a device only
  OffloadLayers layers_;                 // what the device owns
  size_t device_memory_limit_ = 0;
  WeightCopies copies_;  // which of master, bf16 copy, device's copy is current
  size_t released_bytes_ = 0;
  ActivationArena arena_;
  // LoRA: the caller's modules, and the views the passes take (u, scratch, A's bf16 copies).
  LoraParams lora_;
  LoraViews lora_views_;
  AlignedBuffer<float> lora_acts_;  // u of every module, then gB (and with dropout dx, xd)
  AlignedBuffer<bf16> lora_a16_;    // bf16 model: each module's A rounded
  AlignedBuffer<float> lora_bt_;    // each module's B transposed (the forward's rank update)
  AlignedBuffer<bf16> lora_head16_;  // bf16 model: a trained copy of the head, rounded
  bool embedding_from_copy_ = false;  // bf16: what the base gathered from before the adapter
  void plan_lora();
  void stack_sites(LoraViews& v, float* as, float* das);
  // p_ and g_ at the adapter's trained copies (lora_.tensors), pc_ from them.
  void view_trained_copies();
  AlignedBuffer<int> inputs_;   // (B, T) of the last pass
  AlignedBuffer<int> targets_;  // (B, T)
  size_t counted_ = 0;          // the last batch's targets that count (the non-negative ones)
  AlignedBuffer<int> head_targets_;    // (B, T) the counted targets, in order (head())
  AlignedBuffer<uint32_t> head_rows_;  // (B, T) the rows they came from
  // The last pass's packing (packed_): starts and positions (B, T), and rope models' tables at
  // those positions, (B*T, D/2) each: cos, sin, then Gemma 3's local cos, sin.
  bool packed_ = false;
  AlignedBuffer<int> starts_;
  AlignedBuffer<int> positions_;
  AlignedBuffer<float> token_rope_;
};

// GPT-2 initialisation: weights N(0, 0.02), the residual projections (attprojw, fcprojw) N(0,
// 0.02/sqrt(2L)), biases 0, layernorm weights 1, padded wte rows 0. Same seed, same weights. A
// Llama-family model gets transformers' initialisation instead: every matrix N(0, 0.02) (no
// residual scaling), biases 0, RMSNorm weights 1, padded rows of wte and an untied head 0.
void init_model(Model& model, unsigned long long seed);

}  // namespace llmcpu
