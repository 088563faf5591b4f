#include "core/tokenizer/hf_normalizers.h"

#include <vector>

#include "core/tokenizer/hf_pattern.h"
#include "core/tokenizer/unicode_text.h"

namespace llmcpu::hf {

namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(unicode::Form form) : form_(form) {}
  std::string apply(std::string_view text) const override {
    return unicode::normalize(text, form_);
  }

 private:
  unicode::Form form_;
};

class Lowercase : public Normalizer {
 public:
  std::string apply(std::string_view text) const override { return unicode::to_lower(text); }
};

// config.prepend + text, on every part (tokenizers.js prepends even to text that already starts
// with it).
class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string apply(std::string_view text) const override {
    std::string out = prefix_;
    out.append(text);
    return out;
  }

 private:
  std::string prefix_;
};

// text.replaceAll(pattern, content): JavaScript's $ forms in content included.
class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string apply(std::string_view text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// trim() / trimStart() / trimEnd(): JavaScript's whitespace.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string apply(std::string_view text) const override {
    if (left_) text = unicode::js_trim_start(text);
    if (right_) text = unicode::js_trim_end(text);
    return std::string(text);
  }

 private:
  bool left_, right_;
};

// text.replace(/\p{M}/gu, ""): every combining mark removed (no decomposition first).
class StripAccents : public Normalizer {
 public:
  StripAccents() : marks_(Pattern::regex("\\p{M}", "StripAccents")) {}
  std::string apply(std::string_view text) const override {
    if (unicode::is_ascii(text)) return std::string(text);
    return marks_.replace_all(text, "");
  }

 private:
  Pattern marks_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string apply(std::string_view text) const override {
    std::string s;
    bool first = true;
    for (const auto& p : parts_) {
      if (!p) continue;
      s = p->apply(first ? text : std::string_view(s));
      first = false;
    }
    return first ? std::string(text) : s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

// The pattern of a Replace (normalizer, pre-tokenizer or decoder): {"Regex": ...} or {"String":
// ...}.
Pattern make_pattern(const Node& node, bool capture_string) {
  const Node p = node.at("pattern");
  if (p.has_non_null("Regex"))
    return Pattern::regex(p.get("Regex").str(), node.file() + ": " + p.path());
  if (p.has_non_null("String")) return Pattern::literal(p.get("String").str(), capture_string);
  p.fail("expected {\"Regex\": ...} or {\"String\": ...}");
}

std::string character_removed_by(const Node& node) {
  if (node.is_null() || !node.json().is_object()) return {};
  const std::string type = node.type();
  if (type == "Sequence") {
    const Node list = node.at("normalizers");
    return list.size() == 0 ? std::string() : character_removed_by(list.item(list.size() - 1));
  }
  if (type != "Replace") return {};
  const Node p = node.at("pattern");
  if (!p.has_non_null("String")) return {};
  const std::string s = p.get("String").str();
  const std::string content = node.str("content", "");
  const bool one_character = unicode::count_code_points(s) == 1;
  return one_character && content.find(s) == std::string::npos ? s : std::string();
}

std::unique_ptr<Normalizer> make_normalizer(const Node& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "NFC") return std::make_unique<UnicodeForm>(unicode::Form::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeForm>(unicode::Form::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(unicode::Form::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(unicode::Form::kNfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Prepend") return std::make_unique<Prepend>(node.at("prepend").str());
  if (type == "Strip") {
    return std::make_unique<Strip>(node.boolean("strip_left", false),
                                   node.boolean("strip_right", false));
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(make_pattern(node, false), node.str("content", ""));
  }
  if (type == "Sequence") {
    const Node list = node.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) parts.push_back(make_normalizer(list.item(i)));
    return std::make_unique<Sequence>(std::move(parts));
  }
  node.fail("normalizer type \"" + type +
            "\" is not implemented (implemented: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, "
            "Replace, Strip, StripAccents, Sequence)");
}

}  // namespace llmcpu::hf
