// The syntax tree of a chat template: one node type whose fields mean what its kind says (listed
// below), each node with its place in the prepared text. Built by jinja_parser.cpp, walked by
// jinja_eval.cpp; holds no values and does no work.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace llmcpu::jinja {

enum class NodeKind {
  // Statements
  kText,     // text: the literal text
  kComment,  // {# ... #}
  kSet,      // x: assignee (identifier, tuple or member), y: value or null, body: block set
  kIf,       // x: test, body, alt (elif is an If alone in alt)
  kFor,    // x: loop variable (identifier or tuple), y: iterable (a kSelect: inline if), body, alt
  kBreak,  // {% break %}
  kContinue,     // {% continue %}
  kMacro,        // text: name, args: parameters (identifiers or kKeyword with defaults), body
  kFilterBlock,  // x: filter (identifier or call), body
  // Expressions
  kInteger,     // number
  kFloat,       // number
  kString,      // text
  kIdentifier,  // text
  kArray,       // args: items
  kTuple,       // args: items
  kObject,      // args: key, value, key, value, ...
  kMember,      // x: object, y: property, computed: [] rather than .
  kCall,        // x: callee, args (kKeyword for name=value)
  kUnary,       // text: operator (not, -, +), x: operand
  kBinary,      // text: operator, x: left, y: right
  kFilter,      // x: operand, y: filter (identifier or call)
  kTest,        // x: operand, text: test name, negate
  kSelect,      // x: value, y: condition (`a if b` without else)
  kTernary,     // x: condition, y: if true, z: if false
  kSlice,       // x: start, y: stop, z: step (each may be null)
  kKeyword,     // text: name, x: value
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  size_t at = 0;  // offset in the prepared text
  std::string text;
  double number = 0;
  bool computed = false, negate = false;
  NodePtr x, y, z;
  std::vector<NodePtr> args, body, alt;

  Node(NodeKind k, size_t a) : kind(k), at(a) {}
};

struct Program {
  std::vector<NodePtr> body;
};

}  // namespace llmcpu::jinja
