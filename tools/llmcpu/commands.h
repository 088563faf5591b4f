// The subcommands of `llmcpu`. Each takes the words after its name and returns the exit status;
// errors are thrown as llmcpu::Error and reported by main().
#pragma once

#include <string>
#include <vector>

namespace llmcpu {

int run_train(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);

// Applies --threads (0: OpenMP's default) and returns the thread count in force.
int apply_thread_count(int threads, const char* command);

}  // namespace llmcpu
