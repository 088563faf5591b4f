// `llmcpu convert` and the safetensors reader on bad input: small GPT-2 safetensors files built
// here (a sound one, then each with one fault) must be refused with a message naming the file and
// the tensor, a non-zero exit, no output file and no temporary file left, and an existing output
// kept. Also the fp16 conversions against the compiler's _Float16, and a sound file through to a
// checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/safetensors.h"
#include "core/model/parameters.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Bytes;

// GPT-2 of L=1 NH=2 C=8 V=10 maxT=4, in GPT2Model names: (name, shape).
std::vector<std::pair<std::string, std::vector<size_t>>> tiny_gpt2() {
  const size_t C = 8;
  return {{"wte.weight", {10, C}},
          {"wpe.weight", {4, C}},
          {"h.0.ln_1.weight", {C}},
          {"h.0.ln_1.bias", {C}},
          {"h.0.attn.c_attn.weight", {C, 3 * C}},
          {"h.0.attn.c_attn.bias", {3 * C}},
          {"h.0.attn.c_proj.weight", {C, C}},
          {"h.0.attn.c_proj.bias", {C}},
          {"h.0.ln_2.weight", {C}},
          {"h.0.ln_2.bias", {C}},
          {"h.0.mlp.c_fc.weight", {C, 4 * C}},
          {"h.0.mlp.c_fc.bias", {4 * C}},
          {"h.0.mlp.c_proj.weight", {4 * C, C}},
          {"h.0.mlp.c_proj.bias", {C}},
          {"ln_f.weight", {C}},
          {"ln_f.bias", {C}}};
}

// A header (F32 tensors back to back, values 0.001 * element index + tensor number) and its data.
struct StFile {
  json header = json::object();
  Bytes data;

  StFile() {
    int k = 0;
    for (const auto& [name, shape] : tiny_gpt2()) {
      size_t n = 1;
      for (size_t d : shape) n *= d;
      const size_t begin = data.size();
      for (size_t i = 0; i < n; ++i) {
        const float v = 0.001f * float(i) + float(k);
        testing::append(data, &v, 1);
      }
      header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
      ++k;
    }
  }
  Bytes bytes(const std::string& header_text) const {
    const uint64_t n = header_text.size();
    Bytes out(8 + n + data.size());
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, header_text.data(), n);
    std::copy(data.begin(), data.end(), out.begin() + 8 + long(n));
    return out;
  }
  Bytes bytes() const { return bytes(header.dump()); }
};

const char* kConfig = R"({"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 8,
                          "n_positions": 4, "vocab_size": 10})";

class Convert : public testing::TempDirTest {
 protected:
  void write_model(const Bytes& st, const std::string& config = kConfig) {
    testing::write_bytes(path("model.safetensors"), st);
    testing::write_bytes(path("config.json"), Bytes(config.begin(), config.end()));
  }

  // convert must fail naming the file and each of `words`, with no output left: neither a new
  // file nor a changed one, nor a temporary one.
  void expect_refused(const std::vector<std::string>& words) {
    for (bool existing : {false, true}) {
      const std::string out = path("out.bin");
      fs::remove(out);
      const Bytes before = {'k', 'e', 'e', 'p'};
      if (existing) testing::write_bytes(out, before);
      const testing::Outcome r =
          testing::run_llmcpu("convert " + path("model.safetensors") + " " + out);
      EXPECT_NE(r.status, 0) << r.output;
      EXPECT_NE(r.output.find(path("model.safetensors")), std::string::npos) << r.output;
      for (const std::string& w : words)
        EXPECT_NE(r.output.find(w), std::string::npos) << w << "\n" << r.output;
      if (existing) {
        EXPECT_EQ(testing::read_bytes(out), before);
      } else {
        EXPECT_FALSE(fs::exists(out));
      }
      for (const auto& e : fs::directory_iterator(dir_)) {
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
      }
    }
  }
};

TEST_F(Convert, SoundFileConvertsToTheLayoutByHand) {
  StFile f;
  write_model(f.bytes());
  const testing::Outcome r =
      testing::run_llmcpu("convert " + dir_.string() + " " + path("out.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  const CheckpointInfo info = read_checkpoint_header(path("out.bin"));
  EXPECT_EQ(info.version, kCheckpointFp32);
  EXPECT_EQ(info.config.padded_vocab_size, 128);
  const ParameterLayout layout(info.config);
  std::vector<float> p(layout.total());
  load_checkpoint(path("out.bin"), info.config, p.data());
  // wte: rows 0..9 as stored (tensor 0: 0.001 * index), rows 10..127 zero.
  EXPECT_EQ(p[layout.offset(kWte) + 9 * 8 + 3], 0.001f * float(9 * 8 + 3));
  EXPECT_EQ(p[layout.offset(kWte) + 10 * 8], 0.0f);
  EXPECT_EQ(p[layout.offset(kWte) + 127 * 8 + 7], 0.0f);
  // qkvw (tensor 4, stored (in 8, out 24)): llm.c's [o][i] is the file's [i][o] = i * 24 + o.
  for (size_t o : {0, 5, 23}) {
    for (size_t i : {0, 3, 7}) {
      EXPECT_EQ(p[layout.offset(kQkvw) + o * 8 + i], 0.001f * float(i * 24 + o) + 4.0f)
          << o << "," << i;
    }
  }
  // fcprojw (tensor 12, stored (in 32, out 8)): llm.c's [o][i] = the file's i * 8 + o.
  EXPECT_EQ(p[layout.offset(kFcprojw) + 7 * 32 + 31], 0.001f * float(31 * 8 + 7) + 12.0f);
  EXPECT_EQ(p[layout.offset(kLnfb) + 7], 0.001f * 7 + 15.0f);
}

TEST_F(Convert, TruncatedFile) {
  StFile f;
  Bytes b = f.bytes();
  b.resize(b.size() - 5);
  write_model(b);
  expect_refused({"ln_f.bias", "past the end", "truncated"});
}

TEST_F(Convert, HeaderLengthPastTheEnd) {
  StFile f;
  Bytes b = f.bytes();
  const uint64_t huge = b.size();
  std::memcpy(b.data(), &huge, 8);
  write_model(b);
  expect_refused({"header length", "past the end"});
}

TEST_F(Convert, DataOffsetPastTheEnd) {
  StFile f;
  f.header["wpe.weight"]["data_offsets"] = {f.data.size() - 64, f.data.size() + 64};
  write_model(f.bytes());
  expect_refused({"wpe.weight", "past the end"});
}

TEST_F(Convert, WrongDtype) {
  StFile f;
  f.header["h.0.ln_2.weight"]["dtype"] = "I64";
  f.header["h.0.ln_2.weight"]["shape"] = {4};  // 32 bytes, as the offsets say
  write_model(f.bytes());
  expect_refused({"h.0.ln_2.weight", "I64", "expected F32, F16, BF16"});
}

TEST_F(Convert, MissingTensor) {
  StFile f;
  f.header.erase("h.0.mlp.c_fc.bias");
  write_model(f.bytes());
  expect_refused({"missing tensor", "h.0.mlp.c_fc.bias"});
}

TEST_F(Convert, ShapeContradictsConfig) {
  StFile f;
  // config.json says n_positions 6; wpe.weight holds 4 positions.
  write_model(f.bytes(), R"({"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 6,
                             "vocab_size": 10})");
  expect_refused({"wpe.weight", "(4, 8)", "(6, 8)", "config.json"});
}

TEST_F(Convert, OverlappingOffsets) {
  StFile f;
  // ln_1.bias (8 floats) starts 4 bytes into ln_1.weight.
  const size_t begin = f.header["h.0.ln_1.weight"]["data_offsets"][0].get<size_t>() + 4;
  f.header["h.0.ln_1.bias"]["data_offsets"] = {begin, begin + 32};
  write_model(f.bytes());
  expect_refused({"h.0.ln_1.bias", "overlaps", "h.0.ln_1.weight"});
}

TEST_F(Convert, BadJson) {
  StFile f;
  std::string text = f.header.dump();
  text.back() = ',';  // the object's closing brace: a comma, and the text ends
  write_model(f.bytes(text));
  expect_refused({"not valid JSON"});
}

TEST_F(Convert, UnknownTensor) {
  StFile f;
  const size_t begin = f.data.size();
  f.data.resize(begin + 32);
  f.header["h.0.attn.rotary.weight"] = {
      {"dtype", "F32"}, {"shape", {8}}, {"data_offsets", {begin, begin + 32}}};
  write_model(f.bytes());
  expect_refused({"h.0.attn.rotary.weight"});
}

TEST_F(Convert, UntiedHeadIsRefused) {
  StFile f;
  // lm_head.weight: wte's values but one, element 17 (row 2), changed in its lowest bit.
  const auto wte = f.header["wte.weight"]["data_offsets"];
  Bytes head(f.data.begin() + wte[0].get<long>(), f.data.begin() + wte[1].get<long>());
  head[4 * 17] ^= 1;
  const size_t begin = f.data.size();
  f.data.insert(f.data.end(), head.begin(), head.end());
  f.header["lm_head.weight"] = {
      {"dtype", "F32"}, {"shape", {10, 8}}, {"data_offsets", {begin, f.data.size()}}};
  write_model(f.bytes());
  expect_refused({"lm_head.weight", "differs from wte.weight", "row 2"});
}

TEST_F(Convert, TiedHeadAndMaskBuffersAreAccepted) {
  StFile f;
  const auto wte = f.header["wte.weight"]["data_offsets"];
  Bytes head(f.data.begin() + wte[0].get<long>(), f.data.begin() + wte[1].get<long>());
  size_t begin = f.data.size();
  f.data.insert(f.data.end(), head.begin(), head.end());
  f.header["lm_head.weight"] = {
      {"dtype", "F32"}, {"shape", {10, 8}}, {"data_offsets", {begin, f.data.size()}}};
  begin = f.data.size();
  f.data.resize(begin + 2);  // a scalar F16
  f.header["h.0.attn.masked_bias"] = {
      {"dtype", "F16"}, {"shape", json::array()}, {"data_offsets", {begin, begin + 2}}};
  write_model(f.bytes());
  const testing::Outcome r =
      testing::run_llmcpu("convert " + path("model.safetensors") + " " + path("out.bin"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("out.bin")));
}

// Without config.json the shape comes from the tensors, but the number of heads cannot: C=8 is no
// multiple of GPT-2's head size 64, so it is asked for; --config gives it.
TEST_F(Convert, HeadsWithoutConfigAreAskedFor) {
  StFile f;
  write_model(f.bytes());
  fs::rename(path("config.json"), path("elsewhere.json"));
  testing::Outcome r =
      testing::run_llmcpu("convert " + path("model.safetensors") + " " + path("out.bin"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("n_head"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("out.bin")));
  r = testing::run_llmcpu("convert " + path("model.safetensors") + " " + path("out.bin") +
                          " --config " + path("elsewhere.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_checkpoint_header(path("out.bin")).config.num_heads, 2);
}

// An llm.c model whose padding rows of wte are not zero (llm.c's random initialisation fills all
// Vp rows) exports with a warning; the V real rows and everything else come back unchanged, the
// padding as zeros.
TEST_F(Convert, NonzeroPaddingRowsAreDroppedWithAWarning) {
  ModelConfig c{.max_seq_len = 4,
                .vocab_size = 10,
                .padded_vocab_size = 128,
                .num_layers = 1,
                .num_heads = 2,
                .channels = 8};
  const ParameterLayout layout(c);
  std::vector<float> p(layout.total());
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.25f * float(i % 97) - 3.0f;
  save_checkpoint(path("in.bin"), c, p.data());
  testing::Outcome r = testing::run_llmcpu("convert " + path("in.bin") + " " + path("hf"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: 118 of wte's 118 padding rows (10..127) were not zero"),
            std::string::npos)
      << r.output;
  r = testing::run_llmcpu("convert " + path("hf") + " " + path("back.bin"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<float> q(layout.total());
  load_checkpoint(path("back.bin"), c, q.data());
  const size_t pad_begin = 10 * 8, pad_end = 128 * 8;
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(q[i], i >= pad_begin && i < pad_end ? 0.0f : p[i]) << i;
  }
}

// Every fp16 value widens as the compiler's _Float16 does and narrows back to itself.
TEST(Fp16, AllValuesAgainstFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    const uint16_t bits = uint16_t(h);
    std::memcpy(&ref, &bits, 2);
    const float f = f16_to_float(bits);
    if (std::isnan(float(ref))) {
      EXPECT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(f, float(ref)) << h;
    ASSERT_EQ(std::signbit(f), std::signbit(float(ref))) << h;
    ASSERT_EQ(float_to_f16(f), bits) << h;
  }
}

// fp32 -> fp16 rounds as the compiler does (nearest even), over magnitudes from below the smallest
// subnormal to beyond the largest finite.
TEST(Fp16, RoundingAgainstFloat16) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-27.0f, 17.0f), sign(-1.0f, 1.0f);
  for (int k = 0; k < 1000000; ++k) {
    const float f = std::copysign(std::exp2(exponent(rng)), sign(rng));
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &ref, 2);
    ASSERT_EQ(float_to_f16(f), bits) << f;
  }
  // Ties: halfway between 1 and 1 + 2^-10 goes to the even 1; between 1 + 2^-10 and 1 + 2^-9 up.
  EXPECT_EQ(float_to_f16(1.0f + std::exp2(-11.0f)), 0x3c00);
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::exp2(-11.0f)), 0x3c02);
}

}  // namespace
}  // namespace llmcpu
