#include "tools/llmcpu/args.h"

#include <toml++/toml.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "core/util/toml_file.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

std::string format_real(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// All the digits a double needs to be read back as itself.
std::string exact_real(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// "1..65536", "0..1", "" for a range that is every value of the type.
struct RangeText {
  std::string operator()(std::monostate) const { return ""; }
  std::string operator()(IntRange r) const {
    return std::to_string(r.min) + ".." + std::to_string(r.max);
  }
  std::string operator()(UintRange r) const {
    if (r.min == 0 && r.max == std::numeric_limits<uint64_t>::max()) return "";
    return std::to_string(r.min) + ".." + std::to_string(r.max);
  }
  std::string operator()(RealRange r) const {
    return format_real(r.min) + ".." + format_real(r.max);
  }
};

bool is_flag_word(const std::string& w) { return w.size() > 1 && w[0] == '-'; }

}  // namespace

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::add(const char* name, char short_name, Target target, const char* metavar,
                    const char* help, Range range) {
  entries_.push_back({name, short_name, target, metavar ? metavar : "", help, range});
}

void ArgParser::flag(const char* name, char s, bool* t, const char* help) {
  add(name, s, t, nullptr, help);
}
void ArgParser::option(const char* name, char s, std::string* t, const char* mv, const char* help) {
  add(name, s, t, mv, help);
}
void ArgParser::option(const char* name, char s, int* t, const char* mv, const char* help,
                       IntRange range) {
  if (range.min < INT32_MIN || range.max > INT32_MAX || range.min > range.max) {
    throw std::logic_error(std::string("--") + name + ": a range an int cannot hold");
  }
  add(name, s, t, mv, help, range);
}
void ArgParser::option(const char* name, char s, int64_t* t, const char* mv, const char* help,
                       IntRange range) {
  if (range.min > range.max) throw std::logic_error(std::string("--") + name + ": empty range");
  add(name, s, t, mv, help, range);
}
void ArgParser::option(const char* name, char s, uint64_t* t, const char* mv, const char* help,
                       UintRange range) {
  if (range.min > range.max) throw std::logic_error(std::string("--") + name + ": empty range");
  add(name, s, t, mv, help, range);
}
void ArgParser::option(const char* name, char s, double* t, const char* mv, const char* help,
                       RealRange range) {
  if (!(range.min <= range.max) || !std::isfinite(range.min) || !std::isfinite(range.max)) {
    throw std::logic_error(std::string("--") + name + ": not a finite range");
  }
  add(name, s, t, mv, help, range);
}
void ArgParser::list_option(const char* name, char s, std::vector<std::string>* t, const char* mv,
                            const char* help) {
  add(name, s, t, mv, help);
}
void ArgParser::positionals(std::vector<std::string>* target) { positionals_ = target; }

ArgParser::Entry* ArgParser::find(const std::string& word) {
  for (Entry& e : entries_) {
    if (word == "--" + e.name || (e.short_name && word == std::string("-") + e.short_name))
      return &e;
  }
  return nullptr;
}

bool ArgParser::given(const char* name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return e.given;
  }
  return false;
}

std::vector<FlagInfo> ArgParser::flags() const {
  std::vector<FlagInfo> out;
  for (const Entry& e : entries_) {
    static constexpr FlagKind kinds[] = {FlagKind::kSwitch,  FlagKind::kText,    FlagKind::kInteger,
                                         FlagKind::kInteger, FlagKind::kInteger, FlagKind::kReal,
                                         FlagKind::kList};
    static_assert(std::variant_size_v<Target> == std::size(kinds));
    out.push_back({e.name, e.short_name, kinds[e.target.index()], e.metavar,
                   !config_name_.empty() && e.name == config_name_});
  }
  return out;
}

std::string ArgParser::flag_naming(const std::string& path) const {
  auto names = [&](const std::string& value) {
    if (value == path) return true;
    if (value.empty() || path.size() <= value.size() || path.compare(0, value.size(), value) != 0) {
      return false;
    }
    return value.back() == '/' || path[value.size()] == '/';
  };
  for (const Entry& e : entries_) {
    if (!e.given) continue;
    if (auto* text = std::get_if<std::string*>(&e.target); text && names(**text)) {
      return "--" + e.name + " " + **text;
    }
    if (auto* list = std::get_if<std::vector<std::string>*>(&e.target)) {
      for (const std::string& v : **list) {
        if (names(v)) return "--" + e.name + " " + v;
      }
    }
  }
  return "";
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
    } else if (std::holds_alternative<std::vector<std::string>*>(e->target)) {
      throw UsageError(where + ": " + e->name + " is given on the command line only");
    } else if (std::holds_alternative<double*>(e->target)) {
      if (node.is_floating_point()) {
        const double v = node.as_floating_point()->get();
        assign_real(*e, v, format_real(v), where);
        continue;
      }
      if (!node.is_integer()) throw UsageError(where + " must be a number");
      // toml++ keeps an integer as int64; a double holds it exactly only up to 2^53 (and some
      // beyond). One it cannot hold is refused: rounding it would change the run silently.
      const int64_t i = node.as_integer()->get();
      const double d = static_cast<double>(i);
      if (d >= 0x1p63 || static_cast<int64_t>(d) != i) {
        throw UsageError(where + " = " + std::to_string(i) +
                         " is an integer a double cannot hold exactly (the nearest is " +
                         exact_real(d) + "); write it as a float if you mean that");
      }
      assign_real(*e, d, std::to_string(i), where);
    } else {
      if (!node.is_integer()) {
        throw UsageError(where + " must be an integer" +
                         (node.is_floating_point() ? " (without a decimal point)" : ""));
      }
      assign(*e, std::to_string(node.as_integer()->get()), where);
    }
  }
}

void ArgParser::assign_integer(Entry& e, int64_t v, const std::string& shown,
                               const std::string& where) {
  const IntRange r = std::get<IntRange>(e.range);
  if (v < r.min || v > r.max) {
    throw UsageError(where + " " + shown + " is out of range: expected an integer in " +
                     RangeText{}(r));
  }
  if (auto* pi = std::get_if<int*>(&e.target)) **pi = static_cast<int>(v);
  if (auto* pl = std::get_if<int64_t*>(&e.target)) **pl = v;
}

void ArgParser::assign(Entry& e, const std::string& value, const std::string& where) {
  const std::string range = std::visit(RangeText{}, e.range);
  const std::string expected = range.empty() ? "" : " in " + range;
  auto bad = [&](const char* what) {
    return UsageError(where + " '" + value + "' is not " + what + expected);
  };
  const char* const first = value.data();
  const char* const last = first + value.size();
  if (auto* p = std::get_if<std::string*>(&e.target)) {
    **p = value;
  } else if (std::holds_alternative<int*>(e.target) || std::holds_alternative<int64_t*>(e.target)) {
    // Decimal digits with an optional '-', the whole value (a NUL inside it would otherwise end the
    // number early); one past int64 is still a number, only out of range.
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(first, last, v);
    if (value.empty() || end != last || ec == std::errc::invalid_argument) throw bad("an integer");
    if (ec == std::errc::result_out_of_range) {
      throw UsageError(where + " " + value + " is out of range: expected an integer" + expected);
    }
    assign_integer(e, v, value, where);
  } else if (auto* pu = std::get_if<uint64_t*>(&e.target)) {
    const UintRange r = std::get<UintRange>(e.range);
    uint64_t v = 0;
    const bool negative = !value.empty() && value[0] == '-';
    const auto [end, ec] = std::from_chars(first + negative, last, v);
    if (value.size() == size_t(negative) || end != last || ec == std::errc::invalid_argument) {
      throw bad("a non-negative integer");
    }
    if (negative || ec == std::errc::result_out_of_range || v < r.min || v > r.max) {
      throw UsageError(where + " " + value + " is out of range: expected an integer in " +
                       std::to_string(r.min) + ".." + std::to_string(r.max));
    }
    **pu = v;
  } else if (std::holds_alternative<double*>(e.target)) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(first, &end);
    // strtod skips leading blanks and reads "0x1p3": neither is a number a user types.
    if (value.empty() || end != last || std::isspace(static_cast<unsigned char>(value[0])) ||
        value.find_first_of("xX") != std::string::npos) {
      throw bad("a number");
    }
    if (errno == ERANGE) {  // 1e999, 1e-400
      throw UsageError(where + " " + value + " is beyond what a double holds (it would become " +
                       format_real(v) + "): expected a number" + expected);
    }
    assign_real(e, v, value, where);  // refuses "nan" and "inf" too
  }
}

void ArgParser::assign_real(Entry& e, double v, const std::string& shown,
                            const std::string& where) {
  const RealRange r = std::get<RealRange>(e.range);
  if (!std::isfinite(v)) {
    throw UsageError(where + " '" + shown + "' is not a finite number in " + RangeText{}(r));
  }
  if (v < r.min || v > r.max) {
    throw UsageError(where + " " + shown + " is out of range: expected a number in " +
                     RangeText{}(r));
  }
  *std::get<double*>(e.target) = v;
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
      if (!is_flag_word(word)) {
        if (positionals_) {
          positionals_->push_back(word);
          continue;
        }
        throw UsageError("unexpected argument '" + word + "' (see llmcpu " + command_ + " --help)");
      }
      throw UsageError("unknown flag '" + key + "' (see llmcpu " + command_ + " --help)");
    }
    e->given = true;
    if (auto* b = std::get_if<bool*>(&e->target)) {
      if (inline_value) throw UsageError("--" + e->name + " takes no value");
      **b = true;
      continue;
    }
    if (auto* list = std::get_if<std::vector<std::string>*>(&e->target)) {
      const size_t before = (*list)->size();
      if (inline_value) (*list)->push_back(value);
      while (i + 1 < args.size() && !is_flag_word(args[i + 1])) (*list)->push_back(args[++i]);
      if ((*list)->size() == before) {
        throw UsageError("--" + e->name + " needs at least one " + e->metavar);
      }
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
    if (left.size() < 30)
      left.resize(30, ' ');
    else
      left += "  ";
    const std::string range = std::visit(RangeText{}, e.range);
    out += left + e.help + (range.empty() ? "" : " [" + range + "]") + "\n";
  }
  out += "  -h, --help                  this text\n";
  return out;
}

}  // namespace llmcpu
