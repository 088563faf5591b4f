#include "core/tokenizer/hf_bpe.h"

#include <algorithm>
#include <functional>

#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode_text.h"

namespace llmcpu::hf {

namespace {

std::string byte_token(unsigned char b) {
  static const char* hex = "0123456789ABCDEF";
  std::string s = "<0x";
  s += hex[b >> 4];
  s += hex[b & 15];
  s += '>';
  return s;
}

}  // namespace

BpeModel::BpeModel(const Node& model, std::vector<std::string>& notes) {
  if (model.has_non_null("continuing_subword_prefix") &&
      !model.get("continuing_subword_prefix").str().empty()) {
    notes.push_back(model.file() + ": model.continuing_subword_prefix \"" +
                    model.get("continuing_subword_prefix").str() +
                    "\" is ignored, as tokenizers.js ignores it (Hugging Face's tokenizers puts it "
                    "before every piece of a word but the first)");
  }
  if (model.has_non_null("dropout")) {
    const Node d = model.get("dropout");
    if (!d.json().is_number()) d.fail("expected a number or null");
    if (d.json().get<double>() > 0)
      d.fail("BPE dropout is not implemented (it is random by design)");
  }
  read_vocab(model);
  read_merges(model);
  for (int b = 0; b < 256; ++b) {
    unicode::append_utf8(alphabet_[b],
                         static_cast<char32_t>(byte_to_unicode(static_cast<unsigned char>(b))));
  }
  byte_fallback_ = model.boolean("byte_fallback", false);
  fuse_unk_ = model.boolean("fuse_unk", false);
  ignore_merges_ = model.boolean("ignore_merges", false);
  end_of_word_suffix_ = model.str("end_of_word_suffix", "");
  continuing_subword_suffix_ = model.str("continuing_subword_suffix", "");
  has_unk_ = model.has_non_null("unk_token");
  if (has_unk_) {
    unk_token_ = model.get("unk_token").str();
    const auto it = vocab_.find(unk_token_);
    if (it == vocab_.end()) {
      model.get("unk_token").fail("unk_token \"" + unk_token_ + "\" is not in the vocabulary");
    }
    unk_id_ = it->second;
  }
}

void BpeModel::read_vocab(const Node& model) {
  const Node v = model.at("vocab");
  if (!v.json().is_object()) v.fail("expected an object of token: id");
  int max_id = -1;
  for (const auto& [token, id] : v.json().items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 30)) {
      v.fail("the id of \"" + token + "\" is not an integer in 0..2^30-1");
    }
    const int i = id.get<int>();
    vocab_[token] = i;
    max_id = std::max(max_id, i);
  }
  check_dense(v, max_id, vocab_.size());
  id_text_.assign(static_cast<size_t>(max_id + 1), std::string());
  id_known_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [token, id] : vocab_) {
    if (id_known_[id]) {
      v.fail("tokens \"" + id_text_[id] + "\" and \"" + token + "\" share the id " +
             std::to_string(id));
    }
    id_text_[id] = token;
    id_known_[id] = 1;
  }
}

void BpeModel::read_merges(const Node& model) {
  const Node m = model.at("merges");
  const size_t n = m.size();
  const bool pairs = n > 0 && m.json()[0].is_array();
  merge_list_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Json& e = m.json()[i];
    if (pairs) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
        m.item(i).fail("expected a merge as a pair of strings, as the first merge is");
      }
      merge_list_.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      continue;
    }
    if (!e.is_string())
      m.item(i).fail("expected a merge as a string \"left right\", as the first is");
    // x.split(" ", 2): the text before the first space and the text up to the next one.
    const std::string s = e.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos) {
      merge_list_.emplace_back(std::string(1, '\0') + "no pair", std::string());  // never matches
      continue;
    }
    const size_t sp2 = s.find(' ', sp + 1);
    merge_list_.emplace_back(
        s.substr(0, sp),
        s.substr(sp + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp - 1));
  }
}

// Ids index arrays, so they must be about as many as the tokens: the largest may leave room for
// holes (ids no token has), but not for an array of a billion entries from a small file.
void BpeModel::check_dense(const Node& where, int64_t max_id, size_t tokens) {
  if (max_id >= static_cast<int64_t>(2 * tokens + 65536)) {
    where.fail("the largest id, " + std::to_string(max_id) + ", is far beyond the " +
               std::to_string(tokens) +
               " tokens (ids must number the tokens from 0, with at most a few gaps)");
  }
}

void BpeModel::add_token(const std::string& content, int id, bool special, const Node& where) {
  check_dense(where, id, vocab_.size() + 1);
  if (special && !special_model_ids_.count(content)) {
    const auto it = vocab_.find(content);
    special_model_ids_[content] = it == vocab_.end() ? -1 : it->second;
  }
  vocab_[content] = id;
  if (static_cast<size_t>(id) >= id_text_.size()) {
    id_text_.resize(static_cast<size_t>(id) + 1);
    id_known_.resize(static_cast<size_t>(id) + 1, 0);
  }
  id_text_[id] = content;
  id_known_[id] = 1;
}

int BpeModel::symbol_of(std::string_view s) {
  const auto it = symbols_.find(s);
  if (it != symbols_.end()) return it->second;
  const int id = static_cast<int>(symbol_text_.size());
  symbols_.emplace(std::string(s), id);
  symbol_text_.emplace_back(s);
  return id;
}

int BpeModel::find_symbol(std::string_view s) const {
  if (finished_ && s.size() <= PieceCache<int>::kMaxKey) {
    uint32_t n = 0;
    const int* sym = symbol_index_.find(s, n);
    return sym ? *sym : -1;
  }
  const auto it = symbols_.find(s);
  return it == symbols_.end() ? -1 : it->second;
}

int BpeModel::find_raw_symbol(std::string_view bytes) const {
  uint32_t n = 0;
  if (const int* sym = raw_symbol_index_.find(bytes, n)) return *sym;
  if (bytes.size() <= PieceCache<int>::kMaxKey) return -1;
  std::string mapped;
  for (const char c : bytes) mapped += alphabet_[static_cast<unsigned char>(c)];
  return find_symbol(mapped);
}

BpeModel::Token BpeModel::symbol_token(int sym, bool plain) const {
  if (plain && !plain_.empty()) {
    if (const auto it = plain_.find(sym); it != plain_.end()) return it->second;
  }
  return {symbol_output_id_[sym], symbol_vocab_id_[sym]};
}

void BpeModel::finish(const StringIds& output_ids, const StringIds& plain_output_ids) {
  output_ids_ = output_ids;
  for (const auto& [token, id] : vocab_) symbol_of(token);
  add_merges();
  assign_ids();
  add_plain_view(plain_output_ids);
  build_indexes();
}

int BpeModel::output_of(const std::string& s, int vocab_id) const {
  const auto it = output_ids_.find(s);
  return it == output_ids_.end() ? vocab_id : it->second;
}

// The merge table, and the junctions of the merges (may_cut_between).
void BpeModel::add_merges() {
  // Added last to first: the first add of a pair wins, so a pair listed twice keeps its last rank.
  for (size_t r = merge_list_.size(); r-- > 0;) {
    const auto& [a, b] = merge_list_[r];
    const int left = symbol_of(a), right = symbol_of(b), result = symbol_of(a + b);
    merges_.add(left, right, static_cast<int>(r), result);
  }
  cuts_ = end_of_word_suffix_.empty() && continuing_subword_suffix_.empty();
  for (const auto& [a, b] : merge_list_) {
    if (a.empty() || b.empty()) continue;  // (such a merge never applies)
    size_t last = a.size() - 1;
    while (last > 0 && (static_cast<unsigned char>(a[last]) & 0xC0) == 0x80) --last;
    const char32_t left = unicode::decode_at(a, last).cp, right = unicode::decode_at(b, 0).cp;
    const int l = small_index(left), r = small_index(right);
    if (l >= 0 && r >= 0) {
      small_junctions_[l][r >> 6] |= uint64_t{1} << (r & 63);
    } else {
      junctions_.insert(uint64_t{left} << 32 | right);
    }
  }
  merge_list_.clear();
  merge_list_.shrink_to_fit();
}

// Each symbol's vocabulary and output ids, the byte tokens' and unk's.
void BpeModel::assign_ids() {
  symbol_vocab_id_.assign(symbol_text_.size(), -1);
  symbol_output_id_.assign(symbol_text_.size(), -1);
  for (size_t s = 0; s < symbol_text_.size(); ++s) {
    const auto it = vocab_.find(symbol_text_[s]);
    if (it == vocab_.end()) continue;
    symbol_vocab_id_[s] = it->second;
    symbol_output_id_[s] = output_of(symbol_text_[s], it->second);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string t = byte_token(static_cast<unsigned char>(b));
    const auto it = vocab_.find(t);
    byte_vocab_id_[b] = it == vocab_.end() ? -1 : it->second;
    byte_output_id_[b] = it == vocab_.end() ? -1 : output_of(t, it->second);
  }
  if (has_unk_) unk_output_id_ = output_of(unk_token_, unk_id_);
}

// The plain view differs for the special tokens' strings and for strings the output map sends to
// a special token.
void BpeModel::add_plain_view(const StringIds& plain_output_ids) {
  const auto plain_token = [&](const std::string& t) {
    const auto special = special_model_ids_.find(t);
    const auto v = vocab_.find(t);
    const int vocab_id = special != special_model_ids_.end() ? special->second
                         : v != vocab_.end()                 ? v->second
                                                             : -1;
    const auto o = plain_output_ids.find(t);
    return Token{o != plain_output_ids.end() ? o->second : vocab_id, vocab_id};
  };
  const auto full_token = [&](const std::string& t) {
    const auto v = vocab_.find(t);
    return v == vocab_.end() ? Token{-1, -1} : Token{output_of(t, v->second), v->second};
  };
  for (const auto* strings : {&special_model_ids_, &output_ids_}) {
    for (const auto& entry : *strings) {
      const Token p = plain_token(entry.first), full = full_token(entry.first);
      if (p.id != full.id || p.vocab_id != full.vocab_id) plain_[symbol_of(entry.first)] = p;
    }
  }
  symbol_vocab_id_.resize(symbol_text_.size(), -1);
  symbol_output_id_.resize(symbol_text_.size(), -1);
}

// The flat tables encoding looks symbols up in; symbols_ keeps only those too long for them.
void BpeModel::build_indexes() {
  for (int b = 0; b < 256; ++b) byte_symbol_[b] = find_symbol(alphabet_[b]);
  std::string bytes;
  for (int sym = 0; sym < static_cast<int>(symbol_text_.size()); ++sym) {
    const std::string& text = symbol_text_[sym];
    symbol_index_.insert(text, &sym, 1);
    if (ignore_merges_ && alphabet_to_bytes(text, bytes)) raw_symbol_index_.insert(bytes, &sym, 1);
  }
  StringIds long_symbols;
  for (auto& [text, sym] : symbols_) {
    if (text.size() > PieceCache<int>::kMaxKey) long_symbols.emplace(text, sym);
  }
  symbols_ = std::move(long_symbols);
  finished_ = true;
  for (int i = 0; i <= 128; ++i) {
    std::string text;
    unicode::append_utf8(text, i < 128 ? static_cast<char32_t>(i) : 0x2581);
    small_symbol_[i] = find_symbol(text);
  }
}

BpeModel::Token BpeModel::lookup(std::string_view token, bool plain) const {
  const int sym = find_symbol(token);
  return sym < 0 ? Token{-1, -1} : symbol_token(sym, plain);
}

const std::string* BpeModel::token_of(int id) const {
  if (id < 0 || id >= size() || !id_known_[id]) return nullptr;
  return &id_text_[id];
}

// Merges as tokenizers.js's heap does: the pair of lowest rank first, the leftmost (by the
// position of its first character in the word) among equal ranks; a pair whose nodes changed since
// it was queued is skipped when it comes up. `symbols` holds one symbol per character (-1: a
// character no merge or token knows); on return it holds the merged word's symbols in order, and
// `order` the index of each one's first character.
// The same order found by scanning: the pair of lowest rank, the leftmost among equal ranks, is
// merged, and the two pairs beside it are looked up again. Quadratic, but for the short words most
// text is made of faster than the heap.
void BpeModel::merge_short_word(std::vector<int>& symbols, std::vector<size_t>& order) const {
  size_t n = symbols.size();
  thread_local std::vector<int> rank, result;  // of the pair (symbols[i], symbols[i + 1])
  rank.resize(n);
  result.resize(n);
  order.resize(n);
  const auto look = [&](size_t i) {
    const BpeMerges::Merge* m =
        symbols[i] >= 0 && symbols[i + 1] >= 0 ? merges_.find(symbols[i], symbols[i + 1]) : nullptr;
    rank[i] = m ? m->rank : BpeMerges::kNoRank;
    result[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  while (n > 1) {
    int best = BpeMerges::kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (rank[i] < best) best = rank[i], at = i;
    }
    if (best == BpeMerges::kNoRank) break;
    symbols[at] = result[at];
    for (size_t i = at + 1; i + 1 < n; ++i) {  // the right symbol of the pair goes
      symbols[i] = symbols[i + 1];
      order[i] = order[i + 1];
      rank[i] = rank[i + 1];
      result[i] = result[i + 1];
    }
    --n;
    if (at > 0) look(at - 1);
    if (at + 1 < n) look(at);
  }
  symbols.resize(n);
  order.resize(n);
}

void BpeModel::merge_word(std::vector<int>& symbols, std::vector<size_t>& order) const {
  if (symbols.size() <= kShortWord) {
    merge_short_word(symbols, order);
    return;
  }
  const size_t n = symbols.size();
  // Per-thread scratch, kept between words: a first pass over new text merges many short words.
  thread_local std::vector<int> prev, next;
  thread_local std::vector<uint32_t> version;
  thread_local std::vector<uint8_t> alive;
  prev.resize(n);
  next.resize(n);
  version.assign(n, 0);
  alive.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
  }
  struct Entry {
    int rank;
    int node;
    uint32_t version;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : node > o.node; }
  };
  thread_local std::vector<Entry> heap;  // a min-heap on (rank, node)
  heap.clear();
  struct Queue {
    std::vector<Entry>& h;
    bool empty() const { return h.empty(); }
    const Entry& top() const { return h.front(); }
    void push(const Entry& e) {
      h.push_back(e);
      std::push_heap(h.begin(), h.end(), std::greater<Entry>());
    }
    void pop() {
      std::pop_heap(h.begin(), h.end(), std::greater<Entry>());
      h.pop_back();
    }
  } queue{heap};
  const auto push = [&](int i) {
    const int j = next[i];
    if (j < 0 || symbols[i] < 0 || symbols[j] < 0) return;
    if (const BpeMerges::Merge* m = merges_.find(symbols[i], symbols[j])) {
      queue.push({m->rank, i, version[i]});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
  while (!queue.empty()) {
    const Entry e = queue.top();
    queue.pop();
    const int i = e.node;
    if (!alive[i] || version[i] != e.version || next[i] < 0) continue;
    const int j = next[i];
    symbols[i] = merges_.find(symbols[i], symbols[j])->result;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    ++version[i];
    if (prev[i] >= 0) {
      ++version[prev[i]];
      push(prev[i]);
    }
    push(i);
  }
  // A node's index is the position of its first character: the left node of a merge survives.
  size_t w = 0;
  order.clear();
  for (int i = n ? 0 : -1; i >= 0; i = next[i]) {
    order.push_back(static_cast<size_t>(i));
    symbols[w++] = symbols[i];
  }
  symbols.resize(w);
}

void BpeModel::emit(std::string_view token, bool plain, std::vector<Token>& out) const {
  if (const Token t = lookup(token, plain); t.vocab_id >= 0) {
    out.push_back(t);
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (const char c : token) all = all && byte_vocab_id_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (const char c : token) {
        const auto b = static_cast<unsigned char>(c);
        out.push_back({byte_output_id_[b], byte_vocab_id_[b]});
      }
      return;
    }
  }
  if (has_unk_) out.push_back({unk_output_id_, unk_id_});
}

void BpeModel::encode(std::string_view word, bool plain, bool raw_bytes, std::vector<Token>& out,
                      bool whole) const {
  if (word.empty()) return;
  if (ignore_merges_ && whole) {  // the whole pre-token, when it is a token
    const int sym = raw_bytes ? find_raw_symbol(word) : find_symbol(word);
    if (const Token t = sym < 0 ? Token{-1, -1} : symbol_token(sym, plain); t.vocab_id >= 0) {
      out.push_back(t);
      return;
    }
  }
  // One symbol per character, the last with end_of_word_suffix; chars[k] is character k's text
  // (for raw bytes, GPT-2's alphabet's). (Scratch kept per thread between words.)
  thread_local std::vector<std::string_view> chars;
  thread_local std::vector<int> symbols;
  thread_local std::vector<size_t> order;
  chars.clear();
  symbols.clear();
  if (raw_bytes) {
    for (const char c : word) {
      chars.emplace_back(alphabet_[static_cast<unsigned char>(c)]);
      symbols.push_back(byte_symbol_[static_cast<unsigned char>(c)]);
    }
  } else {
    for (size_t pos = 0; pos < word.size();) {
      const unicode::CodePoint c = unicode::decode_at(word, pos);
      const size_t len = static_cast<size_t>(c.bytes);
      chars.push_back(word.substr(pos, len));
      const int small = small_index(c.cp);
      symbols.push_back(small >= 0 ? small_symbol_[small] : find_symbol(chars.back()));
      pos += len;
    }
  }
  std::string last;
  if (!end_of_word_suffix_.empty()) {
    last = std::string(chars.back()) + end_of_word_suffix_;
    symbols.back() = find_symbol(last);
  }
  merge_word(symbols, order);
  for (size_t k = 0; k < symbols.size(); ++k) {
    const int sym = symbols[k];
    if (sym >= 0 && (continuing_subword_suffix_.empty() || k + 1 == symbols.size())) {
      if (const Token t = symbol_token(sym, plain); t.vocab_id >= 0) {
        out.push_back(t);
        continue;
      }
    }
    std::string text;
    if (sym >= 0) {
      text = symbol_text_[static_cast<size_t>(sym)];
    } else {  // a character no symbol knows is never merged: its own text
      text = order[k] + 1 == chars.size() && !last.empty() ? last : std::string(chars[order[k]]);
    }
    if (!continuing_subword_suffix_.empty() && k + 1 < symbols.size()) {
      text += continuing_subword_suffix_;
    }
    emit(text, plain, out);
  }
}

}  // namespace llmcpu::hf
