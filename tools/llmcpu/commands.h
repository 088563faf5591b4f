// The subcommands of `llmcpu`. Each takes the words after its name and returns the exit status;
// errors are thrown as llmcpu::Error and reported by main().
#pragma once

#include <string>
#include <vector>

namespace llmcpu {

int run_train(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_sample(const std::vector<std::string>& args);
int run_topo(const std::vector<std::string>& args);
int run_tokenize(const std::vector<std::string>& args);
int run_prepare(const std::vector<std::string>& args);
int run_version(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_plot(const std::vector<std::string>& args);
int run_convert(const std::vector<std::string>& args);

}  // namespace llmcpu
