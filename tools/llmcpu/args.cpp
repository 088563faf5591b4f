#include "tools/llmcpu/args.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <toml++/toml.h>

#include "core/util/toml_file.h"
#include "simd/error.h"

namespace llmcpu {

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::add(const char* name, char short_name, Target target, const char* metavar,
                    const char* help) {
  entries_.push_back({name, short_name, target, metavar ? metavar : "", help});
}

void ArgParser::flag(const char* name, char s, bool* t, const char* help) { add(name, s, t, nullptr, help); }
void ArgParser::option(const char* name, char s, std::string* t, const char* mv, const char* help) {
  add(name, s, t, mv, help);
}
void ArgParser::option(const char* name, char s, int* t, const char* mv, const char* help) {
  add(name, s, t, mv, help);
}
void ArgParser::option(const char* name, char s, double* t, const char* mv, const char* help) {
  add(name, s, t, mv, help);
}
void ArgParser::option(const char* name, char s, uint64_t* t, const char* mv, const char* help) {
  add(name, s, t, mv, help);
}

ArgParser::Entry* ArgParser::find(const std::string& word) {
  for (Entry& e : entries_) {
    if (word == "--" + e.name || (e.short_name && word == std::string("-") + e.short_name)) return &e;
  }
  return nullptr;
}

bool ArgParser::given(const char* name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return e.given;
  }
  return false;
}

void ArgParser::config_flag(const char* name, char short_name,
                            std::string (*resolve)(const std::string&), const char* help) {
  config_name_ = name;
  config_short_ = short_name;
  config_resolve_ = resolve;
  add(name, short_name, &config_path_, "FILE", help);
}

void ArgParser::apply_config(const std::string& path) {
  const toml::table table = read_toml_file(path);
  for (const auto& [key, node] : table) {
    std::string name(key.str());
    for (char& c : name) c = c == '_' ? '-' : c;
    Entry* e = find("--" + name);
    if (!e || e->name == config_name_) {
      throw UsageError(path + ": unknown key '" + std::string(key.str()) + "' for llmcpu " +
                       command_ + " (keys are the long flag names; see llmcpu " + command_ +
                       " --help)");
    }
    const std::string where = path + ": key '" + std::string(key.str()) + "'";
    if (auto* b = std::get_if<bool*>(&e->target)) {
      if (!node.is_boolean()) throw UsageError(where + " must be true or false");
      **b = *node.value<bool>();
    } else if (std::holds_alternative<std::string*>(e->target)) {
      if (!node.is_string()) throw UsageError(where + " must be a string");
      assign(*e, *node.value<std::string>(), where);
    } else if (std::holds_alternative<double*>(e->target)) {
      if (!node.is_number()) throw UsageError(where + " must be a number");
      const double v = *node.value<double>();
      if (!std::isfinite(v))
        throw UsageError(where + " must be a finite number, not " + std::to_string(v));
      *std::get<double*>(e->target) = v;
    } else {
      if (!node.is_integer()) throw UsageError(where + " must be an integer");
      assign(*e, std::to_string(*node.value<int64_t>()), where);
    }
  }
}

void ArgParser::assign(Entry& e, const std::string& value, const std::string& where) {
  auto bad = [&](const char* expected) {
    return UsageError(where + " '" + value + "' is not " + expected);
  };
  const char* s = value.c_str();
  char* end = nullptr;
  errno = 0;
  // The whole value must parse (a NUL inside it would otherwise end the number early).
  auto whole = [&] { return !value.empty() && end == s + value.size() && errno == 0; };
  if (auto* p = std::get_if<std::string*>(&e.target)) {
    **p = value;
  } else if (auto* pi = std::get_if<int*>(&e.target)) {
    const long v = std::strtol(s, &end, 10);
    if (!whole() || v < INT32_MIN || v > INT32_MAX) throw bad("an integer");
    **pi = static_cast<int>(v);
  } else if (auto* pu = std::get_if<uint64_t*>(&e.target)) {
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (!whole() || value[0] == '-') throw bad("a non-negative integer");
    **pu = v;
  } else if (auto* pd = std::get_if<double*>(&e.target)) {
    const double v = std::strtod(s, &end);
    if (!whole()) throw bad("a number");
    if (!std::isfinite(v)) throw bad("a finite number");  // "nan", "inf"
    **pd = v;
  }
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  // The config file first, wherever it stands, so that every other flag overrides it.
  if (!config_name_.empty()) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& w = args[i];
      const std::string long_flag = "--" + config_name_;
      std::string value;
      if (w == long_flag || (config_short_ && w == std::string("-") + config_short_)) {
        if (i + 1 >= args.size()) throw UsageError(long_flag + " needs a value (FILE)");
        value = args[i + 1];
      } else if (w.rfind(long_flag + "=", 0) == 0) {
        value = w.substr(long_flag.size() + 1);
      } else {
        continue;
      }
      apply_config(config_resolve_ ? config_resolve_(value) : value);
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--help" || word == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    std::string key = word, value;
    bool inline_value = false;
    if (word.rfind("--", 0) == 0 && word.find('=') != std::string::npos) {
      key = word.substr(0, word.find('='));
      value = word.substr(word.find('=') + 1);
      inline_value = true;
    }
    Entry* e = find(key);
    if (!e) {
      if (word.empty() || word[0] != '-') {
        throw UsageError("unexpected argument '" + word + "' (see llmcpu " + command_ +
                         " --help)");
      }
      throw UsageError("unknown flag '" + key + "' (see llmcpu " + command_ + " --help)");
    }
    e->given = true;
    if (auto* b = std::get_if<bool*>(&e->target)) {
      if (inline_value) throw UsageError("--" + e->name + " takes no value");
      **b = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        throw UsageError("--" + e->name + " needs a value (" + e->metavar + ")");
      }
      value = args[++i];
    }
    assign(*e, value, "--" + e->name);
  }
  return true;
}

std::string ArgParser::help() const {
  std::string out = "usage: llmcpu " + command_ + " [flags]\n" + summary_ + "\n\nflags:\n";
  for (const Entry& e : entries_) {
    std::string left = "  ";
    left += e.short_name ? std::string("-") + e.short_name + ", " : "    ";
    left += "--" + e.name + (e.metavar.empty() ? "" : " " + e.metavar);
    if (left.size() < 30) left.resize(30, ' ');
    else left += "  ";
    out += left + e.help + "\n";
  }
  out += "  -h, --help                  this text\n";
  return out;
}

}  // namespace llmcpu
