// JavaScript's string and number semantics over UTF-8 strings (see jinja_text.h).
#include "core/chat/jinja_text.h"

#include <unicode/ustring.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace llmcpu::jinja {

uint32_t decode_utf8(std::string_view s, size_t i, size_t* length) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  *length = 1;
  if (n == 0 || i + n > s.size()) return n == 1 ? c : 0xFFFD;
  if (n == 1) return c;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0xFFFD;
    cp = cp << 6 | (d & 0x3F);
  }
  static const uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kLeast[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFD;
  *length = n;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate: what node writes as UTF-8
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

bool is_js_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
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

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t n = 0;
  return is_js_space(decode_utf8(s, i, &n)) ? n : 0;
}

size_t js_space_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {  // white space is at most 3 bytes long
    if (js_space_at(s, end - n) == n) return n;
  }
  return 0;
}

std::string trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_at(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string trim_end(std::string_view s) {
  size_t end = s.size();
  while (size_t n = js_space_before(s, end)) end -= n;
  return std::string(s.substr(0, end));
}

std::string trim(std::string_view s) { return trim_start(trim_end(s)); }

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(s, i, &n);
    i += n;
    if (cp >= 0x10000) {
      out += static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10));
      out += static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

std::string from_utf16(const std::u16string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    uint32_t cp = s[i];
    if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < s.size() && s[i + 1] >= 0xDC00 &&
        s[i + 1] <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    append_utf8(out, cp);
  }
  return out;
}

size_t utf16_length(std::string_view s) { return to_utf16(s).size(); }

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(s, i, &n);
    std::string one;
    append_utf8(one, cp);
    out.push_back(one);
    i += n;
  }
  return out;
}

bool char_at_utf16(std::string_view s, long long index, std::string* out) {
  const std::u16string u = to_utf16(s);
  const long long size = static_cast<long long>(u.size());
  if (index < 0) index += size;
  if (index < 0 || index >= size) return false;
  *out = from_utf16(std::u16string(1, u[static_cast<size_t>(index)]));
  return true;
}

namespace {

// ICU's full case mapping with the root locale: what JavaScript's toUpperCase/toLowerCase give.
std::string icu_case(std::string_view s, bool upper) {
  const std::u16string in = to_utf16(s);
  std::u16string out(in.size() * 3 + 4, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  const auto* src = reinterpret_cast<const UChar*>(in.data());
  auto* dst = reinterpret_cast<UChar*>(out.data());
  const int32_t cap = static_cast<int32_t>(out.size());
  const int32_t len = static_cast<int32_t>(in.size());
  const int32_t n = upper ? u_strToUpper(dst, cap, src, len, "", &err)
                          : u_strToLower(dst, cap, src, len, "", &err);
  if (U_FAILURE(err)) return std::string(s);
  out.resize(static_cast<size_t>(n));
  return from_utf16(out);
}

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string to_upper(std::string_view s) { return icu_case(s, true); }
std::string to_lower(std::string_view s) { return icu_case(s, false); }

std::string title_case(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool boundary = i == 0 || !is_word_char(out[i - 1]);
    if (boundary && is_word_char(out[i]) && out[i] >= 'a' && out[i] <= 'z') out[i] -= 32;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::u16string u = to_utf16(s);
  if (u.empty()) return "";
  // A first unit that is half of a surrogate pair is left as it is (toUpperCase of a lone
  // surrogate), and the pair joins up again with the rest.
  if (u[0] >= 0xD800 && u[0] <= 0xDFFF) return std::string(s);
  return from_utf16(to_utf16(to_upper(from_utf16(u.substr(0, 1)))) + u.substr(1));
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  std::string sign = v < 0 ? "-" : "";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // d.ddde+XX, the shortest digits that read back exactly
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : "");
  const int n = std::atoi(sci.c_str() + e + 1) + 1;  // the decimal point after n digits
  const int k = static_cast<int>(digits.size());
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  const std::string exp = (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  return sign + digits.substr(0, 1) + (k > 1 ? "." + digits.substr(1) : "") + "e" + exp;
}

std::string js_float(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && std::fmod(v, 1.0) == 0 && std::fabs(v) < 1e21) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  return js_number(v);
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(s, i, &n);
    i += n;
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F && cp < 0x10000)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else if (ensure_ascii && cp >= 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                    0xDC00 + ((cp - 0x10000) & 0x3FF));
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  return out + "\"";
}

namespace {

// The longest prefix of s (after JavaScript white space) that strtod reads as a decimal number
// without hexadecimal forms, infinities spelled otherwise than "Infinity", or NaN.
double js_decimal_prefix(std::string_view s, size_t* used, bool integer_only) {
  const std::string t = trim_start(s);
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  const size_t digits_from = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  const size_t int_digits = i - digits_from;
  size_t frac_digits = 0;
  if (!integer_only && i < t.size() && t[i] == '.') {
    size_t j = i + 1;
    while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
    frac_digits = j - i - 1;
    if (int_digits + frac_digits > 0) i = j;
  }
  if (int_digits + frac_digits == 0) {
    if (!integer_only && t.compare(digits_from, 8, "Infinity") == 0) {
      *used = s.size() - t.size() + digits_from + 8;
      const double inf = std::numeric_limits<double>::infinity();
      return t[0] == '-' ? -inf : inf;
    }
    *used = 0;
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (!integer_only && i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    size_t k = i + 1;
    if (k < t.size() && (t[k] == '+' || t[k] == '-')) ++k;
    const size_t exp_from = k;
    while (k < t.size() && t[k] >= '0' && t[k] <= '9') ++k;
    if (k > exp_from) i = k;
  }
  const std::string number = t.substr(0, i);
  *used = s.size() - t.size() + i;
  return std::strtod(number.c_str(), nullptr);
}

}  // namespace

double js_parse_int(std::string_view s) {
  size_t used = 0;
  return js_decimal_prefix(s, &used, true);
}

double js_parse_float(std::string_view s) {
  size_t used = 0;
  return js_decimal_prefix(s, &used, false);
}

double js_string_to_number(std::string_view s) {
  const std::string t = trim(s);
  if (t.empty()) return 0;
  if (t.size() > 2 && t[0] == '0' &&
      (t[1] == 'x' || t[1] == 'X' || t[1] == 'o' || t[1] == 'O' || t[1] == 'b' || t[1] == 'B')) {
    const int base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : 2;
    char* end = nullptr;
    const double v = static_cast<double>(std::strtoull(t.c_str() + 2, &end, base));
    return *end == '\0' ? v : std::numeric_limits<double>::quiet_NaN();
  }
  size_t used = 0;
  const double v = js_decimal_prefix(t, &used, false);
  return used == t.size() ? v : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace llmcpu::jinja
