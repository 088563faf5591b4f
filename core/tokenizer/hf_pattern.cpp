// TEMPORARY stand-in (not committed): PCRE2 on the source as it is.
#include "core/tokenizer/hf_pattern.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "simd/error.h"
namespace llmcpu::hf {
struct Pattern::Impl { pcre2_code* code = nullptr; std::string src; ~Impl() { if (code) pcre2_code_free(code); } };
Pattern::Pattern(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;
static pcre2_code* compile_code(const std::string& src, uint32_t flags) {
  struct { pcre2_code* code; } r{}; auto* impl = &r;
  int err; PCRE2_SIZE off;
  impl->code = pcre2_compile((PCRE2_SPTR)src.data(), src.size(), PCRE2_UTF | flags, &err, &off, nullptr);
  if (!impl->code) throw Error("bad pattern " + src);
  return impl->code;
}
Pattern Pattern::regex(std::string_view source, const std::string&) { auto i = std::make_unique<Impl>(); i->src = source; i->code = compile_code(i->src, PCRE2_UCP); return Pattern(std::move(i)); }
Pattern Pattern::literal(std::string_view text, bool capture) {
  std::string s = capture ? "(\\Q" : "\\Q"; s += text; s += "\\E"; if (capture) s += ")";
  auto i = std::make_unique<Impl>(); i->src = s; i->code = compile_code(s, 0); return Pattern(std::move(i));
}
const std::string& Pattern::compiled_source() const { return impl_->src; }
void Pattern::matches(std::string_view text, std::vector<Span>& out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(impl_->code, (PCRE2_SPTR)text.data(), text.size(), pos, 0, md, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.push_back({ov[0], ov[1]});
    if (ov[1] == ov[0]) { pos = ov[1] + 1; while (pos < text.size() && (text[pos] & 0xC0) == 0x80) ++pos; } else pos = ov[1];
  }
  pcre2_match_data_free(md);
}
std::string Pattern::replace_all(std::string_view text, std::string_view replacement) const {
  std::vector<Span> m; matches(text, m);
  std::string out; size_t prev = 0;
  for (auto& s : m) { out.append(text.substr(prev, s.begin - prev)); out.append(replacement); prev = s.end; }
  out.append(text.substr(prev)); return out;
}
void Pattern::split(std::string_view text, std::vector<std::string>& out) const {
  std::vector<Span> m; matches(text, m); size_t prev = 0;
  for (auto& s : m) { if (s.begin > prev) out.emplace_back(text.substr(prev, s.begin - prev)); prev = s.end; }
  if (prev < text.size()) out.emplace_back(text.substr(prev));
}
}
