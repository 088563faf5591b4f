// core/tokenizer/hf_pattern.h against tokenizers.js (the npm package @huggingface/tokenizers,
// run by node at test time through tests/tokenizer/pattern_reference.mjs): for the patterns of
// real tokenizer.json files and for each supported Oniguruma construct, on fixed and seeded random
// texts, the Split pre-tokenizer's three behaviours (Isolated pieces, inverted matches, Removed
// split) and the Replace normalizer must give exactly tokenizers.js's strings. Without node or the
// package the reference tests fail and say how to get them. The refusals are tested without node.
//
// The texts hold no character assigned after Unicode 14: PCRE2 10.42's tables are Unicode 14,
// node's are newer, and \p{..} of a later character would differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "core/tokenizer/hf_pattern.h"
#include "core/tokenizer/unicode_text.h"
#include "simd/error.h"
#include "tests/tokenizer/test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;
using hf::Pattern;

// A pattern as tokenizer.json writes it: {"Regex": source} or {"String": source}.
struct Spec {
  bool regex;
  std::string source;
};
Spec R(std::string s) { return {true, std::move(s)}; }
Spec S(std::string s) { return {false, std::move(s)}; }

struct Case {
  Spec pattern;
  std::string content;  // the Replace normalizer's replacement
  std::string text;
};

// What tokenizers.js gives (or the error it throws).
struct Outputs {
  bool error = false;
  std::string message;
  std::vector<std::string> isolated, matches, removed;
  std::string replaced;
  bool operator==(const Outputs& o) const {
    return error == o.error && isolated == o.isolated && matches == o.matches &&
           removed == o.removed && replaced == o.replaced;
  }
};

// The package folder: the cache's npm/node_modules, else $LLMCPU_HF_TOKENIZERS_JS.
std::string package_folder(std::string* missing) {
  std::vector<std::string> tried;
  try {
    tried.push_back(cache_dir() + "/npm/node_modules/@huggingface/tokenizers");
  } catch (const std::exception&) {
  }
  if (const char* env = std::getenv("LLMCPU_HF_TOKENIZERS_JS")) tried.push_back(env);
  for (const std::string& dir : tried) {
    if (fs::exists(dir + "/dist/tokenizers.mjs")) return dir;
  }
  *missing =
      "tokenizers.js (@huggingface/tokenizers@0.2.0) is not in the cache folder's "
      "npm/node_modules nor at $LLMCPU_HF_TOKENIZERS_JS; " +
      std::string(kSetupHint);
  return "";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string unhex(const std::string& h) {  // "x" + hex digits
  std::string out;
  for (size_t i = 1; i + 1 < h.size(); i += 2) {
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  }
  return out;
}

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

std::vector<std::string> unhex_list(const std::string& field) {
  std::vector<std::string> out;
  if (!field.empty()) {
    for (const std::string& h : split_on(field, ',')) out.push_back(unhex(h));
  }
  return out;
}

// Runs tokenizers.js over all the cases at once.
std::vector<Outputs> reference(const std::vector<Case>& cases, const std::string& dir) {
  std::string missing;
  const std::string package = package_folder(&missing);
  const Outcome which = run_shell("command -v node 2>/dev/null");
  if (which.status != 0) missing = "node is not installed; " + std::string(kSetupHint);
  if (!missing.empty()) {
    ADD_FAILURE() << missing;
    return {};
  }
  std::string json = "[";
  for (const Case& c : cases) {
    json += json.size() > 1 ? ",\n" : "\n";
    json += "{\"pattern\": {\"" + std::string(c.pattern.regex ? "Regex" : "String") +
            "\": " + json_string(c.pattern.source) + "}, \"content\": " + json_string(c.content) +
            ", \"text\": " + json_string(c.text) + "}";
  }
  write_file(dir + "/cases.json", json + "]");
  const Outcome r =
      run_shell("node " + shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/pattern_reference.mjs") + " " +
                shell_quote(package) + " " + shell_quote(dir + "/cases.json"));
  EXPECT_EQ(r.status, 0) << r.output;
  std::vector<Outputs> all;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const std::vector<std::string> f = split_on(line, '\t');
    Outputs o;
    o.error = f[0] == "error";
    if (o.error) {
      o.message = f.size() > 1 ? f[1] : "";
    } else if (f.size() == 5) {
      o.isolated = unhex_list(f[1]);
      o.matches = unhex_list(f[2]);
      o.removed = unhex_list(f[3]);
      o.replaced = unhex(f[4]);
    }
    all.push_back(std::move(o));
  }
  EXPECT_EQ(all.size(), cases.size()) << r.output.substr(0, 2000);
  return all;
}

// The same four outputs from Pattern: tokenizers.js's regex_split, match, split and replaceAll.
Outputs ours(const Case& c) {
  Outputs o;
  try {
    const Pattern plain = c.pattern.regex ? Pattern::regex(c.pattern.source, "test pattern")
                                          : Pattern::literal(c.pattern.source, false);
    const Pattern split = c.pattern.regex ? Pattern::regex(c.pattern.source, "test pattern")
                                          : Pattern::literal(c.pattern.source, true);
    std::vector<Pattern::Span> spans;
    plain.matches(c.text, spans);
    size_t prev = 0;
    for (const Pattern::Span& s : spans) {
      if (prev < s.begin) o.isolated.push_back(c.text.substr(prev, s.begin - prev));
      if (s.end > s.begin) {
        o.isolated.push_back(c.text.substr(s.begin, s.end - s.begin));
        o.matches.push_back(c.text.substr(s.begin, s.end - s.begin));
      }
      prev = s.end;
    }
    if (prev < c.text.size()) o.isolated.push_back(c.text.substr(prev));
    split.split(c.text, o.removed);
    o.replaced = plain.replace_all(c.text, c.content);
  } catch (const Error& e) {
    o.error = true;
    o.message = e.what();
  }
  return o;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string show(const std::vector<std::string>& pieces) {
  std::string out = "[";
  for (const std::string& p : pieces) {
    if (out.size() > 1) out += '|';
    out += printable(p);
  }
  return out + "]";
}

std::string show(const Outputs& o) {
  if (o.error) return "error: " + o.message;
  return "isolated " + show(o.isolated) + "\n  matches " + show(o.matches) + "\n  removed " +
         show(o.removed) + "\n  replaced [" + printable(o.replaced) + "]";
}

// Whether tokenizers.js cut an astral character in two: node's RegExp (V8), against ECMAScript's
// rule for the "u" flag, also tries the position between the two UTF-16 halves of an astral
// character while it searches, and a pattern that matches the empty string there (as ^, $, \A,
// \z, \Z and \B can) cuts it; its halves come back as U+FFFD. UTF-8 has no such position, and
// Pattern follows the specification.
bool cuts_astral(const Outputs& o, const std::string& text) {
  const std::string replacement = "\xEF\xBF\xBD";
  if (text.find(replacement) != std::string::npos) return false;
  bool cut = o.replaced.find(replacement) != std::string::npos;
  for (const auto* pieces : {&o.isolated, &o.matches, &o.removed}) {
    for (const std::string& p : *pieces) cut = cut || p.find(replacement) != std::string::npos;
  }
  return cut;
}

// Compares every case with tokenizers.js; at most `report` differences are printed. Cases where
// tokenizers.js cuts an astral character are passed over, for the patterns in `may_cut` only.
void compare(const std::vector<Case>& cases, const std::string& dir,
             const std::vector<std::string>& may_cut = {}, size_t report = 10) {
  const std::vector<Outputs> expected = reference(cases, dir);
  if (expected.size() != cases.size()) return;
  size_t differ = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Outputs got = ours(cases[k]);
    if (got == expected[k]) continue;
    if (cuts_astral(expected[k], cases[k].text) &&
        std::find(may_cut.begin(), may_cut.end(), cases[k].pattern.source) != may_cut.end()) {
      continue;
    }
    if (++differ > report) continue;
    ADD_FAILURE() << (cases[k].pattern.regex ? "Regex " : "String ") << "pattern ["
                  << printable(cases[k].pattern.source) << "] on [" << printable(cases[k].text)
                  << "] content [" << printable(cases[k].content) << "]\n ours: " << show(got)
                  << "\n tokenizers.js: " << show(expected[k]);
  }
  EXPECT_EQ(differ, 0u) << "cases that differ, of " << cases.size();
}

// Pieces of the texts: prose, contractions in both cases, digit runs, whitespace of every kind
// (tab, CRLF, U+0085, U+00A0, U+2028, U+3000, U+FEFF), scripts, long s (U+017F) and the Kelvin
// sign (U+212A) that Unicode case folding maps to ASCII, emoji with ZWJ and modifiers, astral
// letters, combining marks.
const std::vector<std::string> kPieces = {"Hello",
                                          " world",
                                          "'s",
                                          "'S",
                                          "'T",
                                          "'re",
                                          "'LL",
                                          " don't",
                                          "I'M",
                                          "123",
                                          "4567890",
                                          " 42",
                                          "\t",
                                          "\t\t",
                                          "  ",
                                          "   ",
                                          "\n",
                                          "\r\n",
                                          "\n\n",
                                          "\xC2\x85",
                                          "\xC2\xA0",
                                          "\xE2\x80\xA8",
                                          "\xE3\x80\x80",
                                          "\xEF\xBB\xBF",
                                          "日本語",
                                          "中文字符",
                                          "ひらがな",
                                          "カタカナ",
                                          "한국어",
                                          "مرحبا",
                                          "नमस्ते",
                                          "Привет",
                                          "ſ",
                                          "\xE2\x84\xAA",
                                          "😀",
                                          "👨‍👩‍👧",
                                          "👍🏽",
                                          "𝔘𝔫𝔦",
                                          "𠀀",
                                          "e\xCC\x81",
                                          "ñ",
                                          "...",
                                          "!?",
                                          "—",
                                          "…",
                                          "。",
                                          "，",
                                          "(x)",
                                          "$5",
                                          "x_y",
                                          "²³",
                                          "½",
                                          "٣٤",
                                          "0x1F",
                                          "ß",
                                          "İ",
                                          "ǅ",
                                          "ʰ",
                                          "ABC",
                                          "abc",
                                          "a",
                                          "A",
                                          "/",
                                          "\\",
                                          " ",
                                          "।",
                                          "Ωμέγα",
                                          "über",
                                          "{2}",
                                          "a-b"};

const std::vector<std::string> kTexts = {
    "",
    "Hello world! It's a test: we're 2 seconds in; they'LL say I'M fine, don't they?",
    "Numbers 1 12 123 1234 12345 and 3.14159 or ٣٤٥ and ²³ and ½.",
    "  leading spaces\ttabs\t\tand trailing   \n\nlines\r\nCRLF\r\n",
    "nbsp\xC2\xA0nel\xC2\x85ls\xE2\x80\xA8ideo\xE3\x80\x80"
    "bom\xEF\xBB\xBF"
    "end",
    "日本語のテキスト、中文（简体）。한국어 텍스트. Русский текст с ſ и \xE2\x84\xAA.",
    "مرحبا بالعالم، नमस्ते दुनिया। Ωμέγα über straße İstanbul ǅ ʰ",
    "emoji 😀👍🏽 family 👨‍👩‍👧 astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀𠀁 combining "
    "e\xCC\x81 "
    "n\xCC\x83",
    "a",
    " ",
    "\n",
    "'s",
    "'S'T'RE",
    "x_y-z/w\\v",
    "{2}{,3}[x](y)",
};

std::vector<std::string> random_texts(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  for (size_t k = 0; k < n; ++k) {
    std::string t;
    const size_t pieces = 1 + rng() % 12;
    for (size_t p = 0; p < pieces; ++p) t += kPieces[rng() % kPieces.size()];
    texts.push_back(t);
  }
  return texts;
}

// Every fixed text, every piece alone and `random` seeded random texts, with one pattern.
void add_cases(std::vector<Case>& cases, const Spec& pattern, size_t random,
               const std::string& content = "<$&>") {
  for (const std::string& t : kTexts) cases.push_back({pattern, content, t});
  for (const std::string& t : kPieces) cases.push_back({pattern, content, t});
  for (const std::string& t : random_texts(static_cast<uint32_t>(cases.size()), random)) {
    cases.push_back({pattern, content, t});
  }
}

class HfPatternReference : public TempDirTest {};

// The pre-tokenisation patterns of real tokenizer.json files.
TEST_F(HfPatternReference, RealPatterns) {
  const std::vector<Spec> patterns = {
      // GPT-2
      R("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"),
      // Llama 3
      R("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
      // Qwen2
      R("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
      // GPT-4o (o200k)
      R("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+("
        "?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+["
        "\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
        "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
      // DeepSeek
      R("\\p{N}{1,3}"),
      R("[一-龥\\u3040-ゟ゠-ヿ]+"),
      // Bloom (tokenizers.js's special case)
      R("[^(\\s|[.,!?…。，、।۔،])]+"),
      // Metaspace and whitespace splits
      S(" "),
      S("▁"),
  };
  std::vector<Case> cases;
  for (const Spec& p : patterns) add_cases(cases, p, 300);
  compare(cases, dir_.string());
}

// Each supported construct.
TEST_F(HfPatternReference, Constructs) {
  const std::vector<std::string> patterns = {
      ".",
      "^a|b$",
      "^",
      "$",
      "^\\s+|\\s+$",
      "\\b",
      "\\B",
      "\\b\\w+\\b",
      "\\w+",
      "\\W+",
      "\\d+",
      "\\D+",
      "\\h+",
      "\\H+",
      "\\A\\s*",
      "\\s*\\z",
      "\\Z",
      "\\n\\Z",
      "\\s\\S",
      "\\p{L}++",
      "\\p{N}*+",
      "(?>\\p{L}+)",
      "\\p{N}{2}+",
      "\\p{L}{1,2}*",
      "x*",
      "(?=a)",
      "(?!a)",
      "a|",
      "(?:)",
      "[a-c]*?",
      "\\p{L}+?",
      "\\p{L}??",
      "(\\s)",
      "(\\p{L})(\\p{N})?",
      "(?<w>\\p{L}+)",
      "(|a)",
      "(?i:abc|ſ|k)",
      "(?i:'s|'t)",
      "(?i:[a-c])",
      "(?i:[^a-z])",
      "(?i:\\x41|\\u0062|\\x{63}|\\p{Lu})",
      "(?i:[[:lower:]])",
      "[[:alpha:]]+",
      "[[:^digit:]]+",
      "[[:punct:]]",
      "[[:space:][:upper:]]+",
      "[[:word:]]+",
      "[[:xdigit:]]+",
      "[[:blank:]]",
      "[[:cntrl:]]",
      "[[:alnum:]]+",
      "[\\w&&[^\\d]]+",
      "[a-z&&[^aeiou]]+",
      "[^[a-z][0-9]]+",
      "[\\p{L}&&\\p{Lu}]",
      "[^\\p{L}&&[a-z]]",
      "[\\W\\d]",
      "[\\H]+",
      "[\\P{Word}x]",
      "\\p{Han}+",
      "\\p{Hiragana}+",
      "\\p{Greek}",
      "\\p{Cyrillic}+",
      "\\p{Script=Latin}+",
      "\\p{sc=Arab}+",
      "\\p{scx=Deva}+",
      "\\p{Word}+",
      "\\P{Word}+",
      "[\\p{Word}]+",
      "\\p{Alphabetic}+",
      "\\p{White_Space}",
      "\\p{Lu}\\p{Ll}+",
      "\\P{L}+",
      "\\p{Emoji}",
      "\\p{Extended_Pictographic}+",
      "\\p{Any}",
      "\\x{3000}",
      "\\u00A0",
      "\\x2F",
      "\\cJ",
      "[\\s\\S]",
      "\\e|\\a|\\t|\\f|\\v",
      "[\\t\\n\\r]+",
      "(?<=\\p{L})\\p{N}",
      "(?<!\\s)\\s",
      "(?<=ab|c)\\w",
      "(?<=\\b)\\w",
      "a{,2}",
      "\\p{N}{1,3}",
      "\\p{N}{2,}",
      "[\\-\\]]",
      "[a\\-z]",
      "[-a]",
      "[a-]",
      "[]a]",
      "[^]a]",
      "\\.",
      "\\{1\\}",
      "{",
      "a{x}",
      "}",
      "]",
      "a{2",
      "{2}",
      "x|{2}",
      "[^\\s\\p{L}\\p{N}]+",
      "\\G\\w",
      "\\s+(?!\\S)",
      "[一-龥]+",
      "\\x{1F600}",
      "\\uD83D\\uDE00",
      "\\b+",
      "\\p{L}\\B\\p{L}",
      "[\\x{1F300}-\\x{1F5FF}]",
      "[\\u3040-\\u309F]+",
      "(?:\\p{L}|\\p{N})+",
      "(\\p{L}+)|(\\p{N}+)",
      "\\/",
      "\\-",
      "\\'",
      "[^\\x00-\\x7F]+",
      "\\0",
      "[.*+?]",
      "(?<a_1>x)|(?<b>y)",
      "\\p{L}(?=\\p{N})",
      "(?=\\p{Lu})",
  };
  const std::vector<std::string> may_cut = {"^",   "$",      "^a|b$",   "^\\s+|\\s+$", "\\B",
                                            "\\Z", "\\n\\Z", "\\A\\s*", "\\s*\\z"};
  std::vector<Case> cases;
  for (const std::string& p : patterns) add_cases(cases, R(p), 20);
  compare(cases, dir_.string(), may_cut);
}

// Replacement strings: $&, $1, $nn, $$, $`, $', $<name> and $ kept as text.
TEST_F(HfPatternReference, Replacements) {
  const std::vector<std::string> patterns = {"(\\p{L})(\\p{N})?", "(?<w>\\p{L}+)", "\\s+", "x*",
                                             "(a)(b)?(c)?(d)?(e)?(f)?(g)?(h)?(i)?(j)?(k)?"};
  const std::vector<std::string> contents = {
      "$&", "[$1]", "$$", "$`",  "$'", "<$2|$1>", "$10", "$01", "$0",      "$00",    "$<w>",
      "$<", "$<w",  "$9", "$11", "$",  "a$",      "▁",   "",    "$<nope>", "$1$1$$&"};
  std::vector<Case> cases;
  for (const std::string& p : patterns) {
    for (const std::string& c : contents) {
      for (const char* t : {"abc a1 b22 c3d", "", "  x  ", "abcdefghijk"}) {
        cases.push_back({R(p), c, t});
      }
    }
  }
  for (const std::string& c : contents) cases.push_back({S("b"), c, "abcb"});
  compare(cases, dir_.string());
}

// String patterns: the text itself, whatever it holds.
TEST_F(HfPatternReference, StringPatterns) {
  std::vector<Case> cases;
  for (const char* s : {"", "ab", ".*", "$1", "(x)", "\\", "[", "▁▁", "\n", "😀"}) {
    add_cases(cases, S(s), 20, "[$&]");
    add_cases(cases, S(s), 5, "<->");  // no $ forms: replaced as bytes
  }
  compare(cases, dir_.string());
}

// Patterns tokenizers.js cannot build are refused here too.
TEST_F(HfPatternReference, RejectedByBoth) {
  std::vector<Case> cases;
  for (const char* p :
       {"(?m:a)", "\\y", "\\K", "a**", "*", "\\p{Foo}", "\\p{lu}", "[a-\\d]", "[z-a]", "[[:foo:]]",
        "(", ")", "[a", "\\", "(?<=a)*", "\\p{Letter=L}", "\\x{110000}", "\\xZ"}) {
    cases.push_back({R(p), "", "abc"});
  }
  const std::vector<Outputs> expected = reference(cases, dir_.string());
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    EXPECT_TRUE(expected[k].error) << cases[k].pattern.source << ": tokenizers.js accepts it";
    EXPECT_TRUE(ours(cases[k]).error) << cases[k].pattern.source << ": accepted here";
  }
}

// The message names where, the construct and its byte offset.
void expect_refused(const std::string& source, const std::string& construct, size_t offset) {
  try {
    Pattern::regex(source, "tokenizer.json: pre_tokenizer.pattern.Regex");
    ADD_FAILURE() << source << ": compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer.json: pre_tokenizer.pattern.Regex: "), std::string::npos)
        << what;
    EXPECT_NE(what.find(construct), std::string::npos) << source << ": " << what;
    EXPECT_NE(what.find("at byte " + std::to_string(offset) + " "), std::string::npos)
        << source << ": " << what;
    EXPECT_NE(what.find("not supported"), std::string::npos) << what;
  }
}

TEST(HfPattern, RefusesByName) {
  expect_refused("a(b)+", "a capturing group inside a repeated group", 4);
  expect_refused("(?:a|)*x", "a repeated group that can match the empty string", 6);
  expect_refused("\\p{L}{0,2}+", "a repeated group that can match the empty string", 5);
  expect_refused("(a)\\1", "a backreference", 3);
  expect_refused("(?<n>a)\\k<n>", "a backreference \\k<name>", 7);
  expect_refused("ab(?m:c)", "this group syntax", 2);
  expect_refused("(?#note)", "this group syntax", 0);
  expect_refused("x(?<=a+)b", "a lookbehind whose length is not fixed", 1);
  expect_refused("(?<=a|bc?)", "a lookbehind whose length is not fixed", 0);
  expect_refused("ab\\K", "the escape \\K", 2);
  expect_refused("\\R", "the escape \\R", 0);
  expect_refused("a\\p{Foo}", "the Unicode property Foo", 1);
  expect_refused("[x\\p{Foo_Bar}]", "the Unicode property Foo_Bar", 2);
  expect_refused("\\p{Changes_When_NFKC_Casefolded}", "PCRE2 10.42 does not", 0);
  expect_refused("[a-\\d]", "a class range with a set at one end", 3);
  expect_refused("[[:graph:]]", "the POSIX bracket [:graph:]", 1);
  expect_refused("[[=a=]]", "equivalence class", 1);
  expect_refused("a**", "a quantifier with nothing to repeat", 2);
  expect_refused("x{99999}", "a repetition count above 65535", 1);
  expect_refused("(?=a)+", "a quantifier after an assertion", 5);
}

TEST(HfPattern, RefusesInvalidPatterns) {
  for (const char* bad : {"(", ")", "[a", "[]", "a\\", "\\xZ", "\\x{110000}", "[z-a]", "(?<1>x)",
                          "(?<a>x)(?<a>y)", "\\c1", "\\u{}", "[[:^:]]"}) {
    EXPECT_THROW(Pattern::regex(bad, "test"), Error) << bad;
  }
  // Deep nesting is refused, not a stack overflow.
  EXPECT_THROW(Pattern::regex(std::string(100000, '(') + std::string(100000, ')'), "t"), Error);
  EXPECT_THROW(Pattern::regex(std::string(100000, '[') + std::string(100000, ']'), "t"), Error);
  EXPECT_THROW(Pattern::regex("\xFF", "test"), Error);
  EXPECT_THROW(Pattern::literal("\xC3", false), Error);
}

TEST(HfPattern, CompiledSource) {
  EXPECT_EQ(Pattern::regex("\\s+", "t").compiled_source(), "\\p{White_Space}+");
  EXPECT_EQ(Pattern::regex("(?i:'s)", "t").compiled_source(), "(?:\\'[Ss])");
  EXPECT_EQ(Pattern::regex("\\p{Han}", "t").compiled_source(), "\\p{sc:Han}");
  EXPECT_EQ(Pattern::regex("[^\\s\\p{L}]", "t").compiled_source(), "[^\\p{White_Space}\\p{L}]");
  EXPECT_EQ(Pattern::regex("a++", "t").compiled_source(), "a+");
  EXPECT_EQ(Pattern::regex("a{2}+", "t").compiled_source(), "(?:a{2})+");
  EXPECT_EQ(Pattern::regex(".", "t").compiled_source(), "[^\\x{A}]");
  EXPECT_EQ(Pattern::literal("a.b", true).compiled_source(), "(a\\.b)");
}

// JavaScript's iteration: after an empty match the search resumes one code point later, so an
// empty match falls between the bytes of no character.
TEST(HfPattern, EmptyMatchesStepOneCodePoint) {
  const Pattern p = Pattern::regex("x*", "t");
  std::vector<Pattern::Span> spans;
  p.matches("aé😀", spans);
  ASSERT_EQ(spans.size(), 4u);
  const size_t begins[] = {0, 1, 3, 7};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(spans[k].begin, begins[k]);
    EXPECT_EQ(spans[k].end, begins[k]);
  }
  std::vector<std::string> pieces;
  p.split("aé😀", pieces);
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "é", "😀"}));
  EXPECT_EQ(p.replace_all("aé", "-"), "-a-é-");
  p.split("", pieces);
  EXPECT_TRUE(pieces.empty());
}

TEST(HfPattern, SplitKeepsCapturedGroups) {
  std::vector<std::string> pieces;
  Pattern::regex("(,)|(;)", "t").split("a,b;;c", pieces);
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", ",", "b", ";", ";", "c"}));
  Pattern::literal("--", true).split("x--y----", pieces);
  EXPECT_EQ(pieces, (std::vector<std::string>{"x", "--", "y", "--", "--"}));
}

// The hand-written matchers of Llama 3's and Qwen2's patterns (hf_pattern_fast.h) give exactly
// PCRE2's matches, on random texts made of the characters each alternative turns on: letters
// (those of the contractions among them), digits, apostrophes, every ASCII whitespace, punctuation
// and control characters, and non-ASCII letters, digits, spaces and symbols, where the hand
// matcher must hand over to PCRE2.
TEST(HfPattern, HandMatchersGivePcre2sMatches) {
  const std::vector<std::string> alphabet = {
      "s", "S", "t", "T", "r", "e", "E", "v", "m", "l", "L", "d", "x", "Q", "0", "1", "7", "'",
      "'", " ", " ", "\t", "\n", "\r", "\v", "\f", ".", ",", "!", "-", "\"", "(", "\x01",
      "\x1f", "\x7f", "\xC3\xA9", "\xC5\xBF", "\xC2\xA0", "\xE2\x80\x83", "\xD9\xA3",
      "\xC2\xB2", "\xE2\x80\x94", "\xE2\x80\x99", "\xF0\x9F\x98\x80", "\xC2\x85",
      "\xE2\x84\xAA", "\xCC\x81"};
  const char* const sources[] = {
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  std::mt19937 rng(20241128);
  for (const char* source : sources) {
    const Pattern hand = Pattern::regex(source, "t");
    const Pattern pcre2 = Pattern::regex(source, "t", false);
    ASSERT_TRUE(hand.hand_matched()) << source;
    ASSERT_FALSE(pcre2.hand_matched());
    std::vector<Pattern::Span> a, b;
    size_t differ = 0;
    for (int k = 0; k < 100000; ++k) {
      std::string text;
      const size_t len = 1 + rng() % 24;
      // Mostly ASCII (the hand matcher's ground), now and then anything of the alphabet.
      const size_t ascii = alphabet.size() - 12, pick = k % 4 == 0 ? alphabet.size() : ascii;
      for (size_t i = 0; i < len; ++i) text += alphabet[rng() % pick];
      hand.matches(text, a);
      pcre2.matches(text, b);
      bool same = a.size() == b.size();
      for (size_t i = 0; same && i < a.size(); ++i) {
        same = a[i].begin == b[i].begin && a[i].end == b[i].end;
      }
      if (!same && ++differ <= 5) {
        ADD_FAILURE() << "pattern " << source << ", text " << printable(text) << ": hand "
                      << a.size() << " matches, PCRE2 " << b.size();
      }
    }
    EXPECT_EQ(differ, 0u) << source;
  }
}

// unicode::replace_all (literal Replace normalizers, decoders, clean-up) against a plain search and
// copy, on random texts where the byte to replace falls at every place of the 8-byte steps of the
// one-byte case, and for longer `from`: sought by a byte inside it (" a", "a b"), by its last
// (letters and spaces only), and overlapping itself ("bb", "  ").
TEST(HfPattern, LiteralReplaceAllMatchesPlainLoop) {
  const auto plain = [](const std::string& text, const std::string& from, const std::string& to) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, from.size(), from) == 0) {
        out += to;
        i += from.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  };
  std::mt19937 rng(7);
  const std::string letters = "ab \xE2\x96\x81 ";
  for (int k = 0; k < 20000; ++k) {
    std::string text;
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) text += letters[rng() % letters.size()];
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {" ", "\xE2\x96\x81"}, {" ", ""}, {"a", "xyzxyzxyz"}, {"\xE2\x96\x81", " "},
             {"ab", "-"}, {" a", "!"}, {"a b", ""}, {"bb", "b"}, {"  ", " "}}) {
      ASSERT_EQ(unicode::replace_all(text, from, to), plain(text, from, to))
          << printable(text) << " " << printable(from);
    }
  }
}

// One Pattern matched from several threads at once gives what it gives on one.
TEST(HfPattern, ConcurrentUse) {
  const Pattern p = Pattern::regex(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "t");
  std::string text;
  for (const std::string& t : random_texts(7, 2000)) text += t;
  std::vector<Pattern::Span> expected;
  p.matches(text, expected);
  std::vector<int> same(8, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < same.size(); ++t) {
    threads.emplace_back([&, t] {
      std::vector<Pattern::Span> got;
      bool ok = true;
      for (int round = 0; round < 20; ++round) {
        p.matches(text, got);
        ok = ok && got.size() == expected.size();
        for (size_t k = 0; ok && k < got.size(); ++k) {
          ok = got[k].begin == expected[k].begin && got[k].end == expected[k].end;
        }
      }
      same[t] = ok;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int s : same) EXPECT_TRUE(s);
}

}  // namespace
}  // namespace llmcpu
