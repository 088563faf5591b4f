// Text helpers of the chat-template interpreter, with JavaScript's meaning (the reference renderer,
// @huggingface/jinja, runs on JavaScript strings): white space is JavaScript's \s (what trim() and
// the lexer skip), lengths and indices count UTF-16 code units, numbers print as Number's
// toString(), JSON strings as JSON.stringify writes them, upper/lower case by ICU's full mappings
// (what toUpperCase()/toLowerCase() use). Strings are UTF-8 throughout; invalid bytes read as
// U+FFFD. No locale-dependent behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmcpu::jinja {

// The code point at s[i] and its length in bytes (U+FFFD, 1 for a byte that starts no valid one).
uint32_t decode_utf8(std::string_view s, size_t i, size_t* length);
void append_utf8(std::string& out, uint32_t cp);

// JavaScript's white space (WhiteSpace and LineTerminator: \s, trim()).
bool is_js_space(uint32_t cp);
// The length in bytes of the white space character at s[i], or 0.
size_t js_space_at(std::string_view s, size_t i);
// The length in bytes of the white space character that ends at s[end], or 0.
size_t js_space_before(std::string_view s, size_t end);
std::string trim_start(std::string_view s);
std::string trim_end(std::string_view s);
std::string trim(std::string_view s);

// UTF-16 views: the length in code units, the string as code points (Array.from), the code unit
// at an index (negative from the end, as String.at; nullopt-like empty result when outside).
size_t utf16_length(std::string_view s);
std::vector<std::string> code_points(std::string_view s);
bool char_at_utf16(std::string_view s, long long index, std::string* out);
std::u16string to_utf16(std::string_view s);
std::string from_utf16(const std::u16string& s);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
// Python's str.title() as @huggingface/jinja writes it: an ASCII letter or digit after a
// non-word character (or at the start) is upper-cased, nothing else changes.
std::string title_case(std::string_view s);
// charAt(0).toUpperCase() + rest.
std::string capitalize(std::string_view s);

// Number.prototype.toString() (and JSON.stringify's number, except NaN and infinities: "null").
std::string js_number(double v);
// A float as @huggingface/jinja prints it: "2.0" for whole numbers, "-0.0", else js_number.
std::string js_float(double v);
// JSON.stringify of a string; with ensure_ascii every code unit from U+007F up as \uXXXX.
std::string json_quote(std::string_view s, bool ensure_ascii);
// Number("...") for a string: trimmed, "" is 0, decimal or 0x/0o/0b, Infinity; else NaN.
double js_string_to_number(std::string_view s);
// parseInt(s, 10) and parseFloat(s); NaN where they give NaN.
double js_parse_int(std::string_view s);
double js_parse_float(std::string_view s);

}  // namespace llmcpu::jinja
