// The subcommands of `llmcpu`, as one table. Each command is an object whose members its flags are
// bound to: add_flags() registers its flag table, check() refuses values that are wrong whatever
// the files and the machine (ranges that depend on other flags, words that name a choice) and run()
// does the work. main() dispatches through the table, and the tests and fuzz targets read the same
// table, so a flag added to a command is tested and fuzzed from the day it exists.
// Errors are thrown as llmcpu::Error and reported by main().
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/placement.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {

class Command {
 public:
  virtual ~Command() = default;
  // Registers the command's flags (and plain words) on p, bound to this object's members.
  virtual void add_flags(ArgParser& p) = 0;
  // After a successful parse: the checks that read no file, touch no device and change nothing
  // in this process. UsageErrors name the flag.
  virtual void check(const ArgParser& p) { (void)p; }
  // The work, after check(); returns the exit status.
  virtual int run(const ArgParser& p) = 0;
  // The thread placement options, for commands that place threads (the fuzz target plans them
  // on a synthetic machine); nullptr for the others.
  virtual const PlacementOptions* placement() const { return nullptr; }
};

struct CommandInfo {
  const char* name;
  const char* summary;      // one line for llmcpu's usage
  const char* description;  // the first lines of `llmcpu NAME --help`
  std::unique_ptr<Command> (*make)();
};

// Every command, in the order the usage lists them.
const std::vector<CommandInfo>& command_table();
// The command called `name` (also its aliases, e.g. --version), or nullptr.
const CommandInfo* find_command(std::string_view name);

// A command's parser: the ArgParser with its flags registered.
ArgParser command_parser(const CommandInfo& info, Command& command);
// Parses args, checks and runs; --help prints the flags and returns 0.
int run_command(const CommandInfo& info, const std::vector<std::string>& args);

// The commands' objects, made by command_table() (each in its cmd_NAME.cpp).
std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_verify_command();
std::unique_ptr<Command> make_sample_command();
std::unique_ptr<Command> make_topo_command();
std::unique_ptr<Command> make_tokenize_command();
std::unique_ptr<Command> make_prepare_command();
std::unique_ptr<Command> make_version_command();
std::unique_ptr<Command> make_bench_command();
std::unique_ptr<Command> make_plot_command();
std::unique_ptr<Command> make_convert_command();
std::unique_ptr<Command> make_chat_command();

}  // namespace llmcpu
