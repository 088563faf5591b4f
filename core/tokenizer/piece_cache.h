// A cache from pre-token (bytes) to the values (tokens) the model made of it: open addressing over
// one array of 32-byte slots. A key of up to 16 bytes is kept in its slot, zero-padded, and so is a
// single value, so that a hit on a short word (most of them) reads one slot and nothing else;
// longer keys live in one byte arena and longer value lists in one array. Growing it allocates a
// handful of blocks rather than a node per entry. Emptied as a whole (clear()), never entry by
// entry. Also used as a fixed string -> value table (a vocabulary keyed by bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace llmcpu {

template <typename Value>
class PieceCache {
  static_assert(std::is_trivially_copyable_v<Value> && sizeof(Value) <= 8,
                "values are kept in the slot: at most 8 bytes, trivially copyable");

 public:
  static constexpr size_t kMaxKey = 65534;     // longer keys are not stored (insert ignores them)
  static constexpr size_t kMaxValues = 65535;  // and neither are longer value lists

  // The values kept for `key`, or nullptr (then `count` is untouched).
  const Value* find(std::string_view key, uint32_t& count) const {
    if (slots_.empty() || key.size() > kMaxKey) return nullptr;
    const Probe p = probe(key);
    for (size_t i = p.hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == kEmpty) return nullptr;
      if (s.tag == p.tag && s.len == key.size() && same_key(s, p, key)) {
        count = s.count;
        return s.count == 1 ? &s.value.one : values_.data() + s.value.off;
      }
    }
  }
  // Adds `key` with values [first, first + n) (the key must not be there yet). A key longer than
  // kMaxKey or more than kMaxValues values are not kept.
  void insert(std::string_view key, const Value* first, size_t n) {
    if (key.size() > kMaxKey || n > kMaxValues) return;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const Probe p = probe(key);
    Slot s{};
    s.tag = p.tag;
    s.len = static_cast<uint16_t>(key.size());
    s.count = static_cast<uint16_t>(n);
    if (key.size() <= 16) {
      s.key.words[0] = p.w0;
      s.key.words[1] = p.w1;
    } else {
      s.key.far = {static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(p.hash)};
      keys_.append(key);
    }
    if (n == 1) {
      s.value.one = *first;
    } else {
      s.value.off = static_cast<uint32_t>(values_.size());
      values_.insert(values_.end(), first, first + n);
    }
    place(s, p.hash);
    ++count_;
    stored_values_ += n;
  }
  void clear() {
    slots_.clear();
    keys_.clear();
    values_.clear();
    count_ = stored_values_ = 0;
    mask_ = 0;
  }
  size_t size() const { return count_; }
  size_t values() const { return stored_values_; }

 private:
  static constexpr uint16_t kEmpty = UINT16_MAX;
  struct Slot {
    uint32_t tag;    // the hash's upper half
    uint16_t len;    // key bytes; kEmpty for a free slot
    uint16_t count;  // values
    union {
      uint64_t words[2];  // the key, zero-padded, when it has at most 16 bytes
      struct {
        uint32_t off;       // else its place in keys_
        uint32_t hash_low;  // and the hash's lower half (for growing)
      } far;
    } key;
    union {
      Value one;     // the value when there is exactly one
      uint32_t off;  // else the first one's place in values_
    } value;
  };
  struct Probe {
    uint64_t w0 = 0, w1 = 0;  // the key zero-padded (keys of at most 16 bytes)
    uint64_t hash = 0;
    uint32_t tag = 0;
  };

  static uint64_t load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint64_t load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static uint64_t byte(const char* p, size_t i) { return static_cast<unsigned char>(p[i]); }
  // The first min(n, 16) bytes at p as two little-endian words, zero-padded, reading only p[0, n).
  static void load_padded(const char* p, size_t n, uint64_t& w0, uint64_t& w1) {
    w0 = w1 = 0;
    if (n > 8) {
      w0 = load64(p);
      w1 = load64(p + n - 8) >> ((16 - n) * 8);  // bytes 8..n-1 (the load overlaps w0's)
    } else if (n >= 4) {
      w0 = load32(p) | load32(p + n - 4) << ((n - 4) * 8);
    } else if (n > 0) {
      w0 = byte(p, 0) | byte(p, n / 2) << (n / 2 * 8) | byte(p, n - 1) << ((n - 1) * 8);
    }
  }
  static uint64_t mix(uint64_t h) {
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
  }
  static uint64_t short_hash(uint64_t w0, uint64_t w1, size_t n) {
    return mix((w0 ^ 0x9E3779B97F4A7C15ull) * 0xff51afd7ed558ccdull ^
               (w1 + n) * 0xc4ceb9fe1a85ec53ull);
  }
  static Probe probe(std::string_view key) {
    Probe p;
    const size_t n = key.size();
    if (n <= 16) {
      load_padded(key.data(), n, p.w0, p.w1);
      p.hash = short_hash(p.w0, p.w1, n);
    } else {
      uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
      size_t i = 0;
      for (; i + 8 <= n; i += 8) {
        h = (h ^ load64(key.data() + i)) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
      }
      h = (h ^ load64(key.data() + n - 8)) * 0xc4ceb9fe1a85ec53ull;  // the last 8 bytes
      p.hash = mix(h);
    }
    p.tag = static_cast<uint32_t>(p.hash >> 32);
    return p;
  }
  bool same_key(const Slot& s, const Probe& p, std::string_view key) const {
    if (key.size() <= 16) return s.key.words[0] == p.w0 && s.key.words[1] == p.w1;
    return std::memcmp(keys_.data() + s.key.far.off, key.data(), key.size()) == 0;
  }
  uint64_t hash_of(const Slot& s) const {
    if (s.len > 16) return static_cast<uint64_t>(s.tag) << 32 | s.key.far.hash_low;
    return short_hash(s.key.words[0], s.key.words[1], s.len);
  }
  void place(const Slot& s, uint64_t hash) {
    size_t i = hash & mask_;
    while (slots_[i].len != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    Slot empty{};
    empty.len = kEmpty;
    slots_.assign(old.empty() ? 32768 : old.size() * 2, empty);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.len != kEmpty) place(s, hash_of(s));
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<Value> values_;
  size_t count_ = 0, stored_values_ = 0, mask_ = 0;
};

}  // namespace llmcpu
