// GGUF files written by llmcpu (core/io/gguf.h) read by an independent reader: @huggingface/gguf
// (npm, tests/gguf/gguf_reference.mjs). Every metadata value type, the tensor types llmcpu writes,
// and a wider alignment: the reference must see the same keys, types, values, tensor names,
// shapes, types and offsets, and the data section where llmcpu's reader puts it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/gguf.h"
#include "tests/common/npm_modules.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

using Json = nlohmann::json;

class GgufReference : public testing::TempDirTest {
 protected:
  // The reference's reading of `file`; fails the test (and returns null) when it cannot run.
  Json read(const std::string& file) {
    const testing::NodeReference ref = testing::find_node_reference({"@huggingface/gguf"});
    if (!ref.missing.empty()) {
      ADD_FAILURE() << "the reference cannot run: " << ref.missing;
      return nullptr;
    }
    const std::string cmd = testing::shell_quote(ref.node) + " " +
                            testing::shell_quote(LLMCPU_GGUF_TEST_DIR "/gguf_reference.mjs") + " " +
                            testing::shell_quote(ref.modules) + " " + testing::shell_quote(file) +
                            " 2>&1";
    const testing::Outcome out = testing::run_shell(cmd);
    if (out.status != 0) {
      ADD_FAILURE() << cmd << " failed (" << out.status << "): " << out.output;
      return nullptr;
    }
    return Json::parse(out.output);
  }
};

// A metadata value as the reference prints it: 64-bit integers as decimal strings, other numbers
// as JSON numbers, bools as true/false.
Json expected_number(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kU64:
      return std::to_string(bits);
    case GgufType::kI64:
      return std::to_string(int64_t(bits));
    case GgufType::kBool:
      return bits != 0;
    case GgufType::kF32:
    case GgufType::kF64:
      return GgufValue::number_as_double(t, bits);
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
      return int64_t(bits);
    default:
      return bits;
  }
}

TEST_F(GgufReference, ReadsWhatLlmcpuWrites) {
  for (uint32_t alignment : {32u, 64u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w(alignment);
    std::vector<std::pair<std::string, GgufValue>> kv;
    auto scalar = [&](const char* key, GgufType t, uint64_t bits) {
      kv.emplace_back(key, GgufValue::scalar(t, bits));
    };
    scalar("t.u8", GgufType::kU8, 255);
    scalar("t.i8", GgufType::kI8, uint64_t(int64_t(-128)));
    scalar("t.u16", GgufType::kU16, 65535);
    scalar("t.i16", GgufType::kI16, uint64_t(int64_t(-32768)));
    scalar("t.u32", GgufType::kU32, 4294967295u);
    scalar("t.i32", GgufType::kI32, uint64_t(int64_t(std::numeric_limits<int32_t>::min())));
    scalar("t.f32", GgufType::kF32, std::bit_cast<uint32_t>(-3.4028235e38f));
    scalar("t.bool", GgufType::kBool, 0);
    scalar("t.u64", GgufType::kU64, ~uint64_t(0));
    scalar("t.i64", GgufType::kI64, uint64_t(std::numeric_limits<int64_t>::min()));
    scalar("t.f64", GgufType::kF64, std::bit_cast<uint64_t>(1e-310));  // subnormal
    kv.emplace_back("general.architecture", GgufValue::string("llama"));
    kv.emplace_back("t.utf8", GgufValue::string("\xe2\x96\x81"
                                                "caf\xc3\xa9 \xf0\x9f\x98\x80"));
    kv.emplace_back("tokenizer.ggml.tokens", GgufValue::strings_array({"<s>", "", "\xc4\xa0the"}));
    kv.emplace_back("tokenizer.ggml.scores", GgufValue::f32_array({0.0f, -1.5f, 1e-30f}));
    kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32_array({3, 1, -2}));
    GgufValue bools;
    bools.type = GgufType::kArray, bools.elem = GgufType::kBool, bools.numbers = {1, 0, 1};
    kv.emplace_back("t.bools", bools);
    for (const auto& [k, v] : kv) w.set(k, v);
    const std::vector<std::pair<GgmlType, std::vector<uint64_t>>> tensors = {
        {GgmlType::kF32, {7}},      {GgmlType::kF16, {3, 5}},   {GgmlType::kBf16, {2, 2, 2}},
        {GgmlType::kQ8_0, {64, 2}}, {GgmlType::kQ4_0, {32, 3}}, {GgmlType::kQ4_K, {256, 2}},
        {GgmlType::kQ6_K, {512}},
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
      w.add_tensor(std::string("blk.").append(std::to_string(i)).append(".w"), tensors[i].second,
                   tensors[i].first);
    }
    const std::string file = path(alignment == 32 ? "m32.gguf" : "m64.gguf");
    w.write(file, [](size_t, uint8_t*) {});
    const Json got = read(file);
    ASSERT_FALSE(got.is_null());
    const GgufFile ours(file);
    EXPECT_EQ(got["version"], 3);
    EXPECT_EQ(got["alignment"], alignment);
    EXPECT_EQ(got["data_offset"], std::to_string(ours.data_offset()));
    const Json& meta = got["metadata"];
    EXPECT_EQ(meta.size(), kv.size() + (alignment != 32 ? 1 : 0));
    for (const auto& [key, v] : kv) {
      SCOPED_TRACE(key);
      ASSERT_TRUE(meta.contains(key));
      const Json& m = meta[key];
      EXPECT_EQ(m["type"], uint32_t(v.type));
      if (v.type == GgufType::kString) {
        EXPECT_EQ(m["value"], v.str);
      } else if (!v.is_array()) {
        EXPECT_EQ(m["value"], expected_number(v.type, v.bits)) << m.dump();
      } else {
        EXPECT_EQ(m["elem"], uint32_t(v.elem));
        ASSERT_EQ(m["value"].size(), v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          if (v.elem == GgufType::kString) {
            EXPECT_EQ(m["value"][i], v.strings[i]);
          } else {
            EXPECT_EQ(m["value"][i], expected_number(v.elem, v.numbers[i])) << i;
          }
        }
      }
    }
    ASSERT_EQ(got["tensors"].size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Json& t = got["tensors"][i];
      const GgufTensor& o = ours.tensors()[i];
      SCOPED_TRACE(o.name);
      EXPECT_EQ(t["name"], o.name);
      EXPECT_EQ(t["dtype"], uint32_t(tensors[i].first));
      ASSERT_EQ(t["shape"].size(), tensors[i].second.size());
      for (size_t d = 0; d < tensors[i].second.size(); ++d) {
        EXPECT_EQ(t["shape"][d], std::to_string(tensors[i].second[d]));
      }
      EXPECT_EQ(t["offset"], std::to_string(o.offset));
      EXPECT_EQ(o.offset % alignment, 0u);
    }
  }
}

}  // namespace
}  // namespace llmcpu
