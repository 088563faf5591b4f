#include "core/tokenizer/json_vocab.h"

#include <cstdint>
#include <unordered_set>

#include "core/tokenizer/unicode_text.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

class VocabParser {
 public:
  VocabParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  std::vector<std::pair<std::string, int>> parse() {
    std::vector<std::pair<std::string, int>> out;
    std::unordered_set<std::string> seen;
    skip_space();
    expect('{', "'{' (encoder.json is one JSON object of string keys and integer values)");
    skip_space();
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        skip_space();
        const size_t key_at = pos_;
        std::string key = parse_string();
        skip_space();
        expect(':', "':' after a key");
        skip_space();
        const int value = parse_int();
        if (!seen.insert(key).second) fail(key_at, "duplicate key \"" + printable(key) + "\"");
        out.emplace_back(std::move(key), value);
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}', "',' or '}' after a value");
        break;
      }
    }
    skip_space();
    if (pos_ != s_.size()) fail(pos_, "unexpected data after the closing '}'");
    return out;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw FileError(path_, "invalid JSON at byte offset " + std::to_string(at) + ": " + what);
  }
  int peek() const { return pos_ < s_.size() ? static_cast<unsigned char>(s_[pos_]) : -1; }
  void expect(char c, const char* what) {
    if (peek() != c) {
      std::string msg = std::string("expected ") + what + ", found ";
      if (pos_ < s_.size()) {
        msg += '\'';
        msg += printable(s_.substr(pos_, 1));
        msg += '\'';
      } else {
        msg += "end of file";
      }
      fail(pos_, msg);
    }
    ++pos_;
  }
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  static std::string printable(std::string_view v) {
    std::string out;
    for (unsigned char c : v) {
      if (c < 0x20 || c == 0x7f) {
        static const char* hex = "0123456789abcdef";
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  int parse_int() {
    const size_t start = pos_;
    if (peek() == '-') fail(pos_, "negative token id");
    if (peek() < '0' || peek() > '9') fail(pos_, "expected a token id (a non-negative integer)");
    if (peek() == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
      fail(pos_, "number with a leading zero");
    }
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > INT32_MAX) fail(start, "token id too large");
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') fail(start, "token id is not an integer");
    return static_cast<int>(v);
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail(pos_, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v |= c - 'A' + 10;
      else
        fail(pos_ + i, "bad hex digit in \\u escape");
    }
    pos_ += 4;
    return v;
  }

  // Checks one raw (unescaped) UTF-8 character at pos_ and copies it.
  void copy_utf8_char(std::string& out) {
    const size_t at = pos_;
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0) fail(at, "invalid UTF-8 lead byte");
    if (pos_ + len > s_.size()) fail(at, "truncated UTF-8 character");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const unsigned char d = static_cast<unsigned char>(s_[pos_ + i]);
      if ((d >> 6) != 2) fail(at + i, "invalid UTF-8 continuation byte");
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail(at, "invalid UTF-8 sequence");
    }
    out.append(s_.data() + pos_, len);
    pos_ += len;
  }

  std::string parse_string() {
    expect('"', "a string key");
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail(pos_, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail(pos_, "unescaped control character in a string");
      if (c != '\\') {
        copy_utf8_char(out);
        continue;
      }
      const size_t esc_at = pos_;
      ++pos_;
      if (pos_ >= s_.size()) fail(esc_at, "unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail(esc_at, "lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
              fail(esc_at, "high surrogate not followed by a \\u low surrogate");
            }
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF)
              fail(esc_at, "high surrogate followed by a non-low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          unicode::append_utf8(out, cp);
          break;
        }
        default:
          fail(esc_at, std::string("unknown escape '\\") + printable(std::string(1, e)) + "'");
      }
    }
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int>> parse_json_vocab(std::string_view text,
                                                          const std::string& path) {
  return VocabParser(text, path).parse();
}

}  // namespace llmcpu
