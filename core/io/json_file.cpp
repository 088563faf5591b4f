#include "core/io/json_file.h"

#include <fstream>
#include <iterator>

#include "simd/error.h"

namespace llmcpu {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open for reading");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, std::string("is not valid JSON: ") + e.what());
  }
}

}  // namespace llmcpu
