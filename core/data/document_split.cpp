#include "core/data/document_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>

#include "simd/error.h"

namespace llmcpu {

struct DocumentSplit::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  ~Regex() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

namespace {

constexpr const char* kAccepted = "file, blank-lines, lines or regex:PATTERN";

// "--split-on SPEC: why", built by appending (g++ 12 warns wrongly on some chains of operator+).
std::string problem(const std::string& spec, const std::string& why) {
  std::string m = "--split-on ";
  m += spec;
  m += ": ";
  m += why;
  return m;
}

std::string keyword(const std::string& spec) {
  std::string k = spec;
  for (char& c : k) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

}  // namespace

DocumentSplit::DocumentSplit(const std::string& spec) : spec_(spec) {
  const std::string k = keyword(spec);
  if (k == "file") return;
  if (k == "blank-lines") {
    kind_ = Kind::kLiteral;
    literal_ = "\n\n";
    return;
  }
  if (k == "lines") {
    kind_ = Kind::kLiteral;
    literal_ = "\n";
    return;
  }
  if (spec.rfind("regex:", 0) != 0) {
    throw UsageError(problem(spec, std::string("expected ") + kAccepted));
  }
  const std::string pattern = spec.substr(6);
  if (pattern.empty()) throw UsageError(problem(spec, "needs a pattern after 'regex:'"));
  int code = 0;
  PCRE2_SIZE offset = 0;
  regex_ = std::make_unique<Regex>();
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                               PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr);
  if (!regex_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    throw UsageError(problem(spec, reinterpret_cast<char*>(message) + (" at offset " +
                                   std::to_string(offset) + " of the pattern")));
  }
  uint32_t min_length = 1;
  pcre2_pattern_info(regex_->code, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0) {
    throw UsageError(
        problem(spec, "can match the empty string; a separator must take at least one character"));
  }
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
  regex_->match = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  if (!regex_->match) throw std::bad_alloc();
  kind_ = Kind::kRegex;
}

DocumentSplit::~DocumentSplit() = default;
DocumentSplit::DocumentSplit(DocumentSplit&&) noexcept = default;
DocumentSplit& DocumentSplit::operator=(DocumentSplit&&) noexcept = default;

size_t DocumentSplit::document_end(std::string_view text, size_t from) const {
  switch (kind_) {
    case Kind::kFile:
      return kNone;
    case Kind::kLiteral: {
      const size_t at = text.find(literal_, from);
      return at == std::string_view::npos ? kNone : at + literal_.size();
    }
    case Kind::kRegex: {
      // Compiled with PCRE2_MATCH_INVALID_UTF: bytes that are not UTF-8 never match a character,
      // and do not stop the run.
      const int rc = pcre2_match(regex_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                                 text.size(), from, 0, regex_->match, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) return kNone;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw Error(problem(spec_, "matching failed at byte " + std::to_string(from) + ": " +
                                       reinterpret_cast<char*>(message)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(regex_->match);
      if (ov[1] == ov[0]) {
        throw UsageError(problem(spec_, "matches the empty string at byte " +
                                            std::to_string(ov[0]) +
                                            "; a separator must take at least one character"));
      }
      return ov[1];
    }
  }
  return kNone;
}

}  // namespace llmcpu
