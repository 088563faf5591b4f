// The filters and tests of chat templates, as @huggingface/jinja has them: which kinds of values
// each filter takes, what it returns, and its keyword arguments. A filter or test name the
// reference does not know is refused as unsupported (naming it and its place); a known filter on
// a kind of value it does not take fails as it fails in the reference.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/chat/jinja_runtime.h"
#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {
namespace {

const std::set<std::string>& known_filters() {
  static const std::set<std::string> kKnown = {
      "safe",       "tojson", "list",    "first",    "last",  "length", "reverse",    "sort",
      "join",       "string", "unique",  "upper",    "lower", "title",  "capitalize", "trim",
      "indent",     "int",    "float",   "abs",      "items", "bool",   "default",    "selectattr",
      "rejectattr", "map",    "replace", "dictsort", "keys",  "values", "get"};
  return kKnown;
}

std::string indent_lines(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t end = s.find('\n', start);
    const std::string text =
        s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line > 0) out += '\n';
    out += ((!first && line == 0) || (!blank && text.empty())) ? text : pad + text;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// An attribute path "a.b.0" into objects and arrays; undefined where it leads nowhere.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_container()) {
      const Value* next = v.object->find(part);
      v = next ? *next : Value::undefined();
    } else if (v.is_array()) {
      const double i = js_parse_int(part);
      if (std::isnan(i) || i < 0 || i >= static_cast<double>(v.array->size()))
        return Value::undefined();
      v = (*v.array)[static_cast<size_t>(i)];
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Array sorted(const Array& items, bool reverse, bool case_sensitive, const Value& attribute) {
  Array out = items;
  const auto key = [&](const Value& v) {
    if (attribute.kind == Kind::kNull) return v;
    return attribute_path(
        v, attribute.kind == Kind::kInteger ? js_number(attribute.number) : attribute.string);
  };
  std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(key(a), key(b), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return out;
}

const Value& arg_or(const Args& a, size_t i, const char* name, const Value& fallback) {
  const Value* v = a.get(i, name);
  return v ? *v : fallback;
}

Value plain_array_filter(const std::string& name, const Value& operand) {
  const Array& items = *operand.array;
  if (name == "list") return operand;
  if (name == "first" || name == "last") {
    if (items.empty()) throw ValueError("'" + name + "' of an empty list");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "length") return Value::integer(static_cast<double>(items.size()));
  if (name == "reverse") return Value::list(Array(items.rbegin(), items.rend()));
  if (name == "sort") return Value::list(sorted(items, false, false, Value::null()));
  if (name == "join") {
    std::string out;
    for (const Value& v : items) out += join_text(v);
    return Value::str(out);
  }
  if (name == "string") return Value::str(to_json(operand, JsonOptions(), 0, false));
  if (name == "unique") {
    Array out;
    for (const Value& v : items) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return strict_equals(o, v); }))
        out.push_back(v);
    }
    return Value::list(std::move(out));
  }
  throw ValueError("Unknown ArrayValue filter: " + name);
}

Value plain_string_filter(const std::string& name, const Value& operand) {
  const std::string& s = operand.string;
  if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
  if (name == "upper") return Value::str(to_upper(s));
  if (name == "lower") return Value::str(to_lower(s));
  if (name == "title") return Value::str(title_case(s));
  if (name == "capitalize") return Value::str(capitalize(s));
  if (name == "trim") return Value::str(trim(s));
  if (name == "indent") return Value::str(indent_lines(s, "    ", false, false));
  if (name == "join" || name == "string") return operand;
  if (name == "int") {
    const double v = js_parse_int(s);
    return Value::integer(std::isnan(v) ? 0 : v);
  }
  if (name == "float") {
    const double v = js_parse_float(s);
    return Value::floating(std::isnan(v) ? 0 : v);
  }
  throw ValueError("Unknown StringValue filter: " + name);
}

Value plain_filter(const std::string& name, const Value& operand, Env& env) {
  if (name == "safe") return operand;
  if (name == "tojson") return Value::str(to_json(operand, JsonOptions(), 0, true));
  if (operand.is_array()) return plain_array_filter(name, operand);
  if (operand.is_string()) return plain_string_filter(name, operand);
  if (operand.is_number()) {
    if (name == "abs")
      return operand.kind == Kind::kInteger ? Value::integer(std::fabs(operand.number))
                                            : Value::floating(std::fabs(operand.number));
    if (name == "int") return Value::integer(std::floor(operand.number));
    if (name == "float") return Value::floating(operand.number);
    if (name == "string") return Value::str(output_text(operand));
    throw ValueError("Unknown NumericValue filter: " + name);
  }
  if (operand.is_object()) {
    if (name == "items" || name == "length") {
      if (name == "length")
        return Value::integer(static_cast<double>(operand.object->entries.size()));
      Array pairs;
      for (const auto& [k, v] : operand.object->entries)
        pairs.push_back(Value::list({Value::str(k), v}));
      return Value::list(std::move(pairs));
    }
    const Value b = builtin_member(operand, name);
    if (b.kind == Kind::kFunction) {
      std::vector<Value> none;
      return (*b.function)(none, env);
    }
    if (!b.is_undefined()) return b;
    throw ValueError("Unknown ObjectValue filter: " + name);
  }
  if (operand.kind == Kind::kBoolean) {
    const bool b = operand.boolean;
    if (name == "bool") return operand;
    if (name == "int") return Value::integer(b ? 1 : 0);
    if (name == "float") return Value::floating(b ? 1 : 0);
    if (name == "string") return Value::str(b ? "true" : "false");
    throw ValueError("Unknown BooleanValue filter: " + name);
  }
  throw ValueError("Cannot apply filter \"" + name + "\" to type: " + operand.type_name());
}

Value tojson_filter(Evaluator& ev, const Value& operand, const Node& call, Env& env) {
  const Args a = ev.arguments(call.args, env);
  JsonOptions o;
  if (const Value* indent = a.keywords.find("indent")) {
    if (indent->kind == Kind::kInteger) {
      o.indent = static_cast<int>(indent->number);
    } else if (indent->kind != Kind::kNull) {
      throw ValueError("If set, indent must be a number");
    }
  }
  if (const Value* ascii = a.keywords.find("ensure_ascii")) {
    if (ascii->kind != Kind::kBoolean) throw ValueError("If set, ensure_ascii must be a boolean");
    o.ensure_ascii = ascii->boolean;
  }
  if (const Value* sort = a.keywords.find("sort_keys")) {
    if (sort->kind != Kind::kBoolean) throw ValueError("If set, sort_keys must be a boolean");
    if (sort->boolean) ev.unsupported(call, "tojson(sort_keys=true) (locale-aware key order)");
  }
  if (const Value* sep = a.keywords.find("separators"); sep && sep->kind != Kind::kNull) {
    if (!sep->is_array() || sep->array->size() != 2 || !(*sep->array)[0].is_string() ||
        !(*sep->array)[1].is_string())
      throw ValueError("separators must be a tuple of two strings");
    o.custom_separators = true;
    o.item_separator = (*sep->array)[0].string;
    o.key_separator = (*sep->array)[1].string;
  }
  return Value::str(to_json(operand, o, 0, true));
}

Value select_filter(Evaluator& ev, const std::string& name, const Value& operand, const Node& call,
                    Env& env) {
  for (const Value& item : *operand.array) {
    if (!item.is_container())
      throw ValueError("`" + name + "` can only be applied to array of objects");
  }
  for (const NodePtr& arg : call.args) {
    if (arg->kind != NodeKind::kString)
      throw ValueError("arguments of `" + name + "` must be strings");
  }
  if (call.args.empty()) throw ValueError("`" + name + "` needs an attribute name");
  const std::string attr = call.args[0]->text;
  TestFn test = nullptr;
  if (call.args.size() > 1) {
    test = find_test(call.args[1]->text);
    if (!test) ev.unsupported(*call.args[1], "the test '" + call.args[1]->text + "'");
  }
  const Value argument = call.args.size() > 2 ? Value::str(call.args[2]->text) : Value();
  Array out;
  for (const Value& item : *operand.array) {
    const Value* a = item.object->find(attr);
    const bool pass =
        a && (test ? test(*a, call.args.size() > 2 ? &argument : nullptr) : a->truthy());
    if (pass == (name == "selectattr")) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value array_call_filter(Evaluator& ev, const std::string& name, const Value& operand,
                        const Node& call, Env& env) {
  if (name == "selectattr" || name == "rejectattr")
    return select_filter(ev, name, operand, call, env);
  const Args a = ev.arguments(call.args, env);
  if (name == "sort") {
    const Value no = Value::from_bool(false), none = Value::null();
    const Value& reverse = arg_or(a, 0, "reverse", no);
    const Value& cs = arg_or(a, 1, "case_sensitive", no);
    const Value& attribute = arg_or(a, 2, "attribute", none);
    if (reverse.kind != Kind::kBoolean) throw ValueError("reverse must be a boolean");
    if (cs.kind != Kind::kBoolean) throw ValueError("case_sensitive must be a boolean");
    if (!attribute.is_string() && attribute.kind != Kind::kInteger && attribute.kind != Kind::kNull)
      throw ValueError("attribute must be a string, integer, or null");
    return Value::list(sorted(*operand.array, reverse.boolean, cs.boolean, attribute));
  }
  if (name == "map") {
    const Value* attr = a.keywords.find("attribute");
    if (!attr) ev.unsupported(call, "map() without attribute=");
    if (!attr->is_string()) throw ValueError("attribute must be a string");
    const Value* fallback = a.keywords.find("default");
    Array out;
    for (const Value& item : *operand.array) {
      if (!item.is_container()) throw ValueError("items in map must be an object");
      const Value v = attribute_path(item, attr->string);
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value::list(std::move(out));
  }
  throw ValueError("Unknown ArrayValue filter: " + name);
}

Value convert_filter(const std::string& name, const Value& operand, const Args& a) {
  const Value zero = name == "int" ? Value::integer(0) : Value::floating(0);
  const Value& fallback = arg_or(a, 0, "default", zero);
  if (operand.is_string()) {
    const double v = name == "int" ? js_parse_int(operand.string) : js_parse_float(operand.string);
    if (std::isnan(v)) return fallback;
    return name == "int" ? Value::integer(v) : Value::floating(v);
  }
  if (operand.is_number()) return operand;
  if (operand.kind == Kind::kBoolean) {
    return name == "int" ? Value::integer(operand.boolean) : Value::floating(operand.boolean);
  }
  throw ValueError("Cannot apply filter \"" + name + "\" to type: " + operand.type_name());
}

Value call_filter(Evaluator& ev, const Value& operand, const Node& call, Env& env) {
  const std::string& name = call.x->text;
  if (name == "tojson") return tojson_filter(ev, operand, call, env);
  if (name == "join") {
    if (!operand.is_string() && !operand.is_array())
      throw ValueError("Cannot apply filter \"join\" to type: " + std::string(operand.type_name()));
    const Args a = ev.arguments(call.args, env);
    const Value empty = Value::str("");
    const Value& sep = arg_or(a, 0, "separator", empty);
    if (!sep.is_string()) throw ValueError("separator must be a string");
    std::string out;
    if (operand.is_string()) {
      const std::vector<std::string> chars = code_points(operand.string);
      for (size_t i = 0; i < chars.size(); ++i) out += (i ? sep.string : "") + chars[i];
    } else {
      for (size_t i = 0; i < operand.array->size(); ++i)
        out += (i ? sep.string : "") + join_text((*operand.array)[i]);
    }
    return Value::str(out);
  }
  if (name == "int" || name == "float")
    return convert_filter(name, operand, ev.arguments(call.args, env));
  if (name == "default") {
    const Args a = ev.arguments(call.args, env);
    const Value fallback = a.positional.empty() ? Value::str("") : a.positional[0];
    const Value no = Value::from_bool(false);
    const Value& boolean = arg_or(a, 1, "boolean", no);
    if (boolean.kind != Kind::kBoolean) throw ValueError("`default` filter flag must be a boolean");
    return operand.is_undefined() || (boolean.boolean && !operand.truthy()) ? fallback : operand;
  }
  if (operand.is_array()) return array_call_filter(ev, name, operand, call, env);
  if (operand.is_string()) {
    const Args a = ev.arguments(call.args, env);
    if (name == "indent") {
      const Value four = Value::integer(4), no = Value::from_bool(false);
      const Value& width = arg_or(a, 0, "width", four);
      if (width.kind != Kind::kInteger) throw ValueError("width must be a number");
      return Value::str(indent_lines(
          operand.string, std::string(static_cast<size_t>(std::max(0.0, width.number)), ' '),
          arg_or(a, 1, "first", no).truthy(), arg_or(a, 2, "blank", no).truthy()));
    }
    if (name == "replace") {
      std::vector<Value> args = a.positional;
      args.push_back(Value::map(a.keywords, Kind::kKeywords));
      return (*builtin_member(operand, "replace").function)(args, env);
    }
    throw ValueError("Unknown StringValue filter: " + name);
  }
  if (operand.is_object()) {
    const Value b = builtin_member(operand, name);
    if (b.kind == Kind::kFunction) {
      const Args a = ev.arguments(call.args, env);
      std::vector<Value> args = a.positional;
      if (!a.keywords.entries.empty()) args.push_back(Value::map(a.keywords, Kind::kKeywords));
      return (*b.function)(args, env);
    }
    throw ValueError("Unknown ObjectValue filter: " + name);
  }
  throw ValueError("Cannot apply filter \"" + name + "\" to type: " + operand.type_name());
}

}  // namespace

Value apply_filter(Evaluator& ev, const Value& operand, const Node& filter, Env& env) {
  const std::string& name = filter.kind == NodeKind::kCall ? filter.x->text : filter.text;
  if (filter.kind == NodeKind::kCall && filter.x->kind != NodeKind::kIdentifier)
    ev.unsupported(filter, "a filter that is not a name");
  if (!known_filters().count(name)) ev.unsupported(filter, "the filter '" + name + "'");
  try {
    return filter.kind == NodeKind::kCall ? call_filter(ev, operand, filter, env)
                                          : plain_filter(name, operand, env);
  } catch (const ValueError& e) {
    ev.fail(filter, e.what());
  }
}

TestFn find_test(const std::string& name) {
  // size: table
  static const std::vector<std::pair<std::string, TestFn>> kTests = {
      {"boolean", [](const Value& v, const Value*) { return v.kind == Kind::kBoolean; }},
      {"callable", [](const Value& v, const Value*) { return v.kind == Kind::kFunction; }},
      {"odd",
       [](const Value& v, const Value*) {
         if (v.kind != Kind::kInteger)
           throw ValueError(std::string("cannot odd on ") + v.type_name());
         return std::fmod(v.number, 2) != 0;
       }},
      {"even",
       [](const Value& v, const Value*) {
         if (v.kind != Kind::kInteger)
           throw ValueError(std::string("cannot even on ") + v.type_name());
         return std::fmod(v.number, 2) == 0;
       }},
      {"false",
       [](const Value& v, const Value*) { return v.kind == Kind::kBoolean && !v.boolean; }},
      {"true", [](const Value& v, const Value*) { return v.kind == Kind::kBoolean && v.boolean; }},
      {"none", [](const Value& v, const Value*) { return v.kind == Kind::kNull; }},
      {"string", [](const Value& v, const Value*) { return v.is_string(); }},
      {"number", [](const Value& v, const Value*) { return v.is_number(); }},
      {"integer", [](const Value& v, const Value*) { return v.kind == Kind::kInteger; }},
      {"iterable",
       [](const Value& v, const Value*) { return v.kind == Kind::kArray || v.is_string(); }},
      {"mapping", [](const Value& v, const Value*) { return v.is_object(); }},
      {"sequence",
       [](const Value& v, const Value*) { return v.is_array() || v.is_object() || v.is_string(); }},
      {"lower", [](const Value& v,
                   const Value*) { return v.is_string() && v.string == to_lower(v.string); }},
      {"upper", [](const Value& v,
                   const Value*) { return v.is_string() && v.string == to_upper(v.string); }},
      {"defined", [](const Value& v, const Value*) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const Value*) { return v.is_undefined(); }},
      {"equalto",
       [](const Value& v, const Value* b) {
         if (!b) throw ValueError("the test 'equalto' needs a value to compare with");
         return strict_equals(v, *b);
       }},
      {"eq", [](const Value& v, const Value* b) {
         if (!b) throw ValueError("the test 'eq' needs a value to compare with");
         return strict_equals(v, *b);
       }}};
  for (const auto& [n, f] : kTests) {
    if (n == name) return f;
  }
  return nullptr;
}

}  // namespace llmcpu::jinja
