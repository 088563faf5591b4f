// The inside of the chat-template interpreter, shared by its evaluator (jinja_eval.cpp), its
// filters and tests (jinja_filters.cpp) and its globals and methods (jinja_builtins.cpp): scopes,
// evaluated call arguments and the evaluator itself. Not a public interface: chat_template.h is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"
#include "core/chat/jinja_value.h"

namespace llmcpu::jinja {

// One scope of variables; lookups go up to the parent. A for loop and a macro call open one; an
// if does not (as in the reference).
class Env {
 public:
  explicit Env(Env* parent = nullptr) : parent_(parent) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
  bool has_own(const std::string& name) const;

 private:
  Env* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

// Evaluated call arguments: positional ones, then name=value ones.
struct Args {
  std::vector<Value> positional;
  Object keywords;
  // The i-th positional argument, else the keyword `name`, else nullptr.
  const Value* get(size_t i, const char* name) const;
};

class Evaluator {
 public:
  explicit Evaluator(const Source& source) : source_(source) {}
  std::string render(const Program& program, Env& globals);

  std::string block(const std::vector<NodePtr>& body, Env& env);
  Value eval(const Node& n, Env& env);
  Args arguments(const std::vector<NodePtr>& args, Env& env);
  [[noreturn]] void fail(const Node& n, const std::string& what) const;
  [[noreturn]] void unsupported(const Node& n, const std::string& construct) const;
  const Source& source() const { return source_; }

 private:
  Value eval_node(const Node& n, Env& env);
  Value set_statement(const Node& n, Env& env);
  Value for_statement(const Node& n, Env& env);
  Value macro_statement(const Node& n, Env& env);
  Value member(const Node& n, Env& env);
  Value call(const Node& n, Env& env);
  Value binary(const Node& n, Env& env);
  Value unary(const Node& n, Env& env);
  Value slice(const Node& n, const Value& object, Env& env);
  Value literal(const Node& n, Env& env);

  const Source& source_;
};

// Filters: `filter` is the identifier or call node after '|'.
Value apply_filter(Evaluator& ev, const Value& operand, const Node& filter, Env& env);
// Tests (`x is NAME`); nullptr for a name the reference does not know.
using TestFn = bool (*)(const Value& operand, const Value* argument);
TestFn find_test(const std::string& name);
// A member of a string, array or object that is not an own key (upper, split, items, get, ...);
// undefined when there is none.
Value builtin_member(const Value& object, const std::string& name);
// The globals every template sees: namespace, range, strftime_now, raise_exception (which throws
// TemplateRaised through the `raise` hook), true/false/none and their capitalised spellings.
void add_globals(Env& env);

// Control flow inside loops, and raise_exception's message on its way out.
struct BreakSignal {};
struct ContinueSignal {};
struct RaisedSignal {
  std::string message;
};

}  // namespace llmcpu::jinja
