#include "core/tokenizer/hf_decoders.h"

#include "core/tokenizer/hf_normalizers.h"
#include "core/tokenizer/hf_pattern.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode_text.h"

namespace llmcpu::hf {

namespace {

// Bytes -> text as TextDecoder("utf-8") decodes them: invalid sequences become U+FFFD, and a
// leading byte order mark is dropped unless `keep_bom` (ignoreBOM: true).
std::string decode_bytes(const std::string& bytes, bool keep_bom) {
  std::string fixed;
  const bool valid = unicode::to_valid_utf8(bytes, fixed);
  std::string out = valid ? bytes : std::move(fixed);
  if (!keep_bom && out.compare(0, 3, "\xEF\xBB\xBF") == 0) out.erase(0, 3);
  return out;
}

// Runs of tokens that are not added tokens are joined, read back through GPT-2's byte alphabet
// (a character outside it reads as byte 0, as a Uint8Array makes of undefined) and decoded.
class ByteLevelDecoder : public Decoder {
 public:
  explicit ByteLevelDecoder(std::shared_ptr<const std::unordered_set<std::string>> added)
      : added_(std::move(added)) {
    for (int b = 0; b < 256; ++b)
      byte_of_[byte_to_unicode(static_cast<unsigned char>(b))] = static_cast<unsigned char>(b);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    bool open = false;
    for (const std::string& t : tokens) {
      if (added_->count(t)) {
        if (open) out.push_back(decode_bytes(bytes, true));
        bytes.clear();
        open = false;
        out.push_back(t);
        continue;
      }
      open = true;
      for (size_t pos = 0; pos < t.size();) {
        const unicode::CodePoint c = unicode::decode_at(t, pos);
        bytes += static_cast<char>(c.cp < kAlphabetEnd ? byte_of_[c.cp] : 0);
        pos += static_cast<size_t>(c.bytes);
      }
    }
    if (open) out.push_back(decode_bytes(bytes, true));
    tokens = std::move(out);
  }

 private:
  std::shared_ptr<const std::unordered_set<std::string>> added_;
  // The byte each character of GPT-2's alphabet (U+0000..U+0143) stands for; 0 for any other, as
  // tokenizers.js's Uint8Array makes of the undefined its lookup gives.
  static constexpr char32_t kAlphabetEnd = 324;
  unsigned char byte_of_[kAlphabetEnd] = {};
};

class MetaspaceDecoder : public Decoder {
 public:
  explicit MetaspaceDecoder(std::string replacement) : replacement_(std::move(replacement)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = unicode::replace_all(tokens[i], replacement_, " ");
      if (i == 0 && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
    }
  }

 private:
  std::string replacement_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

size_t utf16_length(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size();) {
    const unicode::CodePoint c = unicode::decode_at(s, pos);
    n += c.cp > 0xFFFF ? 2 : 1;
    pos += static_cast<size_t>(c.bytes);
  }
  return n;
}

int hex_value(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// The byte a token "<0xHH>" stands for, as tokenizers.js reads it: a token of 6 UTF-16 units
// starting "<0x" and ending ">", whose two middle characters parseInt(..., 16) reads as a number
// (leading whitespace, a sign, then hex digits while there are any), stored into a Uint8Array
// (modulo 256). -1 when it is not such a token.
int fallback_byte(const std::string& t) {
  if (t.size() < 6 || t.compare(0, 3, "<0x") != 0 || t.back() != '>' || utf16_length(t) != 6) {
    return -1;
  }
  std::vector<char32_t> mid;
  const std::string_view m = std::string_view(t).substr(3, t.size() - 4);
  for (size_t pos = 0; pos < m.size();) {
    const unicode::CodePoint c = unicode::decode_at(m, pos);
    mid.push_back(c.cp);
    pos += static_cast<size_t>(c.bytes);
  }
  size_t k = 0;
  while (k < mid.size() && unicode::is_js_space(mid[k])) ++k;
  int sign = 1;
  if (k < mid.size() && (mid[k] == '+' || mid[k] == '-')) sign = mid[k++] == '-' ? -1 : 1;
  if (k + 1 < mid.size() && mid[k] == '0' && (mid[k + 1] == 'x' || mid[k + 1] == 'X')) k += 2;
  int value = 0, digits = 0;
  for (; k < mid.size() && hex_value(mid[k]) >= 0; ++k, ++digits)
    value = value * 16 + hex_value(mid[k]);
  if (digits == 0) return -1;
  return ((sign * value) % 256 + 256) % 256;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    bool open = false;
    for (std::string& t : tokens) {
      const int b = fallback_byte(t);
      if (b >= 0) {
        bytes += static_cast<char>(b);
        open = true;
        continue;
      }
      if (open) out.push_back(decode_bytes(bytes, false));
      bytes.clear();
      open = false;
      out.push_back(std::move(t));
    }
    if (open) out.push_back(decode_bytes(bytes, false));
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

// Removes up to `start` leading and `stop` trailing characters equal to `content` from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, int64_t start, int64_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    // tokenizers.js compares one UTF-16 unit with content: only a one-unit content ever matches.
    if (content_.empty() || utf16_length(content_) != 1) return;
    for (std::string& t : tokens) {
      size_t begin = 0, end = t.size();
      for (int64_t i = 0; i < start_ && t.compare(begin, content_.size(), content_) == 0; ++i) {
        begin += content_.size();
        if (begin > t.size()) break;
      }
      for (int64_t i = 0; i < stop_ && end >= begin + content_.size() &&
                          t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      t = end > begin ? t.substr(begin, end - begin) : std::string();
    }
  }

 private:
  std::string content_;
  int64_t start_, stop_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// TemplateProcessing's "single": special tokens before and after the one sequence "A".
class Template : public PostProcessor {
 public:
  Template(std::vector<std::string> before, std::vector<std::string> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<std::string>& before, std::vector<std::string>& after,
               bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    before.insert(before.begin(), before_.begin(), before_.end());
    after.insert(after.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<std::string> before_, after_;
};

class NoSpecialTokens : public PostProcessor {
 public:
  void process(std::vector<std::string>&, std::vector<std::string>&, bool) const override {}
};

class SequencePost : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void process(std::vector<std::string>& before, std::vector<std::string>& after,
               bool add_special_tokens) const override {
    for (const auto& p : parts_) p->process(before, after, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const Node& node) {
  const Node single = node.at("single");
  std::vector<std::string> before, after;
  bool seen_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const Node item = single.item(i);
    if (item.has("SpecialToken")) {
      (seen_a ? after : before).push_back(item.at("SpecialToken").at("id").str());
    } else if (item.has("Sequence") && item.at("Sequence").at("id").str() == "A" && !seen_a) {
      seen_a = true;
    } else {
      item.fail(
          "expected {\"SpecialToken\": ...} or one {\"Sequence\": {\"id\": \"A\"}} in a "
          "single template");
    }
  }
  if (!seen_a) single.fail("the single template has no {\"Sequence\": {\"id\": \"A\"}}");
  return std::make_unique<Template>(std::move(before), std::move(after));
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(
    const Node& node, std::shared_ptr<const std::unordered_set<std::string>> added) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>(std::move(added));
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(node.str("replacement", "\xE2\x96\x81"));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(make_pattern(node, false), node.str("content", ""));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const auto count = [&](const char* key) {
      return node.has_non_null(key) ? node.integer(key) : int64_t{0};
    };
    return std::make_unique<StripDecoder>(node.str("content", ""), count("start"), count("stop"));
  }
  if (type == "Sequence") {
    const Node list = node.at("decoders");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto d = make_decoder(list.item(i), added);
      if (!d) list.item(i).fail("a null decoder in a Sequence");
      parts.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  node.fail(
      "decoder type \"" + type +
      "\" is not implemented (implemented: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
      "Strip, Sequence)");
}

std::unique_ptr<PostProcessor> make_post_processor(const Node& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "TemplateProcessing") return make_template(node);
  if (type == "ByteLevel") return std::make_unique<NoSpecialTokens>();
  if (type == "Sequence") {
    const Node list = node.at("processors");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_post_processor(list.item(i));
      if (!p) list.item(i).fail("a null post-processor in a Sequence");
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePost>(std::move(parts));
  }
  node.fail("post-processor type \"" + type +
            "\" is not implemented (implemented: TemplateProcessing, ByteLevel, Sequence)");
}

}  // namespace llmcpu::hf
