#include "core/io/model_file.h"

#include <filesystem>
#include <memory>
#include <regex>
#include <type_traits>

#include "core/io/checkpoint.h"
#include "core/io/hf_gpt2.h"
#include "core/io/hf_llama.h"
#include "core/io/hf_llama_config.h"
#include "core/io/json_file.h"
#include "core/model/preset.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

namespace {

// The folder beside the model when it holds a tokenizer.json or GPT-2's encoder.json and
// vocab.bpe, else "".
std::string tokenizer_beside(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path folder = dir.empty() ? fs::path(".") : dir;
  const bool found = fs::is_regular_file(folder / "tokenizer.json", ec) ||
                     (fs::is_regular_file(folder / "encoder.json", ec) &&
                      fs::is_regular_file(folder / "vocab.bpe", ec));
  return found ? folder.string() : std::string();
}

// The family a Hugging Face model's config.json names by its model_type; GPT-2 where there is no
// config.json or it names none (GPT-2's files may leave it out). A model_type llmcpu does not read
// is refused by name here, before its tensors are read as another family's.
const Family& hf_family(const nlohmann::json& config, const std::string& path) {
  const std::string type = config_model_type(config);
  if (type.empty()) return family_of(Architecture::kGpt2);
  const Family* family = find_family(type.c_str());
  if (!family) {
    throw FileError(path, "model_type is \"" + type +
                              "\", a family llmcpu does not read; it reads " +
                              known_model_types());
  }
  return *family;
}

// The safetensors model at `paths` opened as its config says (a Llama-family model or a GPT-2)
// into `s`: its shape, description and the reader of its weights.
template <class File>
void opened(std::shared_ptr<const File> file, ModelSource& s) {
  s.config = file->config(), s.description = file->description();
  s.read_weights = [file](float* params, const WeightsWritten& written) {
    if constexpr (std::is_same_v<File, HfLlamaFile>) {
      file->load(params, written);
    } else {
      file->load(params);
    }
  };
}
void open_hf_model(const HfModelPaths& paths, ModelSource& s) {
  const nlohmann::json config = paths.config.empty() ? nlohmann::json() : read_json_file(paths.config);
  if (!hf_family(config, paths.config).llmc_files) {
    return opened(std::make_shared<const HfLlamaFile>(
                      paths.weights, read_llama_config(config, paths.config), paths.config),
                  s);
  }
  if (fs::path(paths.weights).filename() == "model.safetensors.index.json") {
    throw FileError(paths.weights,
                    "is a sharded model, which llmcpu reads for the Llama family "
                    "only (its config.json names model_type gpt2 or none)");
  }
  opened(std::make_shared<const HfGpt2File>(paths), s);
}

}  // namespace

ModelFormat model_file_format(const std::string& path) {
  return is_hf_model(path) ? ModelFormat::kSafetensors : ModelFormat::kLlmc;
}

ModelSource open_model_file(const std::string& path, ModelFormat format,
                            const std::string& hf_config) {
  ModelSource s;
  s.spec = s.path = path;
  s.format = format;
  if (format == ModelFormat::kSafetensors) {
    open_hf_model(hf_model_paths(path, hf_config), s);
  } else {
    const CheckpointInfo info = read_checkpoint_header(path);
    s.config = info.config;
    s.description = "llm.c checkpoint version " + std::to_string(info.version);
    s.read_weights = [path, config = info.config](float* params, const WeightsWritten&) {
      load_checkpoint(path, config, params);
    };
  }
  s.hf_config = hf_config;
  s.tokenizer = tokenizer_beside(path);
  return s;
}

namespace {

// Why a folder that holds no Hugging Face model is not a model file, naming the newest model file
// of a checkpoint folder where it is one.
std::string not_a_model_folder(const std::string& dir) {
  std::error_code ec;
  std::string newest;
  const std::regex model_name("model_[0-9]{8,}\\.(bin|safetensors)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, model_name) && entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  std::string why =
      "is a folder without model.safetensors or model.safetensors.index.json (a "
      "Hugging Face model folder holds them and config.json)";
  if (!newest.empty()) why += "; a checkpoint folder: name one of its model files, e.g. " + newest;
  return why;
}

}  // namespace

ModelSource open_model_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) && !is_hf_model(path)) {
    throw FileError(path, not_a_model_folder(path));
  }
  return open_model_file(path, model_file_format(path));
}

ModelSource resolve_model(const std::string& spec) {
  if (spec.empty()) throw UsageError("--model: required (a checkpoint file or a preset name)");
  std::error_code ec;
  const bool is_file = fs::is_regular_file(spec, ec);
  if (is_file && fs::path(spec).extension() != ".toml") return open_model_file(spec);
  if (!is_file && fs::is_directory(spec, ec) && is_hf_model(spec)) {
    return open_model_file(spec, ModelFormat::kSafetensors);
  }
  ModelSource s;
  s.spec = spec;
  s.path = is_file ? spec : find_conf_file("models", spec);
  if (s.path.empty() && fs::is_directory(spec, ec)) {  // neither a model nor a preset
    throw UsageError("--model " + spec + ": " + not_a_model_folder(spec) +
                     ", and no preset is "
                     "named so");
  }
  if (s.path.empty()) {
    throw UsageError("--model " + spec + ": no such checkpoint file, and no preset conf/models/" +
                     spec + ".toml (try gpt2-d2, gpt2-d4, gpt2-d6, gpt2-124m, llama-d2)");
  }
  s.config = load_model_preset(s.path);
  s.description = "preset " + s.path;
  return s;
}

namespace {

// The parameters of a model file into `params`, laid out by ParameterLayout(expected); the file
// must hold a model of that shape.
void load_parameters(const ModelSource& source, const ModelConfig& expected, float* params,
                     const WeightsWritten& written) {
  if (!source.read_weights) {
    throw Error("load_model_file: " + source.spec + " is a preset, not a model file");
  }
  if (!(source.config == expected)) {
    throw FileError(source.path, "holds a model of shape " + describe(source.config) +
                                     ", expected " + describe(expected));
  }
  source.read_weights(params, written);
}

}  // namespace

namespace {
// A Hugging Face Llama-family model (HfLlamaFile), not GPT-2's files.
bool hf_llama(const ModelSource& source) {
  return source.format == ModelFormat::kSafetensors && !source.config.family().llmc_files;
}
}  // namespace

LlamaOrigin llama_origin_of(const ModelSource& source) {
  if (!hf_llama(source)) return {};
  const HfModelPaths paths = hf_model_paths(source.path, source.hf_config);
  const fs::path folder = fs::path(paths.weights).parent_path();
  return llama_origin(paths.config, folder.empty() ? "." : folder.string());
}

WeightsOrigin weights_origin(const ModelSource& source) {
  if (!source.is_file()) return WeightsOrigin::kInitialised;
  return hf_llama(source) ? WeightsOrigin::kFileByTensor : WeightsOrigin::kFileWhole;
}

void load_model_parameters(const ModelSource& source, float* params) {
  load_parameters(source, source.config, params, {});
}

// A model freezing its base as it is written (Model::begin_freeze) freezes each tensor once read.
void load_model_file(const ModelSource& source, Model& model) {
  load_parameters(source, model.config(), model.params_flat(),
                  [&model](size_t offset, size_t count) { model.base_written(offset, count); });
}

}  // namespace llmcpu
