// `llmcpu bench` as a user runs it: the table has one row per op and pass of a training step for
// every kernel target (the list taken from the dispatch API, not from the program's output), the
// CSV the same rows, the JSON parses and carries the fields; the numbers are sane (times positive,
// min <= median <= max, a positive share of the roof); bad flag values are clear errors.
// The expected ops are the step's as core/model/transformer.h documents it: the embedding, per
// block two layernorms, four matmuls, attention, GELU and two residual sums, then the final
// layernorm, the lm head and the loss; backward the same in reverse (a residual sum has no
// backward kernel: its gradient flows through unchanged); then AdamW.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/io/checkpoint.h"
#include "simd/kernels.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

using testing::Outcome;
using testing::run_llmcpu;

// A preset file of GPT-2's shape at a small width and vocabulary, in the test's own folder
// (TempDirTest's, removed afterwards); with small B, T and two reps each run takes seconds (most
// of it measuring the roofs).
constexpr int kLayers = 2;
class BenchCli : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    const std::string preset = path("llmcpu_bench_small.toml");  // the model name the rows show
    std::ofstream(preset) << "layers = " << kLayers
                          << "\nheads = 2\nchannels = 64\nmax_seq_len = 64\nvocab_size = 500\n";
    quick_ = "--model " + preset + " -b 1 -t 8 --reps 2 --threads 2";
  }
  std::string quick_;
};

std::vector<std::string> targets() {
  std::vector<std::string> r;
  for (std::string_view t : available_targets()) r.emplace_back(t);
  return r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// (op, pass) -> calls per step, by the rule above.
std::map<std::pair<std::string, std::string>, int> expected_ops(int L) {
  std::map<std::pair<std::string, std::string>, int> r;
  for (const char* pass : {"forward", "backward"}) {
    r[{"encoder", pass}] = 1;
    r[{"layernorm", pass}] = 2 * L + 1;
    for (const char* m : {"matmul qkv", "matmul attention proj", "matmul fc", "matmul fc proj"})
      r[{m, pass}] = L;
    r[{"attention", pass}] = L;
    r[{"gelu", pass}] = L;
    r[{"matmul lm head", pass}] = 1;  // one chunk of rows at B*T = 8
    r[{"softmax + cross-entropy", pass}] = 1;
  }
  r[{"residual", "forward"}] = 2 * L;
  r[{"gradient norm", "update"}] = 1;
  r[{"adamw", "update"}] = 1;
  r[{"training step", "step"}] = 1;
  return r;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> r;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, sep);) r.push_back(trim(cell));
  return r;
}

// The markdown table's rows as cells (header and separator dropped).
std::vector<std::vector<std::string>> table_rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream in(out);
  bool header = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cells = split(line.substr(1, line.size() - 2), '|');
    if (!header) {
      header = true;
      EXPECT_EQ(cells[0], "model");
      continue;
    }
    if (cells[0].find("---") != std::string::npos) continue;
    rows.push_back(cells);
  }
  return rows;
}

// Each target must have each expected (op, pass) exactly once, with its calls per step, and
// nothing else. Columns: model, op, pass, target, shape, calls/step, ...
void expect_every_op(const std::vector<std::vector<std::string>>& rows,
                     const std::vector<std::string>& want_targets, int L) {
  const auto want = expected_ops(L);
  std::map<std::tuple<std::string, std::string, std::string>, int> seen;
  for (const auto& r : rows) {
    ASSERT_GE(r.size(), 6u);
    EXPECT_TRUE(want.count({r[1], r[2]})) << "unexpected row " << r[1] << " " << r[2];
    EXPECT_NE(std::find(want_targets.begin(), want_targets.end(), r[3]), want_targets.end())
        << "unexpected target " << r[3];
    if (want.count({r[1], r[2]})) {
      EXPECT_EQ(std::stoi(r[5]), want.at({r[1], r[2]})) << r[1] << " " << r[2];
    }
    ++seen[{r[3], r[1], r[2]}];
  }
  for (const std::string& t : want_targets) {
    for (const auto& [op, calls] : want) {
      EXPECT_EQ((seen[{t, op.first, op.second}]), 1) << t << ": " << op.first << " " << op.second;
    }
  }
  EXPECT_EQ(rows.size(), want.size() * want_targets.size());
}

TEST_F(BenchCli, TableHasEveryOpOfEveryAvailableTarget) {
  const Outcome r = run_llmcpu("bench " + quick_);
  ASSERT_EQ(r.status, 0) << r.output;
  expect_every_op(table_rows(r.output), targets(), kLayers);
}

TEST_F(BenchCli, CsvHasTheTablesRows) {
  const std::vector<std::string> some = {targets().back()};
  const Outcome t = run_llmcpu("bench " + quick_ + " --targets " + some[0]);
  const Outcome c = run_llmcpu("bench " + quick_ + " --targets " + some[0] + " --format csv", "");
  ASSERT_EQ(t.status, 0) << t.output;
  ASSERT_EQ(c.status, 0) << c.output;
  std::vector<std::vector<std::string>> csv;
  std::stringstream in(c.output);
  bool header = false;
  for (std::string line; std::getline(in, line);) {
    // Progress lines ("bench: ...", "placement: ...") are on stderr, merged here.
    if (line.rfind("model,", 0) == 0) {
      header = true;
      continue;
    }
    if (header && line.rfind("llmcpu_bench_small,", 0) == 0) csv.push_back(split(line, ','));
  }
  ASSERT_TRUE(header) << c.output;
  expect_every_op(csv, some, kLayers);
  std::set<std::tuple<std::string, std::string, std::string, std::string>> a, b;
  for (const auto& r : table_rows(t.output)) a.insert({r[1], r[2], r[3], r[4]});
  for (const auto& r : csv) b.insert({r[1], r[2], r[3], r[4]});
  EXPECT_EQ(a, b);
}

// The JSON report, stdout only (the progress on stderr dropped).
nlohmann::json bench_json(const std::string& flags) {
  const Outcome r = testing::run_shell(std::string(LLMCPU_BINARY) + " bench " + flags +
                                       " --format json 2>/dev/null");
  EXPECT_EQ(r.status, 0) << r.output;
  return nlohmann::json::parse(r.output);  // throws (fails the test) if it is not JSON
}

void expect_sane(const nlohmann::json& j) {
  ASSERT_TRUE(j.contains("rows"));
  for (const char* f : {"cpu", "threads", "model", "batch", "seq_len", "precision", "roofs"})
    EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_GT(j["roofs"]["fp32_flops"].get<double>(), 0);
  EXPECT_GT(j["roofs"]["bandwidth_bytes_per_s"].get<double>(), 0);
  for (const auto& row : j["rows"]) {
    for (const char* f : {"model", "op", "pass", "target", "shape", "calls_per_step", "ms_median",
                          "ms_min", "ms_max", "gflops", "gbs", "bound", "roof_pct"}) {
      ASSERT_TRUE(row.contains(f)) << f << " missing in " << row.dump();
    }
    const double med = row["ms_median"], lo = row["ms_min"], hi = row["ms_max"];
    EXPECT_GT(lo, 0) << row.dump();
    EXPECT_LE(lo, med) << row.dump();
    EXPECT_LE(med, hi) << row.dump();
    EXPECT_GT(row["roof_pct"].get<double>(), 0) << row.dump();
    // Every op computes something.
    const double flops = row["flops"], gflops = row["gflops"];
    EXPECT_GT(flops, 0) << row.dump();
    EXPECT_NEAR(gflops, flops / (med / 1e3) / 1e9, 1e-9 * gflops + 1e-12) << row.dump();
    EXPECT_GT(row["gbs"].get<double>(), 0) << row.dump();
    if (row["op"] == "training step") {
      // tokens/s is B*T over the median step.
      EXPECT_NEAR(row["tokens_per_s"].get<double>(), 1 * 8 / (med / 1e3),
                  1e-6 * row["tokens_per_s"].get<double>());
    }
  }
}

TEST_F(BenchCli, JsonParsesWithSaneNumbers) {
  // Two targets: the table's test covers every one.
  const std::vector<std::string> two = {targets().front(), targets().back()};
  const nlohmann::json j = bench_json(quick_ + " --targets " + joined(two));
  expect_sane(j);
  EXPECT_EQ(j["rows"].size(), expected_ops(kLayers).size() * two.size());
  EXPECT_EQ(j["model"]["name"], "llmcpu_bench_small");
  EXPECT_EQ(j["model"]["padded_vocab_size"], 512);
  EXPECT_EQ(j["batch"], 1);
  EXPECT_EQ(j["seq_len"], 8);
  EXPECT_EQ(j["model"]["layers"], kLayers);
}

TEST_F(BenchCli, Bf16HasEveryOp) {
  const std::string best = targets().size() > 1 ? targets()[1] : targets()[0];
  const nlohmann::json j = bench_json(quick_ + " --precision bf16 --targets " + best);
  expect_sane(j);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["rows"].size(), expected_ops(kLayers).size());
  EXPECT_FALSE(j["targets"][0]["bf16_table"].get<std::string>().empty());
}

TEST_F(BenchCli, CheckpointGivesItsShape) {
  const std::string path = std::string(LLMCPU_FIXTURE_DIR) + "/tiny_model.bin";
  const ModelConfig c = read_checkpoint_header(path).config;
  const nlohmann::json j =
      bench_json("--model " + path + " -b 1 -t 8 --reps 1 --threads 2 --targets scalar");
  expect_sane(j);
  EXPECT_EQ(j["model"]["name"], "tiny_model.bin");
  EXPECT_EQ(j["model"]["layers"], c.num_layers);
  EXPECT_EQ(j["model"]["channels"], c.channels);
  std::map<std::string, int> calls;
  for (const auto& row : j["rows"]) calls[row["op"]] = row["calls_per_step"];
  EXPECT_EQ(calls["matmul qkv"], c.num_layers);
  EXPECT_EQ(calls["layernorm"], 2 * c.num_layers + 1);
}

TEST_F(BenchCli, BadValuesAreClearErrors) {
  const Outcome t = run_llmcpu("bench --targets " + targets().back() + ",nosuch");
  EXPECT_NE(t.status, 0);
  EXPECT_NE(t.output.find("--targets"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("nosuch"), std::string::npos) << t.output;
  for (const std::string& name : targets()) {
    EXPECT_NE(t.output.find(name), std::string::npos) << name << " not named in\n" << t.output;
  }
  const Outcome f = run_llmcpu("bench --format xml");
  EXPECT_NE(f.status, 0);
  EXPECT_NE(f.output.find("--format"), std::string::npos) << f.output;
  EXPECT_NE(f.output.find("xml"), std::string::npos) << f.output;
  const Outcome m = run_llmcpu("bench --model no-such-model");
  EXPECT_NE(m.status, 0);
  EXPECT_NE(m.output.find("--model no-such-model"), std::string::npos) << m.output;
  const Outcome n = run_llmcpu("bench --reps 0");
  EXPECT_NE(n.status, 0);
  EXPECT_NE(n.output.find("--reps"), std::string::npos) << n.output;
  const Outcome s = run_llmcpu("bench --seq-len 5000");
  EXPECT_NE(s.status, 0);
  EXPECT_NE(s.output.find("--seq-len"), std::string::npos) << s.output;
  const Outcome p = run_llmcpu("bench --precision fp16");
  EXPECT_NE(p.status, 0);
  EXPECT_NE(p.output.find("--precision"), std::string::npos) << p.output;
}

}  // namespace
}  // namespace llmcpu
