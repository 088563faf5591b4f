#include "core/tokenizer/bpe.h"

namespace llmcpu {

size_t BpeMerges::slot_of(uint64_t k) const {
  // Fibonacci hashing of the 64-bit key; slots_.size() is a power of two.
  const size_t mask = slots_.size() - 1;
  size_t i = static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  while (slots_[i].key != kEmpty && slots_[i].key != k) i = (i + 1) & mask;
  return i;
}

void BpeMerges::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  for (const Slot& s : old) {
    if (s.key != kEmpty) slots_[slot_of(s.key)] = s;
  }
}

bool BpeMerges::add(int left, int right, int rank, int result) {
  if ((count_ + 1) * 2 > slots_.size()) grow();  // keep the load factor at most 1/2
  const uint64_t k = key(left, right);
  Slot& s = slots_[slot_of(k)];
  if (s.key == k) return false;
  s.key = k;
  s.merge = {rank, result};
  ++count_;
  return true;
}

const BpeMerges::Merge* BpeMerges::find(int left, int right) const {
  if (slots_.empty()) return nullptr;
  const Slot& s = slots_[slot_of(key(left, right))];
  return s.key == kEmpty ? nullptr : &s.merge;
}

void BpeMerges::apply(std::vector<int>& w, Scratch& scratch) const {
  size_t n = w.size();
  if (n < 2) return;
  std::vector<int>& rk = scratch.ranks;
  std::vector<uint8_t>& fresh = scratch.merged;
  rk.resize(n);
  fresh.resize(n);
  for (size_t i = 0; i + 1 < n; ++i) {
    const Merge* m = find(w[i], w[i + 1]);
    rk[i] = m ? m->rank : kNoRank;
  }
  while (n > 1) {
    // The lowest rank; among equal ranks the last pair, as gpt-3-encoder's minPairs[rank] = pair
    // keeps the last pair it sees. (Equal ranks of different pairs only arise from its string keys,
    // see tokenizer.cpp.)
    int best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (rk[i] <= best && rk[i] != kNoRank) {
        best = rk[i];
        at = i;
      }
    }
    if (best == kNoRank) break;
    const int a = w[at], b = w[at + 1];
    const int result = find(a, b)->result;
    // One pass, left to right, over non-overlapping occurrences of (a, b). Ranks of pairs that do
    // not touch a new token move along with their left element.
    size_t out = 0;
    for (size_t i = 0; i < n; ++out) {
      if (i + 1 < n && w[i] == a && w[i + 1] == b) {
        w[out] = result;
        fresh[out] = 1;
        i += 2;
      } else {
        w[out] = w[i];
        rk[out] = rk[i];
        fresh[out] = 0;
        i += 1;
      }
    }
    n = out;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (fresh[i] || fresh[i + 1]) {
        const Merge* m = find(w[i], w[i + 1]);
        rk[i] = m ? m->rank : kNoRank;
      }
    }
  }
  w.resize(n);
}

}  // namespace llmcpu
