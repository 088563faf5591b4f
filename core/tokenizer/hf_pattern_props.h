// The names of JavaScript's \p{...} and \P{...} (with the "u" flag), as the RegExp that
// tokenizers.js builds accepts them, spelled for PCRE2. JavaScript's names are exact (case,
// underscores); PCRE2 matches names loosely, so every name is checked here against JavaScript's
// lists before PCRE2 sees it. A lone name JavaScript does not know is tried as Script=name, as
// tokenizers.js's compile_unicode_regexp retries it (so \p{Han} means \p{Script=Han}).
//
// The scripts are Unicode 14's (PCRE2 10.42's tables, taken from Unicode's
// PropertyValueAliases.txt); a script added later (Kawi, Nag_Mundari) is reported as unknown.
#pragma once

#include <string>
#include <string_view>

namespace llmcpu::hf::detail {

enum class PropertyLookup {
  kFound,           // pcre2 holds the name to put between \p{ and }
  kUnknown,         // JavaScript rejects the name (tokenizers.js would fail to build the pattern)
  kMissingInPcre2,  // JavaScript knows it, PCRE2 10.42 does not
};

struct Property {
  std::string pcre2;    // "L", "L&", "White_Space", "sc:Han", "scx:Latin", ...
  bool invert = false;  // pcre2 names the complement (\p{Assigned} is \P{Cn})
};

// `name` is the text between the braces of \p{...}.
PropertyLookup js_property(std::string_view name, Property* out);

}  // namespace llmcpu::hf::detail
