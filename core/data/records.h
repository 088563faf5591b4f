// The records of a JSON data file for `llmcpu prepare --format` (docs/formats.md): JSON Lines (one
// object a line; blank lines skipped) or one JSON array of objects (a file whose first byte other
// than white space is '['). A record is named by FILE:LINE (JSON Lines) or FILE: record [I] (an
// array, 0-based) in every error about it. Lines are found at once; each is parsed when asked, so
// records can be parsed on many threads. An array is parsed whole when the file is opened: a
// syntax error in it is the file's (FileError naming its line), not one record's.
// Not here: what the fields mean (core/data/chat_records.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/file.h"
#include "simd/error.h"

namespace llmcpu {

using Json = nlohmann::ordered_json;

// One bad record: "WHERE: FIELD: PROBLEM" (FIELD may be empty: the record as a whole).
class RecordError : public Error {
 public:
  RecordError(const std::string& where, const std::string& field, const std::string& problem)
      : Error(where + ": " + (field.empty() ? "" : field + ": ") + problem),
        where_(where),
        field_(field) {}
  const std::string& where() const { return where_; }
  const std::string& field() const { return field_; }

 private:
  std::string where_, field_;
};

class RecordFile {
 public:
  // Maps the file (FileError if it cannot be read; an array that is not valid JSON or holds no
  // records, or a file of no records at all, is a FileError naming the file).
  explicit RecordFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  bool is_array() const { return is_array_; }
  size_t size() const { return is_array_ ? array_.size() : lines_.size(); }
  // The record's place: "FILE:LINE" or "FILE: record [I]".
  std::string where(size_t i) const;
  // Bytes of the file up to the end of record i (for progress; an array's records count evenly).
  uint64_t bytes_through(size_t i) const;
  // Record i as a JSON object; RecordError naming where(i) for a line that is not valid JSON or a
  // record that is not an object.
  Json parse(size_t i) const;

 private:
  struct Line {
    size_t begin, end;  // the line's bytes, without its '\n'
    size_t number;      // 1-based
  };
  MappedFile file_;
  bool is_array_ = false;
  std::vector<Line> lines_;
  Json array_;
};

// Field `name` of `record`, which must be there and not null; RecordError naming where and name.
const Json& required_field(const Json& record, const std::string& name, const std::string& where);
// The same, a string.
const std::string& string_field(const Json& record, const std::string& name,
                                const std::string& where);
// Field `name` if it is there and a string; "" when absent or null; RecordError for another type.
std::string optional_string(const Json& record, const std::string& name, const std::string& where);
// A JSON value's type for messages: "a string", "a number", "an array", ...
std::string json_kind(const Json& value);

}  // namespace llmcpu
