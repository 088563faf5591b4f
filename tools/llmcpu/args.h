// Command-line flags for the subcommands: a table of long names (and llm.c-style short names) bound to
// variables, with --name VALUE, --name=VALUE and -x VALUE forms. The same table reads a TOML config
// file whose keys are the long names (train-data or train_data); flags given on the command line
// override the file. Unknown flags or keys, missing values and values that do not parse or have the
// wrong type are UsageErrors that name the flag (or the file and key).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace llmcpu {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  void flag(const char* name, char short_name, bool* target, const char* help);
  void option(const char* name, char short_name, std::string* target, const char* metavar,
              const char* help);
  void option(const char* name, char short_name, int* target, const char* metavar, const char* help);
  void option(const char* name, char short_name, double* target, const char* metavar,
              const char* help);
  void option(const char* name, char short_name, uint64_t* target, const char* metavar,
              const char* help);

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

 private:
  using Target = std::variant<bool*, std::string*, int*, double*, uint64_t*>;
  struct Entry {
    std::string name;
    char short_name;
    Target target;
    std::string metavar;
    std::string help;
    bool given = false;
  };
  void add(const char* name, char short_name, Target target, const char* metavar, const char* help);
  Entry* find(const std::string& word);
  void assign(Entry& e, const std::string& value, const std::string& where);
  void apply_config(const std::string& path);

  std::string command_;
  std::string summary_;
  std::vector<Entry> entries_;
  std::string config_name_;
  char config_short_ = 0;
  std::string config_path_;
  std::string (*config_resolve_)(const std::string&) = nullptr;
};

}  // namespace llmcpu
