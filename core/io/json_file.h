// A JSON file read whole (config.json, model.safetensors.index.json): FileError naming the file when
// it cannot be read or is not JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace llmcpu {

nlohmann::json read_json_file(const std::string& path);

}  // namespace llmcpu
