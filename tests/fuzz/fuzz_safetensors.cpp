// Fuzz target: Hugging Face GPT-2 files (core/io/safetensors.h, core/io/hf_gpt2.h). The input is
// the whole model.safetensors; beside it a fixed config.json says only n_head = 1, so every other
// dimension comes from the tensors. An accepted container must keep its tensors inside the data
// section without overlaps; an accepted GPT-2 of a small shape (at most kMaxParameters) must load
// with zero padding rows of wte, and written back (save_hf_gpt2, F32) and read again must give the
// same shape and the same parameters, bit for bit.
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "core/io/hf_gpt2.h"
#include "core/io/safetensors.h"
#include "core/model/parameters.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr const char* kTarget = "safetensors";
constexpr size_t kMaxParameters = size_t(1) << 16;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  static const std::string config =
      fuzz::write_file("config.json", std::string_view(R"({"n_head": 1})"));
  const std::string path = fuzz::write_file("model.safetensors", data, size);
  std::unique_ptr<SafetensorsFile> file;
  if (!fuzz::accepts([&] { file = std::make_unique<SafetensorsFile>(path); })) return 0;
  size_t stored = 0;
  const std::vector<SafeTensor>& ts = file->tensors();
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t bytes = ts[i].count * dtype_bytes(ts[i].dtype);
    stored += bytes;
    if (i + 1 < ts.size()) {
      LLMCPU_FUZZ_CHECK(kTarget, ts[i].data + bytes <= ts[i + 1].data,
                        "accepted tensors overlap: " + ts[i].name + ", " + ts[i + 1].name);
    }
  }
  LLMCPU_FUZZ_CHECK(kTarget, stored + 8 <= size, "accepted tensors hold more bytes than the file");

  std::unique_ptr<HfGpt2File> model;
  if (!fuzz::accepts([&] { model = std::make_unique<HfGpt2File>(hf_model_paths(path)); })) {
    return 0;
  }
  const ModelConfig c = model->config();
  LLMCPU_FUZZ_CHECK(kTarget, c.num_heads == 1, "n_head of config.json not taken");
  const ParameterLayout layout(c);
  if (layout.total() > kMaxParameters) return 0;
  std::vector<float> p(layout.total());
  if (!fuzz::accepts([&] { model->load(p.data()); })) return 0;  // an untied lm_head
  const size_t C = size_t(c.channels);
  for (size_t i = size_t(c.vocab_size) * C; i < size_t(c.padded_vocab_size) * C; ++i) {
    LLMCPU_FUZZ_CHECK(kTarget, p[layout.offset(kWte) + i] == 0.0f, "a padding row of wte is not zero");
  }
  const std::string back = fuzz::scratch_dir() + "/back.safetensors";
  const std::string back_config = fuzz::scratch_dir() + "/back_config.json";
  save_hf_gpt2(back, back_config, c, p.data(), TensorDtype::kF32);
  const HfGpt2File again(hf_model_paths(back, back_config));
  LLMCPU_FUZZ_CHECK(kTarget, again.config() == c, "the written model reads back another shape");
  std::vector<float> q(layout.total());
  again.load(q.data());
  LLMCPU_FUZZ_CHECK(kTarget, std::memcmp(p.data(), q.data(), p.size() * sizeof(float)) == 0,
                    "the written model reads back other parameters");
  return 0;
}
