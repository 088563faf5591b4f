#include "core/model/preset.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <toml++/toml.h>

#include "core/util/error.h"
#include "core/util/toml_file.h"

namespace llmcpu {

namespace fs = std::filesystem;

ModelConfig load_model_preset(const std::string& path) {
  const toml::table table = read_toml_file(path);
  ModelConfig c;
  struct Key {
    const char* name;
    int* field;
  };
  const Key keys[] = {{"layers", &c.num_layers},
                      {"heads", &c.num_heads},
                      {"channels", &c.channels},
                      {"max_seq_len", &c.max_seq_len},
                      {"vocab_size", &c.vocab_size}};
  for (const auto& [key, value] : table) {
    bool known = false;
    for (const Key& k : keys) known |= key.str() == k.name;
    if (!known) {
      throw UsageError(path + ": unknown key '" + std::string(key.str()) +
                       "' (a model preset has layers, heads, channels, max_seq_len, vocab_size)");
    }
  }
  for (const Key& k : keys) {
    const toml::node* node = table.get(k.name);
    if (!node) throw UsageError(path + ": missing key '" + k.name + "'");
    const auto v = node->value<int64_t>();
    if (!node->is_integer() || !v || *v <= 0 || *v > (1 << 24)) {
      throw UsageError(path + ": key '" + k.name + "' must be a positive integer");
    }
    *k.field = static_cast<int>(*v);
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
