// The JSON text llmcpu_vulkan_probe prints: objects, arrays, keys and values written in order, the
// commas put where they belong. A number that is not finite is written as null, as JSON has no NaN
// or infinity, so a consumer never meets a value its parser refuses. Not here: reading JSON, pretty
// printing (one line; `python3 -m json.tool` indents it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace llmcpu::vk {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // Inside an object, before each value.
  JsonWriter& key(std::string_view k) {
    separate();
    quote(k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }

  JsonWriter& value(std::string_view s) {
    separate();
    quote(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& value(std::nullptr_t) { return raw("null"); }
  JsonWriter& value(double d) {
    if (!std::isfinite(d)) return raw("null");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", d);
    return raw(buf);
  }
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) JsonWriter& value(T v) {
    return raw(std::to_string(v));
  }
  template <class T>
  JsonWriter& value(const std::optional<T>& v) {
    return v ? value(*v) : raw("null");
  }

  // key(k) then value(v).
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }

 private:
  // A comma before every element of a container but its first; none right after a key.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  JsonWriter& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char c) {
    out_ += c;
    first_.pop_back();
    return *this;
  }
  JsonWriter& raw(std::string_view text) {
    separate();
    out_ += text;
    return *this;
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (unsigned char ch : s) {
      if (ch == '"' || ch == '\\') {
        out_ += '\\';
        out_ += char(ch);
      } else if (ch == '\n') {
        out_ += "\\n";
      } else if (ch < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", ch);
        out_ += buf;
      } else {
        out_ += char(ch);
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace llmcpu::vk
