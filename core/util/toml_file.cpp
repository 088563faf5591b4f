#include "core/util/toml_file.h"

#include <filesystem>

#include "simd/error.h"

namespace llmcpu {

toml::table read_toml_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw FileError(path, "no such file");
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw FileError(path, "not valid TOML: " + std::string(e.description()) + " at line " +
                              std::to_string(e.source().begin.line));
  }
}

}  // namespace llmcpu
