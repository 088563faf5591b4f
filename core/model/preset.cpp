#include "core/model/preset.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/model/llama_config.h"
#include "core/util/toml_file.h"
#include "simd/error.h"

namespace llmcpu {

namespace fs = std::filesystem;

namespace {

// A Llama-family preset: config.json's keys in TOML, read as config.json is.
ModelConfig llama_preset(const toml::table& table, const std::string& path) {
  std::ostringstream json;
  json << toml::json_formatter{table};
  return read_llama_config(nlohmann::json::parse(json.str()), path);
}

}  // namespace

ModelConfig load_model_preset(const std::string& path) {
  const toml::table table = read_toml_file(path);
  if (table.contains("model_type")) return llama_preset(table, path);
  ModelConfig c;
  // The ranges are validate()'s (core/model/config.cpp), checked here to name the key.
  struct Key {
    const char* name;
    int* field;
    int64_t max;
  };
  const Key keys[] = {{"layers", &c.num_layers, 4096},
                      {"heads", &c.num_heads, 4096},
                      {"channels", &c.channels, 65536},
                      {"max_seq_len", &c.max_seq_len, kMaxSeqLen},
                      {"vocab_size", &c.vocab_size, kMaxVocabSize}};
  for (const auto& [key, value] : table) {
    bool known = false;
    for (const Key& k : keys) known |= key.str() == k.name;
    if (!known) {
      throw UsageError(path + ": unknown key '" + std::string(key.str()) +
                       "' (a GPT-2 preset has layers, heads, channels, max_seq_len, vocab_size; "
                       "a Llama-family one has model_type and config.json's keys)");
    }
  }
  for (const Key& k : keys) {
    const toml::node* node = table.get(k.name);
    if (!node) throw UsageError(path + ": missing key '" + k.name + "'");
    const std::string where = path + ": key '" + k.name + "'";
    if (!node->is_integer()) {
      std::ostringstream type;
      type << node->type();
      const std::string a =
          std::string("aeiou").find(type.str()[0]) != std::string::npos ? "an" : "a";
      throw UsageError(where + " must be an integer in 1.." + std::to_string(k.max) + ", got " + a +
                       " " + type.str());
    }
    const int64_t v = **node->as_integer();
    if (v < 1 || v > k.max) {
      throw UsageError(where + " must be an integer in 1.." + std::to_string(k.max) + ", got " +
                       std::to_string(v));
    }
    *k.field = static_cast<int>(v);
  }
  if (c.channels % c.num_heads != 0) {
    throw UsageError(path + ": key 'channels' (" + std::to_string(c.channels) +
                     ") must be a multiple of key 'heads' (" + std::to_string(c.num_heads) + ")");
  }
  c.padded_vocab_size = padded_vocab(c.vocab_size);
  validate(c, path);
  return c;
}

std::vector<std::string> conf_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LLMCPU_CONF_DIR"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      dirs.push_back((dir / "conf").string());
      dirs.push_back((dir / "share" / "llmcpu" / "conf").string());
    }
  }
#ifdef LLMCPU_SOURCE_CONF_DIR
  dirs.emplace_back(LLMCPU_SOURCE_CONF_DIR);
#endif
  return dirs;
}

std::string find_conf_file(const std::string& kind, const std::string& name) {
  for (const std::string& dir : conf_search_dirs()) {
    const fs::path p = fs::path(dir) / kind / (name + ".toml");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

}  // namespace llmcpu
