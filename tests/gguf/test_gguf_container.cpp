// The GGUF container (core/io/gguf.h): the writer's bytes against a file laid out by hand from
// ggml's docs/gguf.md, a round trip of every value type and tensor type, and the reader's
// refusals of broken files (each named, none allocating from a count the file cannot hold).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/io/gguf.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

using testing::Bytes;
using testing::expect_file_error;

// Little-endian bytes as gguf.md lays them out, written here without the writer.
struct Spec {
  Bytes b;
  template <class T>
  Spec& put(T v) {
    testing::append(b, &v, 1);
    return *this;
  }
  Spec& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Spec& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return put<uint32_t>(0x46554747)
        .put<uint32_t>(version)
        .put<uint64_t>(tensors)
        .put<uint64_t>(kvs);
  }
  // A tensor info: name, n_dims, ne..., type, offset.
  Spec& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Spec& pad(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
};

class GgufTest : public testing::TempDirTest {
 protected:
  std::string write(const std::string& name, const Bytes& bytes) {
    const std::string p = path(name);
    testing::write_bytes(p, bytes);
    return p;
  }
};

// One u32 key and one F32 tensor of two elements: the writer's bytes are gguf.md's, byte for byte.
TEST_F(GgufTest, WriterLaysOutTheSpecsBytes) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("llama.block_count", GgufValue::u32(2));
  w.add_tensor("output_norm.weight", {2}, GgmlType::kF32);
  const float values[2] = {1.5f, -2.0f};
  w.write(path("a.gguf"), [&](size_t i, uint8_t* out) {
    ASSERT_EQ(i, 0u);
    std::memcpy(out, values, sizeof values);
  });
  Spec s;
  s.header(1, 2);
  s.str("general.architecture").put<uint32_t>(8).str("llama");
  s.str("llama.block_count").put<uint32_t>(4).put<uint32_t>(2);
  s.tensor("output_norm.weight", {2}, 0, 0).pad(32);
  s.put<float>(1.5f).put<float>(-2.0f);
  EXPECT_EQ(testing::read_bytes(path("a.gguf")), s.b);
}

TEST_F(GgufTest, EveryValueTypeAndTensorTypeComesBack) {
  GgufWriter w(64);
  std::vector<std::pair<std::string, GgufValue>> want;
  auto scalar = [&](const char* key, GgufType t, uint64_t bits) {
    want.emplace_back(key, GgufValue::scalar(t, bits));
  };
  scalar("u8", GgufType::kU8, 200);
  scalar("i8", GgufType::kI8, uint64_t(int64_t(-100)));
  scalar("u16", GgufType::kU16, 60000);
  scalar("i16", GgufType::kI16, uint64_t(int64_t(-30000)));
  scalar("u32", GgufType::kU32, 4000000000u);
  scalar("i32", GgufType::kI32, uint64_t(int64_t(-2000000000)));
  scalar("f32", GgufType::kF32, std::bit_cast<uint32_t>(0.1f));
  scalar("f32_nan", GgufType::kF32, 0x7f800001u);  // a signaling NaN keeps its payload
  scalar("bool", GgufType::kBool, 1);
  scalar("u64", GgufType::kU64, ~uint64_t(0));
  scalar("i64", GgufType::kI64, uint64_t(std::numeric_limits<int64_t>::min()));
  scalar("f64", GgufType::kF64, std::bit_cast<uint64_t>(-1e300));
  want.emplace_back("string", GgufValue::string(std::string("caf\xc3\xa9\0x", 7)));
  want.emplace_back("strings", GgufValue::strings_array({"a", "", "\xe2\x96\x81the"}));
  want.emplace_back("f32s", GgufValue::f32_array({-0.0f, 1e-30f, INFINITY}));
  want.emplace_back("i32s", GgufValue::i32_array({-1, 0, 7}));
  GgufValue empty;
  empty.type = GgufType::kArray, empty.elem = GgufType::kU8;
  want.emplace_back("empty", empty);
  for (const auto& [k, v] : want) w.set(k, v);
  const std::vector<std::pair<GgmlType, std::vector<uint64_t>>> tensors = {
      {GgmlType::kF32, {3}},       {GgmlType::kF16, {5, 2}},         {GgmlType::kBf16, {4, 1, 3}},
      {GgmlType::kQ8_0, {64, 3}},  {GgmlType::kQ4_0, {32, 2, 1, 2}}, {GgmlType::kQ4_K, {512}},
      {GgmlType::kQ6_K, {256, 2}},
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.add_tensor("t" + std::to_string(i), tensors[i].second, tensors[i].first);
  }
  auto byte_of = [](size_t i, size_t j) { return uint8_t(i * 31 + j * 7 + 1); };
  w.write(path("all.gguf"), [&](size_t i, uint8_t* out) {
    for (size_t j = 0; j < w.tensors()[i].bytes; ++j) out[j] = byte_of(i, j);
  });

  const GgufFile f(path("all.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_NE(f.find("general.alignment"), nullptr);
  EXPECT_EQ(f.find("general.alignment")->type, GgufType::kU32);
  EXPECT_EQ(f.find("general.alignment")->bits, 64u);
  ASSERT_EQ(f.metadata().size(), want.size() + 1);
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [key, got] = f.metadata()[i + 1];
    const GgufValue& v = want[i].second;
    SCOPED_TRACE(key);
    EXPECT_EQ(key, want[i].first);
    EXPECT_EQ(got.type, v.type);
    EXPECT_EQ(got.bits, v.bits);
    EXPECT_EQ(got.str, v.str);
    if (v.is_array()) {
      EXPECT_EQ(got.elem, v.elem);
    }
    EXPECT_EQ(got.numbers, v.numbers);
    EXPECT_EQ(got.strings, v.strings);
  }
  EXPECT_EQ(f.find("i8")->as_int(), -100);
  EXPECT_EQ(f.find("i64")->as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.find("f32")->as_double(), double(0.1f));
  EXPECT_EQ(f.find("i32s")->int_at(0), -1);
  EXPECT_TRUE(std::isinf(f.find("f32s")->double_at(2)));

  // Sizes from ggml-common.h's blocks: Q8_0 34 bytes / 32, Q4_0 18 / 32, Q4_K 144 / 256,
  // Q6_K 210 / 256; F16 and BF16 2 bytes, F32 4.
  const uint64_t bytes[] = {12, 20, 24, 6 * 34, 4 * 18, 2 * 144, 2 * 210};
  ASSERT_EQ(f.tensors().size(), tensors.size());
  EXPECT_EQ(f.data_offset() % 64, 0u);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, "t" + std::to_string(i));
    EXPECT_EQ(t.type, tensors[i].first);
    EXPECT_EQ(t.ne, tensors[i].second);
    EXPECT_EQ(t.bytes, bytes[i]);
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ(t.data, f.find_tensor(t.name)->data);
    for (size_t j = 0; j < t.bytes; ++j) ASSERT_EQ(t.data[j], byte_of(i, j)) << j;
  }
}

// A valid file with a tensor, then every prefix of it: each refused, naming what it was reading.
TEST_F(GgufTest, EveryTruncationIsRefused) {
  Spec s;
  s.header(1, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("ab").str("c");
  s.tensor("w", {4}, 0, 0).pad(32);
  for (int i = 0; i < 4; ++i) s.put<float>(float(i));
  ASSERT_NO_THROW(GgufFile(write("whole.gguf", s.b)));
  for (size_t n = 0; n < s.b.size(); ++n) {
    SCOPED_TRACE(n);
    const std::string p = write("cut.gguf", Bytes(s.b.begin(), s.b.begin() + n));
    expect_file_error([&] { GgufFile f(p); }, p, {"truncated"});
  }
}

TEST_F(GgufTest, BrokenHeadersAreRefusedByName) {
  struct Case {
    const char* name;
    Spec file;
    std::vector<std::string> words;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"magic", Spec().put<uint32_t>(0x4c4c4747).put<uint32_t>(3), {"bad magic 'GGLL'", "GGUF"}});
  cases.push_back({"version1", Spec().header(0, 0, 1), {"version 1", "expected 3"}});
  cases.push_back(
      {"kv_count", Spec().header(0, uint64_t(1) << 62), {"4611686018427387904 metadata"}});
  cases.push_back({"tensor_count", Spec().header(uint64_t(1) << 60, 0), {"tensors, more than"}});
  cases.push_back(
      {"array_count",
       Spec().header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1u << 30),
       {"'a'", "1073741824 elements of u64"}});
  cases.push_back({"string_length",
                   Spec().header(0, 1).str("s").put<uint32_t>(8).put<uint64_t>(~0ull),
                   {"the value of 's'", "truncated"}});
  cases.push_back({"nested",
                   Spec().header(0, 1).str("n").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(0),
                   {"array of arrays"}});
  cases.push_back({"value_type",
                   Spec().header(0, 1).str("x").put<uint32_t>(13).put<uint32_t>(0),
                   {"'x'", "unknown type 13"}});
  cases.push_back(
      {"bool", Spec().header(0, 1).str("b").put<uint32_t>(7).put<uint8_t>(2), {"bool of value 2"}});
  cases.push_back({"duplicate_key",
                   Spec()
                       .header(0, 2)
                       .str("k")
                       .put<uint32_t>(4)
                       .put<uint32_t>(1)
                       .str("k")
                       .put<uint32_t>(4)
                       .put<uint32_t>(2),
                   {"'k' appears twice"}});
  cases.push_back({"alignment",
                   Spec().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48),
                   {"general.alignment", "power of two"}});
  cases.push_back({"alignment_type",
                   Spec().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32),
                   {"general.alignment is u64"}});
  cases.push_back(
      {"dims", Spec().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0), {"'t' has 5 dimensions"}});
  cases.push_back({"zero_dim", Spec().header(1, 0).tensor("t", {4, 0}, 0, 0), {"ne[1] = 0"}});
  cases.push_back({"elements",
                   Spec().header(1, 0).tensor("t", {1ull << 32, 1ull << 32}, 0, 0),
                   {"'t'", "2^63 elements"}});
  cases.push_back(
      {"type", Spec().header(1, 0).tensor("t", {32}, 3, 0), {"'t' has ggml type 3", "Q4_K"}});
  cases.push_back({"blocks",
                   Spec().header(1, 0).tensor("t", {33}, 8, 0),
                   {"Q8_0 with rows of 33", "blocks of 32"}});
  cases.push_back({"misaligned",
                   Spec().header(1, 0).tensor("t", {4}, 0, 16),
                   {"data offset 16", "alignment 32"}});
  cases.push_back(
      {"past_end",
       Spec().header(1, 0).tensor("t", {64}, 0, 0).pad(32).put<float>(0),
       {"'t' (F32 [64], 256 bytes at data offset 0) runs past the end", "has 4 bytes"}});
  Spec overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {4}, 0, 32).pad(32);
  overlap.b.resize(overlap.b.size() + 64, 0);
  cases.push_back({"overlap", overlap, {"'a' and 'b' overlap"}});
  Spec twice;
  twice.header(2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad(32);
  cases.push_back({"duplicate_tensor", twice, {"tensor 'a' appears twice"}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = write(std::string(c.name) + ".gguf", c.file.b);
    try {
      GgufFile f(p);
      ADD_FAILURE() << "loaded";
    } catch (const FileError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(p), std::string::npos) << what;
      for (const std::string& w : c.words)
        EXPECT_NE(what.find(w), std::string::npos) << w << " in " << what;
    }
  }
}

// A fill that throws halfway leaves the file that was there.
TEST_F(GgufTest, AFailedWriteLeavesTheOldFile) {
  const Bytes old = {1, 2, 3};
  const std::string p = write("m.gguf", old);
  GgufWriter w;
  w.add_tensor("a", {4}, GgmlType::kF32);
  w.add_tensor("b", {4}, GgmlType::kF32);
  EXPECT_THROW(w.write(p,
                       [](size_t i, uint8_t*) {
                         if (i == 1) throw Error("no data for b");
                       }),
               Error);
  EXPECT_EQ(testing::read_bytes(p), old);
  EXPECT_EQ(listing(), std::vector<std::string>{"m.gguf"});
}

TEST_F(GgufTest, WriterRefusesWhatTheFormatCannotHold) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("q", {33}, GgmlType::kQ8_0), Error);
  EXPECT_THROW(w.add_tensor("d", {1, 1, 1, 1, 1}, GgmlType::kF32), Error);
  w.add_tensor("x", {2}, GgmlType::kF32);
  EXPECT_THROW(w.add_tensor("x", {2}, GgmlType::kF32), Error);
  EXPECT_THROW(GgufWriter(48), Error);
}

}  // namespace
}  // namespace llmcpu
