// A cache from pre-token (bytes) to the tokens the model made of it: open addressing over one array
// of slots, the keys in one byte arena and the values in one array, so that a lookup is a hash of
// the key, usually one slot and one comparison, and growing it allocates a handful of blocks
// rather than a node per entry. Emptied as a whole (clear()), never entry by entry.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace llmcpu {

template <typename Value>
class PieceCache {
 public:
  // The values cached for `key`, or nullptr (then `count` is untouched).
  const Value* find(std::string_view key, uint32_t& count) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == kEmpty) return nullptr;
      if (s.hash == h && s.key_len == key.size() &&
          std::memcmp(keys_.data() + s.key_off, key.data(), key.size()) == 0) {
        count = s.value_len;
        return values_.data() + s.value_off;
      }
    }
  }
  // Adds `key` with values [first, first + n) (the key must not be there yet).
  void insert(std::string_view key, const Value* first, size_t n) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash(key);
    Slot s{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()),
           static_cast<uint32_t>(values_.size()), static_cast<uint32_t>(n)};
    keys_.append(key);
    values_.insert(values_.end(), first, first + n);
    place(s);
    ++count_;
  }
  void clear() {
    slots_.clear();
    keys_.clear();
    values_.clear();
    count_ = 0;
    mask_ = 0;
  }
  size_t size() const { return count_; }
  size_t values() const { return values_.size(); }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash;
    uint32_t key_off, key_len, value_off, value_len;
  };
  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t v;
      std::memcpy(&v, s.data() + i, 8);
      h = (h ^ v) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    uint64_t v = 0;
    std::memcpy(&v, s.data() + i, s.size() - i);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
  }
  void place(const Slot& s) {
    size_t i = s.hash & mask_;
    while (slots_[i].key_len != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{0, 0, kEmpty, 0, 0});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_len != kEmpty) place(s);
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<Value> values_;
  size_t count_ = 0, mask_ = 0;
};

}  // namespace llmcpu
