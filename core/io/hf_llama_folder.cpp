#include "core/io/hf_llama_folder.h"

#include <filesystem>

#include "core/io/hf_llama.h"
#include "core/io/hf_llama_config.h"
#include "core/io/json_file.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json",  "tokenizer_config.json", "special_tokens_map.json",
      "tokenizer.model", "chat_template.jinja",   "generation_config.json"};
  return names;
}

LlamaOrigin llama_origin(const std::string& config_path, const std::string& folder) {
  LlamaOrigin origin;
  if (!config_path.empty()) {
    origin.config = read_json_file(config_path);
    if (!origin.config.is_object()) {
      throw FileError(config_path, "is not a JSON object (a config.json's)");
    }
  }
  std::error_code ec;
  if (folder.empty()) return origin;
  for (const std::string& name : tokenizer_file_names()) {
    const fs::path file = fs::path(folder) / name;
    if (fs::is_regular_file(file, ec)) origin.tokenizer_files.push_back(file.string());
  }
  return origin;
}

AtomicFileWriter& StagedFiles::add(const std::string& path, const char* fault_point) {
  files_.push_back(std::make_unique<AtomicFileWriter>(path, fault_point));
  return *files_.back();
}

void StagedFiles::publish() {
  for (const auto& file : files_) file->publish();
}

LlamaWeights llama_weights_of(const Model& model, TensorDtype dtype) {
  if (dtype == TensorDtype::kBf16 && model.bf16_copy_current()) {
    // The working copy is bf16(master) already: the bytes rounding would give.
    return {model.config(), model.params_flat(), model.params_bf16_flat()};
  }
  if (model.master_released()) {
    throw Error(
        std::string("writing a ") + dtype_name(dtype) + " safetensors file: this model " +
        "keeps the fp32 master of its matmul weights in part only (ZeRO-1); it writes BF16");
  }
  return {model.config(), model.params_flat(), nullptr};
}

namespace {

// A copy of the file at `from` into an open writer.
void copy_into(AtomicFileWriter& out, const std::string& from) {
  const MappedFile file(from);
  out.write(file.data(), file.size());
}

}  // namespace

void stage_llama_folder(StagedFiles& files, const std::string& folder,
                        const std::string& weights_name, const LlamaWeights& w, TensorDtype dtype,
                        const LlamaOrigin& origin, const char* weights_fault) {
  // config.json and the tokenizer's files first: published in this order, the weights never
  // stand in the folder without them.
  const fs::path dir(folder);
  AtomicFileWriter& config = files.add((dir / "config.json").string());
  const std::string text = llama_config_json(w.config, dtype, origin.config).dump(2) + "\n";
  config.write(text.data(), text.size());
  config.finish();
  std::error_code ec;
  for (const std::string& from : origin.tokenizer_files) {
    const fs::path source(from);
    if (fs::equivalent(source.parent_path(), dir, ec)) continue;  // in the folder already
    AtomicFileWriter& copy = files.add((dir / source.filename()).string());
    copy_into(copy, from);
    copy.finish();
  }
  AtomicFileWriter& weights = files.add((dir / weights_name).string(), weights_fault);
  write_llama_safetensors(weights, w.config, w.params, w.rounded, dtype);
  weights.finish();
}

void save_llama_folder(const std::string& folder, const LlamaWeights& weights, TensorDtype dtype,
                       const LlamaOrigin& origin) {
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec)) {
    throw FileError(folder,
                    "is a file; a Llama-family model is written as a folder (it gets "
                    "model.safetensors, config.json and the tokenizer's files)");
  }
  const bool created = fs::create_directories(folder, ec);
  if (ec) throw FileError(folder, "cannot create the folder: " + ec.message());
  try {
    StagedFiles files;
    stage_llama_folder(files, folder, "model.safetensors", weights, dtype, origin);
    files.publish();
  } catch (...) {
    if (created) fs::remove(folder, ec);  // the folder made here, empty again
    throw;
  }
}

}  // namespace llmcpu
