// llmcpu: trains GPT-2-family language models on CPUs. This file only dispatches subcommands (the
// table in commands.h) and turns errors into a message and a non-zero exit status.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "simd/error.h"
#include "tools/llmcpu/commands.h"

namespace {

std::string usage() {
  std::string out = "usage: llmcpu <command> [flags]\n\ncommands:\n";
  for (const llmcpu::CommandInfo& c : llmcpu::command_table()) {
    std::string name = c.name;
    name.resize(10, ' ');
    out += "  " + name + c.summary + "\n";
  }
  out += "  help      this text\n\n`llmcpu <command> --help` lists a command's flags.\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  const llmcpu::CommandInfo* info = llmcpu::find_command(command);
  if (!info) {
    std::fprintf(stderr, "llmcpu: unknown command '%s'\n\n%s", command.c_str(), usage().c_str());
    return 2;
  }
  const char* name = info->name;
  try {
    return llmcpu::run_command(*info, args);
  } catch (const llmcpu::Error& e) {
    std::fprintf(stderr, "llmcpu %s: error: %s\n", name, e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "llmcpu %s: error: out of memory\n", name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmcpu %s: internal error: %s\n", name, e.what());
  }
  return 2;
}
