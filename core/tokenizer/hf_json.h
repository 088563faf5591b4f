// Reading tokenizer.json and tokenizer_config.json: a JSON value together with where it is (the
// file and the path inside it, "pre_tokenizer.pretokenizers[1]"), so that every refusal names both.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "simd/error.h"

namespace llmcpu::hf {

using Json = nlohmann::json;

class Node {
 public:
  Node(const Json& value, const std::string& file, std::string path)
      : value_(&value), file_(&file), path_(std::move(path)) {}

  const Json& json() const { return *value_; }
  const std::string& file() const { return *file_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return value_->is_null(); }

  // Throws FileError naming the file, this node's path and `what`.
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(*file_, (path_.empty() ? std::string() : path_ + ": ") + what);
  }
  // A member (null when absent); at() requires it to be present.
  Node get(const char* key) const;
  Node at(const char* key) const;
  Node item(size_t index) const;  // of an array
  bool has(const char* key) const { return value_->is_object() && value_->contains(key); }
  bool has_non_null(const char* key) const { return has(key) && !(*value_)[key].is_null(); }

  std::string str() const;                                              // this node as a string
  std::string str(const char* key, const std::string& fallback) const;  // absent or null: fallback
  bool boolean(const char* key, bool fallback) const;
  int64_t integer(const char* key) const;
  // The "type" member, as the factories switch on it.
  std::string type() const;
  size_t size() const;  // of an array; fails on anything else

 private:
  const Json* value_;
  const std::string* file_;
  std::string path_;
};

inline const Json& null_json() {
  static const Json null;
  return null;
}

inline Node Node::get(const char* key) const {
  if (!value_->is_object()) fail("expected an object");
  const auto it = value_->find(key);
  return Node(it == value_->end() ? null_json() : *it, *file_,
              path_.empty() ? std::string(key) : path_ + "." + key);
}

inline Node Node::at(const char* key) const {
  if (!has(key)) fail(std::string("missing \"") + key + "\"");
  return get(key);
}

inline Node Node::item(size_t index) const {
  return Node((*value_)[index], *file_, path_ + "[" + std::to_string(index) + "]");
}

inline size_t Node::size() const {
  if (!value_->is_array()) fail("expected an array");
  return value_->size();
}

inline std::string Node::str() const {
  if (!value_->is_string()) fail("expected a string");
  return value_->get<std::string>();
}

inline std::string Node::str(const char* key, const std::string& fallback) const {
  const Node n = get(key);
  return n.is_null() ? fallback : n.str();
}

inline bool Node::boolean(const char* key, bool fallback) const {
  const Node n = get(key);
  if (n.is_null()) return fallback;
  if (!n.json().is_boolean()) n.fail("expected true or false");
  return n.json().get<bool>();
}

inline int64_t Node::integer(const char* key) const {
  const Node n = at(key);
  if (!n.json().is_number_integer()) n.fail("expected an integer");
  return n.json().get<int64_t>();
}

inline std::string Node::type() const {
  if (!value_->is_object()) fail("expected an object with a \"type\"");
  return at("type").str();
}

}  // namespace llmcpu::hf
