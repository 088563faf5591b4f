// The one way numbers come in (tools/llmcpu/args.h): every numeric flag and config key parsed whole
// into 64 bits or a double, checked against its range, and refused with a message that names the
// flag (or key), the value and the range; list flags and plain words; the commands' table that the
// tests and fuzz targets read.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tools/llmcpu/args.h"
#include "tools/llmcpu/commands.h"

namespace llmcpu {
namespace {

// The message of the UsageError that parsing `args` throws ("" if it parses).
std::string refusal(ArgParser& p, const std::vector<std::string>& args) {
  try {
    p.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

struct Numbers {
  int i = 7;
  int64_t l = 7;
  uint64_t u = 7;
  double d = 0.5;
  ArgParser parser() {
    ArgParser p("test", "");
    p.option("i", 'i', &i, "N", "an int", {1, 65536});
    p.option("l", 0, &l, "N", "an int64", {0, INT64_MAX});
    p.option("u", 0, &u, "N", "a uint64", kAnyUint64);
    p.option("d", 0, &d, "X", "a double", {0, 1});
    return p;
  }
};

TEST(Args, IntegersOutsideTheirRangeNameTheFlagTheValueAndTheRange) {
  for (const std::string value :
       {"0", "-1", "65537", "2147483647", "2147483648", "9223372036854775807",
        "9223372036854775808", "-9223372036854775809", "99999999999999999999999"}) {
    Numbers n;
    ArgParser p = n.parser();
    EXPECT_EQ(refusal(p, {"--i", value}),
              "--i " + value + " is out of range: expected an integer in 1..65536");
    EXPECT_EQ(n.i, 7) << "changed by a refused value " << value;
  }
  Numbers n;
  ArgParser p = n.parser();
  ASSERT_TRUE(
      p.parse({"-i", "65536", "--l", "9223372036854775807", "--u", "18446744073709551615"}));
  EXPECT_EQ(n.i, 65536);
  EXPECT_EQ(n.l, INT64_MAX);
  EXPECT_EQ(n.u, UINT64_MAX);
}

TEST(Args, WordsThatAreNotIntegersAreRefused) {
  for (const std::string value : {"", "word", "1e3", "0x10", "+5", " 5", "5 ", "1.0", "--5"}) {
    Numbers n;
    ArgParser p = n.parser();
    EXPECT_EQ(refusal(p, {"--i=" + value}), "--i '" + value + "' is not an integer in 1..65536");
  }
  Numbers n;
  ArgParser p = n.parser();
  EXPECT_EQ(refusal(p, {"--u", "-1"}),
            "--u -1 is out of range: expected an integer in 0..18446744073709551615");
  Numbers m;
  ArgParser q = m.parser();
  EXPECT_EQ(refusal(q, {"--u", "18446744073709551616"}),
            "--u 18446744073709551616 is out of range: expected an integer in "
            "0..18446744073709551615");
}

TEST(Args, RealsMustBeFiniteAndInRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1.5", "--d 1.5 is out of range: expected a number in 0..1"},
      {"-0.001", "--d -0.001 is out of range: expected a number in 0..1"},
      {"1e308", "--d 1e308 is out of range: expected a number in 0..1"},
      {"nan", "--d 'nan' is not a finite number in 0..1"},
      {"-inf", "--d '-inf' is not a finite number in 0..1"},
      {"1e999",
       "--d 1e999 is beyond what a double holds (it would become inf): expected a "
       "number in 0..1"},
      {"1e-400",
       "--d 1e-400 is beyond what a double holds (it would become 0): expected a "
       "number in 0..1"},
      {"0x1p-2", "--d '0x1p-2' is not a number in 0..1"},
      {"", "--d '' is not a number in 0..1"},
      {"half", "--d 'half' is not a number in 0..1"}};
  for (const auto& [value, message] : cases) {
    Numbers n;
    ArgParser p = n.parser();
    EXPECT_EQ(refusal(p, {"--d", value}), message);
    EXPECT_EQ(n.d, 0.5);
  }
  Numbers n;
  ArgParser p = n.parser();
  ASSERT_TRUE(p.parse({"--d", "1"}));
  EXPECT_EQ(n.d, 1.0);
}

class ArgsConfig : public testing::TempDirTest {
 protected:
  std::string refusal_of(const std::string& toml) {
    const std::string file = path("run.toml");
    std::ofstream(file) << toml << "\n";
    ArgParser p = numbers_.parser();
    p.config_flag("config", 0, nullptr, "");
    return refusal(p, {"--config", file});
  }
  Numbers numbers_;
};

TEST_F(ArgsConfig, KeysAreCheckedAsTheirFlags) {
  const std::string file = path("run.toml");
  EXPECT_EQ(refusal_of("i = 0"),
            file + ": key 'i' 0 is out of range: expected an integer in 1..65536");
  EXPECT_EQ(
      refusal_of("i = 9223372036854775807"),
      file + ": key 'i' 9223372036854775807 is out of range: expected an integer in 1..65536");
  EXPECT_EQ(refusal_of("i = 2.0"), file + ": key 'i' must be an integer (without a decimal point)");
  EXPECT_EQ(refusal_of("d = 2.5"),
            file + ": key 'd' 2.5 is out of range: expected a number in 0..1");
  EXPECT_EQ(refusal_of("d = nan"), file + ": key 'd' 'nan' is not a finite number in 0..1");
  EXPECT_EQ(refusal_of("u = -1"),
            file + ": key 'u' -1 is out of range: expected an integer in 0..18446744073709551615");
  EXPECT_EQ(refusal_of("d = 1"), "");
  EXPECT_EQ(numbers_.d, 1.0);
}

// An integer a double cannot hold exactly is refused for a real-valued key, never rounded (before,
// lr = 9007199254740993 became a learning rate of 0).
TEST_F(ArgsConfig, AnIntegerADoubleCannotHoldIsRefusedForARealKey) {
  double x = 0;
  auto parse = [&](const std::string& toml) {
    const std::string file = path("run.toml");
    std::ofstream(file) << toml << "\n";
    ArgParser p("test", "");
    p.config_flag("config", 0, nullptr, "");
    p.option("x", 0, &x, "X", "", {0, 1e300});
    return refusal(p, {"--config", file});
  };
  EXPECT_EQ(parse("x = 9007199254740993"),
            path("run.toml") +
                ": key 'x' = 9007199254740993 is an integer a double cannot hold "
                "exactly (the nearest is 9007199254740992); write it as a float "
                "if you mean that");
  EXPECT_EQ(parse("x = 9223372036854775807"),
            path("run.toml") +
                ": key 'x' = 9223372036854775807 is an integer a double cannot "
                "hold exactly (the nearest is 9.2233720368547758e+18); write it as "
                "a float if you mean that");
  EXPECT_EQ(x, 0);
  EXPECT_EQ(parse("x = 9007199254740992"), "");  // 2^53: exact
  EXPECT_EQ(x, 9007199254740992.0);
  EXPECT_EQ(parse("x = 3"), "");
  EXPECT_EQ(x, 3.0);
}

TEST(Args, ListFlagsAndPlainWords) {
  std::vector<std::string> inputs, plain;
  std::string out;
  ArgParser p("test", "");
  p.list_option("input", 'i', &inputs, "FILE...", "");
  p.option("out", 'o', &out, "DIR", "");
  p.positionals(&plain);
  ASSERT_TRUE(
      p.parse({"first", "--input=a", "b", "-", "-o", "-dir", "-i", "c", "--out", "d", "e"}));
  EXPECT_EQ(inputs, (std::vector<std::string>{"a", "b", "-", "c"}));
  EXPECT_EQ(out, "d");
  EXPECT_EQ(plain, (std::vector<std::string>{"first", "e"}));
  std::vector<std::string> none;
  ArgParser q("test", "");
  q.list_option("input", 'i', &none, "FILE...", "");
  EXPECT_EQ(refusal(q, {"--input", "--other"}), "--input needs at least one FILE...");
  ArgParser r("test", "");
  EXPECT_EQ(refusal(r, {"file"}), "unexpected argument 'file' (see llmcpu test --help)");
}

TEST(Args, HelpShowsEachNumbersRange) {
  Numbers n;
  const std::string help = n.parser().help();
  EXPECT_NE(help.find("an int [1..65536]\n"), std::string::npos) << help;
  EXPECT_NE(help.find("a double [0..1]\n"), std::string::npos) << help;
  EXPECT_NE(help.find("a uint64\n"), std::string::npos) << help;  // every value: nothing to say
}

// Every command's table: names unique (long and short), every numeric flag with a range that its
// --help line shows, and the table read back as FlagInfo in the order of the help.
TEST(Args, EveryCommandsTableIsWellFormed) {
  std::set<std::string> commands;
  for (const CommandInfo& info : command_table()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(commands.insert(info.name).second);
    EXPECT_EQ(find_command(info.name), &info);
    const auto command = info.make();
    const ArgParser p = command_parser(info, *command);
    const std::string help = p.help().substr(p.help().find("\nflags:\n"));
    std::set<std::string> names;
    std::set<char> shorts;
    for (const FlagInfo& f : p.flags()) {
      EXPECT_TRUE(names.insert(f.name).second) << f.name;
      if (f.short_name) {
        EXPECT_TRUE(shorts.insert(f.short_name).second) << f.short_name;
      }
      EXPECT_NE(help.find("--" + f.name), std::string::npos) << f.name;
      if (f.kind == FlagKind::kInteger || f.kind == FlagKind::kReal) {
        const size_t line = help.find("--" + f.name + " ");
        const std::string text = help.substr(line, help.find('\n', line) - line);
        EXPECT_TRUE(text.find("..") != std::string::npos || f.name == "seed") << text;
      }
    }
  }
  EXPECT_EQ(find_command("--version"), find_command("version"));
  EXPECT_EQ(find_command("nope"), nullptr);
}

}  // namespace
}  // namespace llmcpu
