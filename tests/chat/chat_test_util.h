// Helpers of the chat-template tests: where the reference is (node, and the npm packages
// @huggingface/jinja 0.5.11 and @huggingface/ollama-utils 0.0.18 in the cache folder that
// tools/fetch-data.sh --tests fills), running it on templates and variables, files, and readable
// descriptions of where two texts differ.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/npm_modules.h"
#include "tests/common/process.h"

namespace llmcpu::testing {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A scratch folder of this process under the test temporary folder.
inline std::string scratch_dir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "llmcpu_chat_" + name + "_" + std::to_string(::getpid());
  fs::create_directories(dir);
  return dir;
}

inline std::string unbase64(const std::string& text) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : text) {
    const int d = c >= 'A' && c <= 'Z'   ? c - 'A'
                  : c >= 'a' && c <= 'z' ? c - 'a' + 26
                  : c >= '0' && c <= '9' ? c - '0' + 52
                  : c == '+'             ? 62
                  : c == '/'             ? 63
                                         : -1;
    if (d < 0) continue;
    v = v << 6 | static_cast<uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xFF);
    }
  }
  return out;
}

struct ChatReference {
  std::string node, jinja_dir, ollama_dir;
  std::string missing;  // why the reference cannot run, with what to do; empty when it can
};

inline ChatReference find_chat_reference() {
  const NodeReference node =
      find_node_reference({"@huggingface/jinja", "@huggingface/ollama-utils"});
  ChatReference r;
  r.node = node.node;
  r.jinja_dir = node.modules + "/@huggingface/jinja";
  r.ollama_dir = node.modules + "/@huggingface/ollama-utils";
  r.missing = node.missing;
  return r;
}

// One rendering by the reference: the text, or the error and whether it came from parsing.
struct Rendered {
  bool ok = false;
  std::string text;
  std::string stage, error;
};

// Renders every template with every context; result[t][c]. Fails the test (and returns nothing)
// when the script fails.
inline std::vector<std::vector<Rendered>> run_jinja_reference(
    const ChatReference& ref, const std::vector<std::string>& templates,
    const std::vector<Json>& contexts) {
  const std::string dir = scratch_dir("reference");
  const std::string job = dir + "/job.json";
  Json j;
  j["templates"] = templates;
  j["contexts"] = contexts;
  write_file(job, j.dump());
  const std::string cmd =
      shell_quote(ref.node) + " " + shell_quote(LLMCPU_CHAT_TEST_DIR "/jinja_reference.mjs") + " " +
      shell_quote(ref.jinja_dir) + " " + shell_quote(job) + " 2>" + shell_quote(job + ".stderr");
  const auto [status, out] = run_shell(cmd);
  std::vector<std::vector<Rendered>> result;
  if (status != 0) {
    ADD_FAILURE() << "the reference failed (status " << status << "): " << cmd << "\n"
                  << read_file(job + ".stderr");
    return result;
  }
  std::istringstream lines(out);
  std::string line;
  for (size_t t = 0; t < templates.size(); ++t) {
    result.emplace_back();
    for (size_t c = 0; c < contexts.size(); ++c) {
      if (!std::getline(lines, line)) {
        ADD_FAILURE() << "the reference answered for fewer renderings than asked";
        return {};
      }
      const Json r = Json::parse(line);
      Rendered x;
      x.ok = r.at("ok").get<bool>();
      if (x.ok) {
        x.text = unbase64(r.at("text").get<std::string>());
      } else {
        x.stage = r.at("stage").get<std::string>();
        x.error = r.at("error").get<std::string>();
      }
      result.back().push_back(std::move(x));
    }
  }
  fs::remove_all(dir);
  return result;
}

// Bytes as a readable quoted string: \n, \t, \\, \" escaped; at most `max` bytes.
inline std::string printable(const std::string& s, size_t max = 120) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const char c = s[i];
    out += c == '\n'   ? "\\n"
           : c == '\t' ? "\\t"
           : c == '"'  ? "\\\""
           : c == '\\' ? "\\\\"
                       : std::string(1, c);
  }
  return out + (s.size() > max ? "\"..." : "\"");
}

// Where two texts first differ: the byte offset and both sides from a little before it.
inline std::string text_difference(const std::string& ours, const std::string& ref) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  const size_t lo = i >= 24 ? i - 24 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (ours " << ours.size() << " bytes, reference "
     << ref.size() << ")\n      ours[" << lo << "..]: " << printable(ours.substr(lo), 80)
     << "\n       ref[" << lo << "..]: " << printable(ref.substr(lo), 80);
  return os.str();
}

}  // namespace llmcpu::testing
