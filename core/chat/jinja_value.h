// The values a chat template computes with, as @huggingface/jinja's runtime has them: undefined,
// none, booleans, integers and floats (JavaScript numbers, kept apart by kind), strings, arrays
// and tuples, objects (insertion-ordered), keyword arguments, namespaces and functions. Arrays and
// objects are shared (a namespace's attribute set inside a loop is seen outside it; `==` compares
// them by identity, as JavaScript does). Printing, JSON, equality and ordering follow the
// reference's JavaScript, not Python's Jinja (true prints "true", 2.0 + "" is "2").
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace llmcpu::jinja {

class Env;
struct Value;

// A failed operation on values; the evaluator adds the template's name and position.
class ValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

using Array = std::vector<Value>;
// A callable: positional arguments (keyword arguments, if any, as one trailing kKeywords value)
// and the scope of the call (macros see the caller's variables, as in the reference).
using Function = std::function<Value(std::vector<Value>& args, Env& caller)>;

enum class Kind {
  kUndefined,
  kNull,
  kBoolean,
  kInteger,
  kFloat,
  kString,
  kArray,
  kTuple,
  kObject,
  kKeywords,
  kNamespace,
  kFunction
};

struct Value {
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::shared_ptr<Array> array;    // kArray, kTuple
  std::shared_ptr<Object> object;  // kObject, kKeywords, kNamespace
  std::shared_ptr<Function> function;

  static Value undefined() { return Value(); }
  static Value null();
  static Value from_bool(bool b);
  static Value integer(double n);
  static Value floating(double n);
  static Value str(std::string s);
  static Value list(Array items, Kind kind = Kind::kArray);
  static Value map(Object o, Kind kind = Kind::kObject);
  static Value callable(Function f);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_number() const { return kind == Kind::kInteger || kind == Kind::kFloat; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_array() const { return kind == Kind::kArray || kind == Kind::kTuple; }
  bool is_object() const { return kind == Kind::kObject || kind == Kind::kKeywords; }
  bool is_container() const { return is_object() || kind == Kind::kNamespace; }
  // The reference's class names ("IntegerValue", ...), which its error messages use.
  const char* type_name() const;
  bool truthy() const;
};

// A JSON value as the reference gets it from JSON.parse: whole numbers are integers, object keys
// that are array indices come first in ascending order (JavaScript's own-key order).
Value from_json(const nlohmann::ordered_json& j);

// The text a value adds to the output (RuntimeValue.toString()).
std::string output_text(const Value& v);
// JavaScript's String(value) of the value underneath (what ~ and + with a string use): numbers
// without ".0", arrays joined by ",", objects "[object Map]".
std::string js_text(const Value& v);
// What Array.prototype.join writes for an item: none and undefined as "", else js_text.
std::string join_text(const Value& v);

struct JsonOptions {
  int indent = 0;  // 0: on one line
  bool ensure_ascii = false;
  bool custom_separators = false;
  std::string item_separator, key_separator;
};
// tojson; undefined is "null" when undefined_as_null, else "undefined" (as printed in a list).
std::string to_json(const Value& v, const JsonOptions& options, int depth, bool undefined_as_null);

bool loose_equals(const Value& a, const Value& b);   // JavaScript's == on the values underneath
bool strict_equals(const Value& a, const Value& b);  // ===
// -1, 0 or 1 for sort and dictsort; throws ValueError for values of kinds that do not compare.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace llmcpu::jinja
