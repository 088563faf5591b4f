// Command-line flags for the subcommands: a table of long names (and llm.c-style short names) bound
// to variables, with --name VALUE, --name=VALUE and -x VALUE forms, list flags that take the plain
// words after them (--input a.txt b.txt) and the command's own plain words (file names). The same
// table reads a TOML config file whose keys are the long names (train-data or train_data); flags
// given on the command line override the file.
//
// Every number comes in one way: parsed whole into a 64-bit integer or a double and checked against
// the range its flag was registered with, which --help shows. Unknown flags or keys, missing
// values, values that do not parse, that are not finite, that lie outside the range or (a TOML
// integer for a real-valued key) that a double cannot hold exactly are UsageErrors that name the
// flag (or the file and key), the value and what was expected. Nothing is clamped or rounded
// silently.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace llmcpu {

// The values an integer flag takes, both ends included.
struct IntRange {
  int64_t min, max;
};
// The values an unsigned integer flag (a seed) takes.
struct UintRange {
  uint64_t min, max;
};
// The values a real-valued flag takes (finite ones only), both ends included.
struct RealRange {
  double min, max;
};

// Every uint64 (seeds).
inline constexpr UintRange kAnyUint64{0, UINT64_MAX};

// What a flag holds, for the tables' readers (tests, fuzz targets): a switch takes no value.
enum class FlagKind { kSwitch, kText, kInteger, kReal, kList };

struct FlagInfo {
  std::string name;  // long name, without "--"
  char short_name;   // 0: none
  FlagKind kind;
  std::string metavar;
  bool config = false;  // the flag that names a TOML file of the others
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  void flag(const char* name, char short_name, bool* target, const char* help);
  void option(const char* name, char short_name, std::string* target, const char* metavar,
              const char* help);
  void option(const char* name, char short_name, int* target, const char* metavar, const char* help,
              IntRange range);
  void option(const char* name, char short_name, int64_t* target, const char* metavar,
              const char* help, IntRange range);
  void option(const char* name, char short_name, uint64_t* target, const char* metavar,
              const char* help, UintRange range);
  void option(const char* name, char short_name, double* target, const char* metavar,
              const char* help, RealRange range);
  // --NAME W1 W2 ...: every plain word after the flag, up to the next flag, appended to *target.
  // Given without words it is a UsageError.
  void list_option(const char* name, char short_name, std::vector<std::string>* target,
                   const char* metavar, const char* help);
  // The plain words that are no flag's value (file names), in order, into *target; without this
  // a plain word is a UsageError.
  void positionals(std::vector<std::string>* target);

  // Parses args (the words after the subcommand). Returns false when --help was asked for, after
  // printing the help. If a flag registered with config_flag() is given, that file is applied
  // first, so the other flags override it.
  bool parse(const std::vector<std::string>& args);
  // Makes --NAME (and -S) name a TOML file of defaults; `resolve` maps the value to a path.
  void config_flag(const char* name, char short_name, std::string (*resolve)(const std::string&),
                   const char* help);
  // True if the flag appeared on the command line.
  bool given(const char* name) const;
  std::string help() const;
  const std::string& command() const { return command_; }
  // The table, in the order the flags were registered (--help not included).
  std::vector<FlagInfo> flags() const;
  // "--NAME VALUE" of the given text or list flag whose value is `path` or a folder above it (the
  // flag that named a file an error is about); "" when none did.
  std::string flag_naming(const std::string& path) const;

 private:
  using Target = std::variant<bool*, std::string*, int*, int64_t*, uint64_t*, double*,
                              std::vector<std::string>*>;
  using Range = std::variant<std::monostate, IntRange, UintRange, RealRange>;
  struct Entry {
    std::string name;
    char short_name;
    Target target;
    std::string metavar;
    std::string help;
    Range range;
    bool given = false;
  };
  void add(const char* name, char short_name, Target target, const char* metavar, const char* help,
           Range range = {});
  Entry* find(const std::string& word);
  void assign(Entry& e, const std::string& value, const std::string& where);
  void assign_integer(Entry& e, int64_t value, const std::string& shown, const std::string& where);
  void assign_real(Entry& e, double value, const std::string& shown, const std::string& where);
  void apply_config(const std::string& path);

  std::string command_;
  std::string summary_;
  std::vector<Entry> entries_;
  std::vector<std::string>* positionals_ = nullptr;
  std::string config_name_;
  char config_short_ = 0;
  std::string config_path_;
  std::string (*config_resolve_)(const std::string&) = nullptr;
};

}  // namespace llmcpu
