// core/report: the llm.c log reader (against hand-written logs), the metrics line's JSON (read back
// by nlohmann's parser), how a resumed run continues a metrics file (one line per step: cut at the
// resumed step, that step's validation carried into its line), gnuplot's quoting and the plot's
// format and option checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/report/loss_log.h"
#include "core/report/metrics.h"
#include "core/report/plot.h"
#include "core/report/train_reports.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

class LossLog : public testing::TempDirTest {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST_F(LossLog, ReadsTrainAndValLinesAndSkipsOtherKeys) {
  // train --log's lines, and llm.c's with lr:, norm: and eval: fields.
  const LossCurves c = read_loss_log(write("log.txt",
                                           "s:0 tel:10.831327\n"
                                           "s:0 trl:10.841611\n"
                                           "s:1 trl:9.5 lr:0.000300 norm:1.23\n"
                                           "\n"
                                           "s:2 eval:0.25\n"
                                           "s:2 tel:8.25\n"),
                                     "run");
  EXPECT_EQ(c.name, "run");
  ASSERT_EQ(c.train.size(), 2u);
  EXPECT_EQ(c.train[0].step, 0);
  EXPECT_DOUBLE_EQ(c.train[0].loss, 10.841611);
  EXPECT_EQ(c.train[1].step, 1);
  EXPECT_DOUBLE_EQ(c.train[1].loss, 9.5);
  ASSERT_EQ(c.val.size(), 2u);
  EXPECT_EQ(c.val[1].step, 2);
  EXPECT_DOUBLE_EQ(c.val[1].loss, 8.25);
}

TEST_F(LossLog, KeepsNonFiniteLossesAsSuch) {
  const LossCurves c =
      read_loss_log(write("log.txt", "s:0 trl:nan\ns:1 trl:-nan\ns:2 trl:inf\n"), "");
  ASSERT_EQ(c.train.size(), 3u);
  EXPECT_TRUE(std::isnan(c.train[0].loss));
  EXPECT_TRUE(std::isnan(c.train[1].loss));
  EXPECT_TRUE(std::isinf(c.train[2].loss));
}

TEST_F(LossLog, ResumedRunsRepeatedStepsReplaceTheLaterPoints) {
  // A run checkpointed at 2, went on to step 3, was killed and resumed at 2: its lines replace
  // steps 2 and 3.
  const LossCurves c = read_loss_log(
      write("log.txt", "s:0 trl:5\ns:1 trl:4\ns:2 trl:3\ns:3 trl:2.5\ns:2 trl:3.1\ns:3 trl:2.9\n"),
      "");
  ASSERT_EQ(c.train.size(), 4u);
  EXPECT_DOUBLE_EQ(c.train[2].loss, 3.1);
  EXPECT_DOUBLE_EQ(c.train[3].loss, 2.9);
  // resume_at(2): training steps 2.. are redone, the validation at 2 is not.
  LossCurves r;
  for (int s = 0; s < 4; ++s) r.add_train(s, 1.0 / (s + 1));
  for (int s : {0, 2, 4}) r.add_val(s, 1.0);
  r.resume_at(2);
  ASSERT_EQ(r.train.size(), 2u);
  EXPECT_EQ(r.train.back().step, 1);
  ASSERT_EQ(r.val.size(), 2u);
  EXPECT_EQ(r.val.back().step, 2);
}

TEST_F(LossLog, ErrorsNameTheFileAndLine) {
  auto message = [](const std::string& path) {
    try {
      read_loss_log(path, "");
    } catch (const FileError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string empty = write("empty.txt", "");
  EXPECT_NE(message(empty).find(empty + ": no loss line"), std::string::npos) << message(empty);
  const std::string other = write("other.txt", "s:5 eval:0.3\n");
  EXPECT_NE(message(other).find("no loss line"), std::string::npos) << message(other);
  const std::string bad_number = write("bad1.txt", "s:0 trl:5\ns:1 trl:x\n");
  EXPECT_NE(message(bad_number).find("line 2"), std::string::npos) << message(bad_number);
  const std::string bad_step = write("bad2.txt", "s:-1 trl:5\n");
  EXPECT_NE(message(bad_step).find("line 1"), std::string::npos) << message(bad_step);
  const std::string binary = write("bad3.txt", std::string("\x7f"
                                                           "ELF\x02\x01\n",
                                                           7));
  EXPECT_NE(message(binary).find("expected an llm.c log line"), std::string::npos);
  EXPECT_NE(message((dir_ / "missing.txt").string()).find("missing.txt: cannot open"),
            std::string::npos);
  // A last line still being written (no newline yet) is not an error.
  const LossCurves c = read_loss_log(write("partial.txt", "s:0 trl:5\ns:1 trl:4.\ns:2 tr"), "");
  EXPECT_EQ(c.train.size(), 2u);
}

TEST(Metrics, LineIsJsonWithNullForNonFiniteAndNoAbsentKeys) {
  StepMetrics m{.step = 3,
                .loss = 2.5,
                .lr = 3e-4,
                .grad_norm = 1.25,
                .ms = 80.5,
                .tokens_per_s = 1000,
                .val_loss = {}};
  nlohmann::json j = nlohmann::json::parse(metrics_line(m));
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(j["step"], 3);
  EXPECT_EQ(j["loss"], 2.5);
  EXPECT_EQ(j["lr"], 3e-4);
  EXPECT_EQ(j["grad_norm"], 1.25);
  EXPECT_EQ(j["ms"], 80.5);
  EXPECT_EQ(j["tokens_per_s"], 1000.0);
  EXPECT_FALSE(j.contains("val_loss"));

  m.loss = std::numeric_limits<double>::quiet_NaN();
  m.grad_norm = std::numeric_limits<double>::infinity();
  m.val_loss = 4.0;
  const std::string text = metrics_line(m);
  EXPECT_EQ(text.find("NaN"), std::string::npos) << text;
  j = nlohmann::json::parse(text);
  EXPECT_TRUE(j["loss"].is_null());
  EXPECT_TRUE(j["grad_norm"].is_null());
  EXPECT_EQ(j["val_loss"], 4.0);

  j = nlohmann::json::parse(metrics_line({.step = 10, .loss = {}, .val_loss = 3.5}));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"step": 10, "val_loss": 3.5})"));
}

TEST(Metrics, SkippedStepSaysSoAndOthersHaveNoSuchKey) {
  StepMetrics m{.step = 4, .loss = 6.5, .lr = 3e-4, .grad_norm = 2};
  EXPECT_FALSE(nlohmann::json::parse(metrics_line(m)).contains("skipped"));
  m.grad_norm = std::numeric_limits<double>::quiet_NaN();
  m.skipped = true;
  const nlohmann::json j = nlohmann::json::parse(metrics_line(m));
  EXPECT_EQ(j["skipped"], true);
  EXPECT_EQ(j["loss"], 6.5);
  EXPECT_TRUE(j["grad_norm"].is_null());
}

using MetricsFile = LossLog;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::string train_line(int64_t step, std::optional<double> val = {}) {
  return metrics_line({.step = step, .loss = 5.0 + step, .lr = 1e-3, .val_loss = val}) + "\n";
}

TEST_F(MetricsFile, ResumedRunCutsTheFileAtItsStepAndCarriesThatStepsValidation) {
  const std::string earlier = train_line(0, 7.0) + train_line(1) + train_line(2, 6.5);
  // The end of --steps (or a Ctrl-C at a validation step): a validation-only line of step 3.
  const std::string path =
      write("m.jsonl", earlier + metrics_line({.step = 3, .loss = {}, .val_loss = 6.25}) + "\n");
  {
    MetricsWriter w(path, 3);
    ASSERT_TRUE(w.carried_val_loss());
    EXPECT_EQ(*w.carried_val_loss(), 6.25);
    EXPECT_EQ(read_text(path), earlier);
  }
  // Resumed from an older checkpoint (after a kill or a --max-bad-steps stop): the lines of the
  // steps it takes again go, the validation of the resumed step is carried from its training line.
  write("m.jsonl", earlier + train_line(3) + train_line(4, 6.0) + train_line(5));
  {
    MetricsWriter w(path, 2);
    EXPECT_EQ(*w.carried_val_loss(), 6.5);
    EXPECT_EQ(read_text(path), train_line(0, 7.0) + train_line(1));
  }
  // No line of the resumed step, or one without val_loss: nothing carried; a last line cut short by
  // a kill goes too.
  write("m.jsonl", earlier + R"({"step":3,"lo)");
  {
    MetricsWriter w(path, 3);
    EXPECT_FALSE(w.carried_val_loss());
    EXPECT_EQ(read_text(path), earlier);
    w.write({.step = 3, .loss = 8.0});
  }
  EXPECT_EQ(read_text(path), earlier + metrics_line({.step = 3, .loss = 8.0}) + "\n");
  {
    MetricsWriter w(path, 1);
    EXPECT_FALSE(w.carried_val_loss());
    EXPECT_EQ(read_text(path), train_line(0, 7.0));
  }
  // A validation that was not finite (null) is carried as such.
  write("m.jsonl", train_line(0) + R"({"step":1,"val_loss":null})" + "\n");
  {
    MetricsWriter w(path, 1);
    ASSERT_TRUE(w.carried_val_loss());
    EXPECT_TRUE(std::isnan(*w.carried_val_loss()));
  }
  // A run that is not resumed starts the file anew; a resumed one whose file is not there makes it.
  { MetricsWriter w(path, -1); }
  EXPECT_EQ(read_text(path), "");
  const std::string fresh = (dir_ / "fresh.jsonl").string();
  { MetricsWriter w(fresh, 5); }
  EXPECT_TRUE(fs::exists(fresh));
}

TEST_F(MetricsFile, ResumedRunRefusesAFileOfOtherLinesAndLeavesItAsItWas) {
  for (const std::string& foreign : {std::string("s:0 trl:5.0\n"), std::string("{\"loss\": 2}\n"),
                                     std::string("{\"step\": -1}\n"), std::string("\n")}) {
    const std::string text = train_line(0) + foreign + train_line(5);
    const std::string path = write("m.jsonl", text);
    try {
      MetricsWriter w(path, 3);
      ADD_FAILURE() << "accepted " << foreign;
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": line 2 is not a metrics line"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(read_text(path), text);
  }
}

TEST_F(MetricsFile, ResumedStepsLineHasTheValidationOfTheRunBefore) {
  // The first run: steps 0 and 1, validation at 0 and after the last step (2), as the trainer
  // reports them.
  const std::string path = (dir_ / "m.jsonl").string();
  {
    TrainReports r(path, PlotOptions{}, -1, "");
    r.validation(0, 7.0, nullptr);
    r.step({.step = 0, .loss = 5.0});
    r.step({.step = 1, .loss = 4.0, .skipped = true});
    r.validation(2, 6.0, nullptr);
    r.finish(nullptr);
  }
  // Resumed at step 2 and stopped at once: the validation of step 2 keeps its own line.
  const std::string first = read_text(path);
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 3) << first;
  { TrainReports(path, PlotOptions{}, 2, "").finish(nullptr); }
  EXPECT_EQ(read_text(path), first);
  // Resumed at step 2 (no validation measured there again), then stopped after step 3 with no
  // validation.
  {
    TrainReports r(path, PlotOptions{}, 2, "");
    r.step({.step = 2, .loss = 3.0});
    r.step({.step = 3, .loss = 2.0});
    r.finish(nullptr);
  }
  EXPECT_EQ(read_text(path), metrics_line({.step = 0, .loss = 5.0, .val_loss = 7.0}) + "\n" +
                                 metrics_line({.step = 1, .loss = 4.0, .skipped = true}) + "\n" +
                                 metrics_line({.step = 2, .loss = 3.0, .val_loss = 6.0}) + "\n" +
                                 metrics_line({.step = 3, .loss = 2.0}) + "\n");
  // Resumed at step 4 and stopped at once (a Ctrl-C before its first step): nothing to add.
  const std::string all = read_text(path);
  { TrainReports(path, PlotOptions{}, 4, "").finish(nullptr); }
  EXPECT_EQ(read_text(path), all);
}

TEST(Plot, QuotesStringsForGnuplot) {
  EXPECT_EQ(gnuplot_quote("run's log"), "'run''s log'");
  EXPECT_EQ(gnuplot_quote("a\nsystem 'x'"), "'a?system ''x'''");
  EXPECT_EQ(gnuplot_quote("\\n $x `y`"), "'\\n $x `y`'");  // single quotes: no escapes, no `` or $
}

TEST(Plot, FormatFollowsTheExtensionAndBadOptionsAreRefused) {
  EXPECT_EQ(plot_format_of("loss.png", "--output"), PlotFormat::kPng);
  EXPECT_EQ(plot_format_of("dir/Loss.SVG", "--output"), PlotFormat::kSvg);
  for (const char* bad : {"loss.jpg", "loss", ".png", "loss.png.txt"}) {
    try {
      plot_format_of(bad, "--output");
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(".png or .svg"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(check_plot_options({.output = "a.png", .width = 99}, "--output"), UsageError);
  EXPECT_THROW(check_plot_options({.output = "a.png", .height = 10001}, "--output"), UsageError);
  EXPECT_THROW(check_plot_options({.output = "a.png", .title = "two\nlines"}, "--output"),
               UsageError);
  EXPECT_NO_THROW(check_plot_options({.output = "a.png", .title = "ok 'quoted' <b>"}, "--output"));
}

TEST(Plot, ScriptHasOneDatablockPerSeriesWithFinitePointsOnly) {
  LossCurves a{.name = "a.txt"}, b{.name = "b.txt"};
  a.add_train(0, 5.0);
  a.add_train(1, std::nan(""));
  a.add_val(0, 5.5);
  b.add_train(0, 4.0);
  const std::string s =
      gnuplot_script({a, b}, {.output = "x.svg", .log_scale = true}, "x.svg.tmp.1");
  EXPECT_NE(s.find("set terminal svg size 800,500"), std::string::npos) << s;
  EXPECT_NE(s.find("set output 'x.svg.tmp.1'"), std::string::npos) << s;
  EXPECT_NE(s.find("set logscale y"), std::string::npos) << s;
  EXPECT_NE(s.find("$train0 << EOD\n0 5\nEOD\n"), std::string::npos) << s;  // the NaN left out
  EXPECT_NE(s.find("$val0 << EOD\n0 5.5\nEOD\n"), std::string::npos) << s;
  EXPECT_NE(s.find("$train1 << EOD\n0 4\nEOD\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("$val1"), std::string::npos) << s;
  EXPECT_NE(s.find("title 'b.txt train'"), std::string::npos) << s;
  LossCurves nan_only;
  nan_only.add_train(0, std::nan(""));
  EXPECT_THROW(gnuplot_script({nan_only}, {.output = "x.png"}, "t"), Error);
}

}  // namespace
}  // namespace llmcpu
