// tokenizer.json support against tokenizers.js (the npm package @huggingface/tokenizers 0.2.0, run
// by node at test time through hf_reference.mjs). For every layout that hf_make_tokenizers.mjs
// writes (GPT-2, Llama 3, Qwen2, Llama 2, Mistral, SmolLM2 and two that exercise other components)
// and the published tokenizer files of Gemma 1/2, Gemma 3 and Qwen3 (tools/fetch-data.sh --tests),
// and every text (the committed texts and a seeded random round), Tokenizer::load(folder) must give
// exactly the reference's ids, with and without the special tokens, and decode the reference's ids
// to exactly its text. Then the same through `llmcpu tokenize`, and load errors that name the file
// and the component. Without node or the fetched packages these tests fail and say how to get them.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "simd/error.h"
#include "tests/tokenizer/test_hf_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

// Differences from the reference, counted, the first few described in full.
class Mismatches {
 public:
  static constexpr size_t kDescribed = 12;
  void add(const HfText& text, const std::string& check, const std::string& what) {
    if (count_ < kDescribed) {
      details_ << "\n  " << text.name << " " << quoted(text.bytes, 60) << ", " << check << ": "
               << what;
    }
    ++count_;
    if (names_.size() < 200) names_.push_back(text.name + " (" + check + ")");
  }
  size_t count() const { return count_; }
  std::string report(const std::string& label, size_t checks) const {
    std::ostringstream os;
    os << label << ": " << count_ << " of " << checks
       << " checks differ from tokenizers.js" << details_.str();
    if (count_ > kDescribed) {
      os << "\n  all differing checks:";
      for (const std::string& n : names_) os << " " << n << ";";
    }
    return os.str();
  }

 private:
  size_t count_ = 0;
  std::ostringstream details_;
  std::vector<std::string> names_;
};

// Runs `check`, which compares one answer; an exception thrown by our tokenizer is a mismatch.
void compare(Mismatches& m, const HfText& text, const std::string& what,
             const std::function<std::string()>& check) {
  try {
    const std::string difference = check();
    if (!difference.empty()) m.add(text, what, difference);
  } catch (const std::exception& e) {
    m.add(text, what, std::string("threw: ") + e.what());
  }
}

std::vector<std::string> bytes_of(const std::vector<HfText>& texts) {
  std::vector<std::string> out;
  for (const HfText& t : texts) out.push_back(t.bytes);
  return out;
}

// The script writes the layouts this file tests, no more and no fewer.
TEST(HfLayouts, ScriptWritesExactlyTheTestedLayouts) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string dir = ::testing::TempDir() + "llmcpu_hf_layouts_" + std::to_string(::getpid());
  fs::remove_all(dir);
  const std::string printed = make_hf_layouts(ref, dir, {});
  std::string expected;
  for (const std::string& l : hf_layouts()) {
    expected += l + "\n";
    EXPECT_TRUE(fs::exists(dir + "/" + l + "/tokenizer.json")) << l;
    EXPECT_TRUE(fs::exists(dir + "/" + l + "/tokenizer_config.json")) << l;
  }
  EXPECT_EQ(printed, expected);
  fs::remove_all(dir);
}

// Tokenizer::load(folder) against tokenizers.js on every text: the vocabulary size, EOS and the
// document token, then each text's ids (as a document, without and with the special tokens) and the
// decoding of the reference's ids. `label` names the folder in the messages; `scratch` is a file
// name for the texts handed to node.
void expect_tokenizers_js_answers(const HfReference& ref, const std::string& folder,
                                  const std::string& label, const std::string& scratch) {
  const std::vector<HfText> texts = all_hf_texts();
  ASSERT_GE(texts.size(), 320u);
  const HfReferenceRun expected = run_hf_reference(ref, folder, bytes_of(texts), scratch);
  ASSERT_TRUE(expected.error.empty()) << expected.error;

  std::unique_ptr<Tokenizer> tok;
  try {
    tok = std::make_unique<Tokenizer>(Tokenizer::load(folder));
  } catch (const std::exception& e) {
    FAIL() << label << ": Tokenizer::load(" << folder << ") threw: " << e.what();
  }
  EXPECT_EQ(tok->vocab_size(), expected.vocab_size) << label;
  ASSERT_TRUE(expected.eos_token_id.has_value()) << label << " names no eos_token";
  EXPECT_EQ(tok->eot_token(), *expected.eos_token_id) << label;
  ASSERT_TRUE(expected.document_token_id.has_value());
  EXPECT_EQ(tok->document_token(), *expected.document_token_id) << label;
  Mismatches m;
  size_t checks = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const HfText& text = texts[i];
    const HfExpected& e = expected.texts[i];
    checks += 3;
    compare(m, text, "encode as a document", [&] {
      std::vector<int> ours;
      tok->encode_document(text.bytes, ours);
      return ours == e.ids_document ? std::string() : id_difference(ours, e.ids_document);
    });
    compare(m, text, "encode", [&] {
      const std::vector<int> ours = tok->encode(text.bytes);
      return ours == e.ids ? std::string() : id_difference(ours, e.ids);
    });
    compare(m, text, "encode with special tokens", [&] {
      const std::vector<int> ours = tok->encode(text.bytes, true);
      return ours == e.ids_special ? std::string() : id_difference(ours, e.ids_special);
    });
    if (e.decoded) {
      ++checks;
      compare(m, text, "decode", [&] {
        const std::string ours = tok->decode(e.ids.data(), e.ids.size());
        return ours == *e.decoded ? std::string() : text_difference(ours, *e.decoded);
      });
    }
    if (e.decoded_special) {
      ++checks;
      compare(m, text, "decode with special tokens", [&] {
        const std::string ours = tok->decode(e.ids_special.data(), e.ids_special.size());
        return ours == *e.decoded_special ? std::string()
                                          : text_difference(ours, *e.decoded_special);
      });
    }
  }
  EXPECT_EQ(m.count(), 0u) << m.report(label, checks);
}


class HfLayout : public TempDirTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(HfLayout, MatchesTokenizersJs) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::string layout = GetParam();
  make_hf_layouts(ref, dir_.string(), {layout});
  const std::string folder = path(layout);
  ASSERT_TRUE(fs::exists(folder + "/tokenizer.json"));
  expect_tokenizers_js_answers(ref, folder, "layout " + layout, path("texts.json"));
}

// A test name for a layout or model: its letters and digits, '_' for the rest.
std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(HfReference, HfLayout, ::testing::ValuesIn(hf_layouts()), param_name);

// The models' own published tokenizer files (tools/fetch-data.sh --tests): Gemma 1/2's 256000-token
// and Gemma 3's 262144-token SentencePiece-style BPE (spaces as U+2581, byte fallback, thousands of
// added tokens), and Qwen3's byte-level BPE with its chat tokens.
class HfPublished : public TempDirTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(HfPublished, MatchesTokenizersJs) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const PublishedTokenizer published = find_published_tokenizer(GetParam());
  ASSERT_TRUE(published.missing.empty()) << published.missing;
  expect_tokenizers_js_answers(ref, published.dir, published.package, path("texts.json"));
}

INSTANTIATE_TEST_SUITE_P(HfReference, HfPublished, ::testing::ValuesIn(published_tokenizers()),
                         param_name);

// `llmcpu tokenize`, with standard output apart from standard error.
class HfCli : public TempDirTest {
 protected:
  Outcome llmcpu(const std::string& args) {
    last_args_ = args;
    const std::string err = path("stderr.txt");
    Outcome r = run_shell(std::string(LLMCPU_BINARY) + " " + args + " 2>" + shell_quote(err));
    stderr_ = read_file(err);
    return r;
  }
  // The tokenizer `spec` (a folder or a tokenizer.json) against the reference's answers for the
  // tokenizer folder `ref_folder`, on the files `names` under texts/.
  void check_cli(const HfReference& ref, const std::string& spec, const std::string& ref_folder,
                 const std::vector<std::string>& names) {
    std::vector<std::string> texts;
    for (const std::string& n : names)
      texts.push_back(read_file(LLMCPU_TOKENIZER_TEST_DIR "/texts/" + n));
    const HfReferenceRun expected = run_hf_reference(ref, ref_folder, texts, path("texts.json"));
    ASSERT_TRUE(expected.error.empty()) << expected.error;
    const std::string tok = "--tokenizer " + shell_quote(spec) + " ";
    for (size_t i = 0; i < names.size(); ++i) {
      SCOPED_TRACE(spec + ", " + names[i]);
      const HfExpected& e = expected.texts[i];
      const std::string file = shell_quote(LLMCPU_TOKENIZER_TEST_DIR "/texts/" + names[i]);
      // A command that fails fails the rest the same way: the first one is reported.
      if (!ids_match(llmcpu("tokenize " + tok + file), e.ids)) return;
      if (!ids_match(llmcpu("tokenize " + tok + "--add-special-tokens " + file), e.ids_special))
        return;
      for (const auto& [ids, decoded] :
           {std::pair(&e.ids, &e.decoded), std::pair(&e.ids_special, &e.decoded_special)}) {
        if (!decoded->has_value()) continue;
        write_file(path("ids.txt"), id_line(*ids));
        const std::string ids_file = shell_quote(path("ids.txt"));
        if (!text_matches(llmcpu("tokenize " + tok + "--decode " + ids_file), **decoded)) return;
        if (!text_matches(llmcpu("tokenize " + tok + "--decode < " + ids_file), **decoded)) return;
      }
    }
  }
  bool ran(const Outcome& r) {
    if (r.status == 0) return true;
    ADD_FAILURE() << "llmcpu " << last_args_ << "\nexited with " << r.status << ": " << stderr_;
    return false;
  }
  bool ids_match(const Outcome& r, const std::vector<int>& ids) {
    if (!ran(r)) return false;
    if (r.output == id_line(ids)) return true;
    std::vector<int> ours;
    std::istringstream words(r.output);
    for (int v; words >> v;) ours.push_back(v);
    ADD_FAILURE() << "llmcpu " << last_args_ << "\n"
                  << id_difference(ours, ids)
                  << (r.output.empty() || r.output.back() != '\n'
                          ? "\n(output not ended by a newline)"
                          : "");
    return false;
  }
  bool text_matches(const Outcome& r, const std::string& text) {
    if (!ran(r)) return false;
    if (r.output == text) return true;
    ADD_FAILURE() << "llmcpu " << last_args_ << "\n" << text_difference(r.output, text);
    return false;
  }
  std::string last_args_;
  std::string stderr_;
};

const std::vector<std::string> kCliTexts = {"hf/specials.txt", "hf/invalid_utf8.txt",
                                            "hf/scripts_more.txt", "whitespace.txt"};

TEST_F(HfCli, TokenizeAFolderMatchesTheReference) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"llama3", "llama2"});
  for (const char* layout : {"llama3", "llama2"})
    check_cli(ref, path(layout), path(layout), kCliTexts);
}

// --tokenizer naming the tokenizer.json file itself, alone in its folder: the
// tokenizer_config.json defaults apply (clean_up_tokenization_spaces true, where the llama2
// layout's own config says false).
TEST_F(HfCli, TokenizeATokenizerJsonFileMatchesTheReference) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"llama2"});
  fs::create_directories(path("bare"));
  fs::copy_file(path("llama2/tokenizer.json"), path("bare/tokenizer.json"));
  check_cli(ref, path("bare/tokenizer.json"), path("bare"), kCliTexts);
}

// A broken tokenizer.json is refused with an llmcpu Error whose message names the file and the
// component that is wrong.
class HfLoadErrors : public TempDirTest {
 protected:
  // Loading `target` must throw an llmcpu Error whose message holds every one of `words`.
  static void expect_refused(const std::string& target, const std::vector<std::string>& words) {
    try {
      Tokenizer::load(target);
      ADD_FAILURE() << target << ": loaded without an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const std::string& w : words) {
        EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing in: " << what;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << target << ": threw something other than an llmcpu Error: " << e.what();
    }
  }
};

TEST_F(HfLoadErrors, NameTheFileAndTheComponent) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"llama2"});
  // The unbroken file loads: the errors below come from what each case breaks.
  ASSERT_NO_THROW(Tokenizer::load(path("llama2")));
  const std::string text = read_file(path("llama2/tokenizer.json"));
  const nlohmann::json base = nlohmann::json::parse(text);

  struct Case {
    std::string name;
    std::function<void(nlohmann::json&)> edit;  // null: the file cut in half instead
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"unknown_pre_tokenizer",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
       },
       {"BertPreTokenizer"}},
      {"unknown_in_sequence",
       [](nlohmann::json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "NoSuchPreTokenizer"}}}}};
       },
       {"NoSuchPreTokenizer"}},
      {"unknown_normalizer",
       [](nlohmann::json& j) {
         j["normalizer"]["normalizers"][1] = {{"type", "NoSuchNormalizer"}};
       },
       {"NoSuchNormalizer"}},
      {"unknown_decoder",
       [](nlohmann::json& j) {
         j["decoder"] = {{"type", "NoSuchDecoder"}};
       },
       {"NoSuchDecoder"}},
      {"wordpiece_model",
       [](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; },
       {"WordPiece"}},
      {"no_model", [](nlohmann::json& j) { j.erase("model"); }, {"model"}},
      {"truncated", nullptr, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string folder = path(c.name);
    fs::create_directories(folder);
    const std::string file = folder + "/tokenizer.json";
    if (c.edit) {
      nlohmann::json j = base;
      c.edit(j);
      write_file(file, j.dump(1));
    } else {
      write_file(file, text.substr(0, text.size() / 2));
    }
    std::vector<std::string> words = c.words;
    words.push_back(file);
    expect_refused(file, words);
    words.back() = "tokenizer.json";
    expect_refused(folder, words);
  }
}

}  // namespace
}  // namespace llmcpu

namespace llmcpu {
namespace {

// Where tokenizers.js and Hugging Face's tokenizers differ, the tokenizer follows tokenizers.js
// (the layout test above checks the ids) and says so: one note per such setting, none for a layout
// without them.
class HfNotes : public TempDirTest {};

TEST_F(HfNotes, NameWhatFollowsTokenizersJs) {
  const HfReference ref = find_hf_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  make_hf_layouts(ref, dir_.string(), {"replace-regex", "gpt2"});
  const Tokenizer plain = Tokenizer::load(path("gpt2"));
  EXPECT_TRUE(plain.notes().empty());
  const Tokenizer tok = Tokenizer::load(path("replace-regex"));
  std::string all;
  for (const std::string& n : tok.notes()) all += n + "\n";
  EXPECT_EQ(tok.notes().size(), 3u) << all;
  for (const char* word :
       {"single_word", "\"MergedWithPrevious\"", "continuing_subword_prefix \"##\""}) {
    EXPECT_NE(all.find(word), std::string::npos) << word << "\n" << all;
  }
}

// Gemma 3's pre-tokenizer splits "MergedWithPrevious" on " ", which its normalizer has already
// replaced by U+2581 everywhere: the split never matches, so nothing differs and nothing is said.
// The same Split after a normalizer that keeps the spaces is noted.
TEST_F(HfNotes, NoneForASplitTheNormalizerLeavesNothingFor) {
  const PublishedTokenizer gemma3 = find_published_tokenizer("gemma3");
  ASSERT_TRUE(gemma3.missing.empty()) << gemma3.missing;
  const Tokenizer tok = Tokenizer::load(gemma3.dir);
  std::string all;
  for (const std::string& n : tok.notes()) all += n + "\n";
  EXPECT_TRUE(tok.notes().empty()) << all;

  nlohmann::json doc = nlohmann::json::parse(read_file(gemma3.dir + "/tokenizer.json"));
  ASSERT_EQ(doc["pre_tokenizer"]["type"], "Split");
  ASSERT_EQ(doc["pre_tokenizer"]["behavior"], "MergedWithPrevious");
  doc["normalizer"]["content"] = " \u2581";  // the space stays, after a U+2581
  fs::create_directories(path("spaces"));
  write_file(path("spaces/tokenizer.json"), doc.dump());
  const Tokenizer kept = Tokenizer::load(path("spaces"));
  ASSERT_EQ(kept.notes().size(), 1u);
  EXPECT_NE(kept.notes()[0].find("\"MergedWithPrevious\""), std::string::npos) << kept.notes()[0];
}

}  // namespace
}  // namespace llmcpu
