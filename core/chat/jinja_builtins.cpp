// The methods templates call on values (a string's strip/split/startswith/replace/..., a mapping's
// get/items/keys/values/dictsort, a list's length) and the global functions (namespace, range,
// strftime_now, raise_exception), as @huggingface/jinja defines them.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include "core/chat/jinja_runtime.h"
#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {
namespace {

// Python's str.split(sep=None, maxsplit=-1).
Value split(const std::string& s, const std::vector<Value>& args) {
  const Value sep = args.size() > 0 ? args[0] : Value::null();
  const Value max = args.size() > 1 ? args[1] : Value::integer(-1);
  if (!sep.is_string() && sep.kind != Kind::kNull)
    throw ValueError("sep argument must be a string or null");
  if (max.kind != Kind::kInteger) throw ValueError("maxsplit argument must be a number");
  const long long maxsplit = static_cast<long long>(max.number);
  Array out;
  if (sep.kind == Kind::kNull) {
    const std::string text = trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      while (size_t n = js_space_at(text, i)) i += n;
      if (i >= text.size()) break;
      size_t j = i;
      while (j < text.size() && js_space_at(text, j) == 0) {
        size_t n = 0;
        decode_utf8(text, j, &n);
        j += n;
      }
      if (maxsplit != -1 && static_cast<long long>(out.size()) >= maxsplit) {
        out.push_back(Value::str(text.substr(i)));
        break;
      }
      out.push_back(Value::str(text.substr(i, j - i)));
      i = j;
    }
    return Value::list(std::move(out));
  }
  if (sep.string.empty()) throw ValueError("empty separator");
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t k = s.find(sep.string); k != std::string::npos; k = s.find(sep.string, start)) {
    parts.push_back(s.substr(start, k - start));
    start = k + sep.string.size();
  }
  parts.push_back(s.substr(start));
  if (maxsplit != -1 && static_cast<long long>(parts.size()) > maxsplit) {
    std::string rest;
    for (size_t i = static_cast<size_t>(maxsplit); i < parts.size(); ++i)
      rest += (i > static_cast<size_t>(maxsplit) ? sep.string : "") + parts[i];
    parts.resize(static_cast<size_t>(maxsplit));
    parts.push_back(rest);
  }
  for (std::string& p : parts) out.push_back(Value::str(std::move(p)));
  return Value::list(std::move(out));
}

// Python's str.replace(old, new, count=None).
Value replace(const std::string& s, const std::vector<Value>& args) {
  if (args.size() < 2) throw ValueError("replace() requires at least two arguments");
  if (!args[0].is_string() || !args[1].is_string())
    throw ValueError("replace() arguments must be strings");
  Value count = Value::null();
  if (args.size() > 2) {
    if (args[2].kind == Kind::kKeywords) {
      const Value* c = args[2].object->find("count");
      count = c ? *c : Value::null();
    } else {
      count = args[2];
    }
  }
  if (count.kind != Kind::kInteger && count.kind != Kind::kNull)
    throw ValueError("replace() count argument must be a number or null");
  double remaining = count.kind == Kind::kNull || count.number < 0
                         ? std::numeric_limits<double>::infinity()
                         : count.number;
  const std::string& from = args[0].string;
  const std::string& to = args[1].string;
  std::string out;
  if (from.empty()) {  // an empty pattern matches before every character and at the end
    for (const std::string& c : code_points(s)) {
      if (remaining-- > 0) out += to;
      out += c;
    }
    if (remaining > 0) out += to;
    return Value::str(out);
  }
  size_t start = 0;
  for (size_t k = s.find(from); k != std::string::npos && remaining > 0; k = s.find(from, start)) {
    out += s.substr(start, k - start) + to;
    start = k + from.size();
    --remaining;
  }
  return Value::str(out + s.substr(start));
}

Value affix_test(const std::string& s, const std::vector<Value>& args, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  if (args.empty()) throw ValueError(std::string(name) + "() requires at least one argument");
  const auto has = [&](const std::string& a) {
    return s.size() >= a.size() && (prefix ? s.compare(0, a.size(), a) == 0
                                           : s.compare(s.size() - a.size(), a.size(), a) == 0);
  };
  if (args[0].is_string()) return Value::from_bool(has(args[0].string));
  if (args[0].is_array()) {
    for (const Value& v : *args[0].array) {
      if (!v.is_string()) throw ValueError(std::string(name) + "() tuple elements must be strings");
      if (has(v.string)) return Value::from_bool(true);
    }
    return Value::from_bool(false);
  }
  throw ValueError(std::string(name) + "() argument must be a string or tuple of strings");
}

Value string_member(const std::string& s, const std::string& name) {
  using Fn = std::function<Value(std::vector<Value>&)>;
  Fn fn;
  if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
  if (name == "upper") fn = [s](std::vector<Value>&) { return Value::str(to_upper(s)); };
  if (name == "lower") fn = [s](std::vector<Value>&) { return Value::str(to_lower(s)); };
  if (name == "strip") fn = [s](std::vector<Value>&) { return Value::str(trim(s)); };
  if (name == "lstrip") fn = [s](std::vector<Value>&) { return Value::str(trim_start(s)); };
  if (name == "rstrip") fn = [s](std::vector<Value>&) { return Value::str(trim_end(s)); };
  if (name == "title") fn = [s](std::vector<Value>&) { return Value::str(title_case(s)); };
  if (name == "capitalize") fn = [s](std::vector<Value>&) { return Value::str(capitalize(s)); };
  if (name == "startswith") fn = [s](std::vector<Value>& a) { return affix_test(s, a, true); };
  if (name == "endswith") fn = [s](std::vector<Value>& a) { return affix_test(s, a, false); };
  if (name == "split") fn = [s](std::vector<Value>& a) { return split(s, a); };
  if (name == "replace") fn = [s](std::vector<Value>& a) { return replace(s, a); };
  if (!fn) return Value::undefined();
  return Value::callable([fn](std::vector<Value>& args, Env&) { return fn(args); });
}

Value pairs(const Object& o) {
  Array out;
  for (const auto& [k, v] : o.entries) out.push_back(Value::list({Value::str(k), v}));
  return Value::list(std::move(out));
}

Value dictsort(const Object& o, const std::vector<Value>& all) {
  std::vector<Value> args;
  Object kw;
  for (const Value& a : all) {
    if (a.kind == Kind::kKeywords) {
      kw = *a.object;
    } else {
      args.push_back(a);
    }
  }
  const auto pick = [&](size_t i, const char* name, Value fallback) {
    if (i < args.size()) return args[i];
    const Value* v = kw.find(name);
    return v ? *v : fallback;
  };
  const Value cs = pick(0, "case_sensitive", Value::from_bool(false));
  const Value by = pick(1, "by", Value::str("key"));
  const Value reverse = pick(2, "reverse", Value::from_bool(false));
  if (cs.kind != Kind::kBoolean) throw ValueError("case_sensitive must be a boolean");
  if (!by.is_string()) throw ValueError("by must be a string");
  if (by.string != "key" && by.string != "value")
    throw ValueError("by must be either 'key' or 'value'");
  if (reverse.kind != Kind::kBoolean) throw ValueError("reverse must be a boolean");
  Array items = *pairs(o).array;
  const size_t index = by.string == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values((*a.array)[index], (*b.array)[index], cs.boolean);
    return reverse.boolean ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

Value object_member(const std::shared_ptr<Object>& o, const std::string& name) {
  using Fn = std::function<Value(std::vector<Value>&)>;
  Fn fn;
  if (name == "get") {
    fn = [o](std::vector<Value>& a) {
      if (a.empty() || !a[0].is_string())
        throw ValueError(std::string("Object key must be a string: got ") +
                         (a.empty() ? "UndefinedValue" : a[0].type_name()));
      const Value* v = o->find(a[0].string);
      return v ? *v : a.size() > 1 ? a[1] : Value::null();
    };
  }
  if (name == "items") fn = [o](std::vector<Value>&) { return pairs(*o); };
  if (name == "keys") {
    fn = [o](std::vector<Value>&) {
      Array out;
      for (const auto& [k, v] : o->entries) out.push_back(Value::str(k));
      return Value::list(std::move(out));
    };
  }
  if (name == "values") {
    fn = [o](std::vector<Value>&) {
      Array out;
      for (const auto& [k, v] : o->entries) out.push_back(v);
      return Value::list(std::move(out));
    };
  }
  if (name == "dictsort") fn = [o](std::vector<Value>& a) { return dictsort(*o, a); };
  if (!fn) return Value::undefined();
  return Value::callable([fn](std::vector<Value>& args, Env&) { return fn(args); });
}

}  // namespace

Value builtin_member(const Value& object, const std::string& name) {
  if (object.is_string()) return string_member(object.string, name);
  if (object.is_array()) {
    return name == "length" ? Value::integer(static_cast<double>(object.array->size()))
                            : Value::undefined();
  }
  if (object.is_object()) return object_member(object.object, name);
  return Value::undefined();
}

}  // namespace llmcpu::jinja
