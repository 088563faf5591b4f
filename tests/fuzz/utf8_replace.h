// Bytes as a UTF-8 decoder that replaces errors reads them (the WHATWG Encoding Standard's UTF-8
// decoder, as node's TextDecoder and Buffer.toString apply it): every maximal subpart of an
// ill-formed sequence becomes U+FFFD (EF BF BD), and valid sequences are kept. A maximal subpart
// is a lead byte followed by as many continuation bytes as are valid for it (E0 takes A0..BF
// next, ED 80..9F, F0 90..BF, F4 80..8F, all others 80..BF) when the sequence stops short; a byte
// that cannot start a sequence (80..C1, F5..FF) is one subpart. Written here from the standard,
// independently of core/tokenizer/unicode_text, so that the targets check that code against it.
#pragma once

#include <string>
#include <string_view>

namespace llmcpu::fuzz {

inline std::string replace_invalid_utf8(std::string_view in) {
  const std::string replacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto b = static_cast<unsigned char>(in[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the first continuation byte
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
      out += replacement;
      ++i;
      continue;
    }
    size_t j = i + 1;
    int seen = 0;
    for (; seen < need && j < in.size(); ++seen, ++j) {
      const auto c = static_cast<unsigned char>(in[j]);
      if (c < lo || c > hi) break;
      lo = 0x80;
      hi = 0xBF;
    }
    if (seen == need) {
      out.append(in.substr(i, j - i));
    } else {
      out += replacement;  // the lead and its valid continuations; in[j] is read again
    }
    i = j;
  }
  return out;
}

}  // namespace llmcpu::fuzz
