#include "core/data/records.h"

#include <algorithm>

namespace llmcpu {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The 1-based line of byte `at` of `text`.
size_t line_of(std::string_view text, size_t at) {
  at = std::min(at, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
}

}  // namespace

RecordFile::RecordFile(const std::string& path) : file_(path) {
  const std::string_view text(reinterpret_cast<const char*>(file_.data()), file_.size());
  const size_t first = std::find_if_not(text.begin(), text.end(), is_space) - text.begin();
  is_array_ = first < text.size() && text[first] == '[';
  if (is_array_) {
    try {
      array_ = Json::parse(text);
    } catch (const Json::parse_error& e) {
      throw FileError(path, "line " + std::to_string(line_of(text, e.byte ? e.byte - 1 : 0)) +
                                ": not valid JSON (" + e.what() +
                                "); a file starting with '[' must be one JSON array of records");
    }
    if (!array_.is_array()) throw FileError(path, "expected one JSON array of records");
  } else {
    size_t number = 0;
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find('\n', begin);
      if (end == std::string_view::npos) end = text.size();
      ++number;
      const std::string_view line = text.substr(begin, end - begin);
      if (std::any_of(line.begin(), line.end(), [](char c) { return !is_space(c); })) {
        lines_.push_back({begin, end, number});
      }
      begin = end + 1;
    }
  }
  if (size() == 0) {
    throw FileError(path, is_array_ ? "the JSON array holds no records"
                                    : "no records: expected JSON Lines (one JSON object a line) "
                                      "or a JSON array of objects");
  }
}

std::string RecordFile::where(size_t i) const {
  if (is_array_) return path() + ": record [" + std::to_string(i) + "]";
  return path() + ":" + std::to_string(lines_[i].number);
}

uint64_t RecordFile::bytes_through(size_t i) const {
  if (is_array_) return file_.size() * (i + 1) / array_.size();
  return i + 1 == lines_.size() ? file_.size() : lines_[i + 1].begin;
}

Json RecordFile::parse(size_t i) const {
  Json value;
  if (is_array_) {
    value = array_[i];
  } else {
    const char* text = reinterpret_cast<const char*>(file_.data());
    try {
      value = Json::parse(text + lines_[i].begin, text + lines_[i].end);
    } catch (const Json::parse_error& e) {
      throw RecordError(where(i), "",
                        std::string("not valid JSON (") + e.what() +
                            "); expected one JSON object a line (JSON Lines)");
    }
  }
  if (!value.is_object()) {
    throw RecordError(where(i), "", "expected a JSON object, not " + json_kind(value));
  }
  return value;
}

std::string json_kind(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

const Json& required_field(const Json& record, const std::string& name, const std::string& where) {
  const auto it = record.find(name);
  if (it == record.end() || it->is_null()) throw RecordError(where, name, "missing");
  return *it;
}

const std::string& string_field(const Json& record, const std::string& name,
                                const std::string& where) {
  const Json& v = required_field(record, name, where);
  if (!v.is_string()) throw RecordError(where, name, "expected a string, not " + json_kind(v));
  return v.get_ref<const std::string&>();
}

std::string optional_string(const Json& record, const std::string& name, const std::string& where) {
  const auto it = record.find(name);
  if (it == record.end() || it->is_null()) return "";
  if (!it->is_string()) {
    throw RecordError(where, name, "expected a string, not " + json_kind(*it));
  }
  return it->get<std::string>();
}

}  // namespace llmcpu
