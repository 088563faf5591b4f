// Every field of every file header at its edges (tests/common/header_edges.h says how): llm.c's
// checkpoints (version 3 fp32, version 5 bf16), token shards (uint16 and uint32 ids) and debug
// states, llmcpu's training states (a whole one, a ZeRO-1 run's marker and one of its rank shards)
// and safetensors (the 8-byte header length, and each tensor's dtype, shape and data_offsets in the
// JSON). One table per format; what each edge must do follows from what the field means, which the
// tables say where it is not plain refusal. Also --resume with a 64-bit step this trainer cannot
// count to, and a state whose step is not its name's. The tokenizer's gpt2_tokenizer.bin is in
// tests/tokenizer/test_header_edges.cpp.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/comm/zero_shards.h"
#include "core/io/checkpoint.h"
#include "core/io/debug_state.h"
#include "core/io/hf_gpt2.h"
#include "core/io/safetensors.h"
#include "core/io/token_shard.h"
#include "core/io/train_state.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "core/train/trainer.h"
#include "simd/error.h"
#include "tests/common/header_edges.h"
#include "tests/common/temp_files.h"
#include "tests/common/tiny_config.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace llmcpu::testing;
using Type = FieldType;

// The value of the int32 at `offset` plus `add`: "just past" for a field the file's size grows
// with.
std::function<int64_t(const Bytes&)> i32_plus(size_t offset, int add) {
  return [=](const Bytes& f) { return int64_t(read_field<int32_t>(f, offset)) + add; };
}

// The count of `unit`-byte elements just past what lies between `from` and the file's end less
// `trailer` bytes (a checksum).
std::function<int64_t(const Bytes&)> count_past(size_t from, size_t unit, size_t trailer) {
  return [=](const Bytes& f) { return int64_t((f.size() - trailer - from) / unit + 1); };
}

HeaderField reserved_int(int index) {
  return {"header[" + std::to_string(index) + "] (unused)", 4 * index, Type::kI32,
          legitimate("not a field: llm.c's writers leave the header's unused ints zero and its "
                     "readers ignore them")};
}

// ---------------------------------------------------------------------------------------------------
// llm.c checkpoints: int32[256] {20240326, 3 | 5, maxT, V, L, NH, C, Vp}, then the parameters.
// Every shape field is refused outside its range (config.h's validate: positive, C % NH == 0,
// Vp >= V); the ones the file's size grows with are also refused one past the file's shape.

void load_llmc_checkpoint(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_header(path);
  std::vector<float> params(ParameterLayout(info.config).total());
  load_checkpoint(path, info.config, params.data());
}

std::vector<HeaderField> checkpoint_fields() {
  auto dim = [](const char* name, int64_t offset, const char* range,
                std::function<int64_t(const Bytes&)> past) {
    HeaderField f{name, offset, Type::kI32,
                  refused({std::string(name) + " must be " + range, std::string(name) + "={}"})};
    if (past) {
      f.past = std::move(past);
      f.except[kPastTheFile] = refused({std::string(name) + "={}", "bytes (truncated?)"});
    }
    return f;
  };
  HeaderField V = dim("V", 12, "in 1..", nullptr);
  V.past = i32_plus(28, 1);  // one past Vp: more real tokens than wte has rows
  V.except[kPastTheFile] = refused({"Vp must be at least V", "V={}"});
  return {
      {"magic", 0, Type::kI32, refused({"bad magic {}", "expected 20240326"})},
      {"version", 4, Type::kI32,
       refused({"unsupported checkpoint version {}", "expected 3 (fp32) or 5 (bf16)"})},
      dim("maxT", 8, "in 1..", i32_plus(8, 1)),
      V,
      dim("L", 16, "in 1..4096", i32_plus(16, 1)),
      // NH sizes nothing in the file (it splits C): no value past the file.
      dim("NH", 20, "in 1..4096", nullptr),
      // The next C that NH divides.
      dim("C", 24, "in 1..65536",
          [](const Bytes& f) { return read_field<int32_t>(f, 24) + read_field<int32_t>(f, 20); }),
      dim("Vp", 28, "at least V", i32_plus(28, 1)),
      reserved_int(8),
      reserved_int(255),
  };
}

// ---------------------------------------------------------------------------------------------------
// llm.c token shards: int32[256] {20240520, 1, ntok}, then ntok uint16, or {20240801, 7, ntok},
// then ntok uint32. A wrong magic names both; a wrong version names the one its magic takes.

std::vector<HeaderField> token_shard_fields(int version) {
  HeaderField ntok{"ntok", 8, Type::kI32, refused({"its header says {} tokens", "bytes"})};
  ntok.except[kMinusOne] = ntok.except[kInt32Min] = refused({"negative token count {}"});
  ntok.past = i32_plus(8, 1);
  return {
      {"magic", 0, Type::kI32, refused({"bad magic {}", "expected 20240520 or 20240801"})},
      {"version", 4, Type::kI32,
       refused({"unsupported token shard version {}", "expected " + std::to_string(version)})},
      ntok,
      reserved_int(3),
  };
}

// A uint32 shard of the tiny fixture's tokens.
Bytes uint32_token_shard(const std::string& dir) {
  const TokenShard narrow(fixture("tiny", "train.bin"));
  std::vector<uint32_t> ids(narrow.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = narrow.at(i);
  write_token_shard(dir + "/wide.bin", ids, 4);
  return read_bytes(dir + "/wide.bin");
}

// ---------------------------------------------------------------------------------------------------
// llm.c debug states: int32[256] {20240327, 2, B, T}, then x, y, logits, loss and gradients, for
// the tiny fixture's model (maxT = 32).

const ModelConfig& tiny_model_config() {
  static const ModelConfig c = read_checkpoint_header(fixture("tiny", "model.bin")).config;
  return c;
}

std::vector<HeaderField> debug_state_fields() {
  HeaderField B{"B", 8, Type::kI32, refused({"batch size B={}", "is not in 1..2^20"})};
  B.past = i32_plus(8, 1);
  B.except[kPastTheFile] = refused({"B={}", "bytes (truncated?)"});
  HeaderField T{"T", 12, Type::kI32, refused({"sequence length T={}", "is not in 1..maxT=32"})};
  T.past = i32_plus(12, 1);  // 14, within maxT: the file is too short for it
  T.except[kPastTheFile] = refused({"T={}", "bytes (truncated?)"});
  return {
      {"magic", 0, Type::kI32, refused({"bad magic {}", "expected 20240327"})},
      {"version", 4, Type::kI32, refused({"unsupported debug state version {}", "expected 2"})},
      B,
      T,
      reserved_int(4),
  };
}

// ---------------------------------------------------------------------------------------------------
// llmcpu training states (core/io/train_state.h), version 3, of the tiny config (maxT=8 V=11 Vp=16
// L=2 NH=3 C=12), B=2 T=5, 3 micro-batches, shuffled, bf16, at step 17 with 16 AdamW updates,
// data position: shard 1 of the order {1, 0, 2}, sample 4 of the order {3, 1, 4, 0, 2}. Byte
// offsets: magic 0, version 4, maxT 8, V 12, L 16, NH 20, C 24, Vp 28, B 32, T 36, grad_accum 40,
// shuffle 44, seed 45, precision 53, step 54, adamw_t 62, epoch 70, rng_state 78, shard 86,
// sample 90, n_shard_order 98 (its 3 entries from 102), n_sample_order 114 (its 5 entries from
// 122), P 142, shards 150, then the tensors (or the K shard checksums) from 154, and the
// checksum in the last 8 bytes. Every edit but the checksum's is sealed with a fresh checksum, so
// that the field itself is what the loader meets.

TrainState tiny_train_state() {
  TrainState s;
  s.config = tiny_config();
  s.B = 2;
  s.T = 5;
  s.grad_accum = 3;
  s.shuffle = true;
  s.seed = 0x0123456789ABCDEFull;
  s.precision = Precision::kBf16;
  s.step = 17;
  s.adamw_t = 16;
  s.data.epoch = 2;
  s.data.rng_state = 0xFEDCBA9876543210ull;
  s.data.shard = 1;
  s.data.sample = 4;
  s.data.shard_order = {1, 0, 2};
  s.data.sample_order = {3, 1, 4, 0, 2};
  return s;
}

// P of the tiny config, in the words of messages about it.
std::string tiny_P() { return std::to_string(ParameterLayout(tiny_config()).total()); }

void seal_train_state(Bytes& f) {
  const uint64_t sum = train_state_checksum(f.data(), f.size() - 8);
  std::memcpy(f.data() + f.size() - 8, &sum, 8);
}

void load_train_state_file(const std::string& path) {
  const TrainStateFile file(path);
  if (file.state().shards() > 0) return;  // the tensors are in the shard files
  const size_t P = file.num_parameters();
  std::vector<float> params(P), m(P), v(P);
  file.read_tensors(params, m, v);
}

HeaderField shape_field(const char* name, int64_t offset, const char* range, bool past_is_size) {
  HeaderField f{name, offset, Type::kI32,
                refused({"invalid model shape", std::string(name) + " must be " + range,
                         std::string(name) + "={}"})};
  if (past_is_size) {
    f.past = i32_plus(size_t(offset), 1);
    // The tensors are then too few for the shape: P is what disagrees.
    f.except[kPastTheFile] = refused({"parameters, but the model", std::string(name) + "={}"});
  }
  return f;
}

HeaderField file_checksum() {
  HeaderField f{"checksum", -8, Type::kU64, refused({"checksum mismatch", "corrupt"})};
  f.is_checksum = true;
  return f;
}

std::vector<HeaderField> train_state_fields() {
  const EdgeOutcome any_seed =
      legitimate("any 64-bit value is a seed (--resume compares it with --seed)");
  const EdgeOutcome any_epoch =
      legitimate("it counts completed passes over the data, and names nothing in the file");
  const EdgeOutcome any_run = legitimate(
      "a run's own choice, which sizes nothing in the file (--resume compares it with its flag)");

  HeaderField C = shape_field("C", 24, "in 1..65536", false);
  C.past = [](const Bytes& f) { return read_field<int32_t>(f, 24) + read_field<int32_t>(f, 20); };
  C.except[kPastTheFile] = refused({"parameters, but the model", "C={}"});
  HeaderField V = shape_field("V", 12, "in 1..", false);
  V.past = i32_plus(28, 1);  // one past Vp
  V.except[kPastTheFile] = refused({"Vp must be at least V", "V={}"});

  HeaderField B{"B", 32, Type::kI32, refused({"batch size B={}", "expected a positive number"})};
  B.except[kInt32Max] = any_run;
  HeaderField T{"T", 36, Type::kI32, refused({"sequence length T={}", "is not in 1..maxT=8"})};
  T.past = i32_plus(8, 1);  // one past the model's context
  HeaderField accum{"grad_accum", 40, Type::kI32,
                    refused({"grad_accum={}", "expected a positive number of micro-batches"})};
  accum.except[kInt32Max] = any_run;
  HeaderField shuffle{"shuffle", 44, Type::kU8,
                      refused({"invalid shuffle flag {}", "expected 0 (in order) or 1"})};
  // The fixture is shuffled: in order, it would have no sample order.
  shuffle.except[kZero] = refused({"a run without shuffling has a sample order (5 entries)"});
  HeaderField precision{"precision", 53, Type::kU8,
                        refused({"invalid precision code {}", "expected 0 (fp32) or 1 (bf16)"})};
  precision.except[kZero] =
      legitimate("0 is fp32, whose state holds the same fp32 master weights and moments as bf16's");

  HeaderField step{"step", 54, Type::kI64,
                   refused({"step {}", "expected a non-negative number of completed steps"})};
  step.except[kZero] = refused({"adamw_t 16 is not in 0..0", "one update per completed step"});
  step.except[kInt32Max] = step.except[kInt64Max] = legitimate(
      "any count of completed steps of at least adamw_t (the trainer refuses to resume one it "
      "cannot count to: HeaderEdgesResume)");
  HeaderField adamw_t{"adamw_t", 62, Type::kI64,
                      refused({"adamw_t {} is not in 0..17", "one update per completed step"})};
  adamw_t.except[kZero] =
      legitimate("no update taken: every step so far had a non-finite loss and was skipped");

  HeaderField rng{"rng_state", 78, Type::kU64, legitimate("any state but 0 is xorshift64*'s")};
  rng.except[kZero] = refused({"rng_state is 0", "never holds"});
  HeaderField shard{"shard", 86, Type::kU32,
                    refused({"shard index {}", "is not below the shard order's 3 entries"})};
  shard.except[kZero] = legitimate("the first shard of the order");
  shard.past = [](const Bytes& f) { return int64_t(read_field<uint32_t>(f, 98)); };
  HeaderField sample{"sample", 90, Type::kU64,
                     refused({"sample index {}", "is past the sample order's 5 entries"})};
  sample.except[kZero] = legitimate("the first sample of the shard");
  sample.past = [](const Bytes& f) { return int64_t(read_field<uint64_t>(f, 114)) + 1; };

  HeaderField n_shard_order{"n_shard_order", 98, Type::kU32,
                            refused({"truncated", "ends inside the shard order"})};
  // No shard order: the shard index 1 points past it (its entries are then read as the fields
  // after it).
  n_shard_order.except[kZero] =
      refused({"shard index 1", "is not below the shard order's 0 entries"});
  n_shard_order.past = count_past(102, 4, 8);
  HeaderField n_sample_order{"n_sample_order", 114, Type::kU64,
                             refused({"truncated", "ends inside the sample order"})};
  n_sample_order.except[kZero] = refused({"a shuffled run's data position has no sample order"});
  n_sample_order.past = count_past(122, 4, 8);
  HeaderField P{"P", 142, Type::kU64, refused({"holds {} parameters", "has " + tiny_P()})};
  P.past = count_past(154, 12, 8);
  HeaderField shards{"shards", 150, Type::kU32,
                     refused({"truncated", "ends inside the shard checksums"})};
  shards.except[kZero] = legitimate("the file's own value: a whole state, tensors included");
  shards.past = count_past(154, 8, 8);

  return {
      {"magic", 0, Type::kU32, refused({"bad magic", "expected \"LCTS\""})},
      {"version", 4, Type::kU32,
       refused({"unsupported training state version {}", "expected 1 to 6"})},
      shape_field("maxT", 8, "in 1..", true),
      V,
      shape_field("L", 16, "in 1..4096", true),
      shape_field("NH", 20, "in 1..4096", false),
      C,
      shape_field("Vp", 28, "at least V", true),
      B,
      T,
      accum,
      shuffle,
      {"seed", 45, Type::kU64, any_seed},
      precision,
      step,
      adamw_t,
      {"epoch", 70, Type::kU64, any_epoch},
      rng,
      shard,
      sample,
      n_shard_order,
      n_sample_order,
      P,
      shards,
      file_checksum(),
  };
}

// The marker a ZeRO-1 run of 2 ranks completes its checkpoint with: the same header, shards = 2 and
// the shard files' checksums instead of the tensors.
std::vector<HeaderField> zero_marker_fields() {
  HeaderField shards{"shards", 150, Type::kU32,
                     refused({"truncated", "ends inside the shard checksums"})};
  // A whole state would hold its tensors here: the file ends before them.
  shards.except[kZero] = refused({"truncated", "ends inside the weights"});
  shards.past = count_past(154, 8, 8);
  const EdgeOutcome any_checksum = legitimate(
      "a shard file's checksum, any 64-bit value; --resume compares it with the shard's own");
  return {
      shards,
      {"checksum[0]", 154, Type::kU64, any_checksum},
      {"checksum[1]", 162, Type::kU64, any_checksum},
      file_checksum(),
  };
}

// Rank 1 of 2's shard of the tiny config at step 7: u32 magic, u32 version, i64 step, u32 rank,
// u32 ranks, u64 P, u64 Q, then 3 Q floats and the checksum. The loader is given what the state
// file expects of it (rank 1 of 2, step 7, P, Q), as --resume does.
StateShardHeader tiny_shard_header() {
  const std::vector<ParameterSpan> spans = ParameterLayout(tiny_config()).spans();
  return {7, 1, 2, ParameterLayout(tiny_config()).total(), packed_size(owned_parts(spans, 1, 2))};
}

Bytes make_state_shard(const std::string& dir) {
  const StateShardHeader h = tiny_shard_header();
  const std::vector<ParameterSpan> parts =
      owned_parts(ParameterLayout(tiny_config()).spans(), 1, 2);
  std::vector<float> arena(h.num_parameters, 0.25f), m(h.count, 0.5f), v(h.count, 0.75f);
  const std::string path = dir + "/shard.bin";
  AtomicFileWriter out(path);
  write_state_shard(out, h, arena.data(), parts, m, v);
  out.commit();
  return read_bytes(path);
}

void load_state_shard(const std::string& path) {
  const StateShardHeader want = tiny_shard_header();
  const StateShardFile file(path, want);
  std::vector<float> packed(want.count);
  for (int i = 0; i < 3; ++i) std::memcpy(packed.data(), file.tensor_bytes(i), packed.size() * 4);
}

std::vector<HeaderField> state_shard_fields() {
  HeaderField rank{"rank", 16, Type::kU32, refused({"holds the part of rank {}", "expected 1"})};
  rank.past = [](const Bytes& f) { return int64_t(read_field<uint32_t>(f, 20)); };  // = ranks
  HeaderField P{"P", 24, Type::kU64,
                refused({"holds a parameter count of {}", "expected " + tiny_P()})};
  P.past = [](const Bytes& f) { return int64_t(read_field<uint64_t>(f, 24)) + 1; };
  HeaderField Q{"Q", 32, Type::kU64, refused({"holds an element count of {}", "expected"})};
  Q.past = count_past(40, 12, 8);
  return {
      {"magic", 0, Type::kU32, refused({"bad magic", "expected \"LCSH\""})},
      {"version", 4, Type::kU32,
       refused({"unsupported training-state shard version {}", "expected 1"})},
      {"step", 8, Type::kI64, refused({"holds the state of step {}", "expected 7"})},
      rank,
      {"ranks", 20, Type::kU32, refused({"holds a part for a world of ranks {}", "expected 2"})},
      P,
      Q,
      file_checksum(),
  };
}

// ---------------------------------------------------------------------------------------------------
// safetensors: u64 header length N, N bytes of JSON, the data section. The tiny config's GPT-2 in
// F32 as save_hf_gpt2 writes it, with its config.json beside.

// The config.json save_hf_gpt2 wrote beside the valid file.
std::string& hf_config_text() {
  static std::string text;
  return text;
}

Bytes make_safetensors(const std::string& dir) {
  Model model(tiny_config());
  init_model(model, 3);
  save_hf_gpt2(dir + "/model.safetensors", dir + "/config.json", tiny_config(), model.params_flat(),
               TensorDtype::kF32);
  const Bytes config = read_bytes(dir + "/config.json");
  hf_config_text().assign(config.begin(), config.end());
  return read_bytes(dir + "/model.safetensors");
}

void load_hf_gpt2(const std::string& path) {
  const std::string config = (fs::path(path).parent_path() / "config.json").string();
  if (!fs::exists(config))
    write_bytes(config, Bytes(hf_config_text().begin(), hf_config_text().end()));
  const HfGpt2File file({path, config});
  std::vector<float> params(ParameterLayout(file.config()).total());
  file.load(params.data());
}

std::vector<HeaderField> safetensors_length_fields() {
  HeaderField length{"header length", 0, Type::kU64,
                     refused({"header length {}", "runs past the end of the file"})};
  length.except[kZero] = refused({"header length 0", "too short for the JSON header"});
  length.past = count_past(8, 1, 0);
  return {length};
}

// ---------------------------------------------------------------------------------------------------

const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"CheckpointV3",
       [](const std::string&) { return read_bytes(fixture("tiny", "model.bin")); },
       load_llmc_checkpoint,
       {},
       checkpoint_fields()},
      {"CheckpointV5",
       [](const std::string& dir) {
         const ModelConfig& c = tiny_model_config();
         std::vector<float> params(ParameterLayout(c).total());
         load_checkpoint(fixture("tiny", "model.bin"), c, params.data());
         save_checkpoint(dir + "/v5.bin", c, params.data(), kCheckpointBf16);
         return read_bytes(dir + "/v5.bin");
       },
       load_llmc_checkpoint,
       {},
       checkpoint_fields()},
      {"TokenShard",
       [](const std::string&) { return read_bytes(fixture("tiny", "train.bin")); },
       [](const std::string& path) { TokenShard shard(path); },
       {},
       token_shard_fields(kShardVersion)},
      {"TokenShardUint32",
       uint32_token_shard,
       [](const std::string& path) { TokenShard shard(path); },
       {},
       token_shard_fields(kShard32Version)},
      {"DebugState",
       [](const std::string&) { return read_bytes(fixture("tiny", "state.bin")); },
       [](const std::string& path) { load_debug_state(path, tiny_model_config()); },
       {},
       debug_state_fields()},
      {"TrainState",
       [](const std::string& dir) {
         const size_t P = ParameterLayout(tiny_config()).total();
         const std::vector<float> params(P, 0.5f), m(P, 0.25f), v(P, 0.125f);
         save_train_state(dir + "/state.bin", tiny_train_state(), params, m, v);
         return read_bytes(dir + "/state.bin");
       },
       load_train_state_file, seal_train_state, train_state_fields()},
      {"TrainStateZeroMarker",
       [](const std::string& dir) {
         TrainState s = tiny_train_state();
         s.shard_checksums = {0x1111111111111111ull, 0x2222222222222222ull};
         save_train_state(dir + "/state.bin", s, {}, {}, {});
         return read_bytes(dir + "/state.bin");
       },
       load_train_state_file, seal_train_state, zero_marker_fields()},
      // A shard ends in the same checksum as a state file.
      {"StateShard", make_state_shard, load_state_shard, seal_train_state, state_shard_fields()},
      {"Safetensors", make_safetensors, load_hf_gpt2, {}, safetensors_length_fields()},
  };
  return all;
}

class HeaderEdges : public EdgeTest {};

TEST_P(HeaderEdges, EveryEdgeRefusedNamingTheFieldOrLegitimate) { run_case(); }

INSTANTIATE_TEST_SUITE_P(LlmcAndLlmcpuFiles, HeaderEdges,
                         ::testing::ValuesIn(field_cases(formats())), field_case_name);

// The files the tables assume (their offsets and words name these values).
class HeaderEdgesFixtures : public TempDirTest {};

TEST_F(HeaderEdgesFixtures, AreWhatTheTablesSay) {
  EXPECT_EQ(describe(tiny_model_config()), "L=2 NH=4 C=48 V=311 Vp=384 maxT=32");
  const Bytes debug = read_bytes(fixture("tiny", "state.bin"));
  EXPECT_EQ(read_field<int32_t>(debug, 8), 2);    // B
  EXPECT_EQ(read_field<int32_t>(debug, 12), 13);  // T
  const size_t P = ParameterLayout(tiny_config()).total();
  const std::vector<float> params(P), m(P), v(P);
  save_train_state(path("state.bin"), tiny_train_state(), params, m, v);
  const Bytes state = read_bytes(path("state.bin"));
  EXPECT_EQ(read_field<int64_t>(state, 54), 17);    // step
  EXPECT_EQ(read_field<int64_t>(state, 62), 16);    // adamw_t
  EXPECT_EQ(read_field<uint32_t>(state, 86), 1u);   // shard
  EXPECT_EQ(read_field<uint64_t>(state, 90), 4u);   // sample
  EXPECT_EQ(read_field<uint32_t>(state, 98), 3u);   // n_shard_order
  EXPECT_EQ(read_field<uint64_t>(state, 114), 5u);  // n_sample_order
  EXPECT_EQ(read_field<uint64_t>(state, 142), P);   // P
  EXPECT_EQ(read_field<uint32_t>(state, 150), 0u);  // shards
  EXPECT_EQ(state.size(), 154 + 12 * P + 8);
}

// ---------------------------------------------------------------------------------------------------
// safetensors' JSON: each tensor's dtype, shape and data_offsets set to each edge in turn. A JSON
// number has no width: besides the integer edges, UINT64_MAX (the largest unsigned) and 2^64
// (beyond it: a float to a JSON reader). The safetensors format: dtype names the element type (this
// reader takes F32, F16, BF16), shape lists non-negative dimensions, data_offsets [BEGIN, END] lie
// in the data section with END - BEGIN = the product of shape times the dtype's size.

struct JsonEdge {
  const char* label;
  json value;  // null: the value just past the data section, in the field's units
};

const std::vector<JsonEdge>& number_edges() {
  static const std::vector<JsonEdge> edges = {
      {kZero, 0},
      {kMinusOne, -1},
      {kInt32Max, INT32_MAX},
      {kInt32Min, INT32_MIN},
      {kInt64Max, INT64_MAX},
      {kInt64Min, INT64_MIN},
      {"Uint64Max", UINT64_MAX},
      {"TwoTo64", json::parse("18446744073709551616")},
      {kPastTheFile, nullptr},
  };
  return edges;
}

const std::vector<JsonEdge>& dtype_edges() {
  static const std::vector<JsonEdge> edges = {
      {kZero, 0},     {kMinusOne, -1}, {kInt32Max, INT32_MAX}, {kInt64Max, INT64_MAX},
      {"I64", "I64"},  // a safetensors dtype no model is stored in
      {"F64", "F64"},  // read (a reference's float64 figures), of another width than F32
      {"F16", "F16"},  // an accepted one of another width than the data's F32
  };
  return edges;
}

struct JsonField {
  JsonField(std::string name, std::string key, int index, const std::vector<JsonEdge>* edges,
            EdgeOutcome outcome)
      : name(std::move(name)),
        key(std::move(key)),
        index(index),
        edges(edges),
        outcome(std::move(outcome)) {}

  std::string name;
  std::string key;  // in the tensor's entry
  int index;        // in that list; -1: the value itself
  const std::vector<JsonEdge>* edges;
  EdgeOutcome outcome;  // "{tensor}" in a word stands for the tensor's name, "{}" for the value
  std::map<std::string, EdgeOutcome> except;
};

std::vector<JsonField> json_fields() {
  const EdgeOutcome negative = refused({"tensor '{tensor}'", "holds {}", "non-negative integer"});
  JsonField dtype{"dtype", "dtype", -1, &dtype_edges(),
                  refused({"tensor '{tensor}'", "dtype {}", "expected F32, F16, BF16"})};
  dtype.except["F16"] = refused({"tensor '{tensor}'", "but F16 (", "bytes"});
  dtype.except["F64"] = refused({"tensor '{tensor}'", "but F64 (", "bytes"});
  std::vector<JsonField> fields = {dtype};
  for (int i : {0, 1}) {
    JsonField shape{"shape[" + std::to_string(i) + "]", "shape", i, &number_edges(),
                    refused({"tensor '{tensor}'", "hold", "bytes, but F32"})};
    for (const char* e : {kMinusOne, kInt32Min, kInt64Min, "TwoTo64"}) shape.except[e] = negative;
    for (const char* e : {kInt64Max, "Uint64Max"}) {
      shape.except[e] = refused({"tensor '{tensor}'", "is too large"});
    }
    fields.push_back(shape);
  }
  JsonField begin{"data_offsets[0]", "data_offsets", 0, &number_edges(),
                  refused({"tensor '{tensor}'", "end before they begin"})};
  begin.except[kZero] = refused({"tensor '{tensor}'", "data_offsets [0, ", "bytes, but F32"});
  JsonField end{"data_offsets[1]", "data_offsets", 1, &number_edges(),
                refused({"tensor '{tensor}'", "run past the end of the data section"})};
  // An empty range: before its begin, or, for the first tensor, too few bytes.
  end.except[kZero] = refused({"tensor '{tensor}'", "data_offsets [", ", 0]"});
  for (JsonField* f : {&begin, &end}) {
    for (const char* e : {kMinusOne, kInt32Min, kInt64Min, "TwoTo64"}) f->except[e] = negative;
  }
  fields.push_back(begin);
  fields.push_back(end);
  return fields;
}

std::vector<size_t> json_cases() {
  std::vector<size_t> cases(json_fields().size());
  for (size_t f = 0; f < cases.size(); ++f) cases[f] = f;
  return cases;
}

std::string json_case_name(const ::testing::TestParamInfo<size_t>& info) {
  return test_name_part(json_fields()[info.param].name);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

class SafetensorsJsonEdges : public testing::TempDirTest,
                             public ::testing::WithParamInterface<size_t> {};

TEST_P(SafetensorsJsonEdges, EveryEdgeOfEveryTensorRefusedNamingTheTensorOrLegitimate) {
  const JsonField field = json_fields()[GetParam()];
  static const Bytes valid = make_safetensors(dir_.string());
  uint64_t length;
  std::memcpy(&length, valid.data(), 8);
  const json header = json::parse(valid.begin() + 8, valid.begin() + 8 + long(length));
  const Bytes data(valid.begin() + 8 + long(length), valid.end());
  const std::string path = (dir_ / "edited.safetensors").string();
  for (const JsonEdge& edge : *field.edges) {
    int edited = 0;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      json value = edge.value;
      const json& list = entry[field.key];
      if (field.index >= 0 && size_t(field.index) >= list.size()) continue;  // a 1-D tensor
      if (value.is_null()) {
        // Just past the data section: its size + 1 for an offset; for a dimension, the number of
        // rows of the other dimensions' size that the data section cannot hold.
        uint64_t other = 4;  // F32
        for (size_t d = 0; d < list.size(); ++d) {
          if (int(d) != field.index) other *= list[d].get<uint64_t>();
        }
        value = field.key == "shape" ? data.size() / other + 1 : data.size() + 1;
      }
      json changed = header;
      json& target = changed[name][field.key];
      (field.index < 0 ? target : target[size_t(field.index)]) = value;
      const std::string text = changed.dump();
      const uint64_t n = text.size();
      Bytes file(8 + n + data.size());
      std::memcpy(file.data(), &n, 8);
      std::memcpy(file.data() + 8, text.data(), n);
      std::copy(data.begin(), data.end(), file.begin() + 8 + long(n));
      write_bytes(path, file);
      const auto special = field.except.find(edge.label);
      EdgeOutcome outcome = special != field.except.end() ? special->second : field.outcome;
      for (std::string& w : outcome.words) w = replace_all(w, "{tensor}", name);
      if (changed == header) outcome = legitimate("the field's own value: the file is unchanged");
      SCOPED_TRACE(name + " " + field.name + " = " + edge.label + " (" + value.dump() + ")");
      // The loader shows a dtype's string as it is, any other value as JSON.
      expect_outcome(load_hf_gpt2, path, outcome,
                     value.is_string() ? value.get<std::string>() : value.dump());
      ++edited;
    }
    EXPECT_GT(edited, 0) << field.name << " = " << edge.label << ": no tensor has the field";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryTensor, SafetensorsJsonEdges, ::testing::ValuesIn(json_cases()),
                         json_case_name);

// ---------------------------------------------------------------------------------------------------
// --resume and the 64-bit step: a state at a step past what this trainer counts in (int, as
// --steps) is refused, not wrapped; a state whose step is not the one its name says is not the
// checkpoint of that step.

class HeaderEdgesResume : public TempDirTest {
 protected:
  // A checkpoint folder holding the tiny fixture's model and a state at `step` named `name_step`.
  void write_checkpoint(int64_t step, int64_t name_step) {
    const ModelConfig& c = tiny_model_config();
    fs::create_directories(path("ck"));
    fs::copy_file(fixture("tiny", "model.bin"), checkpoint_model_path(path("ck"), name_step));
    TrainState s;
    s.config = c;
    s.B = options().batch;
    s.T = options().seq_len;
    s.shuffle = false;
    s.seed = options().seed;
    s.step = step;
    s.adamw_t = step;
    s.data.rng_state = 1;
    s.data.shard_order = {0};
    const size_t P = ParameterLayout(c).total();
    const std::vector<float> zeros(P, 0.0f);
    save_train_state(checkpoint_state_path(path("ck"), name_step), s, zeros, zeros, zeros);
  }
  TrainOptions options() const {
    TrainOptions o;
    o.train_data = fixture("tiny", "train.bin");
    o.batch = 2;
    o.seq_len = 13;
    o.shuffle = false;
    o.resume = path("ck");
    return o;
  }
  std::string resume_error() {
    try {
      Trainer t(options());
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(HeaderEdgesResume, AStepPastTheTrainersCountIsRefused) {
  for (int64_t step : {int64_t(INT_MAX) + 1, INT64_MAX}) {
    fs::remove_all(path("ck"));
    write_checkpoint(step, step);
    const std::string e = resume_error();
    EXPECT_NE(e.find("at step " + std::to_string(step)), std::string::npos) << e;
    EXPECT_NE(e.find("past the last step --steps can name (2147483647)"), std::string::npos) << e;
  }
}

TEST_F(HeaderEdgesResume, AStateOfAnotherStepThanItsNameIsNotThatCheckpoint) {
  write_checkpoint(11, 10);
  const std::string e = resume_error();
  EXPECT_NE(e.find(checkpoint_state_path(path("ck"), 10) +
                   ": holds the state of step 11, but its name says step 10"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace llmcpu
