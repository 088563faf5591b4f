// Regression tests of the defects that fuzzing (tests/fuzz, tools/fuzz.sh) and the audit of the
// OpenMP regions found, one or more per fix; the inputs that libFuzzer found are also committed
// under tests/fuzz/regressions/ and replayed by every fuzz run. Each test fails (or crashes) on the
// code before its fix:
//   - a debug-state header whose logits size passes 2^64 bytes wrapped around to the length of a
//     small file and was accepted, then its tensors were sized from the header;
//   - a --cpus list that repeats a wide range was expanded range by range (gigabytes for a short
//     list) before duplicates were removed;
//   - number flags and config keys took "nan" and "inf" (`--temperature nan` sampled the last token
//     every time, `weight_decay = inf` passed train's checks), and a value with a NUL inside was
//     read up to the NUL;
//   - a spans sidecar whose counts wrap 8 * num_examples + 16 * num_spans around to its length was
//     accepted, and its starts were then read far past the file;
//   - exceptions thrown inside OpenMP regions (per-thread scratch that cannot be allocated, a GEMM
//     kernel libxsmm cannot make) reached the runtime, which calls std::terminate.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/io/debug_state.h"
#include "core/io/token_spans.h"
#include "core/model/config.h"
#include "core/model/parameters.h"
#include "core/runtime/plan.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/trainer.h"
#include "core/util/file.h"
#include "simd/column_sums.h"
#include "simd/error.h"
#include "simd/kernels.h"
#include "simd/workspace.h"
#include "tools/llmcpu/args.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (fs::path(::testing::TempDir()) /
          ("llmcpu_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + name))
      .string();
}

// B = 2^20, T = 2^24 and V = 2^24 - 2 make the logits 2^44 * (2^24 - 2) * 4 bytes, and with the
// tokens the file length 1028 + 4P + 2^70 bytes, which wraps around to 1028 + 4P: the length of a
// file that holds only the header, the loss and the gradients. The file is sparse (no disk used).
TEST(FuzzRegressions, DebugStateWhoseLengthWrapsAroundIsRefused) {
  ModelConfig c;
  c.num_layers = 1;
  c.num_heads = 1;
  c.channels = 1;
  c.vocab_size = (1 << 24) - 2;
  c.padded_vocab_size = c.vocab_size;
  c.max_seq_len = 1 << 24;
  ASSERT_NO_THROW(validate(c, "test"));
  const size_t P = ParameterLayout(c).total();
  const std::string path = temp_path("state.bin");
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kDebugStateMagic;
  header[1] = kDebugStateVersion;
  header[2] = 1 << 20;  // B
  header[3] = 1 << 24;  // T
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, header, sizeof header), ssize_t(sizeof header));
  ASSERT_EQ(::ftruncate(fd, off_t(kLlmcHeaderBytes + 4 + 4 * P)), 0);
  ::close(fd);
  try {
    load_debug_state(path, c);
    FAIL() << "a debug state whose size passes 2^64 bytes was accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("2^64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  fs::remove(path);
}

// tests/fuzz/regressions/cli/cpus_repeated_wide_ranges.txt: 200 times "0-1048576" took more than
// 512 MB; 2000 times would take 8 GB.
TEST(FuzzRegressions, CpuListRepeatingAWideRangeCostsOneRange) {
  std::string list = "0-1048576";
  for (int i = 1; i < 2000; ++i) list += ",0-1048576";
  const std::vector<int> cpus = parse_cpu_list(list);
  ASSERT_EQ(cpus.size(), size_t(1048577));
  EXPECT_EQ(cpus.front(), 0);
  EXPECT_EQ(cpus.back(), 1048576);
  // Overlapping, unordered and repeated ranges still give each index once, ascending.
  EXPECT_EQ(parse_cpu_list("5-7,0-2,6-9,1,9"), (std::vector<int>{0, 1, 2, 5, 6, 7, 8, 9}));
  EXPECT_EQ(parse_cpu_list("3,3,3"), (std::vector<int>{3}));
}

// tests/fuzz/regressions/cli/temperature_nan.txt, regressions/run_config/weight_decay_inf.toml.
TEST(FuzzRegressions, NumberFlagsAndKeysRefuseNanInfinityAndTrailingBytes) {
  auto refused = [](const std::vector<std::string>& args, const std::string& expected) {
    double x = 1;
    int n = 1;
    uint64_t u = 1;
    ArgParser p("test", "");
    p.option("x", 0, &x, "X", "", {-1e300, 1e300});
    p.option("n", 0, &n, "N", "", {INT32_MIN, INT32_MAX});
    p.option("u", 0, &u, "U", "", kAnyUint64);
    try {
      p.parse(args);
      ADD_FAILURE() << args.back() << " was accepted: x=" << x << " n=" << n << " u=" << u;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  for (const char* word : {"nan", "inf", "-inf", "NAN", "infinity"}) {
    refused({"--x", word}, "is not a finite number");
    refused({std::string("--x=") + word}, "is not a finite number");
  }
  refused({"--x", "1e999"}, "--x 1e999 is beyond what a double holds");
  // (The message quotes the value, which what() shows up to the NUL.)
  refused({"--n", std::string("12\0x", 4)}, "--n '12");
  refused({"--u", std::string("7\0", 2)}, "--u '7");
  refused({"--x", std::string("0.5\0", 4)}, "--x '0.5");
  for (const char* value : {"nan", "inf", "-inf"}) {
    const std::string config = temp_path("run.toml");
    {
      std::ofstream f(config);
      f << "x = " << value << "\n";
    }
    double x = 1;
    ArgParser p("test", "");
    p.config_flag("config", 0, nullptr, "");
    p.option("x", 0, &x, "X", "", {-1e300, 1e300});
    EXPECT_THROW(p.parse({"--config", config}), UsageError) << value;
    EXPECT_EQ(x, 1);
    fs::remove(config);
  }
  double x = 0;
  ArgParser p("test", "");
  p.option("x", 0, &x, "X", "", {-1, 1});
  ASSERT_TRUE(p.parse({"--x", "-2.5e-3"}));
  EXPECT_EQ(x, -2.5e-3);
}

// Threads of a region throw, before and after a barrier that all of them must meet; the first
// exception comes out after the region, and the program is not terminated.
TEST(FuzzRegressions, TeamErrorsCarryAnExceptionOutOfAnOpenMpRegion) {
  TeamErrors errors;
  std::atomic<int> after_barrier{0};
  int team = 0;
#pragma omp parallel num_threads(4)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    errors.run([&] {
      if (t % 2 == 0) throw std::runtime_error("thread " + std::to_string(t));
    });
#pragma omp barrier
    ++after_barrier;
    errors.run([&] { throw std::length_error("after the barrier"); });
  }
  EXPECT_TRUE(errors.failed());
  EXPECT_EQ(after_barrier.load(), team);
  EXPECT_THROW(errors.rethrow(), std::exception);
  TeamErrors none;
#pragma omp parallel
  none.run([] {});
  EXPECT_FALSE(none.failed());
  EXPECT_NO_THROW(none.rethrow());
}

// A size whose bytes do not fit a size_t is refused before the allocator is asked (so this also
// holds under AddressSanitizer, which would otherwise report the allocation).
TEST(FuzzRegressions, ThreadScratchRefusesASizeBeyondSizeT) {
  EXPECT_THROW(thread_scratch(ScratchSlot::kReduce, SIZE_MAX / 2), std::bad_alloc);
  EXPECT_NE(thread_scratch(ScratchSlot::kReduce, 16), nullptr);
}

// The attention backward pass asks each thread for T*T + hs*T floats of scratch inside its
// parallel region; with T = C = 2^31 - 1 that cannot be had, and the std::bad_alloc must reach the
// caller, from every vectorized table (no tensor is touched: every thread skips its work).
TEST(FuzzRegressions, AttentionScratchThatCannotBeHadThrowsOutOfTheRegion) {
  std::vector<float> dummy(64);
  for (std::string_view target : available_targets()) {
    if (target == "scalar") continue;  // the reference allocates nothing inside a region
    SCOPED_TRACE(std::string(target));
    const KernelTable& k = kernels_for_target(target);
    EXPECT_THROW(k.attention_backward(dummy.data(), dummy.data(), dummy.data(), dummy.data(),
                                      dummy.data(), 1, INT_MAX, INT_MAX, 1),
                 std::bad_alloc);
  }
}

// tests/fuzz/regressions/resume_folder/: a step of 19 digits or more made std::stoll throw
// std::out_of_range out of --resume, and state_000000004.bin was listed as step 4, whose files
// are state_00000004.bin and model_00000004.bin. Only the names the trainer writes are listed.
TEST(FuzzRegressions, CheckpointFolderListsOnlyTheNamesTheTrainerWrites) {
  const fs::path dir = temp_path("ckpt");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto touch = [&](const std::string& name) { std::ofstream(dir / name).put('x'); };
  touch("model_99999999999999999999.bin");
  touch("state_99999999999999999999.bin");
  touch("model_00000004.bin");
  touch("state_000000004.bin");
  EXPECT_EQ(list_checkpoints(dir.string()), std::vector<int64_t>{});
  EXPECT_EQ(latest_checkpoint(dir.string()), -1);
  // The real names of step 4 and of the largest step, next to the impostors, are listed.
  touch("state_00000004.bin");
  touch("model_9223372036854775807.bin");
  touch("state_9223372036854775807.bin");
  EXPECT_EQ(list_checkpoints(dir.string()), (std::vector<int64_t>{4, INT64_MAX}));
  fs::remove_all(dir);
}

// The column sums of the GEMM back ends outside Highway: each thread's scratch is sized from its
// share of OC; with OC = 2^63 - 1 (two threads, so that the split does not overflow) it cannot be
// had, and the std::bad_alloc must reach the caller.
TEST(FuzzRegressions, ColumnSumScratchThatCannotBeHadThrowsOutOfTheRegion) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(std::min(threads, 2));
  std::vector<float> dummy(16);
  EXPECT_THROW(add_column_sums(dummy.data(), dummy.data(), 0, SIZE_MAX / 2), std::bad_alloc);
  omp_set_num_threads(threads);
}

// fuzz_tokenizer_json: a "dropout" that is not a number let nlohmann's type_error escape as an
// internal error, and an id of 2^30 - 1 (in the vocab or an added token) made the loader allocate
// a string per id up to it (32 GiB from a 150-byte file). Both are FileErrors naming the file now.
TEST(FuzzRegressions, TokenizerJsonDropoutAndFarIdsAreRefusedByName) {
  const fs::path dir = fs::path(LLMCPU_FIXTURE_DIR) / "../fuzz/regressions/tokenizer_json";
  for (const char* name :
       {"dropout-not-a-number", "id-far-beyond-the-tokens", "added-id-far-beyond-the-tokens"}) {
    SCOPED_TRACE(name);
    const std::string tmp = ::testing::TempDir() + "llmcpu_regression_" + name + ".json";
    fs::copy_file(dir / name, tmp, fs::copy_options::overwrite_existing);
    try {
      Tokenizer::load(tmp);
      ADD_FAILURE() << "loaded";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(tmp), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(name[0] == 'd' ? "dropout" : "far beyond"),
                std::string::npos)
          << e.what();
    }
    fs::remove(tmp);
  }
}

// tests/fuzz/regressions/token_spans/counts_that_wrap_the_size.spans: num_tokens 2^63,
// 2^61 + 1 examples and 2^60 spans, which wrap the sidecar's size around to 1032 bytes, its real
// length (one start, 0). The shard's count is the sidecar's own, as in fuzz_token_spans.
TEST(FuzzRegressions, SpansSidecarWhoseCountsWrapTheSizeIsRefused) {
  const fs::path input = fs::path(LLMCPU_FIXTURE_DIR) /
                         "../fuzz/regressions/token_spans/counts_that_wrap_the_size.spans";
  const std::string path = temp_path("shard.spans");
  fs::copy_file(input, path, fs::copy_options::overwrite_existing);
  ASSERT_EQ(fs::file_size(path), kLlmcHeaderBytes + 8);
  try {
    TokenSpans spans(path, uint64_t(1) << 63);
    FAIL() << "a sidecar of one word was accepted for " << spans.num_examples() << " examples";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2^64"), std::string::npos) << e.what();
  }
  fs::remove(path);
}

}  // namespace
}  // namespace llmcpu
