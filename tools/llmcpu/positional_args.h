// Splits a subcommand's words into flags (for ArgParser) and the plain words among them (file
// names). A word is a flag if it starts with '-' and is not "-" itself; the word after a flag in
// `takes_value` (written without '=') is that flag's value. Flags named in `list_flags` take every
// following plain word (`--input a.txt b.txt`); those words are returned under that flag's name.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace llmcpu {

struct SplitArgs {
  std::vector<std::string> flags;                         // for ArgParser::parse
  std::vector<std::string> plain;                         // positional words, in order
  std::map<std::string, std::vector<std::string>> lists;  // list flag -> its words
};

inline SplitArgs split_args(const std::vector<std::string>& args,
                            const std::set<std::string>& takes_value,
                            const std::set<std::string>& list_flags = {}) {
  SplitArgs out;
  auto is_flag = [](const std::string& w) { return w.size() > 1 && w[0] == '-'; };
  std::string list;  // the list flag whose words are being collected
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (is_flag(w)) {
      list.clear();
      const std::string key = w.substr(0, w.find('='));
      if (list_flags.count(key)) {
        list = key;
        std::vector<std::string>& words = out.lists[key];
        if (key.size() < w.size()) words.push_back(w.substr(key.size() + 1));
        continue;
      }
      out.flags.push_back(w);
      if (takes_value.count(w) && i + 1 < args.size()) out.flags.push_back(args[++i]);
      continue;
    }
    if (!list.empty()) {
      out.lists[list].push_back(w);
    } else {
      out.plain.push_back(w);
    }
  }
  return out;
}

}  // namespace llmcpu
