// llmcpu: trains GPT-2-family language models on CPUs. This file only dispatches subcommands and
// turns errors into a message and a non-zero exit status.
#include <omp.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {

int apply_thread_count(int threads, const char* command) {
  if (threads < 0) throw UsageError(std::string(command) + ": --threads must not be negative");
  if (threads > 0) omp_set_num_threads(threads);
  return omp_get_max_threads();
}

}  // namespace llmcpu

namespace {

constexpr const char* kUsage =
    "usage: llmcpu <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train     train or fine-tune a GPT-2 model on a token shard\n"
    "  verify    compare forward and backward with an llm.c debug state (test_gpt2's check)\n"
    "  help      this text\n"
    "\n"
    "`llmcpu <command> --help` lists a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "train") return llmcpu::run_train(args);
    if (command == "verify") return llmcpu::run_verify(args);
    if (command == "help" || command == "--help" || command == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "llmcpu: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const llmcpu::Error& e) {
    std::fprintf(stderr, "llmcpu %s: error: %s\n", command.c_str(), e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "llmcpu %s: error: out of memory\n", command.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmcpu %s: internal error: %s\n", command.c_str(), e.what());
  }
  return 2;
}
