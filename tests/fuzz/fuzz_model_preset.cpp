// Fuzz target: model presets (core/model/preset.h), the TOML files of conf/models/ that --model
// names. The input is the file. A preset that is accepted must be a valid shape (validate()) with
// Vp = V rounded up to a multiple of 128.
#include "core/model/config.h"
#include "core/model/preset.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "model_preset";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  const std::string path = fuzz::write_file("model.toml", data, size);
  ModelConfig c;
  if (!fuzz::accepts([&] { c = load_model_preset(path); })) return 0;
  LLMCPU_FUZZ_CHECK(kTarget, fuzz::accepts([&] { validate(c, "preset"); }),
                    "an accepted preset is not a valid shape");
  LLMCPU_FUZZ_CHECK(kTarget, c.padded_vocab_size == padded_vocab(c.vocab_size),
                    "Vp is not V rounded up to a multiple of 128");
  return 0;
}
