// A strict reader for GPT-2's encoder.json: one flat JSON object whose keys are strings and whose
// values are non-negative integers ({"!": 0, "\"": 1, ...}). Keys may use every JSON escape, \uXXXX
// included (surrogate pairs become one UTF-8 character). It is not a general JSON parser: nested
// values, floats, negative numbers, duplicate keys and lone surrogates are errors that name the
// file and the byte offset.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcpu {

// Parses `text` (the file's bytes); `path` only names the file in errors (FileError).
// Returns the (key as UTF-8, value) pairs in file order.
std::vector<std::pair<std::string, int>> parse_json_vocab(std::string_view text,
                                                          const std::string& path);

}  // namespace llmcpu
