// Fuzz target: llm.c debug states (core/io/debug_state.h). The input is fuzz::kShapeBytes bytes
// that pick a small model shape (fuzz::small_shape), then the file. An accepted state must have
// the length its header and the shape imply, tensors of the right sizes, and token ids below V.
#include <algorithm>

#include "core/io/debug_state.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "debug_state";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  if (size < fuzz::kShapeBytes) return 0;
  const ModelConfig config = fuzz::small_shape(data);
  const std::string path =
      fuzz::write_file("state.bin", data + fuzz::kShapeBytes, size - fuzz::kShapeBytes);
  DebugState s;
  if (!fuzz::accepts([&] { s = load_debug_state(path, config); })) return 0;
  const size_t BT = size_t(s.B) * s.T, V = config.vocab_size;
  const size_t P = ParameterLayout(config).total();
  LLMCPU_FUZZ_CHECK(kTarget, s.B > 0 && s.T > 0 && s.T <= config.max_seq_len,
                    "B or T out of range in an accepted state");
  LLMCPU_FUZZ_CHECK(kTarget,
                    size - fuzz::kShapeBytes == kLlmcHeaderBytes + 8 * BT + 4 * BT * V + 4 + 4 * P,
                    "a state was accepted whose length does not match B, T and the model");
  LLMCPU_FUZZ_CHECK(kTarget,
                    s.inputs.size() == BT && s.targets.size() == BT && s.logits.size() == BT * V &&
                        s.grads.size() == P,
                    "tensor sizes do not match B, T and the model");
  for (const auto* tokens : {&s.inputs, &s.targets}) {
    LLMCPU_FUZZ_CHECK(kTarget, std::all_of(tokens->begin(), tokens->end(),
                                           [&](int t) { return t >= 0 && size_t(t) < V; }),
                      "a token id outside 0..V-1 was accepted");
  }
  return 0;
}
