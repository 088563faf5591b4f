#include "core/tokenizer/hf_pattern_props.h"

#include <initializer_list>

namespace llmcpu::hf::detail {

namespace {

// Each entry: the name PCRE2 is given, then every spelling JavaScript accepts, space-separated.
// General_Category values (ECMA-262's table of them), as PCRE2's short names.
constexpr const char* kCategories[] = {
    "L& Cased_Letter LC",
    "Pe Close_Punctuation Pe",
    "Pc Connector_Punctuation Pc",
    "Cc Control Cc cntrl",
    "Sc Currency_Symbol Sc",
    "Pd Dash_Punctuation Pd",
    "Nd Decimal_Number Nd digit",
    "Me Enclosing_Mark Me",
    "Pf Final_Punctuation Pf",
    "Cf Format Cf",
    "Pi Initial_Punctuation Pi",
    "L Letter L",
    "Nl Letter_Number Nl",
    "Zl Line_Separator Zl",
    "Ll Lowercase_Letter Ll",
    "M Mark M Combining_Mark",
    "Sm Math_Symbol Sm",
    "Lm Modifier_Letter Lm",
    "Sk Modifier_Symbol Sk",
    "Mn Nonspacing_Mark Mn",
    "N Number N",
    "Ps Open_Punctuation Ps",
    "C Other C",
    "Lo Other_Letter Lo",
    "No Other_Number No",
    "Po Other_Punctuation Po",
    "So Other_Symbol So",
    "Zp Paragraph_Separator Zp",
    "Co Private_Use Co",
    "P Punctuation P punct",
    "Z Separator Z",
    "Zs Space_Separator Zs",
    "Mc Spacing_Mark Mc",
    "Cs Surrogate Cs",
    "S Symbol S",
    "Lt Titlecase_Letter Lt",
    "Cn Unassigned Cn",
    "Lu Uppercase_Letter Lu",
};

// Binary properties (ECMA-262's table of them). Assigned and Changes_When_NFKC_Casefolded are
// handled apart: PCRE2 has no name for them.
constexpr const char* kBinary[] = {
    "ASCII ASCII",
    "ASCII_Hex_Digit ASCII_Hex_Digit AHex",
    "Alphabetic Alphabetic Alpha",
    "Any Any",
    "Bidi_Control Bidi_Control Bidi_C",
    "Bidi_Mirrored Bidi_Mirrored Bidi_M",
    "Case_Ignorable Case_Ignorable CI",
    "Cased Cased",
    "Changes_When_Casefolded Changes_When_Casefolded CWCF",
    "Changes_When_Casemapped Changes_When_Casemapped CWCM",
    "Changes_When_Lowercased Changes_When_Lowercased CWL",
    "Changes_When_Titlecased Changes_When_Titlecased CWT",
    "Changes_When_Uppercased Changes_When_Uppercased CWU",
    "Dash Dash",
    "Default_Ignorable_Code_Point Default_Ignorable_Code_Point DI",
    "Deprecated Deprecated Dep",
    "Diacritic Diacritic Dia",
    "Emoji Emoji",
    "Emoji_Component Emoji_Component EComp",
    "Emoji_Modifier Emoji_Modifier EMod",
    "Emoji_Modifier_Base Emoji_Modifier_Base EBase",
    "Emoji_Presentation Emoji_Presentation EPres",
    "Extended_Pictographic Extended_Pictographic ExtPict",
    "Extender Extender Ext",
    "Grapheme_Base Grapheme_Base Gr_Base",
    "Grapheme_Extend Grapheme_Extend Gr_Ext",
    "Hex_Digit Hex_Digit Hex",
    "IDS_Binary_Operator IDS_Binary_Operator IDSB",
    "IDS_Trinary_Operator IDS_Trinary_Operator IDST",
    "ID_Continue ID_Continue IDC",
    "ID_Start ID_Start IDS",
    "Ideographic Ideographic Ideo",
    "Join_Control Join_Control Join_C",
    "Logical_Order_Exception Logical_Order_Exception LOE",
    "Lowercase Lowercase Lower",
    "Math Math",
    "Noncharacter_Code_Point Noncharacter_Code_Point NChar",
    "Pattern_Syntax Pattern_Syntax Pat_Syn",
    "Pattern_White_Space Pattern_White_Space Pat_WS",
    "Quotation_Mark Quotation_Mark QMark",
    "Radical Radical",
    "Regional_Indicator Regional_Indicator RI",
    "Sentence_Terminal Sentence_Terminal STerm",
    "Soft_Dotted Soft_Dotted SD",
    "Terminal_Punctuation Terminal_Punctuation Term",
    "Unified_Ideograph Unified_Ideograph UIdeo",
    "Uppercase Uppercase Upper",
    "Variation_Selector Variation_Selector VS",
    "White_Space White_Space space",
    "XID_Continue XID_Continue XIDC",
    "XID_Start XID_Start XIDS",
};

// Script values of Unicode 14: the long name (given to PCRE2), then its aliases.
constexpr const char* kScripts[] = {
    "Adlam Adlm",
    "Caucasian_Albanian Aghb",
    "Ahom Ahom",
    "Arabic Arab",
    "Imperial_Aramaic Armi",
    "Armenian Armn",
    "Avestan Avst",
    "Balinese Bali",
    "Bamum Bamu",
    "Bassa_Vah Bass",
    "Batak Batk",
    "Bengali Beng",
    "Bhaiksuki Bhks",
    "Bopomofo Bopo",
    "Brahmi Brah",
    "Braille Brai",
    "Buginese Bugi",
    "Buhid Buhd",
    "Chakma Cakm",
    "Canadian_Aboriginal Cans",
    "Carian Cari",
    "Cham Cham",
    "Cherokee Cher",
    "Chorasmian Chrs",
    "Coptic Copt Qaac",
    "Cypro_Minoan Cpmn",
    "Cypriot Cprt",
    "Cyrillic Cyrl",
    "Devanagari Deva",
    "Dives_Akuru Diak",
    "Dogra Dogr",
    "Deseret Dsrt",
    "Duployan Dupl",
    "Egyptian_Hieroglyphs Egyp",
    "Elbasan Elba",
    "Elymaic Elym",
    "Ethiopic Ethi",
    "Georgian Geor",
    "Glagolitic Glag",
    "Gunjala_Gondi Gong",
    "Masaram_Gondi Gonm",
    "Gothic Goth",
    "Grantha Gran",
    "Greek Grek",
    "Gujarati Gujr",
    "Gurmukhi Guru",
    "Hangul Hang",
    "Han Hani",
    "Hanunoo Hano",
    "Hatran Hatr",
    "Hebrew Hebr",
    "Hiragana Hira",
    "Anatolian_Hieroglyphs Hluw",
    "Pahawh_Hmong Hmng",
    "Nyiakeng_Puachue_Hmong Hmnp",
    " ",
    "Old_Hungarian Hung",
    "Old_Italic Ital",
    "Javanese Java",
    "Kayah_Li Kali",
    "Katakana Kana",
    "Kharoshthi Khar",
    "Khmer Khmr",
    "Khojki Khoj",
    "Khitan_Small_Script Kits",
    "Kannada Knda",
    "Kaithi Kthi",
    "Tai_Tham Lana",
    "Lao Laoo",
    "Latin Latn",
    "Lepcha Lepc",
    "Limbu Limb",
    "Linear_A Lina",
    "Linear_B Linb",
    "Lisu Lisu",
    "Lycian Lyci",
    "Lydian Lydi",
    "Mahajani Mahj",
    "Makasar Maka",
    "Mandaic Mand",
    "Manichaean Mani",
    "Marchen Marc",
    "Medefaidrin Medf",
    "Mende_Kikakui Mend",
    "Meroitic_Cursive Merc",
    "Meroitic_Hieroglyphs Mero",
    "Malayalam Mlym",
    "Modi Modi",
    "Mongolian Mong",
    "Mro Mroo",
    "Meetei_Mayek Mtei",
    "Multani Mult",
    "Myanmar Mymr",
    "Nandinagari Nand",
    "Old_North_Arabian Narb",
    "Nabataean Nbat",
    "Newa Newa",
    "Nko Nkoo",
    "Nushu Nshu",
    "Ogham Ogam",
    "Ol_Chiki Olck",
    "Old_Turkic Orkh",
    "Oriya Orya",
    "Osage Osge",
    "Osmanya Osma",
    "Old_Uyghur Ougr",
    "Palmyrene Palm",
    "Pau_Cin_Hau Pauc",
    "Old_Permic Perm",
    "Phags_Pa Phag",
    "Inscriptional_Pahlavi Phli",
    "Psalter_Pahlavi Phlp",
    "Phoenician Phnx",
    "Miao Plrd",
    "Inscriptional_Parthian Prti",
    "Rejang Rjng",
    "Hanifi_Rohingya Rohg",
    "Runic Runr",
    "Samaritan Samr",
    "Old_South_Arabian Sarb",
    "Saurashtra Saur",
    "SignWriting Sgnw",
    "Shavian Shaw",
    "Sharada Shrd",
    "Siddham Sidd",
    "Khudawadi Sind",
    "Sinhala Sinh",
    "Sogdian Sogd",
    "Old_Sogdian Sogo",
    "Sora_Sompeng Sora",
    "Soyombo Soyo",
    "Sundanese Sund",
    "Syloti_Nagri Sylo",
    "Syriac Syrc",
    "Tagbanwa Tagb",
    "Takri Takr",
    "Tai_Le Tale",
    "New_Tai_Lue Talu",
    "Tamil Taml",
    "Tangut Tang",
    "Tai_Viet Tavt",
    "Telugu Telu",
    "Tifinagh Tfng",
    "Tagalog Tglg",
    "Thaana Thaa",
    "Thai Thai",
    "Tibetan Tibt",
    "Tirhuta Tirh",
    "Tangsa Tnsa",
    "Toto Toto",
    "Ugaritic Ugar",
    "Vai Vaii",
    "Vithkuqi Vith",
    "Warang_Citi Wara",
    "Wancho Wcho",
    "Old_Persian Xpeo",
    "Cuneiform Xsux",
    "Yezidi Yezi",
    "Yi Yiii",
    "Zanabazar_Square Zanb",
    "Inherited Zinh Qaai",
    "Common Zyyy",
    "Unknown Zzzz",
};

// Whether `entry` (one of the lists above) spells `name`, its first word counted unless
// skip_first; its first word (the name PCRE2 is given) in `first`.
bool entry_holds(std::string_view entry, std::string_view name, bool skip_first,
                 std::string_view* first) {
  size_t i = 0;
  bool is_first = true;
  while (i < entry.size()) {
    size_t end = entry.find(' ', i);
    if (end == std::string_view::npos) end = entry.size();
    const std::string_view word = entry.substr(i, end - i);
    if (is_first) *first = word;
    if (word == name && !(is_first && skip_first)) return true;
    is_first = false;
    i = end + 1;
  }
  return false;
}

template <size_t N>
bool find_in(const char* const (&table)[N], std::string_view name, bool skip_first,
             std::string* out) {
  for (const char* entry : table) {
    std::string_view first;
    if (entry_holds(entry, name, skip_first, &first)) {
      *out = std::string(first);
      return true;
    }
  }
  return false;
}

PropertyLookup script(std::string_view value, const char* prefix, Property* out) {
  std::string name;
  if (!find_in(kScripts, value, false, &name)) return PropertyLookup::kUnknown;
  out->pcre2 = prefix + name;
  return PropertyLookup::kFound;
}

PropertyLookup category(std::string_view value, Property* out) {
  if (!find_in(kCategories, value, true, &out->pcre2)) return PropertyLookup::kUnknown;
  return PropertyLookup::kFound;
}

PropertyLookup lone_name(std::string_view name, Property* out) {
  if (category(name, out) == PropertyLookup::kFound) return PropertyLookup::kFound;
  if (find_in(kBinary, name, true, &out->pcre2)) return PropertyLookup::kFound;
  if (name == "Assigned") {
    out->pcre2 = "Cn";
    out->invert = true;
    return PropertyLookup::kFound;
  }
  if (name == "Changes_When_NFKC_Casefolded" || name == "CWKCF") {
    return PropertyLookup::kMissingInPcre2;
  }
  // compile_unicode_regexp's retry: a lone name JavaScript does not know, as a script.
  return script(name, "sc:", out);
}

}  // namespace

PropertyLookup js_property(std::string_view name, Property* out) {
  *out = Property{};
  const size_t eq = name.find('=');
  if (eq == std::string_view::npos) return lone_name(name, out);
  const std::string_view key = name.substr(0, eq), value = name.substr(eq + 1);
  if (key == "General_Category" || key == "gc") return category(value, out);
  if (key == "Script" || key == "sc") return script(value, "sc:", out);
  if (key == "Script_Extensions" || key == "scx") return script(value, "scx:", out);
  return PropertyLookup::kUnknown;
}

}  // namespace llmcpu::hf::detail
