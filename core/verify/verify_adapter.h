// `llmcpu verify --adapter`: a base model with a LoRA adapter (its base frozen) against a reference
// of the adapter's forward and backward pass, a safetensors file holding
//   inputs, targets   I32 (B, T)
//   logits            F32 (B, T, V)      loss F32 []
//   grad.NAME         F32, for each tensor NAME of the adapter (PEFT's names, their shapes)
// (tests/fixtures/make_lora_fixture.py's NAME_reference.safetensors; other tensors are ignored).
// The comparisons and limits are verify.h's: logits and loss, then every adapter gradient.
#pragma once

#include <string>

#include "core/lora/adapter.h"
#include "core/model/model.h"
#include "core/verify/verify.h"

namespace llmcpu {

// The batch's B and T, read from `reference` (FileError naming it when they are missing).
struct AdapterReferenceShape {
  int B = 0, T = 0;
};
AdapterReferenceShape adapter_reference_shape(const std::string& reference);

VerifyReport verify_adapter_against(Model& model, LoraAdapter& adapter,
                                    const std::string& reference, const VerifyTolerances& tol,
                                    Recompute recompute = Recompute::kNone);

}  // namespace llmcpu
