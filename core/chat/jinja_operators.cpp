// The evaluator's expressions with operands: attribute and subscript access, slices, calls, unary
// and binary operators, each with the reference's rules for which kinds of values they take (an
// operation the reference refuses is refused here too, with its message).
#include <algorithm>
#include <cmath>

#include "core/chat/jinja_runtime.h"
#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {

Value Evaluator::member(const Node& n, Env& env) {
  const Value object = eval(*n.x, env);
  Value property;
  if (n.computed) {
    if (n.y->kind == NodeKind::kSlice) return slice(*n.y, object, env);
    property = eval(*n.y, env);
  } else if (n.y->kind == NodeKind::kInteger) {
    property = Value::integer(n.y->number);
  } else {
    property = Value::str(n.y->text);
  }
  if (object.is_container()) {
    if (!property.is_string())
      fail(n, std::string("Cannot access property with non-string: got ") + property.type_name());
    if (const Value* v = object.object->find(property.string)) return *v;
    return object.is_object() ? builtin_member(object, property.string) : Value::undefined();
  }
  if (object.is_array() || object.is_string()) {
    if (property.kind == Kind::kInteger) {
      if (object.is_string()) {
        std::string c;
        return char_at_utf16(object.string, static_cast<long long>(property.number), &c)
                   ? Value::str(c)
                   : Value::undefined();
      }
      long long i = static_cast<long long>(property.number);
      const long long size = static_cast<long long>(object.array->size());
      if (i < 0) i += size;
      return i >= 0 && i < size ? (*object.array)[static_cast<size_t>(i)] : Value::undefined();
    }
    if (property.is_string()) return builtin_member(object, property.string);
    fail(n, std::string("Cannot access property with non-string/non-number: got ") +
                property.type_name());
  }
  if (!property.is_string())
    fail(n, std::string("Cannot access property with non-string: got ") + property.type_name());
  return Value::undefined();
}

namespace {

// Python's slice of n items (utils.slice of the reference).
std::vector<size_t> slice_indices(long long n, const Value& start, const Value& stop,
                                  const Value& step) {
  const long long s = step.is_undefined() ? 1 : static_cast<long long>(step.number);
  const int direction = s > 0 ? 1 : s < 0 ? -1 : 0;
  long long a = 0, b = 0;
  if (direction >= 0) {
    a = start.is_undefined() ? 0 : static_cast<long long>(start.number);
    b = stop.is_undefined() ? n : static_cast<long long>(stop.number);
    a = a < 0 ? std::max(n + a, 0LL) : std::min(a, n);
    b = b < 0 ? std::max(n + b, 0LL) : std::min(b, n);
  } else {
    a = start.is_undefined() ? n - 1 : static_cast<long long>(start.number);
    b = stop.is_undefined() ? -1 : static_cast<long long>(stop.number);
    a = a < 0 ? std::max(n + a, -1LL) : std::min(a, n - 1);
    b = b < -1 ? std::max(n + b, -1LL) : std::min(b, n - 1);
  }
  std::vector<size_t> out;
  if (direction == 0) return out;
  for (long long i = a; direction * i < direction * b; i += s)
    out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

Value Evaluator::slice(const Node& n, const Value& object, Env& env) {
  if (!object.is_array() && !object.is_string()) fail(n, "Slice object must be an array or string");
  const Value start = n.x ? eval(*n.x, env) : Value::undefined();
  const Value stop = n.y ? eval(*n.y, env) : Value::undefined();
  const Value step = n.z ? eval(*n.z, env) : Value::undefined();
  for (const Value* v : {&start, &stop, &step}) {
    if (v->kind != Kind::kInteger && !v->is_undefined())
      fail(n, "Slice indices must be integers or undefined");
  }
  if (object.is_array()) {
    Array out;
    for (size_t i : slice_indices(static_cast<long long>(object.array->size()), start, stop, step))
      out.push_back((*object.array)[i]);
    return Value::list(std::move(out));
  }
  const std::vector<std::string> chars = code_points(object.string);
  std::string out;
  for (size_t i : slice_indices(static_cast<long long>(chars.size()), start, stop, step))
    out += chars[i];
  return Value::str(out);
}

Value Evaluator::call(const Node& n, Env& env) {
  Args a = arguments(n.args, env);
  std::vector<Value> args = std::move(a.positional);
  if (!a.keywords.entries.empty())
    args.push_back(Value::map(std::move(a.keywords), Kind::kKeywords));
  const Value fn = eval(*n.x, env);
  if (fn.kind != Kind::kFunction) {
    if (n.x->kind == NodeKind::kIdentifier && fn.is_undefined())
      unsupported(*n.x, "the function '" + n.x->text + "()'");
    if (n.x->kind == NodeKind::kMember && !n.x->computed && fn.is_undefined()) {
      const Value object = eval(*n.x->x, env);
      if (object.is_string() || object.is_array() || object.is_object())
        unsupported(*n.x->y, std::string("the method '") + n.x->y->text + "()' of a " +
                                 (object.is_string()  ? "string"
                                  : object.is_array() ? "list"
                                                      : "mapping"));
    }
    fail(n, std::string("Cannot call something that is not a function: got ") + fn.type_name());
  }
  try {
    return (*fn.function)(args, env);
  } catch (const RaisedSignal& r) {
    throw TemplateRaised(source().origin(), source().position(n.at), r.message);
  }
}

Value Evaluator::unary(const Node& n, Env& env) {
  const Value v = eval(*n.x, env);
  if (n.text == "not") return Value::from_bool(!v.truthy());
  const double sign = n.text == "-" ? -1 : 1;
  if (v.is_number() || v.kind == Kind::kBoolean) {
    const double x = v.kind == Kind::kBoolean ? (v.boolean ? 1 : 0) : v.number;
    return v.kind == Kind::kFloat ? Value::floating(sign * x) : Value::integer(sign * x);
  }
  fail(n, "Unknown operator \"" + n.text + "\" for " + v.type_name());
}

namespace {

bool numeric_like(const Value& v) { return v.is_number() || v.kind == Kind::kBoolean; }
double numeric(const Value& v) { return v.kind == Kind::kBoolean ? (v.boolean ? 1 : 0) : v.number; }

// +, -, *, /, //, %, <, >, <=, >= on two numbers; the result kind as in the reference.
Value arithmetic(const std::string& op, const Value& l, const Value& r, bool* done) {
  const double a = l.number, b = r.number;
  const bool is_float = l.kind == Kind::kFloat || r.kind == Kind::kFloat;
  const auto number = [&](double v) { return is_float ? Value::floating(v) : Value::integer(v); };
  *done = true;
  if (op == "+") return number(a + b);
  if (op == "-") return number(a - b);
  if (op == "*") return number(a * b);
  if (op == "/") return Value::floating(a / b);
  if (op == "//") return number(std::floor(a / b));
  if (op == "%") return number(std::fmod(a, b));
  if (op == "<") return Value::from_bool(a < b);
  if (op == ">") return Value::from_bool(a > b);
  if (op == ">=") return Value::from_bool(a >= b);
  if (op == "<=") return Value::from_bool(a <= b);
  *done = false;
  return Value();
}

}  // namespace

Value Evaluator::binary(const Node& n, Env& env) {
  const std::string& op = n.text;
  const Value l = eval(*n.x, env);
  if (op == "and") return l.truthy() ? eval(*n.y, env) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.y, env);
  const Value r = eval(*n.y, env);
  if (op == "==") return Value::from_bool(loose_equals(l, r));
  if (op == "!=") return Value::from_bool(!loose_equals(l, r));
  const bool membership = op == "in" || op == "not in";
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && membership) return Value::from_bool(op == "not in");
    fail(n, "Cannot perform operation " + op + " on undefined values");
  }
  if (l.kind == Kind::kNull || r.kind == Kind::kNull)
    fail(n, "Cannot perform operation on null values");
  if (op == "~") return Value::str(js_text(l) + js_text(r));
  if (op == "**" && numeric_like(l) && numeric_like(r)) {
    const double a = numeric(l), b = numeric(r);
    if (a == 0 && b < 0) fail(n, "0.0 cannot be raised to a negative power");
    const double v = std::pow(a, b);
    if (!std::isfinite(v)) fail(n, "Exponentiation result is not a finite real number");
    const bool is_float = l.kind == Kind::kFloat || r.kind == Kind::kFloat || b < 0;
    return is_float ? Value::floating(v) : Value::integer(v);
  }
  if (l.is_number() && r.is_number()) {
    bool done = false;
    Value v = arithmetic(op, l, r, &done);
    if (done) return v;
  } else if (l.is_array() && r.is_array()) {
    if (op == "+") {
      Array joined = *l.array;
      joined.insert(joined.end(), r.array->begin(), r.array->end());
      return Value::list(std::move(joined));
    }
  } else if (r.is_array()) {
    bool found = false;
    for (const Value& e : *r.array) found = found || strict_equals(e, l);
    if (membership) return Value::from_bool(found == (op == "in"));
  }
  if ((l.is_string() || r.is_string()) && op == "+") return Value::str(js_text(l) + js_text(r));
  if (l.is_string() && r.is_string() && membership) {
    const bool found = r.string.find(l.string) != std::string::npos;
    return Value::from_bool(found == (op == "in"));
  }
  if (l.is_string() && r.is_object() && membership) {
    const bool found = r.object->find(l.string) != nullptr;
    return Value::from_bool(found == (op == "in"));
  }
  fail(n, "Unknown operator \"" + op + "\" between " + l.type_name() + " and " + r.type_name());
}

}  // namespace llmcpu::jinja
