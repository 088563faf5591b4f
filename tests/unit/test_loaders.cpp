// The llm.c file loaders on good and bad input: checkpoints (fp32 v3 and bf16 v5), token shards and
// debug states, and llmcpu's training states. A bad file must give a FileError whose message names
// the path and the problem (the field, the expected value or byte count), never a crash; the
// sanitizer build runs these too. Also the atomic writer: an interrupted write leaves the old file
// as it was and no temporary behind. Files are written into a fresh folder per test; the committed
// fixtures are not touched here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/debug_state.h"
#include "core/io/token_shard.h"
#include "core/io/train_state.h"
#include "core/model/config.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "core/util/file.h"
#include "simd/error.h"
#include "tests/common/temp_files.h"
#include "tests/common/tiny_config.h"

namespace llmcpu {
namespace {

using testing::append;
using testing::Bytes;
using testing::expect_file_error;
using testing::read_bytes;
using testing::TempDirTest;
using testing::tiny_config;  // a tiny, ragged model: head size 4, Vp > V
using testing::write_bytes;
namespace fs = std::filesystem;

// The 1024-byte llm.c header, given its first ints.
Bytes header(std::initializer_list<int32_t> fields) {
  std::vector<int32_t> h(kLlmcHeaderInts, 0);
  std::copy(fields.begin(), fields.end(), h.begin());
  Bytes b(kLlmcHeaderBytes);
  std::memcpy(b.data(), h.data(), kLlmcHeaderBytes);
  return b;
}

void set_int(Bytes& file, int index, int32_t value) {
  std::memcpy(file.data() + 4 * index, &value, 4);
}

// Lengths to cut a file of `size` bytes to: the first bytes, both sides of the header's end, every
// 37th byte, and the last few.
std::vector<size_t> cut_lengths(size_t size) {
  std::vector<size_t> n;
  for (size_t i = 0; i < size; ++i) {
    if (i < 16 || (i + 16 >= kLlmcHeaderBytes && i <= kLlmcHeaderBytes + 16) || i % 37 == 0 ||
        i + 4 >= size) {
      n.push_back(i);
    }
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------
// Checkpoints

class LoaderCheckpoint : public TempDirTest {
 protected:
  // A version-3 checkpoint of a GPT-2-initialised tiny model, as bytes.
  Bytes good_checkpoint() {
    Model model(tiny_config());
    init_model(model, 42);
    save_checkpoint(path("good.bin"), model);
    return read_bytes(path("good.bin"));
  }
  size_t fp32_bytes() const {
    return kLlmcHeaderBytes + ParameterLayout(tiny_config()).total() * 4;
  }
};

TEST_F(LoaderCheckpoint, Fp32RoundTrip) {
  Model model(tiny_config());
  init_model(model, 7);
  save_checkpoint(path("model.bin"), model);
  EXPECT_EQ(fs::file_size(path("model.bin")), fp32_bytes());

  const CheckpointInfo info = read_checkpoint_header(path("model.bin"));
  EXPECT_EQ(info.version, kCheckpointFp32);
  EXPECT_EQ(info.config, tiny_config());

  Model loaded(tiny_config());
  load_checkpoint(path("model.bin"), loaded);
  ASSERT_EQ(loaded.num_parameters(), model.num_parameters());
  EXPECT_EQ(std::memcmp(loaded.params_flat(), model.params_flat(), model.num_parameters() * 4), 0);
}

TEST_F(LoaderCheckpoint, Bf16Version5WidensExactly) {
  const ModelConfig c = tiny_config();
  const size_t P = ParameterLayout(c).total();
  Bytes file = header({kCheckpointMagic, kCheckpointBf16, c.max_seq_len, c.vocab_size, c.num_layers,
                       c.num_heads, c.channels, c.padded_vocab_size});
  std::vector<uint16_t> bf16(P);
  std::mt19937 rng(3);
  for (uint16_t& b : bf16) b = static_cast<uint16_t>(rng());
  // 1.0, -0.0, +inf, the smallest subnormal, the largest finite, a NaN.
  const uint16_t special[] = {0x3f80, 0x8000, 0x7f80, 0x0001, 0x7f7f, 0x7fc1};
  std::copy(std::begin(special), std::end(special), bf16.begin());
  append(file, bf16.data(), P);
  write_bytes(path("bf16.bin"), file);

  EXPECT_EQ(read_checkpoint_header(path("bf16.bin")).version, kCheckpointBf16);
  Model model(c);
  load_checkpoint(path("bf16.bin"), model);
  for (size_t i = 0; i < P; ++i) {
    uint32_t bits;
    std::memcpy(&bits, model.params_flat() + i, 4);
    ASSERT_EQ(bits, uint32_t(bf16[i]) << 16) << "parameter " << i;
  }
  EXPECT_EQ(model.params_flat()[0], 1.0f);
}

TEST_F(LoaderCheckpoint, Bf16HeaderWithFp32BodyIsRejected) {
  Bytes file = good_checkpoint();
  set_int(file, 1, kCheckpointBf16);
  write_bytes(path("v5.bin"), file);
  const size_t expected = kLlmcHeaderBytes + ParameterLayout(tiny_config()).total() * 2;
  expect_file_error([&] { read_checkpoint_header(path("v5.bin")); }, path("v5.bin"),
                    {"version 5", std::to_string(expected) + " bytes"});
}

TEST_F(LoaderCheckpoint, EmptyFile) {
  write_bytes(path("empty.bin"), {});
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(path("empty.bin"), model); }, path("empty.bin"),
                    {"too short", "0 bytes", "1024"});
}

TEST_F(LoaderCheckpoint, ShorterThanHeader) {
  Bytes file = good_checkpoint();
  file.resize(1000);
  write_bytes(path("short.bin"), file);
  expect_file_error([&] { read_checkpoint_header(path("short.bin")); }, path("short.bin"),
                    {"too short", "1000 bytes", "1024"});
}

TEST_F(LoaderCheckpoint, TruncatedBody) {
  Bytes file = good_checkpoint();
  file.resize(file.size() - 6);
  write_bytes(path("cut.bin"), file);
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(path("cut.bin"), model); }, path("cut.bin"),
                    {"truncated", std::to_string(file.size()) + " bytes",
                     std::to_string(fp32_bytes()) + " bytes", describe(tiny_config())});
}

TEST_F(LoaderCheckpoint, ExtraBytes) {
  Bytes file = good_checkpoint();
  file.push_back(0);
  write_bytes(path("long.bin"), file);
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(path("long.bin"), model); }, path("long.bin"),
                    {std::to_string(fp32_bytes() + 1) + " bytes", std::to_string(fp32_bytes())});
  try {
    load_checkpoint(path("long.bin"), model);
  } catch (const FileError& e) {
    EXPECT_EQ(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST_F(LoaderCheckpoint, BadMagic) {
  Bytes file = good_checkpoint();
  set_int(file, 0, kShardMagic);  // a token shard's magic: the wrong kind of file
  write_bytes(path("magic.bin"), file);
  expect_file_error([&] { read_checkpoint_header(path("magic.bin")); }, path("magic.bin"),
                    {"magic", std::to_string(kShardMagic), std::to_string(kCheckpointMagic)});
}

TEST_F(LoaderCheckpoint, Version4IsRejected) {
  Bytes file = good_checkpoint();
  set_int(file, 1, 4);
  write_bytes(path("v4.bin"), file);
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(path("v4.bin"), model); }, path("v4.bin"),
                    {"version 4", "3", "5"});
}

TEST_F(LoaderCheckpoint, InvalidHeaderFields) {
  struct Case {
    const char* what;
    int index;  // header int: 2 maxT, 3 V, 4 L, 5 NH, 6 C, 7 Vp
    int32_t value;
    const char* expected_in_message;
  };
  const Case cases[] = {
      {"C not a multiple of NH", 6, 13, "multiple of NH"},
      {"zero layers", 4, 0, "L must be"},
      {"negative layers", 4, -2, "L must be"},
      {"zero heads", 5, 0, "NH must be"},
      {"Vp below V", 7, 10, "Vp must be"},
      {"negative Vp", 7, -16, "Vp must be"},
      {"zero V", 3, 0, "V must be"},
      {"negative maxT", 2, -8, "maxT must be"},
      {"huge maxT", 2, INT32_MAX, "maxT must be"},
      {"huge V", 3, INT32_MAX, "V must be"},
      {"huge C", 6, INT32_MAX, "C must be"},
      {"huge L", 4, INT32_MAX, "L must be"},
      {"INT_MIN C", 6, INT32_MIN, "C must be"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Bytes file = good_checkpoint();
    set_int(file, k.index, k.value);
    write_bytes(path("bad.bin"), file);
    expect_file_error([&] { read_checkpoint_header(path("bad.bin")); }, path("bad.bin"),
                      {"invalid header", k.expected_in_message});
    Model model(tiny_config());
    expect_file_error([&] { load_checkpoint(path("bad.bin"), model); }, path("bad.bin"),
                      {"invalid header", k.expected_in_message});
  }
  // Every field in range, but together 12 L C^2 ~ 2^49 parameters: refused before any size is used.
  Bytes file = good_checkpoint();
  set_int(file, 4, 4096);   // L
  set_int(file, 5, 1);      // NH
  set_int(file, 6, 65536);  // C
  write_bytes(path("huge.bin"), file);
  expect_file_error([&] { read_checkpoint_header(path("huge.bin")); }, path("huge.bin"),
                    {"invalid header", "too many parameters"});
}

TEST_F(LoaderCheckpoint, ModelOfAnotherShape) {
  good_checkpoint();
  ModelConfig other = tiny_config();
  other.num_layers = 3;
  Model model(other);
  expect_file_error([&] { load_checkpoint(path("good.bin"), model); }, path("good.bin"),
                    {"shape", describe(tiny_config()), describe(other)});
}

TEST_F(LoaderCheckpoint, DirectoryIsRejected) {
  const std::string dir = dir_.string();
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(dir, model); }, dir, {"not a regular file"});
}

TEST_F(LoaderCheckpoint, MissingFile) {
  Model model(tiny_config());
  expect_file_error([&] { load_checkpoint(path("nope.bin"), model); }, path("nope.bin"),
                    {"cannot open", "No such file"});
}

// Never a crash: every cut of a good file, and every header field set to hostile values, gives a
// FileError (or, for values that happen to describe the same file, a clean load).
TEST_F(LoaderCheckpoint, EveryTruncationAndHostileHeaderFails) {
  const Bytes good = good_checkpoint();
  Model model(tiny_config());
  for (size_t n : cut_lengths(good.size())) {
    write_bytes(path("cut.bin"), Bytes(good.begin(), good.begin() + (long)n));
    EXPECT_THROW(load_checkpoint(path("cut.bin"), model), FileError) << n << " bytes";
  }
  const int32_t hostile[] = {0,         -1,       1, 2, 3, 5, 4097, 65537, 1 << 24, (1 << 24) + 1,
                             INT32_MAX, INT32_MIN};
  for (int index = 0; index < 8; ++index) {
    for (int32_t value : hostile) {
      Bytes file = good;
      set_int(file, index, value);
      write_bytes(path("hostile.bin"), file);
      int32_t original;
      std::memcpy(&original, good.data() + 4 * index, 4);
      try {
        load_checkpoint(path("hostile.bin"), model);
        EXPECT_EQ(value, original) << "field " << index << ": a changed header loaded";
      } catch (const FileError&) {
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Token shards

class LoaderTokenShard : public TempDirTest {
 protected:
  // Every token of the shard through at(), and the same through copy() must agree.
  static std::vector<uint32_t> tokens_of(const TokenShard& shard) {
    std::vector<uint32_t> t(shard.size());
    for (size_t i = 0; i < t.size(); ++i) t[i] = shard.at(i);
    std::vector<int> copied(shard.size());
    shard.copy(0, copied.size(), copied.data());
    EXPECT_EQ(std::vector<uint32_t>(copied.begin(), copied.end()), t);
    return t;
  }
  // llm.c's write_datafile, written out here independently of write_token_shard: the int32[256]
  // header {magic, version, ntok}, then the ids as `Id` (uint16_t or uint32_t).
  template <class Id>
  void write_llmc_shard(const std::string& file, int32_t magic, int32_t version,
                        const std::vector<uint32_t>& ids) {
    int32_t head[256] = {magic, version, static_cast<int32_t>(ids.size())};
    std::FILE* f = std::fopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr) << file;
    ASSERT_EQ(std::fwrite(head, sizeof(int32_t), 256, f), 256u);
    for (uint32_t id : ids) {
      const Id narrow = static_cast<Id>(id);
      ASSERT_EQ(std::fwrite(&narrow, sizeof(Id), 1, f), 1u);
    }
    ASSERT_EQ(std::fclose(f), 0);
  }
};

TEST_F(LoaderTokenShard, RoundTrip) {
  const std::vector<uint16_t> tokens = {0, 1, 50256, 65535, 7, 7, 300};
  write_token_shard(path("shard.bin"), tokens);
  EXPECT_EQ(fs::file_size(path("shard.bin")), kLlmcHeaderBytes + 2 * tokens.size());
  const TokenShard shard(path("shard.bin"));
  EXPECT_EQ(shard.path(), path("shard.bin"));
  EXPECT_EQ(shard.token_bytes(), 2);
  ASSERT_EQ(shard.size(), tokens.size());
  EXPECT_EQ(tokens_of(shard), std::vector<uint32_t>(tokens.begin(), tokens.end()));
  EXPECT_NO_THROW(shard.check_vocab(65536));
}

TEST_F(LoaderTokenShard, Uint32RoundTrip) {
  const std::vector<uint32_t> tokens = {0, 1, 65535, 65536, 128255, 100000, 7, 0x7ffffffe};
  write_token_shard(path("shard.bin"), tokens, 4);
  EXPECT_EQ(fs::file_size(path("shard.bin")), kLlmcHeaderBytes + 4 * tokens.size());
  const TokenShard shard(path("shard.bin"));
  EXPECT_EQ(shard.token_bytes(), 4);
  ASSERT_EQ(shard.size(), tokens.size());
  EXPECT_EQ(tokens_of(shard), tokens);
  std::vector<int> middle(3);
  shard.copy(3, 3, middle.data());
  EXPECT_EQ(middle, (std::vector<int>{65536, 128255, 100000}));
  EXPECT_NO_THROW(shard.check_vocab(INT_MAX));
  // Ids that fit 16 bits written with either width read back the same.
  const std::vector<uint32_t> small = {3, 65535, 0, 50256};
  write_token_shard(path("w2.bin"), small, 2);
  write_token_shard(path("w4.bin"), small, 4);
  EXPECT_EQ(TokenShard(path("w2.bin")).token_bytes(), 2);
  EXPECT_EQ(tokens_of(TokenShard(path("w2.bin"))), small);
  EXPECT_EQ(tokens_of(TokenShard(path("w4.bin"))), small);
}

TEST_F(LoaderTokenShard, EmptyShardRoundTrip) {
  write_token_shard(path("empty.bin"), {});
  write_token_shard(path("empty4.bin"), std::vector<uint32_t>{}, 4);
  for (const char* name : {"empty.bin", "empty4.bin"}) {
    const TokenShard shard(path(name));
    EXPECT_EQ(shard.size(), 0u);
    EXPECT_NO_THROW(shard.check_vocab(1));
  }
}

// The bytes are llm.c's, for both widths: its header and its ids, nothing else.
TEST_F(LoaderTokenShard, BytesEqualLlmcLayout) {
  const std::vector<uint32_t> ids = {128000, 9906, 11, 1917, 0, 65535, 65536, 128255, 17};
  write_llmc_shard<uint32_t>(path("llmc32.bin"), 20240801, 7, ids);
  write_token_shard(path("ours32.bin"), ids, 4);
  EXPECT_EQ(read_bytes(path("ours32.bin")), read_bytes(path("llmc32.bin")));
  const std::vector<uint32_t> gpt2 = {50256, 15496, 11, 995, 0, 65535};
  write_llmc_shard<uint16_t>(path("llmc16.bin"), 20240520, 1, gpt2);
  write_token_shard(path("ours16.bin"), gpt2, 2);
  EXPECT_EQ(read_bytes(path("ours16.bin")), read_bytes(path("llmc16.bin")));
  // And a file llm.c wrote reads as its ids.
  EXPECT_EQ(tokens_of(TokenShard(path("llmc32.bin"))), ids);
}

TEST_F(LoaderTokenShard, WriteRefusesIdsThatDoNotFit) {
  try {
    write_token_shard(path("wide.bin"), std::vector<uint32_t>{1, 2, 65536}, 2);
    ADD_FAILURE() << "an id past 65535 written into a uint16 shard";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("token 65536 at position 2"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path("wide.bin")));
  EXPECT_THROW(write_token_shard(path("three.bin"), std::vector<uint32_t>{1}, 3), UsageError);
}

TEST_F(LoaderTokenShard, BadMagic) {
  Bytes file = header({kCheckpointMagic, kShardVersion, 0});
  write_bytes(path("magic.bin"), file);
  expect_file_error([&] { TokenShard s(path("magic.bin")); }, path("magic.bin"),
                    {"magic", std::to_string(kCheckpointMagic), std::to_string(kShardMagic),
                     std::to_string(kShard32Magic), "version 1", "version 7"});
}

TEST_F(LoaderTokenShard, BadVersion) {
  write_bytes(path("v2.bin"), header({kShardMagic, 2, 0}));
  expect_file_error([&] { TokenShard s(path("v2.bin")); }, path("v2.bin"),
                    {"version 2", "expected 1"});
}

// Each magic takes its own version only: a uint32 magic with the uint16 version, and the reverse.
TEST_F(LoaderTokenShard, VersionOfTheOtherMagic) {
  write_bytes(path("m32v1.bin"), header({kShard32Magic, kShardVersion, 0}));
  expect_file_error([&] { TokenShard s(path("m32v1.bin")); }, path("m32v1.bin"),
                    {"version 1 for magic 20240801", "expected 7"});
  write_bytes(path("m16v7.bin"), header({kShardMagic, kShard32Version, 0}));
  expect_file_error([&] { TokenShard s(path("m16v7.bin")); }, path("m16v7.bin"),
                    {"version 7 for magic 20240520", "expected 1"});
}

TEST_F(LoaderTokenShard, NegativeCount) {
  write_bytes(path("neg.bin"), header({kShardMagic, kShardVersion, -5}));
  expect_file_error([&] { TokenShard s(path("neg.bin")); }, path("neg.bin"), {"negative", "-5"});
  write_bytes(path("neg4.bin"), header({kShard32Magic, kShard32Version, -5}));
  expect_file_error([&] { TokenShard s(path("neg4.bin")); }, path("neg4.bin"), {"negative", "-5"});
}

TEST_F(LoaderTokenShard, Truncated) {
  Bytes file = header({kShardMagic, kShardVersion, 100});
  file.resize(file.size() + 2 * 99 + 1);
  write_bytes(path("cut.bin"), file);
  expect_file_error([&] { TokenShard s(path("cut.bin")); }, path("cut.bin"),
                    {"truncated", "100 tokens", std::to_string(kLlmcHeaderBytes + 200) + " bytes",
                     std::to_string(file.size()) + " bytes"});
}

// For each width: one byte short is truncated, one byte over is trailing bytes; both refused with
// the sizes. A uint32 shard's length as a uint16 one's (2 bytes a token) is refused too.
TEST_F(LoaderTokenShard, LengthMustMatchTheWidth) {
  for (const auto& [magic, version, width] :
       {std::tuple{kShardMagic, kShardVersion, 2}, std::tuple{kShard32Magic, kShard32Version, 4}}) {
    const size_t exact = kLlmcHeaderBytes + size_t(width) * 10;
    const size_t other_width = kLlmcHeaderBytes + size_t(6 - width) * 10;  // 4 bytes a token for 2
    for (const size_t size : {exact - 1, exact + 1, other_width}) {
      Bytes file = header({magic, version, 10});
      file.resize(size);
      write_bytes(path("bad.bin"), file);
      expect_file_error(
          [&] { TokenShard s(path("bad.bin")); }, path("bad.bin"),
          {"10 tokens of " + std::to_string(width) + " bytes", std::to_string(exact) + " bytes",
           "file is " + std::to_string(size) + " bytes", size < exact ? "(truncated?)" : "bytes"});
    }
    Bytes file = header({magic, version, 10});
    file.resize(exact);
    write_bytes(path("good.bin"), file);
    EXPECT_EQ(TokenShard(path("good.bin")).size(), 10u);
  }
}

TEST_F(LoaderTokenShard, ShorterThanHeaderAndEmpty) {
  write_bytes(path("empty.bin"), {});
  expect_file_error([&] { TokenShard s(path("empty.bin")); }, path("empty.bin"),
                    {"too short", "token shard", "0 bytes"});
  write_bytes(path("short.bin"), Bytes(12, 0));
  expect_file_error([&] { TokenShard s(path("short.bin")); }, path("short.bin"),
                    {"too short", "12 bytes"});
}

TEST_F(LoaderTokenShard, CheckVocabNamesTokenAndPosition) {
  write_token_shard(path("shard.bin"), {5, 50256, 50257, 3, 60000});
  const TokenShard shard(path("shard.bin"));
  EXPECT_NO_THROW(shard.check_vocab(60001));
  expect_file_error([&] { shard.check_vocab(50257); }, path("shard.bin"),
                    {"token 50257 at position 2", "0..50256"});
}

TEST_F(LoaderTokenShard, CheckVocabOfUint32Shard) {
  write_token_shard(path("shard.bin"), std::vector<uint32_t>{5, 128255, 70000, 128256, 0xffffffffu},
                    4);
  const TokenShard shard(path("shard.bin"));
  expect_file_error([&] { shard.check_vocab(128256); }, path("shard.bin"),
                    {"token 128256 at position 3", "0..128255"});
  expect_file_error([&] { shard.check_vocab(65536); }, path("shard.bin"),
                    {"token 128255 at position 1", "0..65535"});
  // The largest uint32 is no negative number: refused as itself by any vocabulary.
  expect_file_error([&] { shard.check_vocab(INT_MAX); }, path("shard.bin"),
                    {"token 4294967295 at position 4"});
}

TEST_F(LoaderTokenShard, CopyPastTheEndIsRefused) {
  write_token_shard(path("shard.bin"), std::vector<uint32_t>{1, 2, 3}, 4);
  const TokenShard shard(path("shard.bin"));
  std::vector<int> out(4);
  EXPECT_NO_THROW(shard.copy(3, 0, out.data()));
  EXPECT_THROW(shard.copy(0, 4, out.data()), ShapeError);
  EXPECT_THROW(shard.copy(4, 0, out.data()), ShapeError);
  EXPECT_THROW(shard.copy(2, SIZE_MAX, out.data()), ShapeError);
}

// ---------------------------------------------------------------------------------------------------
// Debug states

class LoaderDebugState : public TempDirTest {
 protected:
  static constexpr int B = 2, T = 5;
  DebugState make_state() const {
    const ModelConfig c = tiny_config();
    DebugState s;
    s.B = B;
    s.T = T;
    std::mt19937 rng(9);
    for (int i = 0; i < B * T; ++i) {
      s.inputs.push_back(int(rng() % c.vocab_size));
      s.targets.push_back(int(rng() % c.vocab_size));
    }
    std::normal_distribution<float> normal;
    s.logits.resize((size_t)B * T * c.vocab_size);
    for (float& x : s.logits) x = normal(rng);
    s.loss = 2.5f;
    s.grads.resize(ParameterLayout(c).total());
    for (float& x : s.grads) x = normal(rng);
    return s;
  }
  // A good state file as bytes.
  Bytes good_state() {
    save_debug_state(path("good.bin"), tiny_config(), make_state());
    return read_bytes(path("good.bin"));
  }
  std::function<void()> load(const std::string& name) const {
    return [p = path(name)] { load_debug_state(p, tiny_config()); };
  }
};

TEST_F(LoaderDebugState, RoundTrip) {
  const DebugState s = make_state();
  save_debug_state(path("state.bin"), tiny_config(), s);
  const DebugState r = load_debug_state(path("state.bin"), tiny_config());
  EXPECT_EQ(r.B, B);
  EXPECT_EQ(r.T, T);
  EXPECT_EQ(r.inputs, s.inputs);
  EXPECT_EQ(r.targets, s.targets);
  EXPECT_EQ(r.logits, s.logits);
  EXPECT_EQ(r.loss, s.loss);
  EXPECT_EQ(r.grads, s.grads);
}

TEST_F(LoaderDebugState, BadMagic) {
  Bytes file = good_state();
  set_int(file, 0, kCheckpointMagic);
  write_bytes(path("magic.bin"), file);
  expect_file_error(load("magic.bin"), path("magic.bin"),
                    {"magic", std::to_string(kCheckpointMagic), std::to_string(kDebugStateMagic)});
}

TEST_F(LoaderDebugState, Version1IsExplained) {
  Bytes file = good_state();
  set_int(file, 1, 1);
  write_bytes(path("v1.bin"), file);
  expect_file_error(load("v1.bin"), path("v1.bin"), {"version 1", "expected 2", "padded"});
}

TEST_F(LoaderDebugState, TLongerThanMaxT) {
  Bytes file = good_state();
  set_int(file, 3, tiny_config().max_seq_len + 1);
  write_bytes(path("t.bin"), file);
  expect_file_error(load("t.bin"), path("t.bin"), {"T=9", "maxT=8"});
}

TEST_F(LoaderDebugState, NonPositiveB) {
  for (int32_t b : {0, -3, INT32_MIN}) {
    Bytes file = good_state();
    set_int(file, 2, b);
    write_bytes(path("b.bin"), file);
    expect_file_error(load("b.bin"), path("b.bin"), {"B=" + std::to_string(b)});
  }
}

TEST_F(LoaderDebugState, Truncated) {
  Bytes file = good_state();
  const size_t full = file.size();
  file.resize(full - 4);  // the last gradient
  write_bytes(path("cut.bin"), file);
  expect_file_error(
      load("cut.bin"), path("cut.bin"),
      {"truncated", std::to_string(full - 4) + " bytes", std::to_string(full) + " bytes"});
  write_bytes(path("empty.bin"), {});
  expect_file_error(load("empty.bin"), path("empty.bin"), {"too short", "debug state"});
}

TEST_F(LoaderDebugState, TokenOutsideVocabulary) {
  const int V = tiny_config().vocab_size;
  Bytes file = good_state();
  set_int(file, kLlmcHeaderInts + 3, V);  // inputs[3]
  write_bytes(path("in.bin"), file);
  expect_file_error(load("in.bin"), path("in.bin"), {"input token 11 at position 3", "0..10"});

  file = good_state();
  set_int(file, kLlmcHeaderInts + B * T + 7, -1);  // targets[7]
  write_bytes(path("tgt.bin"), file);
  expect_file_error(load("tgt.bin"), path("tgt.bin"), {"target token -1 at position 7"});
}

TEST_F(LoaderDebugState, EveryTruncationAndHostileHeaderFails) {
  const Bytes good = good_state();
  for (size_t n : cut_lengths(good.size())) {
    write_bytes(path("cut.bin"), Bytes(good.begin(), good.begin() + (long)n));
    EXPECT_THROW(load_debug_state(path("cut.bin"), tiny_config()), FileError) << n << " bytes";
  }
  const int32_t hostile[] = {0, -1, 1, 1 << 20, (1 << 20) + 1, INT32_MAX, INT32_MIN};
  for (int index = 0; index < 4; ++index) {
    for (int32_t value : hostile) {
      Bytes file = good;
      set_int(file, index, value);
      write_bytes(path("hostile.bin"), file);
      EXPECT_THROW(load_debug_state(path("hostile.bin"), tiny_config()), FileError)
          << "field " << index << " = " << value;
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Training states (llmcpu's own format, core/io/train_state.h)

class LoaderTrainState : public TempDirTest {
 protected:
  LoaderTrainState() {
    s_.config = tiny_config();
    s_.B = 2;
    s_.T = 5;
    s_.grad_accum = 3;
    s_.shuffle = true;
    s_.seed = 0x0123456789ABCDEFull;
    s_.precision = Precision::kBf16;
    s_.step = 17;
    s_.adamw_t = 16;
    s_.data.epoch = 2;
    s_.data.rng_state = 0xFEDCBA9876543210ull;
    s_.data.shard = 1;
    s_.data.sample = 4;
    s_.data.shard_order = {1, 0, 2};
    s_.data.sample_order = {3, 1, 4, 0, 2};
    const size_t P = ParameterLayout(s_.config).total();
    std::mt19937 rng(13);
    std::normal_distribution<float> normal;
    for (auto* t : {&params_, &m_, &v_}) {
      t->resize(P);
      for (float& x : *t) x = normal(rng);
    }
  }

  // The checksum of the format comment, byte by byte: little-endian 64-bit words (the last one
  // zero-padded), h = (h ^ word) * 0x9E3779B97F4A7C15, h ^= h >> 32; the value is h ^ (h >> 29).
  static uint64_t reference_checksum(const uint8_t* p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i += 8) {
      uint64_t word = 0;
      for (size_t j = 0; j < 8 && i + j < n; ++j) word |= uint64_t(p[i + j]) << (8 * j);
      h = (h ^ word) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 32;
    }
    return h ^ (h >> 29);
  }
  static void seal(Bytes& payload) {  // appends the checksum of everything before it
    const uint64_t sum = reference_checksum(payload.data(), payload.size());
    append(payload, &sum, 1);
  }

  // The file as the format comment lays it out, written here field by field, checksum included.
  Bytes reference_file(uint32_t version = 3) const {  // a GPT-2's state: version 3
    Bytes f;
    auto put = [&f](auto v) { append(f, &v, 1); };
    put(kTrainStateMagic);
    put(version);
    const ModelConfig& c = s_.config;
    for (int32_t x : {c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads, c.channels,
                      c.padded_vocab_size, s_.B, s_.T, s_.grad_accum}) {
      put(x);
    }
    put(uint8_t(s_.shuffle));
    put(s_.seed);
    if (version >= 2) put(uint8_t(s_.precision == Precision::kBf16));
    put(s_.step);
    put(s_.adamw_t);
    put(s_.data.epoch);
    put(s_.data.rng_state);
    put(s_.data.shard);
    put(s_.data.sample);
    put(uint32_t(s_.data.shard_order.size()));
    append(f, s_.data.shard_order.data(), s_.data.shard_order.size());
    put(uint64_t(s_.data.sample_order.size()));
    append(f, s_.data.sample_order.data(), s_.data.sample_order.size());
    put(uint64_t(params_.size()));
    if (version >= 3) put(uint32_t(0));  // no shards: the tensors follow
    for (const auto* t : {&params_, &m_, &v_}) append(f, t->data(), t->size());
    seal(f);
    return f;
  }

  void save(const std::string& name) const { save_train_state(path(name), s_, params_, m_, v_); }

  // Opens `name` and reads its tensors into buffers that start as `sentinel`; expects a FileError
  // containing `words`, and the buffers untouched.
  void expect_refused(const std::string& name, std::initializer_list<std::string> words) const {
    const size_t P = params_.size();
    std::vector<float> p(P, -7.0f), m(P, -7.0f), v(P, -7.0f);
    expect_file_error(
        [&] {
          const TrainStateFile file(path(name));
          file.read_tensors(p, m, v);
        },
        path(name), words);
    for (const auto* t : {&p, &m, &v}) {
      EXPECT_TRUE(std::all_of(t->begin(), t->end(), [](float x) { return x == -7.0f; }))
          << name << ": a refused file overwrote a destination";
    }
  }

  TrainState s_;
  std::vector<float> params_, m_, v_;
};

TEST_F(LoaderTrainState, WritesTheDocumentedBytesAndReadsThemBack) {
  save("state.bin");
  EXPECT_EQ(read_bytes(path("state.bin")), reference_file());
  const TrainStateFile file(path("state.bin"));
  const TrainState& r = file.state();
  EXPECT_EQ(r.config, s_.config);
  EXPECT_EQ(r.B, s_.B);
  EXPECT_EQ(r.T, s_.T);
  EXPECT_EQ(r.grad_accum, s_.grad_accum);
  EXPECT_EQ(r.shuffle, s_.shuffle);
  EXPECT_EQ(r.seed, s_.seed);
  EXPECT_EQ(r.precision, s_.precision);
  EXPECT_EQ(r.step, s_.step);
  EXPECT_EQ(r.adamw_t, s_.adamw_t);
  EXPECT_EQ(r.data.epoch, s_.data.epoch);
  EXPECT_EQ(r.data.rng_state, s_.data.rng_state);
  EXPECT_EQ(r.data.shard, s_.data.shard);
  EXPECT_EQ(r.data.sample, s_.data.sample);
  EXPECT_EQ(r.data.shard_order, s_.data.shard_order);
  EXPECT_EQ(r.data.sample_order, s_.data.sample_order);
  ASSERT_EQ(file.num_parameters(), params_.size());
  const size_t P = params_.size();
  std::vector<float> p(P), m(P), v(P);
  file.read_tensors(p, m, v);
  EXPECT_EQ(p, params_);
  EXPECT_EQ(m, m_);
  EXPECT_EQ(v, v_);
  EXPECT_EQ(load_train_state(path("state.bin")).step, s_.step);
}

TEST_F(LoaderTrainState, Version1ReadsAsFp32) {
  write_bytes(path("v1.bin"), reference_file(1));
  const TrainStateFile file(path("v1.bin"));
  EXPECT_EQ(file.state().precision, Precision::kFp32);
  EXPECT_EQ(file.state().step, s_.step);
  std::vector<float> p(params_.size()), m(p.size()), v(p.size());
  file.read_tensors(p, m, v);
  EXPECT_EQ(v, v_);
}

TEST_F(LoaderTrainState, CorruptFileIsRefusedAndOverwritesNothing) {
  const Bytes good = reference_file();
  const size_t tensors = good.size() - 8 - 3 * 4 * params_.size();
  // One bit flipped in the weights, in the last moment, in the step count, in the checksum itself.
  for (size_t at : {tensors + 5, good.size() - 9, size_t(54), good.size() - 1}) {
    Bytes bad = good;
    bad[at] ^= 0x10;
    write_bytes(path("bad.bin"), bad);
    SCOPED_TRACE("byte " + std::to_string(at));
    expect_refused("bad.bin", {"checksum mismatch", "corrupt"});
  }
}

TEST_F(LoaderTrainState, TruncatedFileIsRefusedAndOverwritesNothing) {
  const Bytes good = reference_file();
  for (size_t n : cut_lengths(good.size())) {
    write_bytes(path("cut.bin"), Bytes(good.begin(), good.begin() + n));
    SCOPED_TRACE(std::to_string(n) + " bytes");
    expect_refused("cut.bin", {});
  }
  // Cut inside the moments but sealed with a valid checksum: the sizes still do not add up.
  Bytes short_moments(good.begin(), good.end() - 8 - 4);
  seal(short_moments);
  write_bytes(path("short.bin"), short_moments);
  expect_refused("short.bin", {"truncated", "ends inside the AdamW moments"});
  // A float too many.
  Bytes longer(good.begin(), good.end() - 8);
  longer.insert(longer.end(), 4, 0);
  seal(longer);
  write_bytes(path("long.bin"), longer);
  expect_refused("long.bin", {"length mismatch", "4 unexpected bytes"});
}

TEST_F(LoaderTrainState, BadHeaderIsRefused) {
  Bytes f = reference_file();
  f[0] ^= 1;
  write_bytes(path("magic.bin"), f);
  expect_refused("magic.bin", {"bad magic", "LCTS"});
  f = reference_file(7);
  write_bytes(path("v7.bin"), f);
  expect_refused("v7.bin", {"version 7", "expected 1 to 6"});
  // A parameter count that is not the model's (sealed, so the count itself is what is refused).
  f = reference_file();
  f.resize(f.size() - 8);
  const size_t count_at = f.size() - 3 * 4 * params_.size() - 4 - 8;  // P, then the shard count
  const uint64_t P = params_.size() + 1;
  std::memcpy(f.data() + count_at, &P, 8);
  seal(f);
  write_bytes(path("count.bin"), f);
  expect_refused("count.bin", {"holds " + std::to_string(P) + " parameters"});
}

TEST_F(LoaderTrainState, TensorSizesAreChecked) {
  std::vector<float> short_m(m_.begin(), m_.end() - 1);
  EXPECT_THROW(save_train_state(path("state.bin"), s_, params_, short_m, v_), Error);
  EXPECT_FALSE(fs::exists(path("state.bin")));
  save("state.bin");
  const TrainStateFile file(path("state.bin"));
  std::vector<float> p(params_.size()), v(params_.size());
  EXPECT_THROW(file.read_tensors(p, short_m, v), Error);
}

// ---------------------------------------------------------------------------------------------------
// Atomic writing

class AtomicWrite : public TempDirTest {};

TEST_F(AtomicWrite, UncommittedWriterLeavesFileUntouched) {
  Model model(tiny_config());
  init_model(model, 1);
  save_checkpoint(path("model.bin"), model);
  const Bytes before = read_bytes(path("model.bin"));
  {
    AtomicFileWriter writer(path("model.bin"));
    const Bytes junk(5000, 0xAB);
    writer.write(junk.data(), junk.size());
    EXPECT_EQ(listing().size(), 2u) << "the temporary file should exist while writing";
    EXPECT_EQ(read_bytes(path("model.bin")), before);
  }  // destroyed without commit(): an interrupted save
  EXPECT_EQ(read_bytes(path("model.bin")), before);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.bin"}) << "a temporary file was left behind";
  Model loaded(tiny_config());
  load_checkpoint(path("model.bin"), loaded);
}

TEST_F(AtomicWrite, CommitReplacesFile) {
  write_bytes(path("f.bin"), Bytes(100, 1));
  {
    AtomicFileWriter writer(path("f.bin"));
    const Bytes data = {1, 2, 3};
    writer.write(data.data(), data.size());
    writer.commit();
  }
  EXPECT_EQ(read_bytes(path("f.bin")), (Bytes{1, 2, 3}));
  EXPECT_EQ(listing(), std::vector<std::string>{"f.bin"});
}

TEST_F(AtomicWrite, SaveCheckpointReplacesExistingFileCompletely) {
  // A longer file of another kind first: nothing of it may survive.
  write_bytes(path("model.bin"), Bytes(200000, 0xCD));
  Model model(tiny_config());
  init_model(model, 2);
  save_checkpoint(path("model.bin"), model);
  save_checkpoint(path("reference.bin"), model);
  EXPECT_EQ(read_bytes(path("model.bin")), read_bytes(path("reference.bin")));
  // And over a checkpoint of another, bigger model.
  ModelConfig bigger = tiny_config();
  bigger.num_layers = 4;
  Model big(bigger);
  init_model(big, 3);
  save_checkpoint(path("model.bin"), big);
  save_checkpoint(path("model.bin"), model);
  EXPECT_EQ(read_bytes(path("model.bin")), read_bytes(path("reference.bin")));
  EXPECT_EQ(listing(), (std::vector<std::string>{"model.bin", "reference.bin"}));
}

TEST_F(AtomicWrite, FailedSaveNamesPathAndLeavesNothing) {
  Model model(tiny_config());
  // Into a folder that does not exist.
  expect_file_error([&] { save_checkpoint(path("missing/model.bin"), model); },
                    path("missing/model.bin"), {"cannot create", "No such file"});
  // Over a folder: the rename fails; the folder is kept and the temporary removed.
  fs::create_directory(path("taken"));
  write_bytes(path("taken/inside.txt"), {'x'});
  expect_file_error([&] { save_checkpoint(path("taken"), model); }, path("taken"),
                    {"cannot rename"});
  EXPECT_EQ(listing(), std::vector<std::string>{"taken"});
  EXPECT_EQ(read_bytes(path("taken/inside.txt")), Bytes{'x'});
}

}  // namespace
}  // namespace llmcpu
