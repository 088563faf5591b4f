// Where the tests' npm references are: the node_modules folder tools/fetch-data.sh fills
// ($LLMCPU_CACHE, else $XDG_CACHE_HOME/llmcpu, else ~/.cache/llmcpu, then npm/node_modules), and
// node itself. A test whose reference is missing fails and says what to run.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>

#include "tests/common/process.h"

namespace llmcpu::testing {

inline std::string npm_modules_dir() {
  const auto env = [](const char* n) {
    const char* v = std::getenv(n);
    return std::string(v ? v : "");
  };
  std::string cache = env("LLMCPU_CACHE");
  if (cache.empty() && !env("XDG_CACHE_HOME").empty()) cache = env("XDG_CACHE_HOME") + "/llmcpu";
  if (cache.empty()) cache = env("HOME") + "/.cache/llmcpu";
  return cache + "/npm/node_modules";
}

struct NodeReference {
  std::string node;     // node's path
  std::string modules;  // npm_modules_dir()
  std::string missing;  // why the reference cannot run, with what to do; empty when it can
};

// node and the npm packages `packages` (names under node_modules, "@huggingface/jinja").
inline NodeReference find_node_reference(std::initializer_list<const char*> packages) {
  NodeReference r;
  const Outcome found = run_shell("command -v node 2>/dev/null");
  r.node = found.output.substr(0, found.output.find('\n'));
  r.modules = npm_modules_dir();
  const char* hint =
      "; install node with tools/install-deps.sh, then run tools/fetch-data.sh --tests";
  if (found.status != 0 || r.node.empty()) {
    r.missing = std::string("node is not installed") + hint;
    return r;
  }
  for (const char* p : packages) {
    const std::string dir = r.modules + "/" + p;
    if (!std::filesystem::exists(dir + "/package.json")) {
      r.missing = dir + " is missing" + hint;
      break;
    }
  }
  return r;
}

}  // namespace llmcpu::testing
