// Where one input file's documents end (`llmcpu prepare --split-on`). Each document is preceded by
// <|endoftext|> in the shards. The rule is llm.c's tinyshakespeare preparation
// (text.replace("\n\n", "\n\n<|endoftext|>")): a document ends just after each separator, which stays
// at the end of the document before it; separators are found left to right without overlapping (a
// third newline after "\n\n" starts the next document), and a text ending in a separator ends with an
// empty document. The separators:
//   file         none: the whole file is one document (the default)
//   blank-lines  "\n\n"
//   lines        "\n"
//   regex:PAT    each match of PAT (PCRE2, UTF-8); a pattern that matches the empty string is refused
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace llmcpu {

class DocumentSplit {
 public:
  // Parses a --split-on value (keywords case-insensitive, '_' read as '-'). Throws UsageError naming
  // the value and what is accepted, or the pattern's compile error and its offset.
  explicit DocumentSplit(const std::string& spec = "file");
  ~DocumentSplit();
  DocumentSplit(DocumentSplit&&) noexcept;
  DocumentSplit& operator=(DocumentSplit&&) noexcept;

  static constexpr size_t kNone = std::string_view::npos;
  // Where the document starting at `from` ends: just after the first separator at or after `from`,
  // or kNone when there is none (the document runs to the end of the text, and is the last).
  // Throws UsageError if the pattern matches the empty string there.
  size_t document_end(std::string_view text, size_t from) const;

  const std::string& spec() const { return spec_; }

 private:
  enum class Kind { kFile, kLiteral, kRegex };
  struct Regex;
  Kind kind_ = Kind::kFile;
  std::string spec_;
  std::string_view literal_;  // kLiteral: a string literal
  std::unique_ptr<Regex> regex_;
};

}  // namespace llmcpu
