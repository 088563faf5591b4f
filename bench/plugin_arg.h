// `--plugin PATH` (or `--plugin=PATH`) on a benchmark's command line, as in `llmcpu train` and
// `verify`: taken out of argv before Google Benchmark parses it, and handed on as LLMCPU_PLUGIN,
// which the benchmarks read. Not here: loading the plugin (core/plugin).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace llmcpu::bench {

// Returns false (after a message naming the flag) when --plugin has no value.
inline bool take_plugin_flag(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* value = nullptr;
    if (std::strcmp(a, "--plugin") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        std::fprintf(stderr, "%s: error: --plugin: expected a path to a plugin library\n", argv[0]);
        return false;
      }
      value = argv[++i];
    } else if (std::strncmp(a, "--plugin=", 9) == 0) {
      value = a + 9;
      if (*value == '\0') {
        std::fprintf(stderr, "%s: error: --plugin: expected a path to a plugin library\n", argv[0]);
        return false;
      }
    }
    if (value) {
      setenv("LLMCPU_PLUGIN", value, 1);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return true;
}

}  // namespace llmcpu::bench
