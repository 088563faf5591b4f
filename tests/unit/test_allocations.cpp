// Planning is the only place that allocates: after plan_batch (and a Generator's construction), a
// training step, a validation pass and sampling allocate nothing, in fp32 and bf16, at the model
// level and through the Trainer. Every heap allocation of the process is counted: this executable
// puts its own malloc, calloc, realloc and the aligned allocators in front of the C library's
// (which they call), so operator new, std::aligned_alloc (the arenas) and the libraries' own
// allocations all pass through the counter. Under AddressSanitizer, which owns malloc, the
// sanitizer's allocation hook counts instead. A warm-up step first: libxsmm's JIT, the kernels'
// scratch and OpenMP's thread pool are made on first use, which is planning too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/token_shard.h"
#include "core/model/generate.h"
#include "core/model/model.h"
#include "core/optim/adamw.h"
#include "core/train/trainer.h"
#include "core/util/rng.h"
#include "tests/unit/fixture_paths.h"

#if defined(__SANITIZE_ADDRESS__)
#define LLMCPU_COUNT_WITH_SANITIZER_HOOK 1
// The sanitizer runtime's hook (sanitizer/allocator_interface.h, which GCC does not install).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             size_t),
                                                         void (*free_hook)(const volatile void*));
#endif

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

inline void count_one() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
}

}  // namespace

#ifdef LLMCPU_COUNT_WITH_SANITIZER_HOOK
namespace {
void on_malloc(const volatile void*, size_t) { count_one(); }
void on_free(const volatile void*) {}
const int g_hooked = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
// glibc's allocator under its exported internal names; free() stays the C library's own.
extern "C" {
void* __libc_malloc(size_t n);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t n);
void* __libc_memalign(size_t alignment, size_t n);

void* malloc(size_t n) {
  count_one();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  count_one();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  count_one();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  count_one();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  count_one();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  count_one();
  void* p = __libc_memalign(alignment, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}
#endif

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fixture;

// The heap allocations made while `body` runs.
template <typename F>
long allocations_during(F&& body) {
  g_allocations = 0;
  g_counting = true;
  body();
  g_counting = false;
  return g_allocations.load();
}

TEST(Allocations, TheCounterSeesEveryKindOfAllocation) {
  // The counter itself must be able to fail the tests below.
  EXPECT_GE(allocations_during([] { std::vector<int> v(100); }), 1);
  EXPECT_GE(allocations_during([] { AlignedBuffer<float> b(1000); }), 1);
  EXPECT_GE(allocations_during([] { auto p = std::make_unique<std::string>(100, 'x'); }), 1);
}

class ModelAllocations : public ::testing::TestWithParam<Precision> {};

// A step, a validation pass and sampling of `model` allocate nothing once planned and warmed up.
void expect_no_allocations_after_planning(Model& model) {
  const ModelConfig& c = model.config();
  const int B = 2, T = 16, n = 12;
  EXPECT_GE(allocations_during([&] { model.plan_batch(B, T); }), 1) << "planning allocates";
  AdamW opt(model.num_parameters(), AdamWConfig{}, model.kernels(), model.bf16_kernels());
  Generator gen(model, n);
  std::vector<int> in(B * T), tg(B * T), val(B * T);
  Rng rng(9);
  for (int i = 0; i < B * T; ++i) {
    in[i] = int(rng.below(c.vocab_size));
    tg[i] = int(rng.below(c.vocab_size));
    val[i] = int(rng.below(c.vocab_size));
  }
  auto step = [&] {
    model.zero_grad();
    model.forward_backward(in.data(), tg.data(), B, T);
    const double norm = global_norm(model.grads_flat(), model.num_parameters(), model.kernels());
    // As the trainer's update in one process: clipped to 1 and cleared in the AdamW pass.
    const Model::UpdateSpans w = model.weights_for_update();
    opt.step(w.master, model.grads_flat(), 1e-3, w.copy, {}, {clip_factor(norm, 1.0), true});
    model.mark_gradients_zero();
  };
  auto validate = [&] { model.forward(val.data(), val.data(), B, T); };
  auto sample = [&] {
    gen.reset();
    int token = 0;
    while (gen.position() < gen.capacity()) {
      gen.step(token);
      token = gen.sample(1.0f, 5, rng);
    }
  };
  step(), validate(), sample();  // warm-up
  EXPECT_EQ(allocations_during(step), 0) << "a training step";
  EXPECT_EQ(allocations_during(validate), 0) << "a validation forward pass";
  EXPECT_EQ(allocations_during(sample), 0) << "sampling " << n << " tokens";
  // A shape that was not planned is refused rather than quietly planned.
  EXPECT_THROW(model.forward(in.data(), tg.data(), 1, T), ShapeError);
}

TEST_P(ModelAllocations, StepValidationAndSamplingAllocateNothingAfterPlanning) {
  const CheckpointInfo info = read_checkpoint_header(fixture("small", "model.bin"));
  Model model(info.config, active_kernels(), GetParam());
  load_checkpoint(fixture("small", "model.bin"), model);
  expect_no_allocations_after_planning(model);
}

// The same for a Llama-family model: grouped-query attention, rotary positions (the decode's own
// tables), SwiGLU and an untied head.
TEST_P(ModelAllocations, LlamaAllocatesNothingAfterPlanning) {
  ModelConfig c{.max_seq_len = 32,
                .vocab_size = 300,
                .padded_vocab_size = 384,
                .num_layers = 2,
                .num_heads = 6,
                .channels = 48};
  c.architecture = Architecture::kLlama;
  c.num_kv_heads = 2, c.head_dim = 8, c.hidden = 80, c.tied_head = false;
  c.qkv_bias = c.attn_proj_bias = c.mlp_bias = false;
  c.rope.head_dim = 8;
  Model model(c, active_kernels(), GetParam());
  init_model(model, 5);
  expect_no_allocations_after_planning(model);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ModelAllocations,
                         ::testing::Values(Precision::kFp32, Precision::kBf16),
                         [](const ::testing::TestParamInfo<Precision>& p) {
                           return std::string(precision_name(p.param));
                         });

// The whole training loop: once the Trainer is built and its first step has run, the steps, the
// validations and the samples that follow allocate nothing.
TEST(TrainerAllocations, LoopAllocatesNothingAfterItsFirstStep) {
  const fs::path dir = fs::path(::testing::TempDir()) / "llmcpu_allocations";
  fs::remove_all(dir);
  fs::create_directories(dir);
  Rng rng(5);
  for (auto [name, count] :
       {std::pair{"train_000000.bin", 1500}, {"train_000001.bin", 1100}, {"val_000000.bin", 600}}) {
    std::vector<uint16_t> tokens(count);
    for (auto& t : tokens) t = static_cast<uint16_t>(rng.below(311));  // the tiny fixture's V
    write_token_shard((dir / name).string(), tokens);
  }
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    TrainOptions o;
    o.model = fixture("tiny", "model.bin");
    o.train_data = (dir / "train_*.bin").string();
    o.val_data = (dir / "val_*.bin").string();
    o.val_every = 1;
    o.val_batches = 2;
    o.sample_every = 1;
    o.sample_tokens = 6;
    o.batch = 2;
    o.seq_len = 13;
    o.total_batch = 2 * 2 * 13;  // two micro-batches per step
    o.steps = 60;                // past the end of both shards: the loader moves between them
    o.precision = parse_precision(precision);
    Trainer trainer(o);
    TrainObserver obs;
    int samples = 0, vals = 0;
    obs.on_step = [](const StepReport& r) {
      if (r.step == 0) g_allocations = 0, g_counting = true;  // after the first step
    };
    obs.on_val = [&](int, float) { ++vals; };
    obs.on_sample = [&](int, const std::vector<int>&) { ++samples; };
    ASSERT_TRUE(trainer.run(obs));
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0);
    EXPECT_EQ(samples, 60);
    EXPECT_EQ(vals, 61);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace llmcpu
