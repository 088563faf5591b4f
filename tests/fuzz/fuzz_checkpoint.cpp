// Fuzz target: llm.c model checkpoints (core/io/checkpoint.h). The input is the whole file.
// read_checkpoint_header() must accept only a header whose shape is valid and whose file length
// matches it exactly; an accepted checkpoint of a small shape (at most kMaxParameters, so that one
// input cannot ask for gigabytes) is then loaded into a model of its shape, and must hold exactly
// the file's weights (version 3) or their bf16 bits (version 5). Loading it into a model of another
// shape must be refused.
#include <cstring>
#include <memory>

#include "core/io/checkpoint.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "tests/fuzz/fuzz_util.h"

namespace llmcpu {
namespace {

constexpr size_t kMaxParameters = size_t(1) << 16;
constexpr const char* kTarget = "checkpoint";

// A model of a fixed small shape, in bf16 precision: an input of any other shape must not load.
Model& other_model() {
  static Model* model = [] {
    ModelConfig c;
    c.max_seq_len = 4;
    c.vocab_size = 7;
    c.padded_vocab_size = 8;
    c.num_layers = 1;
    c.num_heads = 2;
    c.channels = 4;
    return new Model(c, active_kernels(), Precision::kBf16);
  }();
  return *model;
}

void check_weights(const CheckpointInfo& info, const uint8_t* body, const Model& model) {
  const size_t n = model.num_parameters();
  const float* w = model.params_flat();
  if (info.version == kCheckpointFp32) {
    LLMCPU_FUZZ_CHECK(kTarget, std::memcmp(w, body, n * sizeof(float)) == 0,
                      "a version 3 checkpoint's weights differ from the file's bytes");
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    uint16_t b;
    std::memcpy(&bits, w + i, 4);
    std::memcpy(&b, body + 2 * i, 2);
    LLMCPU_FUZZ_CHECK(kTarget, bits == uint32_t(b) << 16,
                      "weight " + std::to_string(i) + " is not the file's bf16 value widened");
  }
}

}  // namespace
}  // namespace llmcpu

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("model.bin", data, size);
  CheckpointInfo info;
  if (!fuzz::accepts([&] { info = read_checkpoint_header(path); })) return 0;
  const size_t n = ParameterLayout(info.config).total();
  const size_t bytes_per = info.version == kCheckpointFp32 ? 4 : 2;
  LLMCPU_FUZZ_CHECK(kTarget, size == kLlmcHeaderBytes + n * bytes_per,
                    "a header was accepted for a file of the wrong length");
  const bool same_shape = info.config == other_model().config();
  const bool loaded = fuzz::accepts([&] { load_checkpoint(path, other_model()); });
  LLMCPU_FUZZ_CHECK(kTarget, loaded == same_shape,
                    same_shape ? "a checkpoint of the model's own shape was refused"
                               : "a checkpoint was loaded into a model of another shape");
  if (n > kMaxParameters) return 0;
  auto model = std::make_unique<Model>(info.config);
  const bool ok = fuzz::accepts([&] { load_checkpoint(path, *model); });
  LLMCPU_FUZZ_CHECK(kTarget, ok, "read_checkpoint_header accepted a file load_checkpoint refuses");
  check_weights(info, data + kLlmcHeaderBytes, *model);
  return 0;
}
