// The interpreter's constructs one at a time: each snippet is rendered by us and by
// @huggingface/jinja (node) and must give the same bytes; where Jinja's semantics fix the answer
// (loop variables, namespaces, macros, white space control) the expected text is also written out
// here from those rules. Then refusals: an unsupported construct is named with its line:column,
// raise_exception's message comes through, syntax errors say where.
#include <gtest/gtest.h>

#include "core/chat/chat_template.h"
#include "tests/chat/chat_test_util.h"

namespace llmcpu {
namespace {

using namespace llmcpu::testing;

struct Snippet {
  std::string source;
  std::string expected;  // what Jinja's rules give; "" where only the reference is compared
};

// size: table
const std::vector<Snippet>& snippets() {
  static const std::vector<Snippet> kSnippets = {
      {"{% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ "
       "loop.revindex0 }}/"
       "{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
       "1/0/3/2/true/false/3;2/1/2/1/false/false/3;3/2/1/0/false/true/3;"},
      {"{% set ns = namespace(n=0, s='') %}{% for m in items %}{% set ns.n = ns.n + m %}"
       "{% set ns.s = ns.s ~ m %}{% endfor %}{{ ns.n }} {{ ns.s }}",
       "6 123"},
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
       "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}",
       "Hi A! Hi B? Hi C."},
      {"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
      {"{% if true %}\nx\n{% endif %}\ny", "x\ny"},
      {"  {% if true %}x{% endif %}\n  {{ 'y' }}", "x  y"},
      {"a {{- ' b ' -}} c", "a b c"},
      {"{# a comment #}x{#- trimmed -#}  y", "xy"},
      {"{% for k, v in obj.items() %}{{ k }}={{ v }},{% endfor %}", "a=1,b=two,"},
      {"{% for k in obj %}{{ k }}{% endfor %}", "ab"},
      {"{% for x in items if x != 2 %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", "1,3"},
      {"{% for x in [] %}no{% else %}empty{% endfor %}", "empty"},
      {"{% for x in items %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}", "13"},
      {"{% for x in items %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "1"},
      {"{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]", "[block 2]"},
      {"{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21"},
      {"{{ 'yes' if items|length > 2 else 'no' }}", "yes"},
      {"{{ items[0] }}{{ items[-1] }}{{ items[1:] }}{{ items[::-1] }}{{ 'hello'[1:3] }}", ""},
      {"{{ 7 // 2 }} {{ 7 / 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ -7 // 2 }} {{ 1.5 + 1 }} {{ 2.0 }}",
       ""},
      {"{{ 'a' ~ 1 ~ 2.0 ~ true ~ [1, 2.5] }}", ""},
      {"{{ 'a' + 1 }}{{ 1 + 'a' }}{{ [1] + [2] }}", ""},
      {"{{ 'b' in 'abc' }} {{ 'x' not in 'abc' }} {{ 2 in items }} {{ 'a' in obj }} {{ 1 == 1.0 }}",
       ""},
      {"{{ 1 == '1' }} {{ none == undefined_name }} {{ items == items }} {{ [1] == [1] }}", ""},
      {"{{ undefined_name is defined }} {{ undefined_name is undefined }} {{ none is none }} "
       "{{ 'x' is string }} {{ obj is mapping }} {{ items is iterable }} {{ 3 is odd }} "
       "{{ 4 is even }} {{ 1.5 is number }} {{ 1 is integer }} {{ true is boolean }} "
       "{{ 'abc' is lower }} {{ x is not none }}",
       ""},
      {"{{ undefined_name }}|{{ undefined_name.attr }}|{{ none }}|{{ obj.missing }}|{{ "
       "items.length }}",
       ""},
      {"{{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world'|title }}|"
       "{{ 'hello'|capitalize }}|{{ 'caf\u00e9'|upper }}|{{ 'abc'|length }}",
       ""},
      {"{{ obj|tojson }}|{{ obj|tojson(indent=2) }}|{{ items|tojson }}|{{ 'q\"\\n\u00e9'|tojson }}|"
       "{{ obj|tojson(ensure_ascii=true) }}|{{ nested|tojson(indent=4) }}|{{ 1.0|tojson }}",
       ""},
      {"{{ items|join(', ') }}|{{ items|first }}|{{ items|last }}|{{ items|length }}|"
       "{{ items|reverse|list }}|{{ [3, 1, 2]|sort }}|{{ [1, 1, 2]|unique }}|{{ items|string }}",
       ""},
      {"{{ people|selectattr('role', 'equalto', 'user')|map(attribute='name')|join(',') }}|"
       "{{ people|rejectattr('role', 'equalto', 'user')|list|length }}|"
       "{{ people|map(attribute='name')|list }}",
       ""},
      {"{{ x|default('d') }}|{{ undefined_name|default('d') }}|{{ ''|default('e', true) }}|"
       "{{ '42'|int + 1 }}|{{ '2.5'|float }}|{{ 3.7|int }}|{{ -3|abs }}|{{ 5|string }}",
       ""},
      {"{{ obj|items|list }}|{{ obj|dictsort }}|{{ obj.keys()|list }}|{{ obj.values()|list }}|"
       "{{ obj.get('a') }}|{{ obj.get('zz', 'dflt') }}|{{ obj|length }}",
       ""},
      {"{{ ' a b  c '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|"
       "{{ '  s  '.strip() }}|{{ '  s  '.lstrip() }}|{{ '  s  '.rstrip() }}|"
       "{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aaa'.replace('a', 'b', 2) "
       "}}|"
       "{{ 'x'.upper() }}|{{ 'hello world'.title() }}",
       ""},
      {"{{ 'line1\nline2\n\nline4'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'aXbX'|replace('X', "
       "'-') }}",
       ""},
      {"{{ {'k': [1, {'z': none}]} }}|{{ (1, 2)|length }}|{{ [1, 'a', true, none, 1.5] }}", ""},
      {"{% macro list_items(xs) %}{% for x in xs %}<{{ x }}>{% endfor %}{% endmacro %}"
       "{{ list_items(items) }}{{ list_items(['a']) }}",
       "<1><2><3><a>"},
      {"{% filter upper %}shout {{ 'this' }}{% endfilter %}", "SHOUT THIS"},
      {"{% generation %}gen{% endgeneration %}|  {%- generation -%}  x  {% endgeneration %}", ""},
      {"{{ range(3)|list }}{{ range(1, 7, 2)|list }}{% for i in range(2) %}{{ i }}{% endfor %}",
       ""},
      {"{{ not true }} {{ true and 'x' }} {{ false or 'y' }} {{ 0 or [] }} {{ 1 < 2 }}", ""},
      {"{%- set x = 1 -%}\n  {%- if x -%}\n    one\n  {%- endif %}\ntail\n", ""},
      {"{{ \"\\u00e9\\x41\\t|\" }}{{ 'a' 'b' }}", ""},
      // JavaScript's numbers, strings and JSON where Python's would differ.
      {"{{ 0.1 + 0.2 }}|{{ 10 ** 21 }}|{{ 1 / 3 }}|{{ -7 % 3 }}|"
       "{{ 7.5 // 2 }}|{{ 0.000001 * 0.1 }}|{{ 100000000000000000000.0 }}|{{ -0.0 }}|{{ 2 ** -1 }}",
       ""},
      {"{{ '\U0001F44B\u00e9a'|length }}|{{ emoji[0:2] }}|{{ emoji|capitalize }}|"
       "{{ '\u00dfx'|upper }}|{{ 'it\u2019s a d\u00e9j\u00e0-vu'|title }}|{{ "
       "emoji|tojson(ensure_ascii=true) }}|"
       "{{ 'a\u00a0b\u3000c'.split() }}|{{ '\u2003x\u2003'|trim }}|{{ 'abc'.replace('', '-') }}|"
       "{{ 'abc'.replace('', '-', 2) }}|{{ 'a b c d'.split(none, 2) }}|{{ 'x'|join(',') }}",
       ""},
      {"{{ nested|tojson(separators=(',', ':')) }}|{{ nested.f }}|{{ nested.list[1][1] }}|"
       "{{ nested['o']['q'] }}|{{ nested.o.p }}|{{ nested|dictsort(reverse=true) }}|"
       "{{ people|sort(attribute='name', reverse=true)|map(attribute='name')|join }}",
       ""},
      {"{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{{ kwargs }}{{ varargs }}{% endmacro %}"
       "{{ m('x') }}|{{ m('x', 'y', 'z') }}|{{ m('x', c=1) }}",
       ""},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{{ loop.previtem }}{{ loop.nextitem }};{% "
       "endfor %}"
       "{% for x in items %}{% for y in items if y > x %}{{ x }}{{ y }}{{ loop.length }} {% endfor "
       "%}{% endfor %}",
       ""},
  };
  return kSnippets;
}

Json snippet_context() {
  return Json::parse(R"({
    "items": [1, 2, 3],
    "obj": {"a": 1, "b": "two"},
    "nested": {"list": [1, [2, {}], []], "o": {"p": null, "q": true}, "f": 0.5},
    "people": [{"role": "user", "name": "Ann"}, {"role": "assistant", "name": "Bot"},
               {"role": "user", "name": "Cy"}],
    "x": "set",
    "emoji": "\ud83d\udc4b\u00e9t\u00e9"
  })");
}

TEST(JinjaSnippets, RenderLikeHuggingFaceJinja) {
  const ChatReference ref = find_chat_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  std::vector<std::string> sources;
  for (const Snippet& s : snippets()) sources.push_back(s.source);
  const auto expected = run_jinja_reference(ref, sources, {snippet_context()});
  ASSERT_EQ(expected.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    const Rendered& want = expected[i][0];
    ASSERT_TRUE(want.ok) << "the reference failed on snippet " << i << " " << printable(sources[i])
                         << ": " << want.error;
    std::string got;
    try {
      got = JinjaTemplate(sources[i], "snippet " + std::to_string(i)).render(snippet_context());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "snippet " << i << " " << printable(sources[i]) << " threw: " << e.what();
      continue;
    }
    EXPECT_EQ(got, want.text) << "snippet " << i << " " << printable(sources[i]) << ": "
                              << text_difference(got, want.text);
    if (!snippets()[i].expected.empty()) {
      EXPECT_EQ(want.text, snippets()[i].expected) << "the reference on snippet " << i;
      EXPECT_EQ(got, snippets()[i].expected) << "snippet " << i;
    }
  }
}

// Templates both renderers refuse to render, each for its own reason.
TEST(JinjaSnippets, FailWhereTheReferenceFails) {
  const ChatReference ref = find_chat_reference();
  ASSERT_TRUE(ref.missing.empty()) << ref.missing;
  const std::vector<std::string> sources = {"{{ undefined_name ~ 'x' }}",
                                            "{{ undefined_name + 1 }}",
                                            "{{ none + 1 }}",
                                            "{{ items|upper }}",
                                            "{{ 'x'|round }}",
                                            "{% for c in 'abc' %}{% endfor %}",
                                            "{{ (1, 2)|tojson }}",
                                            "{{ 'a'.format(1) }}",
                                            "{% if true %}no end",
                                            "{{ raise_exception('Conversation roles must alternate "
                                            "user/assistant/user/assistant/...') }}",
                                            "{{ 1 < 'a' }}",
                                            "{{ obj.get(1) }}",
                                            "{{ [1, 2]|first|upper }}"};
  const auto expected = run_jinja_reference(ref, sources, {snippet_context()});
  ASSERT_EQ(expected.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_FALSE(expected[i][0].ok) << "the reference rendered " << printable(sources[i]);
    bool threw = false;
    try {
      JinjaTemplate(sources[i], "bad").render(snippet_context());
    } catch (const TemplateRaised& e) {
      threw = true;
      EXPECT_EQ(e.message(), expected[i][0].error) << printable(sources[i]);
    } catch (const TemplateError&) {
      threw = true;
    }
    EXPECT_TRUE(threw) << printable(sources[i])
                       << " rendered; the reference said: " << expected[i][0].error;
  }
}

TEST(JinjaErrors, UnsupportedStatementNamesItsPlace) {
  try {
    JinjaTemplate("Hello\n  {% call foo() %}x{% endcall %}", "t.jinja");
    FAIL() << "{% call %} was accepted";
  } catch (const TemplateUnsupported& e) {
    EXPECT_NE(e.construct().find("call"), std::string::npos) << e.what();
    EXPECT_EQ(e.position().line, 2);
    EXPECT_EQ(e.position().column, 6);
    EXPECT_NE(std::string(e.what()).find("t.jinja:2:6"), std::string::npos) << e.what();
  }
}

TEST(JinjaErrors, UnsupportedFilterAndTestNameTheirPlace) {
  const JinjaTemplate filter("{{ x | wordcount }}", "f");
  try {
    filter.render(Json{{"x", "a b"}});
    FAIL() << "an unknown filter was accepted";
  } catch (const TemplateUnsupported& e) {
    EXPECT_NE(e.construct().find("wordcount"), std::string::npos) << e.what();
    EXPECT_EQ(e.position().str(), "1:8");
  }
  EXPECT_THROW(JinjaTemplate("{{ 3 is divisibleby(3) }}", "t"), TemplateUnsupported);
  EXPECT_THROW(JinjaTemplate("{% include 'other.jinja' %}", "t"), TemplateUnsupported);
  EXPECT_THROW(JinjaTemplate("{{ f(*args) }}", "t"), TemplateUnsupported);
  EXPECT_THROW(JinjaTemplate("{{ 4 is divisibleby 2 }}", "t"), TemplateUnsupported);
  EXPECT_THROW(JinjaTemplate("{% for x in y recursive %}{% endfor %}", "t"), TemplateUnsupported);
  try {
    JinjaTemplate("{% for x in items %}{{ loop.cycle('a', 'b') }}{% endfor %}", "t")
        .render(Json{{"items", {1}}});
    FAIL() << "loop.cycle was accepted";
  } catch (const TemplateUnsupported& e) {
    EXPECT_NE(e.construct().find("cycle"), std::string::npos) << e.what();
    EXPECT_EQ(e.position().str(), "1:29") << e.what();
  }
  try {
    JinjaTemplate("{{ dict(a=1) }}", "t").render(Json::object());
    FAIL() << "dict() was accepted";
  } catch (const TemplateUnsupported& e) {
    EXPECT_NE(e.construct().find("dict"), std::string::npos) << e.what();
  }
  const JinjaTemplate test("\n{{ 1 is prime }}", "t");
  try {
    test.render(Json::object());
    FAIL() << "an unknown test was accepted";
  } catch (const TemplateUnsupported& e) {
    EXPECT_NE(e.construct().find("prime"), std::string::npos) << e.what();
    EXPECT_EQ(e.position().line, 2);
  }
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  const JinjaTemplate t(
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') "
      "}}{% endif %}ok",
      "gemma");
  EXPECT_EQ(t.render(Json{{"messages", Json::array({{{"role", "user"}}})}}), "ok");
  try {
    t.render(Json{{"messages", Json::array({{{"role", "system"}}})}});
    FAIL() << "raise_exception did not throw";
  } catch (const TemplateRaised& e) {
    EXPECT_EQ(e.message(), "System role not supported");
    EXPECT_EQ(e.position().line, 1);
  }
}

TEST(JinjaErrors, SyntaxErrorsSayWhere) {
  try {
    JinjaTemplate("line one\n{% for x in y %}never closed", "s.jinja");
    FAIL();
  } catch (const TemplateSyntaxError& e) {
    EXPECT_EQ(e.position().str(), "2:1") << e.what();
  }
  EXPECT_THROW(JinjaTemplate("{{ 'unterminated }}", "s"), TemplateSyntaxError);
  EXPECT_THROW(JinjaTemplate("{{ 1 + }}", "s"), TemplateSyntaxError);
  EXPECT_THROW(JinjaTemplate("{% endfor %}", "s"), TemplateSyntaxError);
}

}  // namespace
}  // namespace llmcpu
