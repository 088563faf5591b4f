// Runs the llmcpu program from a test and captures its exit status and output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace llmcpu::testing {

struct Outcome {
  int status;          // exit status, or -1 if killed by a signal
  std::string output;  // stdout and stderr together
};

inline Outcome run_llmcpu(const std::string& args) {
  const std::string cmd = std::string(LLMCPU_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace llmcpu::testing

#include <fcntl.h>
#include <spawn.h>

#include <vector>

extern char** environ;

namespace llmcpu::testing {

// Starts llmcpu with `args` (no shell involved), its output going to `output_path`. Returns the
// child's pid, to be waited for with waitpid.
inline pid_t spawn_llmcpu(const std::vector<std::string>& args, const std::string& output_path) {
  std::vector<std::string> words = {LLMCPU_BINARY};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace llmcpu::testing
