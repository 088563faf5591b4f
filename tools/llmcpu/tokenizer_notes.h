// Prints a tokenizer's notes (core/tokenizer/tokenizer.h: where a tokenizer.json is read as
// tokenizers.js reads it and Hugging Face's tokenizers would differ) to standard error, so that
// they never mix with the ids or text a command writes.
#pragma once

#include <cstdio>
#include <string>

#include "core/tokenizer/tokenizer.h"

namespace llmcpu {

inline void print_tokenizer_notes(const Tokenizer& tok, const char* command) {
  for (const std::string& note : tok.notes())
    std::fprintf(stderr, "%s: note: %s\n", command, note.c_str());
}

}  // namespace llmcpu
