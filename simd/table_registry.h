// Kernel tables by name, best first: the list the fp32 picker (dispatch.cpp) and the bf16 picker
// (bf16_dispatch.cpp) each make once, looked up by the name a flag or LLMCPU_TARGET gives and
// listed in messages. Not here: which tables there are and how they rank (the two pickers).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmcpu {

// `Entry` holds at least `std::string_view name` and `const Table* table`.
template <typename Entry>
class TableRegistry {
 public:
  explicit TableRegistry(std::vector<Entry> entries) : entries_(std::move(entries)) {}

  // Best first; the first is the scalar reference.
  const std::vector<Entry>& entries() const { return entries_; }

  // The entry called `name`, or null.
  const Entry* find(std::string_view name) const {
    for (const Entry& e : entries_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }

  std::vector<std::string_view> names() const {
    std::vector<std::string_view> r;
    for (const Entry& e : entries_) r.push_back(e.name);
    return r;
  }

  // "scalar, avx512, ..." for messages.
  std::string name_list() const {
    std::string s;
    for (const Entry& e : entries_) s += (s.empty() ? "" : ", ") + std::string(e.name);
    return s;
  }

 private:
  std::vector<Entry> entries_;
};

}  // namespace llmcpu
