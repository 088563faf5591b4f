#include "core/tokenizer/hf_pretokenizers.h"

#include "core/tokenizer/hf_normalizers.h"
#include "core/tokenizer/hf_pattern.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode_text.h"

namespace llmcpu::hf {

namespace {

bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool ascii_word(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Passes on the runs of `piece` whose characters `classify` gives the same non-zero class, one
// piece per run; characters of class 0 are dropped. `classify` sees code points.
template <typename Classify>
void add_runs(std::string_view piece, PieceSink& out, Classify classify) {
  size_t pos = 0, start = 0;
  int current = 0;
  while (pos < piece.size()) {
    const unicode::CodePoint c = unicode::decode_at(piece, pos);
    const int cls = classify(c.cp);
    if (cls != current) {
      if (current != 0) out.piece(piece.substr(start, pos - start));
      current = cls;
      start = pos;
    }
    pos += static_cast<size_t>(c.bytes);
  }
  if (current != 0) out.piece(piece.substr(start));
}

// GPT-2's pattern (pretokenizer.h, JavaScript's \s) when use_regex, then every byte as a character
// of GPT-2's byte alphabet.
class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append_utf8(s,
                           static_cast<char32_t>(byte_to_unicode(static_cast<unsigned char>(b))));
      alphabet_[b] = s;
    }
  }
  void split(std::string_view piece, int, PieceSink& out) const override {
    std::string prefixed;
    if (add_prefix_space_ && (piece.empty() || piece[0] != ' ')) {
      prefixed.reserve(piece.size() + 1);
      prefixed += ' ';
      prefixed.append(piece);
      piece = prefixed;
    }
    if (!use_regex_) {
      add_mapped(piece, out);
      return;
    }
    Pretokenizer::Cursor cursor(gpt2_, piece);
    std::string_view word;
    while (cursor.next(word)) add_mapped(word, out);
  }
  bool defer_byte_level() override { return defer_ = true; }
  bool passes_through() const override { return defer_ && !use_regex_ && !add_prefix_space_; }

 private:
  void add_mapped(std::string_view bytes, PieceSink& out) const {
    if (defer_) {
      out.piece(bytes);
      return;
    }
    std::string mapped;  // (not kept per thread: the next stage may be a ByteLevel too)
    mapped.reserve(bytes.size() * 2);
    for (const char c : bytes) mapped += alphabet_[static_cast<unsigned char>(c)];
    out.piece(mapped);
  }

  bool add_prefix_space_, use_regex_;
  bool defer_ = false;
  Pretokenizer gpt2_;
  std::string alphabet_[256];
};

// Split: invert keeps the matches; "Removed" is text.split(pattern) (capturing groups kept, as
// JavaScript's split keeps them); otherwise the gaps and the matches, each its own piece.
class Split : public PreTokenizer {
 public:
  Split(Pattern pattern, bool invert, bool removed)
      : pattern_(std::move(pattern)), invert_(invert), removed_(removed) {}
  void split(std::string_view piece, int, PieceSink& out) const override {
    if (removed_ && !invert_) {
      std::vector<std::string> parts;
      pattern_.split(piece, parts);
      for (const std::string& p : parts) out.piece(p);
      return;
    }
    size_t prev = 0;
    pattern_.for_each_match(piece, [&](Pattern::Span m) {
      if (!invert_ && prev < m.begin) out.piece(piece.substr(prev, m.begin - prev));
      if (m.end > m.begin) out.piece(piece.substr(m.begin, m.end - m.begin));
      prev = m.end;
    });
    if (!invert_ && prev < piece.size()) out.piece(piece.substr(prev));
  }

 private:
  Pattern pattern_;
  bool invert_, removed_;
};

// /[^\d]+|\d+/gu or /[^\d]+|\d/gu: JavaScript's \d is ASCII's.
class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void split(std::string_view piece, int, PieceSink& out) const override {
    for (size_t pos = 0; pos < piece.size();) {
      const bool digit = ascii_digit(piece[pos]);
      size_t end = pos + 1;
      if (!digit || !individual_) {
        while (end < piece.size() && ascii_digit(piece[end]) == digit) ++end;
      }
      out.piece(piece.substr(pos, end - pos));
      pos = end;
    }
  }

 private:
  bool individual_;
};

// Spaces become the replacement, and the replacement is put in front unless the piece starts
// with it (prepend_scheme "always", or "first" in the first section). No split: tokenizers.js
// gives the whole piece to the model.
class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string str_rep, std::string scheme)
      : replacement_(std::move(replacement)),
        str_rep_(std::move(str_rep)),
        scheme_(std::move(scheme)) {}
  void split(std::string_view piece, int section, PieceSink& out) const override {
    std::string s = unicode::replace_all(piece, " ", str_rep_);
    const bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (scheme_ == "always" || (scheme_ == "first" && section == 0))) s = str_rep_ + s;
    out.piece(s);
  }

 private:
  std::string replacement_, str_rep_, scheme_;
};

// /\w+|[^\w\s]+/g (ASCII \w, JavaScript's \s; whitespace is dropped).
class Whitespace : public PreTokenizer {
 public:
  void split(std::string_view piece, int, PieceSink& out) const override {
    add_runs(piece, out, [](char32_t c) {
      return ascii_word(c) ? 1 : unicode::is_js_space(c) ? 0 : 2;
    });
  }
};

// /\S+/g
class WhitespaceSplit : public PreTokenizer {
 public:
  void split(std::string_view piece, int, PieceSink& out) const override {
    add_runs(piece, out, [](char32_t c) { return unicode::is_js_space(c) ? 0 : 1; });
  }
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {
    find_stages();
  }
  bool defer_byte_level() override {
    bool deferred = false;
    for (size_t i = parts_.size(); i-- > 0;) {
      if (parts_[i]) {
        deferred = parts_[i]->defer_byte_level();
        break;
      }
    }
    find_stages();  // (a deferred ByteLevel may now pass its pieces through)
    return deferred;
  }
  bool passes_through() const override { return stages_.empty(); }
  // Each stage's pieces go straight into the next stage.
  void split(std::string_view piece, int section, PieceSink& out) const override {
    split_from(0, piece, section, out);
  }

 private:
  struct Next final : PieceSink {
    const Sequence* seq;
    size_t stage;
    int section;
    PieceSink* out;
    Next(const Sequence* s, size_t i, int sec, PieceSink* o)
        : seq(s), stage(i), section(sec), out(o) {}
    void piece(std::string_view p) override { seq->split_from(stage, p, section, *out); }
  };
  void split_from(size_t stage, std::string_view piece, int section, PieceSink& out) const {
    if (stage == stages_.size()) {
      out.piece(piece);
      return;
    }
    Next next(this, stage + 1, section, &out);
    stages_[stage]->split(piece, section, next);
  }
  // The parts that do something (not null, not passing their pieces through), in order.
  void find_stages() {
    stages_.clear();
    for (const auto& p : parts_) {
      if (p && !p->passes_through()) stages_.push_back(p.get());
    }
  }

  std::vector<std::unique_ptr<PreTokenizer>> parts_;
  std::vector<const PreTokenizer*> stages_;
};

std::unique_ptr<PreTokenizer> make_split(const Node& node, std::vector<std::string>& notes,
                                         const std::string& absent) {
  const bool invert = node.boolean("invert", false);
  // tokenizers.js captures a String pattern only when invert is given as false.
  const bool capture = node.has_non_null("invert") && !invert;
  std::string behavior = node.str("behavior", "Isolated");
  std::string lower = behavior;
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  const Node pattern = node.at("pattern");
  const bool never_matches = !absent.empty() && pattern.has_non_null("String") &&
                             pattern.get("String").str() == absent;
  if (!invert && lower != "removed" && lower != "isolated" && !never_matches) {
    notes.push_back(node.file() + ": " + node.path() + ": Split behavior \"" + behavior +
                    "\" is applied as tokenizers.js applies it, as \"Isolated\" (Hugging Face's "
                    "tokenizers would merge each match with the text beside it)");
  }
  return std::make_unique<Split>(make_pattern(node, capture), invert, lower == "removed");
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node, std::vector<std::string>& notes,
                                                 const std::string& absent) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(node.boolean("add_prefix_space", false),
                                       node.boolean("use_regex", true));
  }
  if (type == "Split") return make_split(node, notes, absent);
  if (type == "Digits") return std::make_unique<Digits>(node.boolean("individual_digits", false));
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Metaspace") {
    const std::string replacement = node.str("replacement", "\xE2\x96\x81");
    std::string str_rep = node.str("str_rep", "");
    if (str_rep.empty()) str_rep = replacement;
    return std::make_unique<Metaspace>(replacement, str_rep, node.str("prepend_scheme", "always"));
  }
  if (type == "Sequence") {
    const Node list = node.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_pre_tokenizer(list.item(i), notes, absent));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  node.fail("pre-tokenizer type \"" + type +
            "\" is not implemented (implemented: ByteLevel, Split, Digits, Metaspace, Whitespace, "
            "WhitespaceSplit, Sequence)");
}

}  // namespace llmcpu::hf
