// The global names every chat template sees, as @huggingface/jinja sets them up: namespace(),
// range(), strftime_now(), raise_exception() and the constants true/false/none (also spelled
// True/False/None).
#include <ctime>

#include "core/chat/jinja_runtime.h"
#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {
namespace {

Value make_namespace(std::vector<Value>& args) {
  std::vector<Value> positional = args;
  Object kwargs;
  if (!positional.empty() && positional.back().kind == Kind::kKeywords) {
    kwargs = *positional.back().object;
    positional.pop_back();
  }
  if (positional.size() > 1)
    throw ValueError("namespace expected at most 1 argument, got " +
                     std::to_string(positional.size()));
  Object entries;
  if (positional.size() == 1) {
    const Value& source = positional[0];
    if (source.is_object()) {
      for (const auto& [k, v] : source.object->entries) entries.set(k, v);
    } else if (source.is_array()) {
      for (const Value& pair : *source.array) {
        Array kv;
        if (pair.is_array()) kv = *pair.array;
        if (pair.is_string()) {
          for (const std::string& c : code_points(pair.string)) kv.push_back(Value::str(c));
        }
        if (kv.size() != 2)
          throw ValueError("namespace expected an object or an iterable of [key, value] pairs");
        if (!kv[0].is_string()) throw ValueError("namespace keys must be strings");
        entries.set(kv[0].string, kv[1]);
      }
    } else {
      throw ValueError(std::string("'") + source.type_name() + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : kwargs.entries) entries.set(k, v);
  return Value::map(std::move(entries), Kind::kNamespace);
}

Value range(std::vector<Value>& args) {
  for (const Value& a : args) {
    if (!a.is_number())
      throw ValueError(std::string("range() takes numbers, got ") + a.type_name());
  }
  if (args.empty()) throw ValueError("range() needs at least one argument");
  double start = 0, stop = args[0].number, step = 1;
  if (args.size() > 1) {
    start = args[0].number;
    stop = args[1].number;
  }
  if (args.size() > 2) step = args[2].number;
  if (step == 0) throw ValueError("range() step must not be zero");
  Array out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(std::trunc(i) == i ? Value::integer(i) : Value::floating(i));
  }
  return Value::list(std::move(out));
}

// %Y %m %d %b %B %H %M %% of the local time, English month names (node's default locale, en-US);
// any other %x stays as it is.
Value strftime_now(std::vector<Value>& args) {
  if (args.empty() || !args[0].is_string())
    throw ValueError("strftime_now() takes a format string");
  static const char* const kMonths[] = {"January",   "February", "March",    "April",
                                        "May",       "June",     "July",     "August",
                                        "September", "October",  "November", "December"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const auto pad2 = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  const std::string& f = args[0].string;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char c = f[i + 1];
    const std::string month = kMonths[tm.tm_mon];
    std::string piece;
    switch (c) {
      case 'Y':
        piece = std::to_string(tm.tm_year + 1900);
        break;
      case 'm':
        piece = pad2(tm.tm_mon + 1);
        break;
      case 'd':
        piece = pad2(tm.tm_mday);
        break;
      case 'b':
        piece = month.substr(0, 3);
        break;
      case 'B':
        piece = month;
        break;
      case 'H':
        piece = pad2(tm.tm_hour);
        break;
      case 'M':
        piece = pad2(tm.tm_min);
        break;
      case '%':
        piece = "%";
        break;
      default:
        out += '%';
        continue;
    }
    out += piece;
    ++i;
  }
  return Value::str(out);
}

}  // namespace

void add_globals(Env& env) {
  env.set("namespace",
          Value::callable([](std::vector<Value>& a, Env&) { return make_namespace(a); }));
  env.set("false", Value::from_bool(false));
  env.set("true", Value::from_bool(true));
  env.set("none", Value::null());
  env.set("raise_exception", Value::callable([](std::vector<Value>& a, Env&) -> Value {
            throw RaisedSignal{a.empty() || a[0].is_undefined() ? std::string() : js_text(a[0])};
          }));
  env.set("range", Value::callable([](std::vector<Value>& a, Env&) { return range(a); }));
  env.set("strftime_now",
          Value::callable([](std::vector<Value>& a, Env&) { return strftime_now(a); }));
  env.set("True", Value::from_bool(true));
  env.set("False", Value::from_bool(false));
  env.set("None", Value::null());
}

}  // namespace llmcpu::jinja
