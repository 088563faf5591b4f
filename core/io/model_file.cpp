#include "core/io/model_file.h"

#include <filesystem>

#include "core/io/checkpoint.h"
#include "core/io/hf_gpt2.h"
#include "core/model/preset.h"
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

ModelConfig resolve_model_spec(const std::string& spec, std::string* checkpoint,
                               std::string* preset, std::string* description) {
  if (spec.empty()) throw UsageError("--model: required (a checkpoint file or a preset name)");
  std::error_code ec;
  const bool is_file = fs::is_regular_file(spec, ec);
  if (is_model_file(spec)) {
    *checkpoint = spec;
    const ModelFileInfo info = read_model_file_header(spec);
    if (description) *description = info.description;
    return info.config;
  }
  *preset = is_file ? spec : find_conf_file("models", spec);
  if (preset->empty()) {
    throw UsageError("--model " + spec + ": no such checkpoint file, and no preset conf/models/" +
                     spec + ".toml (try gpt2-d2, gpt2-d4, gpt2-d6, gpt2-124m)");
  }
  return load_model_preset(*preset);
}

}  // namespace llmcpu
