#include "core/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <unordered_set>

#include "core/tokenizer/hf_bpe.h"
#include "core/tokenizer/hf_decoders.h"
#include "core/tokenizer/hf_json.h"
#include "core/tokenizer/hf_normalizers.h"
#include "core/tokenizer/hf_pretokenizers.h"
#include "core/tokenizer/piece_cache.h"
#include "core/tokenizer/unicode_text.h"
#include "core/util/file.h"

namespace llmcpu::hf {

namespace {

struct AddedToken {
  std::string content;
  int id = 0;
  bool lstrip = false, rstrip = false, special = false, normalized = false;
};

// tokenizers.js's DictionarySplitter: at each place the longest content that starts there is cut
// out as its own part; the text between is kept as parts too.
class Splitter {
 public:
  void add(const std::string& s) {
    if (s.empty()) return;
    const auto first = static_cast<unsigned char>(s[0]);
    if (by_first_[first].empty()) firsts_ += s[0];
    by_first_[first].push_back(s);
  }
  void finish() {
    for (auto& list : by_first_) {
      std::sort(list.begin(), list.end(),
                [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    }
  }
  bool empty() const { return firsts_.empty(); }
  // The parts, as views into `text`.
  std::vector<std::string_view> split(std::string_view text) const {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = next_candidate(text, 0); i < text.size(); i = next_candidate(text, i)) {
      const std::string* match = nullptr;
      for (const std::string& c : by_first_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, c.size(), c) == 0) {
          match = &c;
          break;
        }
      }
      if (!match) {
        ++i;
        continue;
      }
      if (i > start) out.push_back(text.substr(start, i - start));
      out.push_back(text.substr(i, match->size()));
      i += match->size();
      start = i;
    }
    if (start < text.size()) out.push_back(text.substr(start));
    return out;
  }

 private:
  // The first place at or after i where some content may start.
  size_t next_candidate(std::string_view text, size_t i) const {
    if (firsts_.size() == 1) {  // (the special tokens of most tokenizers start with '<')
      const void* at = i < text.size() ? std::memchr(text.data() + i, firsts_[0], text.size() - i)
                                       : nullptr;
      return at ? static_cast<size_t>(static_cast<const char*>(at) - text.data()) : text.size();
    }
    while (i < text.size() && by_first_[static_cast<unsigned char>(text[i])].empty()) ++i;
    return i;
  }

  std::vector<std::string> by_first_[256];
  std::string firsts_;  // the distinct first bytes
};

// clean_up_tokenization: " ." -> "." and the like, each replaced everywhere, in this order.
std::string clean_up_spaces(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) s = unicode::replace_all(s, from, to);
  return s;
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null.
std::string config_token(const Node& config, const char* key) {
  if (!config.has_non_null(key)) return "";
  const Node n = config.get(key);
  if (n.json().is_string()) return n.str();
  if (n.json().is_object()) return n.at("content").str();
  n.fail("expected a token as a string or {\"content\": ...}");
}

std::atomic<uint64_t> next_instance{1};

}  // namespace

struct HfTokenizer::Impl {
  std::string file;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  StringIds added_ids;        // content and normalized content -> id (the last token wins)
  StringIds plain_added_ids;  // the same for the tokens that are not special
  size_t longest_added = 0;   // bytes of the longest key of added_ids
  StringMap<size_t> added_index;  // -> added[]
  // [0]: every added token; [1]: the tokens that are not special (documents, split_special).
  Splitter raw_splitter[2], normalized_splitter[2];
  bool clean_up_spaces = true, remove_space = false, lowercase_strip_accents = false;
  int eos = -1, bos = -1;
  bool adds_bos = false;
  bool raw_bytes = false;  // the pre-tokenizer leaves GPT-2's byte alphabet to the model
  uint64_t instance = next_instance++;
  std::vector<std::string> notes;  // where tokenizers.js is followed and Hugging Face's differs

  void read_added(const Node& list);
  void read_config(const Node& config, const std::vector<std::string>& template_before);
  int final_id(const std::string& token) const;
  // The id of the added token whose (normalized) content is `s`, or -1; with `only_plain` a special
  // token's does not count.
  int added_id(std::string_view s, bool only_plain) const;
  void strip_beside(std::vector<std::string_view>& parts, bool only_plain) const;
  void encode_section(std::string_view text, int section, bool only_plain,
                      std::vector<int>& out) const;
  void encode_model(std::string_view text, int section, bool plain, std::vector<int>& out) const;
  class Encoder;
};

namespace {

// A thread's cache of pre-token -> model tokens, for one tokenizer at a time.
struct WordCache {
  uint64_t owner = 0;
  PieceCache<BpeModel::Token> pieces;
};
constexpr size_t kMaxCachedWord = 256;                // bytes; longer pre-tokens are not cached
constexpr size_t kMaxCachedTokens = size_t{1} << 22;  // the cache is emptied beyond this

// This thread's cache for tokenizer `instance`: [plain][part] (parts of a pre-token have their own
// where ignore_merges makes a whole word differ).
WordCache& word_cache(uint64_t instance, bool plain, bool part) {
  thread_local WordCache caches[2][2];
  WordCache& cache = caches[plain][part];
  if (cache.owner != instance) {
    cache.pieces.clear();
    cache.owner = instance;
  }
  return cache;
}

}  // namespace

// Takes the pre-tokens of one part of the text through the model, by way of this thread's cache of
// pre-token results, and appends their ids to `out`; with fuse_unk a run of unknown tokens is
// written once.
class HfTokenizer::Impl::Encoder final : public PieceSink {
 public:
  Encoder(const Impl& m, bool plain, std::vector<int>& out)
      : m_(m),
        model_(*m.model),
        plain_(plain),
        out_(out),
        whole_(word_cache(m.instance, plain, false)),
        part_(model_.ignores_merges() ? word_cache(m.instance, plain, true) : whole_),
        unk_(model_.unk_vocab_id()),
        fuse_(model_.fuse_unk() && unk_ >= 0) {}
  void piece(std::string_view word) override { encode(word, true); }

 private:
  using Token = BpeModel::Token;

  // `whole`: the word is a whole pre-token (ignore_merges may take it whole), not a part of one.
  void encode(std::string_view word, bool whole) {
    if (word.size() > kMaxCachedWord) {
      encode_long(word, whole);
      return;
    }
    uint32_t count = 0;
    const Token* t = tokens_of(word, whole, whole ? whole_ : part_, count);
    emit(t, count);
  }
  // The tokens of a word of at most kMaxCachedWord bytes from `cache`, made and kept there when
  // missing; valid until the cache changes.
  const Token* tokens_of(std::string_view word, bool whole, WordCache& cache, uint32_t& count) {
    if (const Token* hit = cache.pieces.find(word, count)) return hit;
    return make_and_keep(word, whole, cache, count);
  }
  // The same for a word not in `cache`.
  const Token* make_and_keep(std::string_view word, bool whole, WordCache& cache,
                             uint32_t& count) {
    thread_local std::vector<Token> fresh;
    fresh.clear();
    model_.encode(word, plain_, m_.raw_bytes, fresh, whole);
    if (cache.pieces.values() > kMaxCachedTokens) cache.pieces.clear();
    cache.pieces.insert(word, fresh.data(), fresh.size());
    count = static_cast<uint32_t>(fresh.size());
    return fresh.data();
  }
  void encode_long(std::string_view word, bool whole) {
    if (!whole || m_.raw_bytes ||
        (model_.ignores_merges() && model_.whole_word(word, plain_).vocab_id >= 0)) {
      thread_local std::vector<Token> fresh;
      fresh.clear();
      model_.encode(word, plain_, m_.raw_bytes, fresh, whole);
      emit(fresh.data(), fresh.size());
      return;
    }
    // A long piece of a SentencePiece-style vocabulary: cut into chunks before each "▁" that no
    // merge joins to the character before it (BpeModel::may_cut_between), each chunk cached.
    static const std::string_view kMeta = "\xE2\x96\x81";
    size_t start = 0;
    for (size_t at = word.find(kMeta, 1); at != std::string_view::npos;
         at = word.find(kMeta, at + 3)) {
      size_t prev = at - 1;
      while (prev > 0 && (static_cast<unsigned char>(word[prev]) & 0xC0) == 0x80) --prev;
      if (!model_.may_cut_between(unicode::decode_at(word, prev).cp, 0x2581)) continue;
      encode_chunk(word.substr(start, at - start));
      start = at;
    }
    encode_chunk(word.substr(start));
  }
  // A chunk found in the cache is written at once; one that is not is cut again, wherever no merge
  // can join across, and made of the parts, each cached like a word: so new text merges only the
  // parts not seen before, and text seen before looks up whole chunks.
  void encode_chunk(std::string_view chunk) {
    uint32_t count = 0;
    const bool cached = chunk.size() <= kMaxCachedWord;
    if (const Token* hit = cached ? part_.pieces.find(chunk, count) : nullptr) {
      emit(hit, count);
      return;
    }
    thread_local std::vector<size_t> cuts;
    cuts.resize(chunk.size() + 2);
    size_t n = 0;
    cuts[n++] = 0;
    char32_t left = 0;
    for (size_t pos = 0; pos < chunk.size();) {  // (the places first, without a branch on each)
      const auto byte = static_cast<unsigned char>(chunk[pos]);
      const unicode::CodePoint c =
          byte < 0x80 ? unicode::CodePoint{byte, 1} : unicode::decode_at(chunk, pos);
      cuts[n] = pos;
      n += pos > 0 && model_.may_cut_between(left, c.cp);
      left = c.cp;
      pos += static_cast<size_t>(c.bytes);
    }
    cuts[n++] = chunk.size();
    if (n == 2) {  // one part: the chunk itself, not in the cache (looked up above)
      if (!cached) {
        encode_long(chunk, false);
        return;
      }
      const Token* t = make_and_keep(chunk, false, part_, count);
      emit(t, count);
      return;
    }
    thread_local std::vector<Token> made;
    made.clear();
    for (size_t k = 0; k + 1 < n; ++k) {
      const std::string_view part = chunk.substr(cuts[k], cuts[k + 1] - cuts[k]);
      if (part.size() > kMaxCachedWord) {
        model_.encode(part, plain_, m_.raw_bytes, made, false);
        continue;
      }
      const Token* t = tokens_of(part, false, part_, count);
      made.insert(made.end(), t, t + count);
    }
    if (cached) {
      if (part_.pieces.values() > kMaxCachedTokens) part_.pieces.clear();
      part_.pieces.insert(chunk, made.data(), made.size());
    }
    emit(made.data(), made.size());
  }
  void emit(const BpeModel::Token* t, size_t n) {
    if (!fuse_) {
      for (size_t i = 0; i < n; ++i) out_.push_back(t[i].id);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      const bool unk = t[i].vocab_id == unk_;
      if (!(unk && last_unk_)) out_.push_back(t[i].id);
      last_unk_ = unk;
    }
  }

  const Impl& m_;
  const BpeModel& model_;
  bool plain_;
  std::vector<int>& out_;
  WordCache &whole_, &part_;
  int unk_;
  bool fuse_, last_unk_ = false;
};

void HfTokenizer::Impl::encode_model(std::string_view text, int section, bool plain,
                                     std::vector<int>& out) const {
  Encoder encoder(*this, plain, out);
  if (pre_tokenizer && !pre_tokenizer->passes_through()) {
    pre_tokenizer->split(text, section, encoder);
  } else {
    encoder.piece(text);
  }
}

int HfTokenizer::Impl::added_id(std::string_view s, bool only_plain) const {
  if (s.size() > longest_added) return -1;  // (a whole long text is not hashed for nothing)
  const auto it = added_index.find(s);
  if (it == added_index.end() || (only_plain && added[it->second].special)) return -1;
  return added_ids.find(s)->second;
}

// lstrip/rstrip of the added tokens among `parts`: the whitespace of the part before (after) it
// is trimmed, in order, as tokenizers.js does it.
void HfTokenizer::Impl::strip_beside(std::vector<std::string_view>& parts, bool only_plain) const {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].size() > longest_added) continue;
    const auto it = added_index.find(parts[i]);
    if (it == added_index.end() || (only_plain && added[it->second].special)) continue;
    const AddedToken& t = added[it->second];
    if (t.lstrip && i > 0) parts[i - 1] = unicode::js_trim_end(parts[i - 1]);
    if (t.rstrip && i + 1 < parts.size()) parts[i + 1] = unicode::js_trim_start(parts[i + 1]);
  }
}

void HfTokenizer::Impl::encode_section(std::string_view text, int section, bool only_plain,
                                       std::vector<int>& out) const {
  std::string buf;     // the text once something has changed it
  if (remove_space) {  // text.trim().split(/\s+/).join(" ")
    std::string joined;
    bool space = false;
    const std::string_view t = unicode::js_trim_end(unicode::js_trim_start(text));
    for (size_t pos = 0; pos < t.size();) {
      const unicode::CodePoint c = unicode::decode_at(t, pos);
      if (unicode::is_js_space(c.cp)) {
        space = true;
      } else {
        if (space) joined += ' ';
        space = false;
        joined.append(t.substr(pos, static_cast<size_t>(c.bytes)));
      }
      pos += static_cast<size_t>(c.bytes);
    }
    text = buf = std::move(joined);
  }
  if (lowercase_strip_accents) {
    static const Pattern marks = Pattern::regex("\\p{M}", "do_lowercase_and_remove_accent");
    std::string changed = marks.replace_all(unicode::to_lower(text), "");
    text = buf = std::move(changed);
  }
  if (normalizer) {
    std::string changed = normalizer->apply(text);
    text = buf = std::move(changed);
  }
  if (text.empty()) return;
  const Splitter& splitter = normalized_splitter[only_plain];
  std::vector<std::string_view> parts =
      splitter.empty() ? std::vector<std::string_view>{text} : splitter.split(text);
  strip_beside(parts, only_plain);
  for (const std::string_view part : parts) {
    if (part.empty()) continue;
    if (const int id = added_id(part, only_plain); id >= 0) {
      out.push_back(id);
      continue;
    }
    encode_model(part, section, only_plain, out);
  }
}

int HfTokenizer::Impl::final_id(const std::string& token) const {
  if (const auto it = added_ids.find(token); it != added_ids.end()) return it->second;
  if (const auto it = model->vocab().find(token); it != model->vocab().end()) return it->second;
  return model->unk_vocab_id();
}

void HfTokenizer::Impl::read_added(const Node& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    const Node n = list.item(i);
    AddedToken t;
    t.content = n.at("content").str();
    const int64_t id = n.integer("id");
    if (id < 0 || id >= (int64_t{1} << 30)) n.fail("id " + std::to_string(id) + " is out of range");
    t.id = static_cast<int>(id);
    t.lstrip = n.boolean("lstrip", false);
    t.rstrip = n.boolean("rstrip", false);
    t.special = n.boolean("special", false);
    t.normalized = n.boolean("normalized", !t.special);
    if (n.boolean("single_word", false)) {
      notes.push_back(file + ": " + n.path() + ": added token \"" + t.content +
                      "\" has single_word true, which tokenizers.js ignores, and so does this "
                      "(Hugging Face's tokenizers matches it only as a whole word)");
    }
    model->add_token(t.content, t.id, t.special, n);
    added_ids[t.content] = t.id;
    longest_added = std::max(longest_added, t.content.size());
    if (!t.special) plain_added_ids[t.content] = t.id;
    added_index[t.content] = added.size();
    if (t.normalized && normalizer) {
      const std::string normalized = normalizer->apply(t.content);
      for (int plain = 0; plain < 2; ++plain) {
        if (!plain || !t.special) normalized_splitter[plain].add(normalized);
      }
      added_ids[normalized] = t.id;
      longest_added = std::max(longest_added, normalized.size());
      if (!t.special) plain_added_ids[normalized] = t.id;
      added_index[normalized] = added.size();
    } else {
      for (int plain = 0; plain < 2; ++plain) {
        if (!plain || !t.special) raw_splitter[plain].add(t.content);
      }
    }
    added.push_back(std::move(t));
  }
  for (int plain = 0; plain < 2; ++plain) {
    raw_splitter[plain].finish();
    normalized_splitter[plain].finish();
  }
}

void HfTokenizer::Impl::read_config(const Node& config, const std::vector<std::string>& before) {
  const auto id_of = [&](const char* key) {
    const std::string name = config_token(config, key);
    if (name.empty()) return -1;
    const int id = final_id(name);
    if (id < 0) config.get(key).fail("token \"" + name + "\" is not in the vocabulary");
    return id;
  };
  clean_up_spaces = config.boolean("clean_up_tokenization_spaces", true);
  remove_space = config.boolean("remove_space", false);
  lowercase_strip_accents = config.boolean("do_lowercase_and_remove_accent", false);
  eos = id_of("eos_token");
  bos = id_of("bos_token");
  if (eos < 0) {  // the usual names of end-of-text among the special added tokens
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
      for (const AddedToken& t : added) {
        if (eos < 0 && t.special && t.content == name) eos = t.id;
      }
    }
  }
  if (bos < 0 && !before.empty()) bos = final_id(before.front());
  adds_bos = config.has_non_null("add_bos_token")
                 ? config.boolean("add_bos_token", false)
                 : !before.empty() && final_id(before.front()) == bos;
}

std::shared_ptr<const HfTokenizer> HfTokenizer::load(const std::string& json_path,
                                                     const std::string& config_path) {
  const auto parse = [](const std::string& path) {
    const MappedFile f(path);
    try {
      return Json::parse(f.data(), f.data() + f.size());
    } catch (const Json::exception& e) {
      throw FileError(path, std::string("not valid JSON: ") + e.what());
    }
  };
  const Json doc = parse(json_path);
  const Json config = config_path.empty() ? Json::object() : parse(config_path);
  auto m = std::make_unique<Impl>();
  m->file = json_path;
  const Node root(doc, m->file, "");
  if (!doc.is_object()) root.fail("expected a JSON object");
  for (const char* key :
       {"model", "normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens"}) {
    if (!root.has(key))
      root.fail(std::string("missing \"") + key + "\" (a tokenizer.json has it, null or not)");
  }
  const Node model = root.get("model");
  const std::string type = model.has_non_null("type") ? model.type() : "BPE";
  if (type != "BPE") {
    model.fail("model type \"" + type + "\" is not implemented (implemented: BPE)");
  }
  m->normalizer = make_normalizer(root.get("normalizer"));
  m->pre_tokenizer = make_pre_tokenizer(root.get("pre_tokenizer"), m->notes,
                                        character_removed_by(root.get("normalizer")));
  m->raw_bytes = m->pre_tokenizer && m->pre_tokenizer->defer_byte_level();
  m->model = std::make_unique<BpeModel>(model, m->notes);
  m->read_added(root.get("added_tokens"));
  m->model->finish(m->added_ids, m->plain_added_ids);
  m->post = make_post_processor(root.get("post_processor"));
  auto added = std::make_shared<std::unordered_set<std::string>>();
  for (const AddedToken& t : m->added) added->insert(t.content);
  m->decoder = make_decoder(root.get("decoder"), added);
  std::vector<std::string> before, after;
  if (m->post) m->post->process(before, after, true);
  for (const auto* list : {&before, &after}) {
    for (const std::string& t : *list) {
      if (m->final_id(t) < 0)
        root.get("post_processor").fail("special token \"" + t + "\" is not in the vocabulary");
    }
  }
  const std::string config_file = config_path;
  m->read_config(Node(config, config_file, ""), before);
  return std::shared_ptr<const HfTokenizer>(new HfTokenizer(std::move(m)));
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;

int HfTokenizer::vocab_size() const { return impl_->model->size(); }
const std::vector<std::string>& HfTokenizer::notes() const { return impl_->notes; }
int HfTokenizer::eos_token() const { return impl_->eos; }
int HfTokenizer::bos_token() const { return impl_->bos; }
bool HfTokenizer::adds_bos() const { return impl_->adds_bos; }
bool HfTokenizer::is_special(int id) const {
  for (const AddedToken& t : impl_->added)
    if (t.id == id && t.special) return true;
  return false;
}

void HfTokenizer::encode(std::string_view text, bool add_special_tokens, std::vector<int>& out,
                         bool split_special_tokens) const {
  const bool only_plain = split_special_tokens;
  const Impl& m = *impl_;
  std::string fixed;
  if (!unicode::to_valid_utf8(text, fixed)) text = fixed;
  std::vector<std::string> before, after;
  if (m.post) m.post->process(before, after, add_special_tokens);
  for (const std::string& t : before) out.push_back(m.final_id(t));
  const Splitter& splitter = m.raw_splitter[only_plain];
  std::vector<std::string_view> sections =
      splitter.empty() ? std::vector<std::string_view>{text} : splitter.split(text);
  m.strip_beside(sections, only_plain);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].empty()) continue;
    if (const int id = m.added_id(sections[i], only_plain); id >= 0) {
      out.push_back(id);
      continue;
    }
    m.encode_section(sections[i], static_cast<int>(i), only_plain, out);
  }
  for (const std::string& t : after) out.push_back(m.final_id(t));
}

std::string HfTokenizer::decode(const int* ids, size_t n, bool clean_up) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(n);
  const std::string* unk = m.model->token_of(m.model->unk_vocab_id());
  for (size_t i = 0; i < n; ++i) {
    const std::string* t = m.model->token_of(ids[i]);
    if (!t) t = ids[i] >= 0 && ids[i] < vocab_size() ? unk : nullptr;
    if (!t) {
      throw ShapeError("token id " + std::to_string(ids[i]) + " (position " + std::to_string(i) +
                       ") is not in the vocabulary of " + m.file + " (ids 0.." +
                       std::to_string(vocab_size() - 1) + ")");
    }
    tokens.push_back(*t);
  }
  std::string text;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
    const std::string& suffix = m.model->end_of_word_suffix();
    if (!suffix.empty()) text = unicode::replace_all(text, suffix, " ");
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return clean_up && m.clean_up_spaces ? clean_up_spaces(std::move(text)) : text;
}

}  // namespace llmcpu::hf
