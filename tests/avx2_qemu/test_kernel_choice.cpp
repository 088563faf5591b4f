// Avx2UnderQemu, the kernel choice: on an AVX2-only CPU (QEMU's Haswell-v4, under_qemu.h) the
// program offers exactly the tables such a CPU runs (every AVX2-family and portable table built,
// never avx512*, avx512bf16 or oneDNN's bf16 matmul, which has no kernels below AVX-512), picks an
// AVX2 table by default in fp32 and bf16, runs every table it offers to the PyTorch fixture's
// limits, and refuses a forced table it cannot run by name (exit 2, the variable, the table, the
// reason and the valid ones), in `version`, `verify` and `bench`.
// Not here: `bench`'s timings. Its roofs run fixed loop counts (2^24 iterations of 12 FMAs, five
// times, per target) that take minutes under emulation, so only what bench decides before
// measuring is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/avx2_qemu/under_qemu.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

using testing::fixture;
using testing::Offered;
using testing::Outcome;
using testing::run_avx2;

const std::string kVerifyTiny = "verify --threads 2 --model " + fixture("tiny", "model.bin") +
                                " --state " + fixture("tiny", "state.bin");

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Every fp32 table built that Haswell runs is offered, in any order, and nothing else.
TEST(Avx2UnderQemu, VersionOffersOnlyTablesThisCpuRuns) {
  const Offered o = testing::offered_under_qemu();
  ASSERT_FALSE(o.built.empty());
  std::set<std::string> want;
  for (const std::string& t : o.built) {
    if (testing::runs_on_haswell(t)) want.insert(t);
  }
  EXPECT_EQ(std::set<std::string>(o.fp32.begin(), o.fp32.end()), want)
      << "offered: " << testing::join_list(o.fp32);
  EXPECT_EQ(o.fp32.size(), want.size()) << testing::join_list(o.fp32);
  // The default is the AVX2 table, on libxsmm's GEMM where the build has it.
  const bool xsmm = o.libxsmm && contains(o.built, "avx2+xsmm");
  EXPECT_EQ(o.fp32_default, xsmm ? "avx2+xsmm" : "avx2");
  // bf16: only tables Haswell runs, the default an AVX2 one among them.
  for (const std::string& t : o.bf16) {
    EXPECT_TRUE(testing::runs_on_haswell(t)) << t << " offered in bf16 on an AVX2-only CPU";
  }
  EXPECT_TRUE(testing::is_avx2(o.bf16_default)) << o.bf16_default;
  EXPECT_TRUE(contains(o.bf16, o.bf16_default)) << o.bf16_default;
}

struct Forced {
  std::string var, table;
  bool bf16;
  std::string reason;  // words the refusal's reason must hold ("" for the generic one)
};

// The tables an AVX-512 machine offers that an AVX2-only one must not: oneDNN makes bf16 matmuls
// only from AVX-512 up, the avx512bf16 table needs VDPBF16PS (AVX512-BF16).
std::vector<Forced> unrunnable() {
  return {{"LLMCPU_TARGET", "avx512+xsmm", false, ""},
          {"LLMCPU_TARGET", "avx512", false, ""},
          {"LLMCPU_BF16_TARGET", "onednn", true, "AVX-512"},
          {"LLMCPU_BF16_TARGET", "avx512bf16", true, "AVX512-BF16"},
          {"LLMCPU_BF16_TARGET", "avx512", true, ""}};
}

// Whether this build has the table, so that the refusal must say this CPU cannot run it (a build
// without it refuses the name as unknown). The avx512bf16 table comes with the x86 kernels, built
// where the avx512 target is.
bool built_here(const Forced& f, const Offered& o) {
  if (f.table == "onednn") return o.onednn;
  if (f.table == "avx512bf16") return contains(o.built, "avx512");
  return contains(o.built, f.table);
}

void expect_refused(const Outcome& r, const Forced& f, const Offered& o) {
  const std::string what = f.var + "=" + f.table;
  EXPECT_EQ(r.status, 2) << what << "\n" << r.output;
  EXPECT_NE(r.output.find("error: " + what + ": "), std::string::npos) << r.output;
  const std::string valid = testing::join_list(f.bf16 ? o.bf16 : o.fp32);
  EXPECT_NE(r.output.find("valid here: " + valid), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  if (built_here(f, o)) {
    EXPECT_NE(r.output.find("this CPU does not run that"), std::string::npos) << r.output;
    if (!f.reason.empty()) {
      EXPECT_NE(r.output.find(f.reason), std::string::npos) << r.output;
    }
  }
}

TEST(Avx2UnderQemu, ForcedTablesThisCpuLacksAreRefusedByName) {
  const Offered o = testing::offered_under_qemu();
  for (const Forced& f : unrunnable()) {
    const std::string env = f.var + "=" + f.table;
    expect_refused(run_avx2("version", env), f, o);
    const Outcome v = run_avx2(kVerifyTiny + (f.bf16 ? " --precision bf16" : ""), env);
    expect_refused(v, f, o);
    EXPECT_EQ(v.output.find("verify: model"), std::string::npos) << "verify ran:\n" << v.output;
  }
}

// Each offered table, forced, runs here (no illegal instruction) and matches PyTorch's fp64
// reference within verify's limits (core/verify/verify.h), fp32 and bf16 alike.
TEST(Avx2UnderQemu, EveryOfferedTableRunsToThePyTorchLimits) {
  const Offered o = testing::offered_under_qemu();
  for (const std::string& t : o.fp32) {
    const Outcome r = run_avx2(kVerifyTiny, "LLMCPU_TARGET=" + t);
    EXPECT_EQ(r.status, 0) << t << "\n" << r.output;
    EXPECT_NE(r.output.find(", fp32, " + t + " kernels,"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\nverify: OK"), std::string::npos) << t << "\n" << r.output;
  }
  for (const std::string& t : o.bf16) {
    const Outcome r = run_avx2(kVerifyTiny + " --precision bf16", "LLMCPU_BF16_TARGET=" + t);
    EXPECT_EQ(r.status, 0) << t << "\n" << r.output;
    EXPECT_NE(r.output.find(", bf16 (" + t + " GEMMs), "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\nverify: OK"), std::string::npos) << t << "\n" << r.output;
  }
}

// bench's target list (its default, and the one --targets is checked against) is the CPU's, and
// a table the CPU lacks is refused before anything is measured.
TEST(Avx2UnderQemu, BenchOffersOnlyTablesThisCpuRuns) {
  const Offered o = testing::offered_under_qemu();
  const Outcome help = run_avx2("bench --help");
  EXPECT_EQ(help.status, 0) << help.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      help.output, m, std::regex("--targets .*default: every one this CPU runs: ([^)]*)\\)")))
      << help.output;
  EXPECT_EQ(testing::split_list(m[1].str(), ","), o.fp32) << help.output;

  const std::string quick =
      "bench --model " + fixture("tiny", "model.bin") + " -b 1 -t 8 --reps 1 --threads 2";
  for (const char* t : {"avx512+xsmm", "avx512", "avx2,avx512"}) {
    const Outcome r = run_avx2(quick + " --targets " + std::string(t));
    EXPECT_EQ(r.status, 2) << t << "\n" << r.output;
    EXPECT_NE(r.output.find("--targets"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("available here: " + testing::join_list(o.fp32)), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("measuring the roofs"), std::string::npos) << r.output;
  }
  for (const Forced& f : unrunnable()) {
    const Outcome r =
        run_avx2(quick + (f.bf16 ? " --precision bf16" : "") + " --targets " + o.fp32_default,
                 f.var + "=" + f.table);
    expect_refused(r, f, o);
    EXPECT_EQ(r.output.find("measuring the roofs"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace llmcpu
