// Values of the chat-template interpreter: construction, JSON in and out, printing, equality and
// ordering with the reference's JavaScript semantics (see jinja_value.h).
#include "core/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {

const Value* Object::find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

Value Value::null() {
  Value v;
  v.kind = Kind::kNull;
  return v;
}

Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::kBoolean;
  v.boolean = b;
  return v;
}

Value Value::integer(double n) {
  Value v;
  v.kind = Kind::kInteger;
  v.number = n;
  return v;
}

Value Value::floating(double n) {
  Value v;
  v.kind = Kind::kFloat;
  v.number = n;
  return v;
}

Value Value::str(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.string = std::move(s);
  return v;
}

Value Value::list(Array items, Kind kind) {
  Value v;
  v.kind = kind;
  v.array = std::make_shared<Array>(std::move(items));
  return v;
}

Value Value::map(Object o, Kind kind) {
  Value v;
  v.kind = kind;
  v.object = std::make_shared<Object>(std::move(o));
  return v;
}

Value Value::callable(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<Function>(std::move(f));
  return v;
}

const char* Value::type_name() const {
  static const char* const kNames[] = {
      "UndefinedValue", "NullValue",    "BooleanValue", "IntegerValue", "FloatValue",
      "StringValue",    "ArrayValue",   "TupleValue",   "ObjectValue",  "KeywordArgumentsValue",
      "NamespaceValue", "FunctionValue"};
  return kNames[static_cast<int>(kind)];
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNull:
      return false;
    case Kind::kBoolean:
      return boolean;
    case Kind::kInteger:
    case Kind::kFloat:
      return number != 0 && !std::isnan(number);
    case Kind::kString:
      return !string.empty();
    case Kind::kArray:
    case Kind::kTuple:
      return !array->empty();
    case Kind::kObject:
    case Kind::kKeywords:
      return !object->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

namespace {

// A canonical array index ("0", "17"; not "01" or "-1"), which JavaScript objects list first.
bool array_index(const std::string& k, double* n) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  if (!std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  *n = std::stod(k);
  return *n < 4294967295.0;
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::null();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::from_bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(j.get<double>());
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) && std::trunc(d) == d ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<double, std::string>> indices;
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) {
        double n = 0;
        if (array_index(it.key(), &n)) indices.emplace_back(n, it.key());
      }
      std::sort(indices.begin(), indices.end());
      for (const auto& [n, k] : indices) o.entries.emplace_back(k, from_json(j.at(k)));
      for (auto it = j.begin(); it != j.end(); ++it) {
        double n = 0;
        if (!array_index(it.key(), &n)) o.entries.emplace_back(it.key(), from_json(it.value()));
      }
      return Value::map(std::move(o));
    }
    default:
      throw ValueError("a JSON value of an unexpected type (binary or discarded)");
  }
}

std::string output_text(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNull:
      return "null";
    case Kind::kBoolean:
      return v.boolean ? "true" : "false";
    case Kind::kInteger:
      return js_number(v.number);
    case Kind::kFloat:
      return js_float(v.number);
    case Kind::kString:
      return v.string;
    case Kind::kFunction:
      throw ValueError("a function cannot be printed");
    default:
      return to_json(v, JsonOptions(), 0, false);
  }
}

std::string js_text(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNull:
      return "null";
    case Kind::kBoolean:
      return v.boolean ? "true" : "false";
    case Kind::kInteger:
    case Kind::kFloat:
      return js_number(v.number);
    case Kind::kString:
      return v.string;
    case Kind::kArray:
    case Kind::kTuple: {
      std::string out;
      for (size_t i = 0; i < v.array->size(); ++i) {
        if (i) out += ',';
        out += output_text((*v.array)[i]);
      }
      return out;
    }
    case Kind::kObject:
    case Kind::kKeywords:
    case Kind::kNamespace:
      return "[object Map]";
    case Kind::kFunction:
      throw ValueError("a function cannot be turned into text");
  }
  return "";
}

std::string join_text(const Value& v) {
  return v.kind == Kind::kNull || v.kind == Kind::kUndefined ? "" : js_text(v);
}

std::string to_json(const Value& v, const JsonOptions& o, int depth, bool undefined_as_null) {
  const std::string item_sep = o.custom_separators ? o.item_separator : o.indent ? "," : ", ";
  const std::string key_sep = o.custom_separators ? o.key_separator : ": ";
  switch (v.kind) {
    case Kind::kNull:
      return "null";
    case Kind::kUndefined:
      return undefined_as_null ? "null" : "undefined";
    case Kind::kBoolean:
      return v.boolean ? "true" : "false";
    case Kind::kInteger:
    case Kind::kFloat:
      return std::isfinite(v.number) ? js_number(v.number) : "null";
    case Kind::kString:
      return json_quote(v.string, o.ensure_ascii);
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kNamespace:
      break;
    default:
      throw ValueError(std::string("Cannot convert to JSON: ") + v.type_name());
  }
  const std::string unit(static_cast<size_t>(std::max(o.indent, 0)), ' ');
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += unit;
  const std::string child = base + unit;
  std::vector<std::string> core;
  if (v.kind == Kind::kArray) {
    for (const Value& e : *v.array) core.push_back(to_json(e, o, depth + 1, undefined_as_null));
  } else {
    for (const auto& [k, e] : v.object->entries) {
      const std::string item =
          json_quote(k, o.ensure_ascii) + key_sep + to_json(e, o, depth + 1, undefined_as_null);
      core.push_back(o.indent ? child + item : item);
    }
  }
  const bool spread = o.indent && !core.empty();
  std::string out = v.kind == Kind::kArray ? "[" : "{";
  if (spread && v.kind == Kind::kArray) out += child;
  for (size_t i = 0; i < core.size(); ++i) {
    if (i) out += item_sep + (spread && v.kind == Kind::kArray ? child : "");
    out += core[i];
  }
  if (spread) out += base;
  return out + (v.kind == Kind::kArray ? "]" : "}");
}

namespace {

// The JavaScript type of a value underneath: 0 undefined, 1 null, 2 boolean, 3 number, 4 string,
// 5 object (arrays, maps, functions: compared by identity).
int js_type(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
      return 0;
    case Kind::kNull:
      return 1;
    case Kind::kBoolean:
      return 2;
    case Kind::kInteger:
    case Kind::kFloat:
      return 3;
    case Kind::kString:
      return 4;
    default:
      return 5;
  }
}

const void* identity(const Value& v) {
  if (v.array) return v.array.get();
  if (v.object) return v.object.get();
  return v.function.get();
}

}  // namespace

bool strict_equals(const Value& a, const Value& b) {
  const int ta = js_type(a), tb = js_type(b);
  if (ta != tb) return false;
  switch (ta) {
    case 0:
    case 1:
      return true;
    case 2:
      return a.boolean == b.boolean;
    case 3:
      return a.number == b.number;
    case 4:
      return a.string == b.string;
    default:
      return identity(a) == identity(b);
  }
}

bool loose_equals(const Value& a, const Value& b) {
  const int ta = js_type(a), tb = js_type(b);
  if (ta == tb) return strict_equals(a, b);
  if (ta <= 1 && tb <= 1) return true;  // null == undefined
  if (ta <= 1 || tb <= 1) return false;
  if (ta == 2) return loose_equals(Value::integer(a.boolean ? 1 : 0), b);
  if (tb == 2) return loose_equals(a, Value::integer(b.boolean ? 1 : 0));
  if (ta == 3 && tb == 4) return a.number == js_string_to_number(b.string);
  if (ta == 4 && tb == 3) return js_string_to_number(a.string) == b.number;
  if (ta == 5 && a.kind != Kind::kFunction) return loose_equals(Value::str(js_text(a)), b);
  if (tb == 5 && b.kind != Kind::kFunction) return loose_equals(a, Value::str(js_text(b)));
  return false;
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  const auto fail = [&]() -> int {
    throw ValueError(std::string("Cannot compare ") + a.type_name() + " with " + b.type_name());
  };
  if (a.kind == Kind::kNull || b.kind == Kind::kNull) return a.kind == b.kind ? 0 : fail();
  if (a.kind == Kind::kUndefined || b.kind == Kind::kUndefined)
    return a.kind == b.kind ? 0 : fail();
  const auto numeric = [](const Value& v) { return v.is_number() || v.kind == Kind::kBoolean; };
  if (numeric(a) && numeric(b)) {
    const double x = a.kind == Kind::kBoolean ? a.boolean : a.number;
    const double y = b.kind == Kind::kBoolean ? b.boolean : b.number;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind != Kind::kString || b.kind != Kind::kString) return fail();
  const std::u16string x = to_utf16(case_sensitive ? a.string : to_lower(a.string));
  const std::u16string y = to_utf16(case_sensitive ? b.string : to_lower(b.string));
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace llmcpu::jinja
