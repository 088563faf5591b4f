// Reading a TOML file (model presets, run configs) with errors that name the file and the line.
#pragma once

#include <string>
#include <toml++/toml.h>

namespace llmcpu {

// Throws FileError when the file cannot be read or is not valid TOML (with the line of the problem).
toml::table read_toml_file(const std::string& path);

}  // namespace llmcpu
