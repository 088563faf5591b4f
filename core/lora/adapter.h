// A LoRA adapter: the A and B matrices of its modules (core/lora/lora_modules.h) in one flat fp32
// arena, their gradients in a second one laid out the same, and what makes them (PEFT's
// initialisation, a PEFT folder: core/lora/peft_files.h). The arena is what an optimizer, gradient
// clipping, data-parallel reduction and a checkpoint see of a LoRA run; the base model is frozen.
// Layout: per module in the model's order, A (r, in) then B (rows, r), row-major; then the copies
// of the base tensors it trains in full (--lora-train), by TensorRole, each laid out as the base's
// whole tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/lora/lora_modules.h"
#include "core/lora/trained_copies.h"
#include "core/model/config.h"
#include "core/model/lora_views.h"
#include "core/model/parameters.h"
#include "core/util/aligned_buffer.h"

namespace llmcpu {

// What a run asks of its adapter (--lora, --lora-alpha, --lora-targets, --lora-dropout,
// --lora-rslora), or what an adapter_config.json says.
struct LoraOptions {
  int r = 0;                    // 0: no adapter (full fine-tuning)
  double alpha = 0;             // lora_alpha; 0: r
  std::vector<std::string> targets = {"all-linear"};  // PEFT's target_modules entries
  double dropout = 0;           // on the adapters' input, in training
  bool rslora = false;          // scale alpha / sqrt(r) instead of alpha / r
  // PEFT's modules_to_save entries (--lora-train): base modules trained in full, as copies
  // (core/lora/trained_copies.h).
  std::vector<std::string> train = {};
  double lora_alpha() const { return alpha > 0 ? alpha : double(r); }
  float scale() const;
};

// --lora-targets' comma list ("q_proj,v_proj") as target_modules entries (empty items dropped).
std::vector<std::string> parse_lora_targets(const std::string& list);

// What an adapter of `options` on this model takes, without making it: its parameters (and as
// many gradients) and the floats of its activations for B x T tokens (the model's).
struct LoraFootprint {
  size_t parameters = 0;
  size_t activation_floats = 0;
};
LoraFootprint lora_footprint(const ModelConfig& config, const LoraOptions& options, int B, int T);

class LoraAdapter {
 public:
  // The modules `options.targets` select (UsageError for one that selects nothing), with PEFT's
  // initialisation: A kaiming-uniform (a = sqrt(5)), that is U(-1/sqrt(in), 1/sqrt(in)), drawn
  // from `seed`, and B = 0, so that the adapter starts as the identity.
  LoraAdapter(const ModelConfig& config, const LoraOptions& options, uint64_t seed);
  // Zeroed A and B for the modules (a file's tensors are read into them).
  LoraAdapter(const ModelConfig& config, const LoraOptions& options);

  const LoraOptions& options() const { return options_; }
  const std::vector<LoraModule>& modules() const { return modules_; }
  size_t size() const { return params_.size(); }  // elements of the arena
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  // Module i's A and B in the arena.
  size_t a_offset(size_t i) const { return offsets_[i]; }
  size_t b_offset(size_t i) const { return offsets_[i] + size_t(options_.r) * modules_[i].in; }
  size_t a_size(size_t i) const { return size_t(options_.r) * modules_[i].in; }
  size_t b_size(size_t i) const { return modules_[i].rows * size_t(options_.r); }
  // The trained copies (--lora-train): the pieces PEFT saves, and per llmcpu tensor its place.
  struct Copy {
    int role;  // its TensorRole
    size_t offset, count;
  };
  const std::vector<TrainedPiece>& pieces() const { return pieces_; }
  const std::vector<Copy>& copies() const { return copies_; }
  // The copy of `role`'s element 0 in the arena (the copy must exist).
  size_t copy_offset(int role) const;
  // Sets each copy to the base's tensor (a new run: PEFT's copies start as the modules they copy):
  // `master` laid out by the model's ParameterLayout (a tied head's copy: wte's).
  void copy_base(const float* master, const ModelConfig& config);
  // The module whose A or B holds element `e` of the arena, or past the modules for a copy's.
  size_t module_of(size_t e) const;
  // The PEFT name of what holds element `e`: "model.layers.0.self_attn.q_proj" or "model.norm".
  std::string name_of(size_t e) const;
  // One span per module (A and B together), tensor -1 and the module's layer, then one per copy
  // (tensor -1, layer -1): the units gradients are reduced in as layers finish, and the
  // optimizer's.
  std::vector<ParameterSpan> spans() const;
  // What Model::attach_lora takes: with gradients (training) or without.
  LoraParams params_for_model(bool gradients);

 private:
  void lay_out(const ModelConfig& config);

  LoraOptions options_;
  std::vector<LoraModule> modules_;
  std::vector<size_t> offsets_;
  std::vector<TrainedPiece> pieces_;
  std::vector<Copy> copies_;
  size_t modules_size_ = 0;  // the arena's elements before the copies
  AlignedBuffer<float> params_;
  AlignedBuffer<float> grads_;
};

}  // namespace llmcpu
