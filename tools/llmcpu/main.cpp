// llmcpu: trains GPT-2-family language models on CPUs. This file only dispatches subcommands and
// turns errors into a message and a non-zero exit status.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "simd/error.h"
#include "tools/llmcpu/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: llmcpu <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train     train or fine-tune a GPT-2 model on a token shard\n"
    "  verify    compare forward and backward with an llm.c debug state (test_gpt2's check)\n"
    "  topo      show the machine (packages, NUMA nodes, cores, caches) and the thread plan\n"
    "  tokenize  GPT-2 token ids of a text file, or (--decode) the text of token ids\n"
    "  prepare   encode text files into llm.c token shards (val and train)\n"
    "  sample    generate text from a checkpoint (KV cache, temperature, top-k)\n"
    "  convert   Hugging Face GPT-2 (model.safetensors) to an llm.c checkpoint and back\n"
    "  bench     time every layer's kernels and a training step per SIMD target, against the roofs\n"
    "  plot      draw the losses of llm.c log files (train --log) into a PNG or SVG (gnuplot)\n"
    "  version   this build (version, commit, compiler, kernel targets, optional parts) and CPU\n"
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
    if (command == "topo") return llmcpu::run_topo(args);
    if (command == "tokenize") return llmcpu::run_tokenize(args);
    if (command == "prepare") return llmcpu::run_prepare(args);
    if (command == "sample") return llmcpu::run_sample(args);
    if (command == "version" || command == "--version" || command == "-V") {
      return llmcpu::run_version(args);
    }
    if (command == "bench") return llmcpu::run_bench(args);
    if (command == "plot") return llmcpu::run_plot(args);
    if (command == "convert") return llmcpu::run_convert(args);
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
