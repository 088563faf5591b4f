// Fuzz target: the command line of every subcommand, read from the commands' own table
// (tools/llmcpu/commands.h): the input's byte 0 picks the command, the rest are its words separated
// by newlines. Each is parsed by the command's parser and checked by its check() (the checks it
// makes before it reads a file); a command that places threads has its placement planned on a
// synthetic machine (cli_checks.h), never applied to this one. Nothing runs and no file is read;
// --config is left out (fuzz_run_config reads config files). A flag added to a command is fuzzed
// from the day it exists.
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/cli_checks.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace {

constexpr const char* kTarget = "cli";
constexpr size_t kMaxWords = 64;

void parse_and_check(const llmcpu::CommandInfo& info, const std::vector<std::string>& args) {
  using namespace llmcpu;
  const std::unique_ptr<Command> command = info.make();
  ArgParser p = command_parser(info, *command);
  if (!p.parse(args)) return;
  command->check(p);
  if (const PlacementOptions* placement = command->placement()) {
    bool numa = false;
    for (const FlagInfo& f : p.flags()) numa = numa || f.name == "numa";
    fuzz::check_placement(kTarget, *placement, numa);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmcpu;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> args;
  for (size_t pos = 0; pos <= text.size() && args.size() < kMaxWords;) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    std::string word(text.substr(pos, end - pos));
    pos = end + 1;
    if (word == "--config" || word.rfind("--config=", 0) == 0) continue;
    args.push_back(std::move(word));
  }
  const std::vector<CommandInfo>& table = command_table();
  const CommandInfo& info = table[data[0] % table.size()];
  fuzz::accepts([&] { parse_and_check(info, args); });
  return 0;
}
