// Running programs from tests: a shell command line with its exit status and output, the llmcpu
// program (LLMCPU_BINARY, defined by each suite's CMakeLists.txt) the same way, or started in the
// background to be signalled and waited for.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace llmcpu::testing {

struct Outcome {
  int status;          // exit status, or -1 if killed by a signal
  std::string output;  // standard output (and standard error where the command line merges them)
};

// Runs a shell command line; returns its exit status and standard output.
inline Outcome run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Single-quotes s for the shell.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `llmcpu ARGS` (ARGS as shell words) with standard error merged into the output; `env` is an
// optional prefix of VAR=value assignments.
inline Outcome run_llmcpu(const std::string& args, const std::string& env = "") {
  return run_shell(env + (env.empty() ? "" : " ") + LLMCPU_BINARY + " " + args + " 2>&1");
}

}  // namespace llmcpu::testing

#include <fcntl.h>
#include <spawn.h>

#include <vector>

extern char** environ;

namespace llmcpu::testing {

// Starts llmcpu with `args` (no shell involved) in the folder `dir` ("": this one), standard input
// empty and its output going to `output_path`. Returns the child's pid, to be waited for with
// waitpid; -1 if it could not start.
inline pid_t spawn_llmcpu(const std::vector<std::string>& args, const std::string& output_path,
                          const std::string& dir = "") {
  std::vector<std::string> words = {LLMCPU_BINARY};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!dir.empty()) posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

}  // namespace llmcpu::testing
