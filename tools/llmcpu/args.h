// Command-line flags for the subcommands: a table of long names (and llm.c-style short names) bound to
// variables, with --name VALUE, --name=VALUE and -x VALUE forms. Unknown flags, missing values and
// values that do not parse are UsageErrors that name the flag.
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
  // printing the help.
  bool parse(const std::vector<std::string>& args);
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
  void assign(Entry& e, const std::string& value);

  std::string command_;
  std::string summary_;
  std::vector<Entry> entries_;
};

}  // namespace llmcpu
