#include "core/tokenizer/unicode_text.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "simd/error.h"

namespace llmcpu::unicode {

namespace {

// The length of the valid UTF-8 sequence at `pos`, or 0 with `consumed` set to the bytes of its
// maximal invalid subpart (at least 1), as the WHATWG decoder reads them.
int valid_sequence_at(std::string_view s, size_t pos, size_t& consumed) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b = byte(pos);
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    consumed = 1;
    return 0;
  }
  size_t i = pos + 1;
  for (int k = 0; k < need; ++k, ++i) {
    if (i >= s.size() || byte(i) < lo || byte(i) > hi) {
      consumed = i - pos;  // the offending byte starts the next sequence
      return 0;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

const UNormalizer2* normalizer_of(Form form) {
  UErrorCode e = U_ZERO_ERROR;
  const UNormalizer2* n = nullptr;
  switch (form) {
    case Form::kNfc:
      n = unorm2_getNFCInstance(&e);
      break;
    case Form::kNfd:
      n = unorm2_getNFDInstance(&e);
      break;
    case Form::kNfkc:
      n = unorm2_getNFKCInstance(&e);
      break;
    case Form::kNfkd:
      n = unorm2_getNFKDInstance(&e);
      break;
  }
  if (U_FAILURE(e) || !n) throw Error(std::string("ICU normalizer unavailable: ") + u_errorName(e));
  return n;
}

std::u16string to_utf16(std::string_view text) {
  std::u16string out(text.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode e = U_ZERO_ERROR;
  u_strFromUTF8(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len,
                text.data(), static_cast<int32_t>(text.size()), &e);
  if (U_FAILURE(e)) throw Error(std::string("UTF-8 to UTF-16 failed: ") + u_errorName(e));
  out.resize(static_cast<size_t>(len));
  return out;
}

std::string to_utf8(const std::u16string& text) {
  std::string out(text.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode e = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len,
              reinterpret_cast<const UChar*>(text.data()), static_cast<int32_t>(text.size()), &e);
  if (U_FAILURE(e)) throw Error(std::string("UTF-16 to UTF-8 failed: ") + u_errorName(e));
  out.resize(static_cast<size_t>(len));
  return out;
}

}  // namespace

bool to_valid_utf8(std::string_view text, std::string& out) {
  out.clear();
  size_t pos = 0, copied = 0;
  bool valid = true;
  while (pos < text.size()) {
    size_t consumed = 0;
    const int n = valid_sequence_at(text, pos, consumed);
    if (n > 0) {
      pos += static_cast<size_t>(n);
      continue;
    }
    if (valid) out.reserve(text.size() + 16);
    valid = false;
    out.append(text.substr(copied, pos - copied));
    out.append("\xEF\xBF\xBD");
    pos += consumed;
    copied = pos;
  }
  if (!valid) out.append(text.substr(copied));
  return valid;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t count_code_points(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_ascii(std::string_view text) {
  unsigned char any = 0;
  for (const char c : text) any |= static_cast<unsigned char>(c);
  return any < 0x80;
}

namespace {

// replace_all of one byte (" " -> "▁" on whole texts): the hits counted, then the text copied eight
// bytes at a time up to the next hit (the lowest byte of `hit` that has its top bit set is the
// first byte equal to c: a borrow only marks bytes above a true one).
std::string replace_byte(std::string_view text, char c, std::string_view to) {
  const size_t hits = static_cast<size_t>(std::count(text.begin(), text.end(), c));
  if (hits == 0) return std::string(text);
  const size_t size = text.size() - hits + hits * to.size();
  std::string out(size + 8, '\0');  // (the last 8-byte store may pass the end)
  const char* s = text.data();
  const char* const end = s + text.size();
  char* w = out.data();
  if constexpr (std::endian::native == std::endian::little) {
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
    const uint64_t pattern = kOnes * static_cast<unsigned char>(c);
    while (end - s >= 8) {
      uint64_t v;
      std::memcpy(&v, s, 8);
      std::memcpy(w, &v, 8);
      const uint64_t x = v ^ pattern;
      const uint64_t hit = (x - kOnes) & ~x & kHighs;
      if (!hit) {
        s += 8, w += 8;
        continue;
      }
      const int first = std::countr_zero(hit) / 8;
      w += first;
      std::memcpy(w, to.data(), to.size());
      w += to.size();
      s += first + 1;
    }
  }
  for (; s < end; ++s) {
    if (*s == c) {
      std::memcpy(w, to.data(), to.size());
      w += to.size();
    } else {
      *w++ = *s;
    }
  }
  out.resize(size);
  return out;
}

}  // namespace

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  if (from.size() == 1) return replace_byte(text, from[0], to);
  out.reserve(text.size() + (to.size() > from.size() ? text.size() / 4 : 0));
  // Each place that could start a match is found by memchr on one byte of `from`, its first that
  // is neither a space nor an ASCII letter (clean-up's " n't" is sought by its apostrophe, not by
  // every space of the text), else its last; the places come in order, so the matches are the
  // leftmost ones that do not overlap, as a plain search finds them.
  size_t anchor = from.size() - 1;
  for (size_t i = 0; i < from.size(); ++i) {
    const auto c = static_cast<unsigned char>(from[i]);
    if (c != ' ' && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) {
      anchor = i;
      break;
    }
  }
  size_t pos = 0, copied = 0;
  while (pos + from.size() <= text.size()) {
    const void* hit = std::memchr(text.data() + pos + anchor, from[anchor],
                                  text.size() - pos - from.size() + 1);
    if (!hit) break;
    const size_t start = static_cast<size_t>(static_cast<const char*>(hit) - text.data()) - anchor;
    if (text.compare(start, from.size(), from) != 0) {
      pos = start + 1;
      continue;
    }
    out.append(text.substr(copied, start - copied));
    out.append(to);
    pos = copied = start + from.size();
  }
  out.append(text.substr(copied));
  return out;
}

std::string normalize(std::string_view text, Form form) {
  if (is_ascii(text)) return std::string(text);  // every form leaves ASCII as it is
  const UNormalizer2* n = normalizer_of(form);
  const std::u16string in = to_utf16(text);
  UErrorCode e = U_ZERO_ERROR;
  const int32_t need = unorm2_normalize(n, reinterpret_cast<const UChar*>(in.data()),
                                        static_cast<int32_t>(in.size()), nullptr, 0, &e);
  std::u16string out(static_cast<size_t>(need), u'\0');
  e = U_ZERO_ERROR;
  unorm2_normalize(n, reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()),
                   reinterpret_cast<UChar*>(out.data()), need, &e);
  if (U_FAILURE(e)) throw Error(std::string("Unicode normalisation failed: ") + u_errorName(e));
  return to_utf8(out);
}

std::string to_lower(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    }
    return out;
  }
  const std::u16string in = to_utf16(text);
  UErrorCode e = U_ZERO_ERROR;
  const int32_t need = u_strToLower(nullptr, 0, reinterpret_cast<const UChar*>(in.data()),
                                    static_cast<int32_t>(in.size()), "", &e);
  std::u16string out(static_cast<size_t>(need), u'\0');
  e = U_ZERO_ERROR;
  u_strToLower(reinterpret_cast<UChar*>(out.data()), need,
               reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()), "", &e);
  if (U_FAILURE(e)) throw Error(std::string("lower-casing failed: ") + u_errorName(e));
  return to_utf8(out);
}

bool is_js_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view js_trim_start(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const CodePoint c = decode_at(text, pos);
    if (!is_js_space(c.cp)) break;
    pos += static_cast<size_t>(c.bytes);
  }
  return text.substr(pos);
}

std::string_view js_trim_end(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_js_space(decode_at(text, start).cp)) break;
    end = start;
  }
  return text.substr(0, end);
}

}  // namespace llmcpu::unicode
