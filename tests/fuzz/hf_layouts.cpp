// The small tokenizer.json layouts of the fuzz targets (hf_layouts.h), written with nlohmann::json
// as Hugging Face's tokenizers writes them (keys in its order).
#include "tests/fuzz/hf_layouts.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/tokenizer/tokenizer.h"

namespace llmcpu::fuzz {

namespace {

using Json = nlohmann::ordered_json;

const char* const kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A byte string in GPT-2's byte alphabet ("Ġthe" for " the").
std::string byte_level(const std::string& bytes) {
  std::string s;
  for (const char c : bytes)
    s += utf8(static_cast<char32_t>(byte_to_unicode(static_cast<unsigned char>(c))));
  return s;
}

// A vocabulary being built: tokens get the next id.
struct Vocab {
  Json tokens = Json::object();
  Json merges = Json::array();
  int next = 0;

  void add(const std::string& token) {
    if (!tokens.contains(token)) tokens[token] = next++;
  }
  // The merge of a and b, and its result as a token. `pairs`: [a, b] rather than "a b".
  void merge(const std::string& a, const std::string& b, bool pairs) {
    merges.push_back(pairs ? Json::array({a, b}) : Json(a + " " + b));
    add(a + b);
  }
};

// The 256 bytes in GPT-2's alphabet (ids 0..255 in byte order), then merges over English-like
// text; the pairs are given as bytes.
Vocab byte_level_vocab(bool pairs) {
  Vocab v;
  for (int b = 0; b < 256; ++b) v.add(byte_level(std::string(1, static_cast<char>(b))));
  const std::pair<const char*, const char*> merges[] = {
      {" ", "t"}, {"h", "e"},   {" t", "he"}, {"i", "n"},     {"in", "g"},      {" ", "a"},
      {"n", "d"}, {" a", "nd"}, {"e", "r"},   {"o", "n"},     {" ", " "},       {"  ", "  "},
      {"1", "2"}, {"12", "3"},  {"'", "s"},   {"\n", "\n"},   {"\xC3", "\xA9"}, {" ", "w"},
      {"o", "r"}, {" w", "or"}, {"l", "d"},   {" wor", "ld"}, {"T", "he"},      {".", "\n"}};
  for (const auto& [a, b] : merges) v.merge(byte_level(a), byte_level(b), pairs);
  return v;
}

Json added_token(int id, const std::string& content, bool special, bool lstrip = false,
                 bool rstrip = false, bool normalized = false) {
  return Json{{"id", id},          {"content", content}, {"single_word", false},
              {"lstrip", lstrip},  {"rstrip", rstrip},   {"normalized", normalized},
              {"special", special}};
}

Json bpe_model(const Vocab& v, bool byte_fallback, bool ignore_merges, const Json& unk) {
  return Json{{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", unk},
              {"continuing_subword_prefix", nullptr},
              {"end_of_word_suffix", nullptr},
              {"fuse_unk", !unk.is_null()},
              {"byte_fallback", byte_fallback},
              {"ignore_merges", ignore_merges},
              {"vocab", v.tokens},
              {"merges", v.merges}};
}

Json document(const Json& added, const Json& normalizer, const Json& pre, const Json& post,
              const Json& decoder, const Json& model) {
  return Json{{"version", "1.0"},       {"truncation", nullptr},    {"padding", nullptr},
              {"added_tokens", added},  {"normalizer", normalizer}, {"pre_tokenizer", pre},
              {"post_processor", post}, {"decoder", decoder},       {"model", model}};
}

Json byte_level_pre(bool add_prefix_space, bool use_regex) {
  return Json{{"type", "ByteLevel"},
              {"add_prefix_space", add_prefix_space},
              {"trim_offsets", true},
              {"use_regex", use_regex}};
}

Json split(const char* regex) {
  return Json{{"type", "Split"},
              {"pattern", {{"Regex", regex}}},
              {"behavior", "Isolated"},
              {"invert", false}};
}

// TemplateProcessing that puts `bos` (id `id`) before a single text.
Json bos_template(const std::string& bos, int id) {
  return Json{{"type", "TemplateProcessing"},
              {"single", Json::array({Json{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                      Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
              {"pair", Json::array({Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                    Json{{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
              {"special_tokens", {{bos, {{"id", bos}, {"ids", {id}}, {"tokens", {bos}}}}}}};
}

const Json kNull = nullptr;

// A layout with a tokenizer_config.json that sets clean_up_tokenization_spaces and the `extra` keys
// (", \"key\": value" each).
HfLayout with_config(const char* name, const Json& doc, bool clean_up, const char* extra = "") {
  return {name, doc.dump(),
          std::string("{\"clean_up_tokenization_spaces\": ") + (clean_up ? "true" : "false") +
              extra + "}",
          clean_up};
}

// The vocabulary of the SentencePiece-like layouts: <unk>, <s>, </s>, then (byte_fallback) the
// 256 byte tokens <0x00>..<0xFF>, then pieces over English-like text.
Vocab piece_vocab(bool byte_tokens) {
  Vocab v;
  for (const char* t : {"<unk>", "<s>", "</s>"}) v.add(t);
  if (byte_tokens) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      v.add(name);
    }
  }
  const std::string m = kMeta;
  for (const char* c : {"t", "h", "e", "a", "n", "d", "i", "g", "o", "r", "w", "l", "s", "T", ".",
                        ",", "1", "2", "\xC3\xA9"}) {
    v.add(c);
  }
  v.add(m);
  const std::pair<std::string, std::string> merges[] = {
      {m, "t"},        {"h", "e"},  {m + "t", "he"},   {m, "a"},   {"n", "d"},
      {m + "a", "nd"}, {"i", "n"},  {"in", "g"},       {m, "w"},   {"o", "r"},
      {m + "w", "or"}, {"l", "d"},  {m + "wor", "ld"}, {"1", "2"}, {m, m},
      {m + m, m + m},  {"T", "he"}, {m, "T"}};
  for (const auto& [a, b] : merges) v.merge(a, b, false);
  return v;
}

}  // namespace

HfLayout gpt2_layout() {
  Vocab v = byte_level_vocab(false);
  const int eot = v.next;
  v.add("<|endoftext|>");
  const Json doc = document(Json::array({added_token(eot, "<|endoftext|>", true)}), kNull,
                            byte_level_pre(false, true), byte_level_pre(false, true),
                            Json{{"type", "ByteLevel"},
                                 {"add_prefix_space", true},
                                 {"trim_offsets", true},
                                 {"use_regex", true}},
                            bpe_model(v, false, false, kNull));
  return with_config("gpt2", doc, false);
}

HfLayout llama3_layout() {
  Vocab v = byte_level_vocab(true);
  v.add(byte_level(" hello"));  // no merges make it: only ignore_merges takes it whole
  const int bos = v.next;
  Json added = Json::array();
  for (const char* t : {"<|begin_of_text|>", "<|end_of_text|>"}) {
    added.push_back(added_token(v.next, t, true));
    v.add(t);
  }
  const Json pre = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({split(kLlama3Pattern), byte_level_pre(false, false)})}};
  const Json post = {{"type", "Sequence"},
                     {"processors", Json::array({Json{{"type", "ByteLevel"},
                                                      {"add_prefix_space", true},
                                                      {"trim_offsets", false},
                                                      {"use_regex", true}},
                                                 bos_template("<|begin_of_text|>", bos)})}};
  const Json doc = document(added, kNull, pre, post, byte_level_pre(true, true),
                            bpe_model(v, false, true, kNull));
  return with_config("llama3", doc, false, ", \"bos_token\": \"<|begin_of_text|>\"");
}

HfLayout qwen2_layout() {
  Vocab v = byte_level_vocab(false);
  Json added = Json::array();
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back(added_token(v.next, t, true));
    v.add(t);
  }
  const Json pre = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({split(kQwen2Pattern), byte_level_pre(false, false)})}};
  const Json doc = document(added, Json{{"type", "NFC"}}, pre, byte_level_pre(false, false),
                            byte_level_pre(false, false), bpe_model(v, false, false, kNull));
  return with_config("qwen2", doc, false, ", \"eos_token\": \"<|endoftext|>\"");
}

HfLayout sentencepiece_layout() {
  const Vocab v = piece_vocab(true);
  Json added = Json::array();
  for (int id = 0; id < 3; ++id) {
    added.push_back(added_token(id, id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>", true));
  }
  const Json normalizer = {
      {"type", "Sequence"},
      {"normalizers",
       Json::array(
           {Json{{"type", "Prepend"}, {"prepend", kMeta}},
            Json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}};
  const Json decoder = {
      {"type", "Sequence"},
      {"decoders",
       Json::array({Json{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                    Json{{"type", "ByteFallback"}}, Json{{"type", "Fuse"}},
                    Json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  const Json doc = document(added, normalizer, kNull, bos_template("<s>", 1), decoder,
                            bpe_model(v, true, false, "<unk>"));
  return with_config("sentencepiece", doc, false,
                     ", \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_bos_token\": true");
}

HfLayout metaspace_layout() {
  const Vocab v = piece_vocab(false);
  Json added = Json::array();
  for (int id = 0; id < 3; ++id) {
    added.push_back(added_token(id, id == 0 ? "<unk>" : id == 1 ? "<s>" : "</s>", true));
  }
  const Json meta = {
      {"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", false}};
  const Json doc = document(added, kNull, meta, kNull, meta, bpe_model(v, false, false, "<unk>"));
  return {"metaspace", doc.dump(), "", true};
}

HfLayout digits_layout() {
  Vocab v;
  v.add("<unk>");
  for (const char* c : {"a", "b", "c", "d", "e", "g", "h", "i", "l", "n", "o", "r",
                        "s", "t", "w", "0", "1", "2", "3", ".", ",", "!", "'"}) {
    v.add(c);
    v.add(std::string(c) + "</w>");
  }
  const std::pair<const char*, const char*> merges[] = {
      {"t", "h"}, {"th", "e</w>"}, {"a", "n"}, {"an", "d</w>"}, {"i", "n"}, {"in", "g</w>"}};
  for (const auto& [a, b] : merges) v.merge(a, b, false);
  Json model = bpe_model(v, false, false, "<unk>");
  model["end_of_word_suffix"] = "</w>";
  model["fuse_unk"] = false;
  const Json normalizer = {
      {"type", "Sequence"},
      {"normalizers", Json::array({Json{{"type", "NFD"}}, Json{{"type", "StripAccents"}},
                                   Json{{"type", "Lowercase"}}})}};
  const Json pre = {
      {"type", "Sequence"},
      {"pretokenizers", Json::array({Json{{"type", "Whitespace"}},
                                     Json{{"type", "Digits"}, {"individual_digits", true}}})}};
  const Json doc =
      document(Json::array({added_token(0, "<unk>", true)}), normalizer, pre, kNull, kNull, model);
  return {"digits", doc.dump(), "", true};
}

HfLayout added_tokens_layout() {
  Vocab v = byte_level_vocab(false);
  Json added = Json::array();
  const auto add = [&](const char* content, bool special, bool lstrip, bool rstrip,
                       bool normalized) {
    added.push_back(added_token(v.next, content, special, lstrip, rstrip, normalized));
    v.add(content);
  };
  const int bos = v.next;
  add("<s>", true, false, false, false);
  add("</s>", true, false, false, false);
  add("<mask>", true, true, false, false);
  add("[SEP]", true, false, true, false);
  add("ab", false, true, true, false);
  add("Hello", false, false, false, true);
  Json post = bos_template("<s>", bos);
  post["single"].push_back(Json{{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}});
  post["special_tokens"]["</s>"] = {{"id", "</s>"}, {"ids", {bos + 1}}, {"tokens", {"</s>"}}};
  const Json doc = document(added, Json{{"type", "Lowercase"}}, byte_level_pre(true, true), post,
                            byte_level_pre(true, true), bpe_model(v, false, false, kNull));
  return {"added_tokens", doc.dump(), "", true};
}

std::vector<HfLayout> hf_layouts() {
  return {gpt2_layout(),      llama3_layout(), qwen2_layout(),       sentencepiece_layout(),
          metaspace_layout(), digits_layout(), added_tokens_layout()};
}

}  // namespace llmcpu::fuzz
