// The training loop as a user relies on it: exact resume (bit for bit), gradient accumulation that
// does not depend on how the batch is split, checkpoints that survive a killed write, Ctrl-C, the
// llm.c data loader's order, config files, and generation through the KV cache.
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/token_shard.h"
#include "core/io/train_state.h"
#include "core/model/generate.h"
#include "core/model/preset.h"
#include "core/train/interrupt.h"
#include "core/train/memory_plan.h"
#include "core/train/trainer.h"
#include "core/util/file.h"
#include "core/util/rng.h"
#include "core/verify/verify.h"
#include "simd/error.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/fixture_paths.h"
#include "tools/llmcpu/train_flags.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fixture;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

class Training : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // Two train shards and a val shard of random tokens for the tiny fixture (V = 311).
    Rng rng(5);
    for (auto [name, n] : {std::pair{"train_000000.bin", 3000},
                           {"train_000001.bin", 2100},
                           {"val_000000.bin", 900}}) {
      std::vector<uint16_t> tokens(n);
      for (auto& t : tokens) t = static_cast<uint16_t>(rng.below(311));
      write_token_shard(path(name), tokens);
    }
  }

  TrainOptions tiny_options(int steps) const {
    TrainOptions o;
    o.model = fixture("tiny", "model.bin");
    o.train_data = path("train_*.bin");
    o.val_data = path("val_*.bin");
    o.val_every = 4;
    o.val_batches = 3;
    o.batch = 2;
    o.seq_len = 13;
    o.total_batch = 2 * 2 * 13;  // two micro-batches per step
    o.steps = steps;
    o.lr = 1e-3;
    o.weight_decay = 0.1;
    o.lr_schedule = LrScheduleKind::kCosine;
    o.warmup = 3;
    o.grad_clip = 1.0;
    return o;
  }
};

TEST_F(Training, ResumeIsBitExact) {
  // 20 steps in one run...
  TrainOptions a = tiny_options(20);
  a.checkpoint_dir = path("a");
  a.log_path = path("a.log");
  ASSERT_TRUE(Trainer(a).run({}));
  // ...equal the same 20-step run stopped after 10 (by the Ctrl-C path, which checkpoints) and
  // resumed, bit for bit: weights, AdamW moments, data order (shuffled) and the log.
  TrainOptions b = tiny_options(20);
  b.checkpoint_dir = path("b");
  b.log_path = path("b.log");
  TrainObserver stop_at_10;
  stop_at_10.on_step = [](const StepReport& r) {
    if (r.step == 9) request_interrupt();
  };
  EXPECT_FALSE(Trainer(b).run(stop_at_10));
  clear_interrupt();
  EXPECT_EQ(latest_checkpoint(path("b")), 10);
  TrainOptions c = tiny_options(20);
  c.model.clear();
  c.resume = path("b");
  c.log_path = path("b.log");
  Trainer resumed(c);
  EXPECT_EQ(resumed.steps_done(), 10);
  ASSERT_TRUE(resumed.run({}));
  EXPECT_EQ(read_bytes(checkpoint_model_path(path("a"), 20)),
            read_bytes(checkpoint_model_path(path("b"), 20)));
  EXPECT_EQ(read_bytes(checkpoint_state_path(path("a"), 20)),
            read_bytes(checkpoint_state_path(path("b"), 20)));
  EXPECT_EQ(read_bytes(path("a.log")), read_bytes(path("b.log")));
}

TEST_F(Training, ResumeRefusesAnotherShapeOrBatch) {
  TrainOptions b = tiny_options(2);
  b.checkpoint_dir = path("b");
  ASSERT_TRUE(Trainer(b).run({}));
  TrainOptions other = tiny_options(4);
  other.resume = path("b");
  other.model = fixture("small", "model.bin");
  try {
    Trainer t(other);
    FAIL() << "resumed a checkpoint into another shape";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("L=2 NH=4 C=48"), std::string::npos) << e.what();
  }
  other.model.clear();
  other.seq_len = 12;
  other.total_batch = 2 * 2 * 12;
  EXPECT_THROW(Trainer t(other), UsageError);
  other = tiny_options(4);
  other.resume = path("empty");
  EXPECT_THROW(Trainer t(other), UsageError);
}

TEST_F(Training, KeepsOnlyTheNewestCheckpoints) {
  TrainOptions o = tiny_options(5);
  o.checkpoint_dir = path("ck");
  o.checkpoint_every = 1;
  o.keep_checkpoints = 2;
  ASSERT_TRUE(Trainer(o).run({}));
  EXPECT_EQ(list_checkpoints(path("ck")), (std::vector<int64_t>{4, 5}));
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(path("ck"))) files.insert(e.path().filename());
  // Two models, two states, the folder's lock file, no temporaries.
  EXPECT_EQ(files,
            (std::set<std::string>{"model_00000004.bin", "model_00000005.bin", "state_00000004.bin",
                                   "state_00000005.bin", "train.lock"}));
}

TEST_F(Training, ResumedRunCheckpointsIntoItsResumeFolder) {
  // --checkpoint-every without --checkpoint-dir is fine on resume: the run writes where it resumed.
  TrainOptions o = tiny_options(2);
  o.checkpoint_dir = path("ck");
  ASSERT_TRUE(Trainer(o).run({}));
  TrainOptions r = tiny_options(4);
  r.model.clear();
  r.resume = path("ck");
  r.checkpoint_every = 1;
  ASSERT_TRUE(Trainer(r).run({}));
  EXPECT_EQ(list_checkpoints(path("ck")), (std::vector<int64_t>{2, 3, 4}));
  TrainOptions fresh = tiny_options(2);
  fresh.checkpoint_every = 1;  // a new run still needs a folder
  EXPECT_THROW(Trainer{fresh}, UsageError);
}

TEST_F(Training, GradientAccumulationDoesNotDependOnTheSplit) {
  // 4 sequences per step as 1x4, 2x2 or 4x1: the same tokens, the same mean loss, the same
  // gradients, up to fp32 rounding of a different summation order. The weights after AdamW are
  // not compared: its update g / (sqrt(v) + eps) is about lr * sign(g) for every element, so a
  // gradient that is rounding noise around zero (as in one split and not another) moves its weight
  // by a whole lr either way.
  std::vector<std::vector<float>> losses, grads;
  for (int B : {4, 2, 1}) {
    TrainOptions o = tiny_options(3);
    o.val_data.clear();
    o.val_every = 0;
    o.shuffle = false;
    o.batch = B;
    o.total_batch = 4 * 13;
    std::vector<float> l;
    TrainObserver obs;
    obs.on_step = [&](const StepReport& r) { l.push_back(r.loss); };
    {
      Trainer t(o);
      EXPECT_EQ(t.grad_accum(), 4 / B);
      ASSERT_TRUE(t.run(obs));
    }
    losses.push_back(l);
    o.steps = 1;  // the first step's gradients, from the same weights
    Trainer t(o);
    ASSERT_TRUE(t.run({}));
    grads.emplace_back(t.model().grads_flat(), t.model().grads_flat() + t.model().num_parameters());
  }
  for (int i = 1; i < 3; ++i) {
    for (int s = 0; s < 3; ++s) EXPECT_NEAR(losses[i][s], losses[0][s], 2e-6) << "split " << i;
    // Each weight gradient is a sum over the step's 52 rows, reassociated by the split: within
    // gamma(52 + 4) of the sum of magnitudes, norm-wise about 56 u = 3.3e-6 of the gradient.
    const TensorComparison c =
        compare_tensors("grads", grads[i].data(), grads[0].data(), grads[0].size(), 56 * 0x1p-24);
    EXPECT_TRUE(c.ok) << "split " << i << ": rel. error " << c.rel_error;
  }
}

// Recomputation gives the forward pass's bits again: a run's losses and weights are the same
// bytes whatever --recompute says, in fp32 and bf16, and the arena shrinks by the layers' copies.
TEST_F(Training, RecomputationChangesNoBitOfTheRun) {
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(precision_name(precision));
    std::vector<std::vector<float>> losses, weights;
    std::vector<size_t> arena;
    size_t rows = 0, C = 0, L = 0;
    for (const Recompute recompute :
         {Recompute::kNone, Recompute::kGelu, Recompute::kAllPointwise, Recompute::kLayers}) {
      TrainOptions o = tiny_options(4);
      o.precision = precision;
      o.recompute = recompute;
      Trainer t(o);
      std::vector<float> l;
      TrainObserver obs;
      obs.on_step = [&](const StepReport& r) { l.push_back(r.loss); };
      obs.on_val = [&](int, float v) { l.push_back(v); };
      ASSERT_TRUE(t.run(obs));
      losses.push_back(l);
      const Model& m = t.model();
      weights.emplace_back(m.params_flat(), m.params_flat() + m.num_parameters());
      arena.push_back(m.arena().forward_floats() * 4 + m.arena().forward_bf16_elements() * 2);
      rows = size_t(o.batch) * o.seq_len, C = m.config().channels, L = m.config().num_layers;
    }
    for (int i = 1; i < 4; ++i) {
      EXPECT_EQ(losses[i], losses[0]) << "recompute option " << i;
      EXPECT_TRUE(weights[i] == weights[0]) << "recompute option " << i;
    }
    // One layer's buffer instead of L: the GELU output is 4C wide, each layernorm C.
    const size_t elem = precision == Precision::kBf16 ? 2 : 4;
    EXPECT_EQ(arena[0] - arena[1], (L - 1) * rows * 4 * C * elem);
    EXPECT_EQ(arena[1] - arena[2], 2 * (L - 1) * rows * C * elem);
    // layers: of the rest, one layer's buffers; every layer's output (residual3) stays.
    EXPECT_LT(arena[3], arena[2] - (L - 1) * rows * C * 4);
  }
}

// A run that does not fit the memory it may use is refused before the model is allocated, with
// the numbers and a change of flags that fits; nothing is left behind.
TEST_F(Training, MemoryPlanThatDoesNotFitIsRefusedWithAWayOut) {
  TrainOptions o = tiny_options(2);
  o.checkpoint_dir = path("ck");
  o.batch = 64;
  o.seq_len = 32;
  o.total_batch = 64 * 32;
  o.val_data.clear();
  o.val_every = 0;
  active_kernels();  // as the trainer does before it plans: the program's size includes the tables
  const MemoryRequest base{.config = read_checkpoint_header(o.model).config,
                           .batch = o.batch,
                           .seq_len = o.seq_len,
                           .total_batch = o.total_batch,
                           .threads = omp_get_max_threads()};
  MemoryRequest half = base;
  half.batch = 32;
  // A limit between the plan at --batch 32 and the plan at --batch 64 (megabytes apart).
  const double fits_half = plan_memory(half).total(), needs = plan_memory(base).total();
  ASSERT_LT(fits_half, needs);
  o.memory_limit =
      parse_memory_size(std::to_string((long long)((fits_half + needs) / 2)), "--memory-limit");
  try {
    Trainer t(o);
    FAIL() << "a plan over the limit was accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--memory-limit"), std::string::npos) << m;
    EXPECT_NE(m.find("--batch 32 --total-batch 2048"), std::string::npos) << m;
  }
  EXPECT_FALSE(fs::exists(path("ck")));  // the folder made for the run is gone again
  o.memory_limit = parse_memory_size("1M", "--memory-limit");
  EXPECT_THROW(Trainer{o}, UsageError);
  for (const char* bad : {"", "12X", "-3G", "G"}) {
    EXPECT_THROW(parse_memory_size(bad, "--memory-limit"), UsageError) << bad;
  }
  o.memory_limit = 0;
  EXPECT_THROW(parse_recompute("layernorm"), UsageError);
  // With room, the plan is what the arena holds (the scratch: test_memory_plan.cpp).
  o.recompute = Recompute::kAllPointwise;
  o.memory_limit = parse_memory_size("64G", "--memory-limit");
  Trainer t(o);
  const ActivationBytes a =
      t.model().activation_bytes(o.batch, o.seq_len, {.recompute = Recompute::kAllPointwise});
  EXPECT_EQ(t.memory_plan().activations, double(a.forward));
  EXPECT_EQ(t.memory_limit().source, "--memory-limit");
}

TEST_F(Training, KilledWriteLeavesThePreviousCheckpointLoadable) {
  const std::string target = path("model.bin");
  fs::copy_file(fixture("tiny", "model.bin"), target);
  const std::vector<uint8_t> before = read_bytes(target);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Overwrite with a different model, but die halfway through the write.
    AtomicFileWriter out(target);
    const std::vector<uint8_t> junk(before.size() / 2, 0xAB);
    out.write(junk.data(), junk.size());
    ::kill(::getpid(), SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(read_bytes(target), before);
  const CheckpointInfo info = read_checkpoint_header(target);
  Model model(info.config);
  EXPECT_NO_THROW(load_checkpoint(target, model));
}

// A run killed at each point of a checkpoint write, SIGTERM and the other faults: test_faults.cpp.

TEST_F(Training, InterruptWritesACheckpointAndExitsCleanly) {
  const std::string ckpt = path("ck");
  const std::string log = path("run.log");
  const pid_t pid = testing::spawn_llmcpu(
      {"train", "--model", fixture("tiny", "model.bin"), "--train-data", path("train_*.bin"), "-b",
       "2", "-t", "13", "--steps", "100000", "-o", ckpt, "--log", log},
      path("out.txt"));
  ASSERT_GT(pid, 0);
  // Wait until it has logged a few steps, then press Ctrl-C.
  for (int i = 0; i < 500; ++i) {
    std::ifstream f(log);
    int lines = 0;
    for (std::string l; std::getline(f, l);) ++lines;
    if (lines >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal instead of stopping cleanly";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream out(path("out.txt"));
  const std::string text((std::istreambuf_iterator<char>(out)), {});
  EXPECT_NE(text.find("interrupted after step"), std::string::npos) << text;
  // The checkpoint is at the last completed step, which is the number of logged steps.
  std::ifstream f(log);
  int steps = 0;
  for (std::string l; std::getline(f, l);) ++steps;
  EXPECT_EQ(latest_checkpoint(ckpt), steps);
  EXPECT_NO_THROW(load_train_state(checkpoint_state_path(ckpt, steps)));
}

TEST_F(Training, SequentialLoaderWalksShardsInOrder) {
  DataLoader loader(path("train_*.bin"), 2, 13, 311, /*shuffle=*/false, 1);
  const TokenShard s0(path("train_000000.bin")), s1(path("train_000001.bin"));
  const uint64_t n0 = (s0.size() - 1) / 26, n1 = (s1.size() - 1) / 26;
  EXPECT_EQ(loader.total_samples(), n0 + n1);
  std::vector<int> x(26), y(26);
  for (uint64_t k = 0; k < n0 + n1 + 1; ++k) {
    loader.next_batch(x.data(), y.data());
    const TokenShard& s = k < n0 ? s0 : (k < n0 + n1 ? s1 : s0);  // wraps to the first shard
    const uint64_t start = (k < n0 ? k : (k < n0 + n1 ? k - n0 : 0)) * 26;
    for (int i = 0; i < 26; ++i) {
      ASSERT_EQ(x[i], int(s.at(start + i))) << "sample " << k;
      ASSERT_EQ(y[i], int(s.at(start + i + 1))) << "sample " << k;
    }
  }
}

// A shard too short for one sample (a tail an older `prepare` wrote, or a stray file the glob
// catches) is left out with its name and size; the other shards are read as if it were not there.
TEST_F(Training, LoaderSkipsAShardShorterThanOneSample) {
  write_token_shard(path("train_000002.bin"), std::vector<uint16_t>(26, 7));  // B*T + 1 = 27
  DataLoader loader(path("train_*.bin"), 2, 13, 311, /*shuffle=*/false, 1);
  ASSERT_EQ(loader.skipped().size(), 1u);
  EXPECT_EQ(loader.skipped()[0].file, path("train_000002.bin"));
  EXPECT_EQ(loader.skipped()[0].tokens, 26u);
  EXPECT_EQ(loader.num_shards(), 2u);
  const TokenShard s0(path("train_000000.bin")), s1(path("train_000001.bin"));
  EXPECT_EQ(loader.total_samples(), (s0.size() - 1) / 26 + (s1.size() - 1) / 26);

  // Only short shards: an error naming the pattern, the largest shard and what a batch needs.
  try {
    DataLoader none(path("train_*.bin"), 20, 160, 311, false, 1);
    ADD_FAILURE() << "no error when no shard holds a batch";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), path("train_*.bin"));
    const std::string what = e.what();
    EXPECT_NE(what.find("none of its 3 shards"), std::string::npos) << what;
    EXPECT_NE(what.find("3201"), std::string::npos) << what;  // B*T + 1
    EXPECT_NE(what.find("largest holds 3000"), std::string::npos) << what;
  }
  // One file: as before, its size and the need.
  EXPECT_THROW(DataLoader(path("train_000002.bin"), 2, 13, 311, false, 1), FileError);
}

TEST_F(Training, ShuffledLoaderVisitsEverySampleOncePerEpoch) {
  DataLoader loader(path("train_*.bin"), 2, 13, 311, /*shuffle=*/true, 9);
  DataLoader again(path("train_*.bin"), 2, 13, 311, /*shuffle=*/true, 9);
  std::vector<int> x(26), y(26), x2(26), y2(26);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<std::vector<int>> seen;
    for (uint64_t k = 0; k < loader.total_samples(); ++k) {
      loader.next_batch(x.data(), y.data());
      again.next_batch(x2.data(), y2.data());
      EXPECT_EQ(x, x2);  // same seed, same order
      seen.insert(x);
    }
    EXPECT_EQ(seen.size(), loader.total_samples());
  }
  // A position saved and restored continues identically.
  const DataPosition pos = loader.position();
  loader.next_batch(x.data(), y.data());
  DataLoader restored(path("train_*.bin"), 2, 13, 311, true, 9);
  restored.restore(pos);
  restored.next_batch(x2.data(), y2.data());
  EXPECT_EQ(x, x2);
  DataPosition bad = pos;
  bad.shard_order = {0, 0};
  EXPECT_THROW(restored.restore(bad), Error);
}

// llm.c's uint32 shards (its format for vocabularies past 65536) give the batches the same tokens
// give in uint16 shards, in order and shuffled, and a glob may mix the two widths.
TEST_F(Training, Uint32ShardsGiveTheSameBatches) {
  fs::create_directories(path("wide"));
  fs::create_directories(path("mixed"));
  for (const std::string name : {"train_000000.bin", "train_000001.bin"}) {
    const TokenShard s(path(name));
    std::vector<uint32_t> ids(s.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = s.at(i);
    write_token_shard(path("wide/" + name), ids, 4);
    write_token_shard(path("mixed/" + name), ids, name == "train_000000.bin" ? 4 : 2);
  }
  ASSERT_EQ(TokenShard(path("wide/train_000001.bin")).token_bytes(), 4);
  ASSERT_EQ(TokenShard(path("mixed/train_000001.bin")).token_bytes(), 2);
  for (const bool shuffle : {false, true}) {
    DataLoader narrow(path("train_*.bin"), 2, 13, 311, shuffle, 9);
    DataLoader wide(path("wide/train_*.bin"), 2, 13, 311, shuffle, 9);
    DataLoader mixed(path("mixed/train_*.bin"), 2, 13, 311, shuffle, 9);
    ASSERT_EQ(wide.total_samples(), narrow.total_samples());
    ASSERT_EQ(mixed.total_samples(), narrow.total_samples());
    std::vector<int> x(26), y(26), xw(26), yw(26), xm(26), ym(26);
    for (uint64_t k = 0; k < 2 * narrow.total_samples() + 3; ++k) {  // past an epoch's end
      narrow.next_batch(x.data(), y.data());
      wide.next_batch(xw.data(), yw.data());
      mixed.next_batch(xm.data(), ym.data());
      ASSERT_EQ(xw, x) << "sample " << k << (shuffle ? " (shuffled)" : "");
      ASSERT_EQ(yw, y) << "sample " << k;
      ASSERT_EQ(xm, x) << "sample " << k;
      ASSERT_EQ(ym, y) << "sample " << k;
    }
    // A saved position means the same in either width.
    DataLoader resumed(path("wide/train_*.bin"), 2, 13, 311, shuffle, 9);
    resumed.restore(narrow.position());
    narrow.next_batch(x.data(), y.data());
    resumed.next_batch(xw.data(), yw.data());
    EXPECT_EQ(xw, x);
  }
}

TEST_F(Training, ConfigFileKeysAndFlagOverrides) {
  std::ofstream(path("run.toml"))
      << "lr = 0.5\nbatch = 3\ntrain_data = \"x.bin\"\nno-shuffle = true\n";
  TrainOptions o;
  TrainCliExtras x;
  ArgParser p("train", "");
  add_train_flags(p, &o, &x);
  ASSERT_TRUE(p.parse({"--lr", "0.1", "--config", path("run.toml")}));
  EXPECT_DOUBLE_EQ(o.lr, 0.1);  // the flag wins, wherever it stands
  EXPECT_EQ(o.batch, 3);
  EXPECT_EQ(o.train_data, "x.bin");
  EXPECT_TRUE(x.no_shuffle);

  std::ofstream(path("typo.toml")) << "learning_rate = 0.1\n";
  TrainOptions o2;
  ArgParser p2("train", "");
  add_train_flags(p2, &o2, &x);
  try {
    p2.parse({"--config", path("typo.toml")});
    FAIL() << "unknown key accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("learning_rate"), std::string::npos) << e.what();
  }
  std::ofstream(path("type.toml")) << "batch = \"four\"\n";
  ArgParser p3("train", "");
  add_train_flags(p3, &o2, &x);
  EXPECT_THROW(p3.parse({"--config", path("type.toml")}), UsageError);
  ArgParser p4("train", "");
  add_train_flags(p4, &o2, &x);
  EXPECT_THROW(p4.parse({"--config", path("no_such.toml")}), FileError);  // a path: the file
  ArgParser p5("train", "");
  add_train_flags(p5, &o2, &x);
  EXPECT_THROW(p5.parse({"--config", "no_such_run"}), UsageError);  // a name: conf/runs/ has none
}

// Every shipped preset and run config parses: no unknown keys, types right, shapes valid.
TEST(Conf, ShippedFilesAreValid) {
  const fs::path conf = fs::path(LLMCPU_FIXTURE_DIR) / ".." / ".." / "conf";
  int models = 0, runs = 0;
  for (const auto& e : fs::directory_iterator(conf / "models")) {
    const ModelConfig c = load_model_preset(e.path().string());
    EXPECT_EQ(c.padded_vocab_size % 128, 0) << e.path();
    ++models;
  }
  for (const auto& e : fs::directory_iterator(conf / "runs")) {
    TrainOptions o;
    TrainCliExtras x;
    ArgParser p("train", "");
    add_train_flags(p, &o, &x);
    EXPECT_NO_THROW(p.parse({"--config", e.path().string()})) << e.path();
    ++runs;
  }
  EXPECT_GE(models, 7);
  EXPECT_GE(runs, 2);
  // The 124M preset is OpenAI's GPT-2 small.
  const ModelConfig small = load_model_preset((conf / "models" / "gpt2-124m.toml").string());
  EXPECT_EQ(ParameterLayout(small).total(), 124475904u);
}

TEST(Generator, KvCacheMatchesFullForward) {
  const CheckpointInfo info = read_checkpoint_header(fixture("small", "model.bin"));
  Model model(info.config);
  load_checkpoint(fixture("small", "model.bin"), model);
  const int n = 23, V = info.config.vocab_size, Vp = info.config.padded_vocab_size;
  Rng rng(3);
  std::vector<int> tokens(n);
  for (int& t : tokens) t = int(rng.below(V));
  model.plan_batch(1, n, {.keep_logits = true});
  model.forward(tokens.data(), nullptr, 1, n);
  std::vector<float> full(model.logits(), model.logits() + (size_t)n * Vp);
  Generator gen(model, n);
  for (int t = 0; t < n; ++t) {
    const float* logits = gen.step(tokens[t]);
    const TensorComparison c =
        compare_tensors("logits", logits, full.data() + (size_t)t * Vp, V, 1e-5);
    EXPECT_TRUE(c.ok) << "position " << t << ": rel. error " << c.rel_error;
  }
  EXPECT_THROW(gen.step(0), ShapeError);  // the cache is full
}

TEST(Generator, SamplingRespectsTopKAndTemperature) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.0f, -2.0f};
  Rng rng(1);
  EXPECT_EQ(sample_token(logits.data(), 5, 0.0f, 0, rng), 1);  // greedy
  std::vector<int> counts(5);
  for (int i = 0; i < 4000; ++i) counts[sample_token(logits.data(), 5, 1.0f, 2, rng)]++;
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);  // only the top 2
  // p(1)/p(3) = e^(5-4) = 2.718: the empirical ratio within 4 standard deviations.
  const double ratio = double(counts[1]) / counts[3];
  EXPECT_NEAR(ratio, std::exp(1.0), 0.35);
}

}  // namespace
}  // namespace llmcpu
