// The evaluator of chat templates: statements render text, expressions compute values, with the
// reference's scoping (loops and macro calls open a scope; a macro sees its caller's variables),
// its loop variables and its operators (see jinja_value.h for equality and printing).
#include <cmath>
#include <set>

#include "core/chat/jinja_runtime.h"
#include "core/chat/jinja_text.h"

namespace llmcpu::jinja {

Value Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent_) {
    for (const auto& [k, v] : e->vars_) {
      if (k == name) return v;
    }
  }
  return Value::undefined();
}

void Env::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars_) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars_.emplace_back(name, std::move(v));
}

bool Env::has_own(const std::string& name) const {
  for (const auto& [k, v] : vars_) {
    if (k == name) return true;
  }
  return false;
}

const Value* Args::get(size_t i, const char* name) const {
  if (i < positional.size()) return &positional[i];
  return keywords.find(name);
}

void Evaluator::fail(const Node& n, const std::string& what) const {
  throw TemplateRuntimeError(source_.origin(), source_.position(n.at), what);
}

void Evaluator::unsupported(const Node& n, const std::string& construct) const {
  throw TemplateUnsupported(source_.origin(), source_.position(n.at), construct);
}

std::string Evaluator::render(const Program& program, Env& globals) {
  try {
    return block(program.body, globals);
  } catch (const BreakSignal&) {
    throw TemplateSyntaxError(source_.origin(), {0, 0}, "{% break %} outside a loop");
  } catch (const ContinueSignal&) {
    throw TemplateSyntaxError(source_.origin(), {0, 0}, "{% continue %} outside a loop");
  }
}

std::string Evaluator::block(const std::vector<NodePtr>& body, Env& env) {
  std::string out;
  for (const NodePtr& n : body) {
    const Value v = eval(*n, env);
    if (v.kind == Kind::kNull || v.kind == Kind::kUndefined) continue;
    try {
      out += output_text(v);
    } catch (const ValueError& e) {
      fail(*n, e.what());
    }
  }
  return out;
}

Value Evaluator::eval(const Node& n, Env& env) {
  try {
    return eval_node(n, env);
  } catch (const ValueError& e) {
    fail(n, e.what());
  }
}

Args Evaluator::arguments(const std::vector<NodePtr>& args, Env& env) {
  Args a;
  for (const NodePtr& n : args) {
    if (n->kind != NodeKind::kKeyword) a.positional.push_back(eval(*n, env));
  }
  for (const NodePtr& n : args) {
    if (n->kind != NodeKind::kKeyword) continue;
    if (a.keywords.find(n->text))
      fail(*n, "Got multiple values for keyword argument '" + n->text + "'");
    a.keywords.entries.emplace_back(n->text, eval(*n->x, env));
  }
  return a;
}

Value Evaluator::eval_node(const Node& n, Env& env) {
  switch (n.kind) {
    case NodeKind::kText:
      return Value::str(n.text);
    case NodeKind::kComment:
      return Value::null();
    case NodeKind::kSet:
      return set_statement(n, env);
    case NodeKind::kIf:
      return Value::str(block(eval(*n.x, env).truthy() ? n.body : n.alt, env));
    case NodeKind::kFor:
      return for_statement(n, env);
    case NodeKind::kBreak:
      throw BreakSignal();
    case NodeKind::kContinue:
      throw ContinueSignal();
    case NodeKind::kMacro:
      return macro_statement(n, env);
    case NodeKind::kFilterBlock:
      return apply_filter(*this, Value::str(block(n.body, env)), *n.x, env);
    case NodeKind::kIdentifier:
      return env.lookup(n.text);
    case NodeKind::kMember:
      return member(n, env);
    case NodeKind::kCall:
      return call(n, env);
    case NodeKind::kUnary:
      return unary(n, env);
    case NodeKind::kBinary:
      return binary(n, env);
    case NodeKind::kFilter:
      return apply_filter(*this, eval(*n.x, env), *n.y, env);
    case NodeKind::kTest: {
      const Value operand = eval(*n.x, env);
      const TestFn test = find_test(n.text);
      if (!test) unsupported(n, "the test '" + n.text + "'");
      return Value::from_bool(test(operand, nullptr) != n.negate);
    }
    case NodeKind::kSelect:
      return eval(*n.y, env).truthy() ? eval(*n.x, env) : Value::undefined();
    case NodeKind::kTernary:
      return eval(*n.x, env).truthy() ? eval(*n.y, env) : eval(*n.z, env);
    case NodeKind::kSlice:
      fail(n, "a slice outside '[]'");
    case NodeKind::kKeyword:
      fail(n, "a keyword argument outside a call");
    default:
      return literal(n, env);
  }
}

Value Evaluator::literal(const Node& n, Env& env) {
  switch (n.kind) {
    case NodeKind::kInteger:
      return Value::integer(n.number);
    case NodeKind::kFloat:
      return Value::floating(n.number);
    case NodeKind::kString:
      return Value::str(n.text);
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      Array items;
      for (const NodePtr& e : n.args) items.push_back(eval(*e, env));
      return Value::list(std::move(items),
                         n.kind == NodeKind::kTuple ? Kind::kTuple : Kind::kArray);
    }
    case NodeKind::kObject: {
      Object o;
      for (size_t i = 0; i + 1 < n.args.size(); i += 2) {
        const Value key = eval(*n.args[i], env);
        if (!key.is_string())
          fail(*n.args[i], std::string("Object keys must be strings: got ") + key.type_name());
        o.set(key.string, eval(*n.args[i + 1], env));
      }
      return Value::map(std::move(o));
    }
    default:
      fail(n, "an unexpected node in an expression");
  }
}

Value Evaluator::set_statement(const Node& n, Env& env) {
  const Value rhs = n.y ? eval(*n.y, env) : Value::str(block(n.body, env));
  const Node& target = *n.x;
  if (target.kind == NodeKind::kIdentifier) {
    env.set(target.text, rhs);
  } else if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_array())
      fail(n, std::string("Cannot unpack non-iterable type in set: ") + rhs.type_name());
    if (rhs.array->size() != target.args.size())
      fail(n, std::string("Too ") + (target.args.size() > rhs.array->size() ? "few" : "many") +
                  " items to unpack in set");
    for (size_t i = 0; i < target.args.size(); ++i) {
      if (target.args[i]->kind != NodeKind::kIdentifier)
        fail(n, "Cannot unpack to non-identifier in set");
      env.set(target.args[i]->text, (*rhs.array)[i]);
    }
  } else if (target.kind == NodeKind::kMember) {
    const Value object = eval(*target.x, env);
    if (object.kind != Kind::kNamespace) fail(n, "cannot assign attribute on non-namespace object");
    if (target.y->kind != NodeKind::kIdentifier)
      fail(n, "Cannot assign to member with non-identifier property");
    object.object->set(target.y->text, rhs);
  } else {
    fail(n, "Invalid LHS inside assignment expression");
  }
  return Value::null();
}

namespace {

// Binds a loop variable (a name, or names unpacked from a list) in `scope`.
void bind_loop_variable(Evaluator& ev, const Node& var, const Value& item, Env& scope) {
  if (var.kind == NodeKind::kIdentifier) {
    scope.set(var.text, item);
    return;
  }
  for (size_t j = 0; j < var.args.size(); ++j) {
    if (var.args[j]->kind != NodeKind::kIdentifier)
      ev.fail(var, "Cannot unpack non-identifier type");
    scope.set(var.args[j]->text, (*item.array)[j]);
  }
}

Value loop_object(const std::vector<Value>& items, size_t i) {
  const double n = static_cast<double>(items.size());
  const double k = static_cast<double>(i);
  Object loop;
  loop.entries = {{"index", Value::integer(k + 1)},
                  {"index0", Value::integer(k)},
                  {"revindex", Value::integer(n - k)},
                  {"revindex0", Value::integer(n - k - 1)},
                  {"first", Value::from_bool(i == 0)},
                  {"last", Value::from_bool(i + 1 == items.size())},
                  {"length", Value::integer(n)},
                  {"previtem", i > 0 ? items[i - 1] : Value::undefined()},
                  {"nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined()}};
  return Value::map(std::move(loop));
}

}  // namespace

Value Evaluator::for_statement(const Node& n, Env& env) {
  Env scope(&env);
  const Node* test = nullptr;
  Value iterable;
  if (n.y->kind == NodeKind::kSelect) {
    iterable = eval(*n.y->x, scope);
    test = n.y->y.get();
  } else {
    iterable = eval(*n.y, scope);
  }
  if (!iterable.is_array() && !iterable.is_object())
    fail(n,
         std::string("Expected iterable or object type in for loop: got ") + iterable.type_name());
  std::vector<Value> all;
  if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.object->entries) all.push_back(Value::str(k));
  } else {
    all = *iterable.array;
  }
  std::vector<Value> items;
  for (const Value& item : all) {
    if (n.x->kind == NodeKind::kTuple) {
      if (item.kind != Kind::kArray)
        fail(n, std::string("Cannot unpack non-iterable type: ") + item.type_name());
      if (item.array->size() != n.x->args.size())
        fail(n, std::string("Too ") + (n.x->args.size() > item.array->size() ? "few" : "many") +
                    " items to unpack");
    }
    if (test) {
      Env test_scope(&scope);
      bind_loop_variable(*this, *n.x, item, test_scope);
      if (!eval(*test, test_scope).truthy()) continue;
    }
    items.push_back(item);
  }
  std::string out;
  bool none = true;
  for (size_t i = 0; i < items.size(); ++i) {
    scope.set("loop", loop_object(items, i));
    bind_loop_variable(*this, *n.x, items[i], scope);
    try {
      out += block(n.body, scope);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    none = false;
  }
  if (none) out += block(n.alt, scope);
  return Value::str(out);
}

namespace {

// Whether a macro's body reads `name` (kwargs or varargs), which then collects extra arguments.
bool reads_name(const Node& n, const std::string& name) {
  if (n.kind == NodeKind::kIdentifier && n.text == name) return true;
  for (const NodePtr* p : {&n.x, &n.y, &n.z}) {
    if (*p && reads_name(**p, name)) return true;
  }
  for (const auto* list : {&n.args, &n.body, &n.alt}) {
    for (const NodePtr& c : *list) {
      if (reads_name(*c, name)) return true;
    }
  }
  return false;
}

}  // namespace

Value Evaluator::macro_statement(const Node& n, Env& env) {
  bool kwargs = false, varargs = false;
  for (const NodePtr& b : n.body) {
    kwargs = kwargs || reads_name(*b, "kwargs");
    varargs = varargs || reads_name(*b, "varargs");
  }
  const Node* macro = &n;
  env.set(n.text, Value::callable([this, macro, kwargs, varargs](std::vector<Value>& args,
                                                                 Env& caller) -> Value {
            Env scope(&caller);
            std::vector<Value> positional = args;
            Object keywords;
            if (!positional.empty() && positional.back().kind == Kind::kKeywords) {
              keywords = *positional.back().object;
              positional.pop_back();
            }
            std::vector<const Node*> pending;
            for (size_t i = 0; i < macro->args.size(); ++i) {
              const Node& p = *macro->args[i];
              Value v;
              bool given = i < positional.size();
              if (given) v = positional[i];
              if (!given && keywords.find(p.text)) {
                v = *keywords.find(p.text);
                given = true;
                std::erase_if(keywords.entries, [&](const auto& e) { return e.first == p.text; });
              }
              if (!given && p.kind == NodeKind::kKeyword) pending.push_back(&p);
              scope.set(p.text, v);
            }
            if (kwargs) {
              scope.set("kwargs", Value::map(keywords));
            } else if (!keywords.entries.empty()) {
              fail(*macro, "macro '" + macro->text + "' takes no keyword argument '" +
                               keywords.entries[0].first + "'");
            }
            if (varargs) {
              Array rest;
              for (size_t i = macro->args.size(); i < positional.size(); ++i)
                rest.push_back(positional[i]);
              scope.set("varargs", Value::list(std::move(rest)));
            } else if (positional.size() > macro->args.size()) {
              fail(*macro, "macro '" + macro->text + "' takes not more than " +
                               std::to_string(macro->args.size()) + " argument(s)");
            }
            for (const Node* p : pending) scope.set(p->text, eval(*p->x, scope));
            return Value::str(block(macro->body, scope));
          }));
  return Value::null();
}

}  // namespace llmcpu::jinja
