#include "core/io/model_file.h"

#include <filesystem>

#include "core/io/checkpoint.h"
#include "core/io/hf_gpt2.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

bool is_model_file(const std::string& path) {
  std::error_code ec;
  return (fs::is_regular_file(path, ec) && fs::path(path).extension() != ".toml") ||
         (fs::is_directory(path, ec) && is_hf_model(path));
}

ModelFileInfo read_model_file_header(const std::string& path) {
  if (is_hf_model(path)) {
    const HfGpt2File file(hf_model_paths(path));
    return {file.config(), file.description()};
  }
  const CheckpointInfo info = read_checkpoint_header(path);
  return {info.config, "llm.c checkpoint version " + std::to_string(info.version)};
}

void load_model_file(const std::string& path, Gpt2& model) {
  if (!is_hf_model(path)) {
    load_checkpoint(path, model);
    return;
  }
  const HfGpt2File file(hf_model_paths(path));
  if (!(file.config() == model.config())) {
    throw FileError(path, "holds a model of shape " + describe(file.config()) + ", expected " +
                              describe(model.config()));
  }
  file.load(model.params_flat());
}

}  // namespace llmcpu
