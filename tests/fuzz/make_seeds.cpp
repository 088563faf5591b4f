// Writes the seed corpora of the fuzz targets (corpus/NAME/) and the tiny tokenizer some targets
// pair their input with (tiny_tokenizer/): small valid files made by llmcpu's own writers, and a
// few slightly broken ones (truncated, a wrong magic or version, a field out of range), so that
// fuzzing starts past the first checks of each reader. The output is committed; run it again only
// when a format changes:
//   build-fuzz/fuzz_make_seeds tests/fuzz
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/debug_state.h"
#include "core/io/gguf.h"
#include "core/io/hf_gpt2.h"
#include "core/io/token_shard.h"
#include "core/io/token_spans.h"
#include "core/io/train_state.h"
#include "core/model/model.h"
#include "core/model/parameters.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/hf_layouts.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

std::string out_root;

std::string read_all(const std::string& path) { return fuzz::read_file(path); }

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::path(out_root) / "corpus" / target;
  fs::create_directories(dir);
  std::FILE* f = std::fopen((dir / name).c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", (dir / name).c_str());
    std::exit(1);
  }
  std::fclose(f);
}

// The bytes of a file written by one of llmcpu's writers into the scratch folder.
template <class Write>
std::string written(Write write) {
  const std::string path = fuzz::scratch_dir() + "/seed.bin";
  write(path);
  return read_all(path);
}

std::string with_int32(std::string bytes, size_t index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, 4);
  return bytes;
}

ModelConfig shape(int L, int NH, int C, int V, int Vp, int maxT) {
  ModelConfig c;
  c.num_layers = L;
  c.num_heads = NH;
  c.channels = C;
  c.vocab_size = V;
  c.padded_vocab_size = Vp;
  c.max_seq_len = maxT;
  return c;
}

// The model of fuzz_checkpoint's fixed other shape, and a smallest one.
const ModelConfig kSmall = shape(1, 2, 4, 7, 8, 4);
const ModelConfig kSmallest = shape(1, 1, 1, 1, 1, 1);

void checkpoints() {
  for (const auto& [name, config] :
       {std::pair{"small", kSmall}, std::pair{"smallest", kSmallest}}) {
    Model model(config);
    init_model(model, 7);
    for (int version : {kCheckpointFp32, kCheckpointBf16}) {
      const std::string bytes =
          written([&](const std::string& p) { save_checkpoint(p, model, version); });
      const std::string base = std::string(name) + "_v" + std::to_string(version);
      put("checkpoint", base + ".bin", bytes);
      if (config == kSmall) {
        put("checkpoint", base + "_truncated.bin", bytes.substr(0, bytes.size() - 1));
        put("checkpoint", base + "_bad_vp.bin", with_int32(bytes, 7, 6));
      }
    }
  }
  Model model(kSmallest);
  const std::string bytes = written([&](const std::string& p) { save_checkpoint(p, model); });
  put("checkpoint", "bad_magic.bin", with_int32(bytes, 0, 20240327));
  put("checkpoint", "version_4.bin", with_int32(bytes, 1, 4));
  put("checkpoint", "header_only.bin", bytes.substr(0, kLlmcHeaderBytes));
}

// Spans sidecars: three examples of a 20-token shard with their spans, and broken copies (cut
// short, a wrong magic, a span over its example's first token).
void token_spans_files() {
  const std::vector<uint64_t> starts = {0, 8, 15};
  const std::vector<TokenSpan> spans = {{2, 5}, {6, 8}, {9, 15}, {16, 20}};
  const std::string bytes =
      written([&](const std::string& p) { write_token_spans(p, 20, starts, spans); });
  put("token_spans", "three_examples.spans", bytes);
  put("token_spans", "truncated.spans", bytes.substr(0, bytes.size() - 8));
  put("token_spans", "bad_magic.spans", with_int32(bytes, 0, 20240520));
  std::string first = bytes;
  const uint64_t eight = 8;
  std::memcpy(first.data() + 1024 + 8 * starts.size() + 16 * 2, &eight, 8);  // span 2 = [8, 15)
  put("token_spans", "span_at_example_start.spans", first);
  put("token_spans", "one_example.spans", written([&](const std::string& p) {
        write_token_spans(p, 3, std::vector<uint64_t>{0}, std::vector<TokenSpan>{});
      }));
}

// GGUF files: metadata of every value type and a tensor of each type llmcpu reads, with the
// default and a wider alignment; a cut copy and one whose tensor runs past the end.
void gguf_files() {
  for (uint32_t alignment : {32u, 64u}) {
    GgufWriter w(alignment);
    w.set("general.architecture", GgufValue::string("llama"));
    w.set("llama.block_count", GgufValue::u32(1));
    w.set("llama.rope.freq_base", GgufValue::f32(10000.0f));
    w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
    w.set("tokenizer.ggml.tokens", GgufValue::strings_array({"<s>", "a", "\xe2\x96\x81" "b"}));
    w.set("tokenizer.ggml.scores", GgufValue::f32_array({0.0f, -1.0f, -2.5f}));
    w.set("tokenizer.ggml.token_type", GgufValue::i32_array({3, 1, 1}));
    w.set("general.file_type", GgufValue::u64(0));
    const GgmlType types[] = {GgmlType::kF32, GgmlType::kF16, GgmlType::kBf16, GgmlType::kQ8_0,
                              GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
    for (GgmlType t : types) {
      const uint64_t row = ggml_block_elements(t) == 1 ? 3 : ggml_block_elements(t);
      w.add_tensor(std::string("blk.0.") + ggml_type_name(t) + ".weight", {row, 2}, t);
    }
    const std::string bytes = written([&](const std::string& p) {
      w.write(p, [](size_t i, uint8_t* out) { out[0] = uint8_t(i + 1); });
    });
    put("gguf", "all_types_" + std::to_string(alignment) + ".gguf", bytes);
    if (alignment == 32) put("gguf", "truncated.gguf", bytes.substr(0, bytes.size() - 5));
  }
  GgufWriter one;
  one.add_tensor("token_embd.weight", {4, 3}, GgmlType::kF32);
  const std::string bytes = written([&](const std::string& p) {
    one.write(p, [](size_t, uint8_t* out) { out[0] = 1; });
  });
  put("gguf", "one_tensor.gguf", bytes);
  // ne[1] = 7, more rows than the data holds: after the 24-byte header, the name (8 + 17 bytes),
  // n_dims (4) and ne[0] (8).
  std::string past = bytes;
  const uint64_t rows = 7;
  std::memcpy(past.data() + 24 + 8 + 17 + 4 + 8, &rows, 8);
  put("gguf", "past_the_end.gguf", past);
}

void token_shards() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(uint16_t((i * 37) % 300));
  const std::string bytes = written([&](const std::string& p) { write_token_shard(p, tokens); });
  put("token_shard", "forty.bin", bytes);
  put("token_shard", "truncated.bin", bytes.substr(0, bytes.size() - 2));
  put("token_shard", "negative_count.bin", with_int32(bytes, 2, -1));
  tokens.back() = 60000;  // beyond GPT-2's vocabulary
  put("token_shard", "big_token.bin",
      written([&](const std::string& p) { write_token_shard(p, tokens); }));
  put("token_shard", "empty.bin",
      written([&](const std::string& p) { write_token_shard(p, std::vector<uint16_t>{}); }));
  // llm.c's uint32 shards (version 7): ids across a 128k vocabulary, past 65535.
  std::vector<uint32_t> wide;
  for (int i = 0; i < 40; ++i) wide.push_back(uint32_t((i * 40009) % 128256));
  const std::string bytes32 = written([&](const std::string& p) { write_token_shard(p, wide, 4); });
  put("token_shard", "forty_uint32.bin", bytes32);
  put("token_shard", "truncated_uint32.bin", bytes32.substr(0, bytes32.size() - 4));
  put("token_shard", "uint32_magic_version_1.bin", with_int32(bytes32, 1, 1));
  put("token_shard", "uint16_magic_version_7.bin", with_int32(bytes, 1, 7));
  wide.back() = 128256;  // beyond Llama 3's vocabulary
  put("token_shard", "big_token_uint32.bin",
      written([&](const std::string& p) { write_token_shard(p, wide, 4); }));
}

// fuzz_safetensors' input: a small GPT-2 (L=1 NH=1 C=2 V=3 maxT=2) written by save_hf_gpt2 in each
// dtype, and the F32 one truncated.
void safetensors_files() {
  const ModelConfig c = shape(1, 1, 2, 3, padded_vocab(3), 2);
  const ParameterLayout layout(c);
  std::vector<float> p(layout.total());
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.125f * float(int(i % 17) - 8);
  std::fill(p.begin() + long(3 * 2), p.begin() + long(layout.offset(kWpe)), 0.0f);  // padding rows
  const std::pair<TensorDtype, const char*> dtypes[] = {
      {TensorDtype::kF32, "f32"}, {TensorDtype::kBf16, "bf16"}, {TensorDtype::kF16, "f16"}};
  for (const auto& [dtype_, name] : dtypes) {
    const TensorDtype dtype = dtype_;  // a variable the lambda can capture
    const std::string file = written([&](const std::string& path) {
      save_hf_gpt2(path, fuzz::scratch_dir() + "/seed_config.json", c, p.data(), dtype);
    });
    put("safetensors", std::string(name) + ".safetensors", file);
    if (dtype == TensorDtype::kF32) {
      put("safetensors", "f32_truncated.safetensors", file.substr(0, file.size() - 3));
    }
  }
}

// fuzz_debug_state's input: kShapeBytes that pick the model's shape (fuzz::small_shape), then the
// file.
void debug_states() {
  const uint8_t prefixes[][fuzz::kShapeBytes] = {{0, 1, 1, 6, 1, 3}, {1, 0, 0, 0, 0, 0}};
  int n = 0;
  for (const uint8_t* prefix : prefixes) {
    const ModelConfig c = fuzz::small_shape(prefix);
    DebugState s;
    s.B = 2;
    s.T = c.max_seq_len >= 3 ? 3 : 1;
    const size_t BT = size_t(s.B) * s.T;
    for (size_t i = 0; i < BT; ++i) {
      s.inputs.push_back(int(i % c.vocab_size));
      s.targets.push_back(int((i + 1) % c.vocab_size));
    }
    s.logits.assign(BT * c.vocab_size, 0.5f);
    s.loss = 1.25f;
    s.grads.assign(ParameterLayout(c).total(), -0.25f);
    const std::string file = written([&](const std::string& p) { save_debug_state(p, c, s); });
    const std::string pre(reinterpret_cast<const char*>(prefix), fuzz::kShapeBytes);
    const std::string name = "state" + std::to_string(n++);
    put("debug_state", name + ".bin", pre + file);
    if (n == 1) {
      put("debug_state", name + "_truncated.bin", pre + file.substr(0, file.size() - 4));
      put("debug_state", name + "_version_1.bin", pre + with_int32(file, 1, 1));
      put("debug_state", name + "_t_too_long.bin", pre + with_int32(file, 3, 9));
      std::string bad_token = file;
      const int32_t v = c.vocab_size;
      std::memcpy(bad_token.data() + kLlmcHeaderBytes + 4, &v, 4);
      put("debug_state", name + "_bad_token.bin", pre + bad_token);
    }
  }
}

// fuzz_train_state restores the data position into a loader of B=1, T=4 over a shard of 33 tokens
// (8 samples).
void train_states() {
  for (const bool shuffle : {true, false}) {
    TrainState s;
    s.config = kSmall;
    s.B = 1;
    s.T = 4;
    s.grad_accum = 2;
    s.shuffle = shuffle;
    s.seed = 1337;
    s.precision = shuffle ? Precision::kBf16 : Precision::kFp32;
    s.step = 5;
    s.adamw_t = 5;
    s.data.epoch = 1;
    s.data.rng_state = 0x1234567;
    s.data.shard = 0;
    s.data.sample = 3;
    s.data.shard_order = {0};
    if (shuffle) s.data.sample_order = {3, 1, 4, 0, 5, 2, 7, 6};
    const size_t P = ParameterLayout(s.config).total();
    std::vector<float> w(P, 0.5f), m(P, 0.01f), v(P, 0.001f);
    const std::string bytes =
        written([&](const std::string& p) { save_train_state(p, s, w, m, v); });
    const std::string name = shuffle ? "shuffled" : "sequential";
    put("train_state", name + ".bin", bytes);
    if (shuffle) {
      std::string flipped = bytes;
      flipped[100] ^= 1;
      put("train_state", name + "_bad_checksum.bin", flipped);
      put("train_state", name + "_truncated.bin", bytes.substr(0, bytes.size() - 9));
    }
  }
}

void resume_folders() {
  put("resume_folder", "two.txt",
      "model_00000004.bin\nstate_00000004.bin\nmodel_00000010.bin\nstate_00000010.bin\n");
  put("resume_folder", "orphans.txt",
      "state_00000002.bin\nmodel_00000003.bin\nstate_0000007.bin\nstate_00000012.bin.tmp.99\n");
  put("resume_folder", "long_step.txt",
      "model_123456789012.bin\nstate_123456789012.bin\nstate_00000001.bin\ntrain.lock\n");
}

// GPT-2's byte alphabet character of byte b, as UTF-8.
std::string alphabet_char(int b) {
  const int cp = byte_to_unicode(static_cast<unsigned char>(b));
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// JSON string contents of a UTF-8 key: quotes and backslashes escaped, non-ASCII as \uXXXX.
std::string json_key(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      const int cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(utf8[++i]) & 0x3F);
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", cp);
      out += buf;
    }
  }
  return out;
}

// The tiny tokenizer: ids 0..255 the bytes, then 256 "th", 257 "the", 258 " the", 259 "  " and
// 260 <|endoftext|>.
void tokenizer_files() {
  const std::string G = alphabet_char(' ');
  std::string json = "{";
  for (int b = 0; b < 256; ++b)
    json += "\"" + json_key(alphabet_char(b)) + "\": " + std::to_string(b) + ", ";
  json += "\"th\": 256, \"the\": 257, \"" + json_key(G + "the") + "\": 258, \"" + json_key(G + G) +
          "\": 259,\n \"<|endoftext|>\": 260}";
  const std::string bpe = "#version: 0.2\nt h\nth e\n" + G + " the\n" + G + " " + G + "\n";
  const fs::path tiny = fs::path(out_root) / "tiny_tokenizer";
  fs::create_directories(tiny);
  for (const auto& [name, bytes] : {std::pair{"encoder.json", json}, std::pair{"vocab.bpe", bpe}}) {
    std::FILE* f = std::fopen((tiny / name).c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  put("encoder_json", "tiny.json", json);
  put("encoder_json", "escapes.json",
      "{\"a\\u00e9\\n\\t\\\"\\\\\\/\\b\\f\\r\": 1, \"\\ud83d\\ude00\": 2, \"x\": 0}");
  put("encoder_json", "lone_surrogate.json", "{\"\\udc00\": 0}");
  put("encoder_json", "duplicate.json", "{\"a\": 0, \"a\": 1}");
  put("encoder_json", "trailing.json", "{\"a\": 0} x");
  put("encoder_json", "empty.json", " { } ");
  put("vocab_bpe", "tiny.bpe", bpe);
  put("vocab_bpe", "unknown_symbol.bpe", "#version: 0.2\nt h\nq \xc4\xa0\n");
  put("vocab_bpe", "no_newline.bpe", "#version: 0.2\nt h");
  put("vocab_bpe", "two_spaces.bpe", "#version: 0.2\nt  h\n");
  put("vocab_bpe", "cut_short.bpe", "#version: 0.2\nt h\n");

  // llm.c's gpt2_tokenizer.bin: int32[256] {20240328, version, V, eot}, then length-prefixed
  // tokens.
  auto llmc = [](int version, int eot, const std::vector<std::string>& tokens) {
    int32_t header[256] = {};
    header[0] = 20240328;
    header[1] = version;
    header[2] = int32_t(tokens.size());
    header[3] = eot;
    std::string bytes(reinterpret_cast<const char*>(header), sizeof header);
    for (const std::string& t : tokens) bytes += static_cast<char>(t.size()) + t;
    return bytes;
  };
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"th", "the", " the", "  ", "<|endoftext|>"}) tokens.push_back(t);
  const std::string v2 = llmc(2, 260, tokens);
  put("llmc_tokenizer", "tiny_v2.bin", v2);
  put("llmc_tokenizer", "truncated.bin", v2.substr(0, v2.size() - 3));
  put("llmc_tokenizer", "trailing.bin", v2 + "x");
  put("llmc_tokenizer", "eot_outside.bin", llmc(2, 5, {"a", "b"}));
  put("llmc_tokenizer", "v1_small.bin", llmc(1, 0, {"a", "b", "c"}));
  put("llmc_tokenizer", "zero_length.bin", llmc(2, 0, {"a", ""}));
}

void tomls() {
  const fs::path conf = fs::path(out_root).parent_path().parent_path() / "conf";
  for (const char* name : {"quickstart", "finetune"}) {
    put("run_config", std::string(name) + ".toml",
        read_all((conf / "runs" / name).string() + ".toml"));
  }
  put("run_config", "types.toml",
      "model = \"gpt2-d2\"\ntrain-data = \"x_*.bin\"\nbatch = 2\nlr = 1\nseed = 18446744073709551\n"
      "no_shuffle = true\nthreads = 1\ncpus = \"0-1\"\nbind = \"spread\"\nprecision = \"bf16\"\n");
  put("run_config", "bad_types.toml", "batch = \"four\"\nlr = true\nseed = -1\nsteps = 3.5\n");
  put("run_config", "unknown.toml", "[section]\nkey = 1\nconfig = \"x\"\n");
  put("run_config", "broken.toml", "batch = \nsteps = [1, 2\n\"unterminated = 1\n");
  for (const char* name : {"gpt2-d2", "gpt2-124m"}) {
    put("model_preset", std::string(name) + ".toml",
        read_all((conf / "models" / name).string() + ".toml"));
  }
  put("model_preset", "missing.toml", "layers = 2\nheads = 2\nchannels = 128\n");
  put("model_preset", "unknown.toml",
      "layers = 2\nheads = 2\nchannels = 128\nmax_seq_len = 64\nvocab_size = 50257\ndepth = 1\n");
  put("model_preset", "bad_values.toml",
      "layers = 0\nheads = 3\nchannels = 128\nmax_seq_len = 1e3\nvocab_size = \"x\"\n");
}

void texts() {
  put("encode", "english.txt", "The quick brown fox's friend didn't jump; it'll be fine. 12345\n");
  put("encode", "unicode.txt",
      "na\xc3\xafve caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 "
      "\xe2\x80\x83x\xef\xbb\xbfy");
  put("encode", "invalid_utf8.txt", "ok \xff\xfe bad \xc3 end \xed\xa0\x80 surrogate");
  put("encode", "whitespace.txt", "a  \t\n\n   b\r\n \x0b\x0c c   ");
  put("encode", "eot.txt", "<|endoftext|>The end<|endoftext|>");
}

// fuzz_tokenizer_json's input: a tokenizer.json, then NUL and its tokenizer_config.json when it has
// one. The layouts of hf_layouts.h (a few KB each); small documents that each use one more kind of
// normalizer, pre-tokenizer, decoder or post-processor over a vocabulary of a few tokens, so that
// mutations reach every factory quickly; and documents with one part that is refused.
void tokenizer_jsons() {
  using Json = nlohmann::ordered_json;
  for (const fuzz::HfLayout& l : fuzz::hf_layouts()) {
    put("tokenizer_json", l.name + ".json",
        l.config.empty() ? l.json : l.json + std::string(1, '\0') + l.config);
  }
  const std::string meta = "\xE2\x96\x81";
  const auto small = [&](const char* part, const Json& value) {
    Json doc = {
        {"added_tokens", Json::array({Json{{"id", 5},
                                           {"content", "<s>"},
                                           {"single_word", false},
                                           {"lstrip", false},
                                           {"rstrip", false},
                                           {"normalized", false},
                                           {"special", true}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer", nullptr},
        {"post_processor", nullptr},
        {"decoder", nullptr},
        {"model",
         {{"type", "BPE"},
          {"unk_token", "<unk>"},
          {"byte_fallback", true},
          {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {meta, 4}, {"<0x61>", 6}}},
          {"merges", Json::array({"a b"})}}}};
    if (part) doc[part] = value;
    return doc.dump();
  };
  const auto pattern = [](const char* kind, const char* p) { return Json{{kind, p}}; };
  put("tokenizer_json", "small.json", small(nullptr, nullptr));
  const std::pair<const char*, Json> parts[] = {
      {"normalizer", {{"type", "NFKC"}}},
      {"normalizer", {{"type", "NFKD"}}},
      {"normalizer", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}},
      {"normalizer",
       {{"type", "Replace"}, {"pattern", pattern("Regex", "\\s+")}, {"content", "$&$1"}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", Json::array({Json{{"type", "NFD"}}, Json{{"type", "StripAccents"}},
                                     Json{{"type", "Lowercase"}},
                                     Json{{"type", "Prepend"}, {"prepend", meta}}})}}},
      {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
      {"pre_tokenizer", {{"type", "Whitespace"}}},
      {"pre_tokenizer", {{"type", "Digits"}, {"individual_digits", false}}},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", pattern("String", " ")},
        {"behavior", "Removed"},
        {"invert", false}}},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", pattern("Regex", "(a)|b+")},
        {"behavior", "Removed"},
        {"invert", true}}},
      {"pre_tokenizer",
       {{"type", "Metaspace"},
        {"replacement", meta},
        {"prepend_scheme", "always"},
        {"split", true}}},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"decoder", {{"type", "ByteFallback"}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "always"}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         Json::array({Json{{"type", "Replace"},
                           {"pattern", pattern("Regex", "a(b)?")},
                           {"content", "$1-$$"}},
                      Json{{"type", "Fuse"}},
                      Json{{"type", "Strip"}, {"content", "-"}, {"start", 2}, {"stop", 1}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", Json::array({Json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                Json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}})}}},
      {"post_processor",
       {{"type", "Sequence"},
        {"processors", Json::array({Json{{"type", "ByteLevel"}, {"trim_offsets", false}}})}}},
  };
  int n = 0;
  for (const auto& [part, value] : parts) {
    put("tokenizer_json",
        "small_" + std::to_string(n++) + "_" + part + "_" + value["type"].get<std::string>() +
            ".json",
        small(part, value));
  }
  // One part each that is refused: a model, normalizer, pre-tokenizer, decoder and post-processor
  // that are not implemented, a Split behavior, single_word, dropout, a continuing_subword_prefix,
  // an unk_token outside the vocabulary, two tokens with one id, a pattern that does not compile,
  // and a merge that is not a pair.
  Json doc = Json::parse(fuzz::gpt2_layout().json);
  const auto refused = [&](const char* name, const auto& change) {
    Json d = doc;
    change(d);
    put("tokenizer_json", std::string("refused_") + name + ".json", d.dump());
  };
  refused("wordpiece", [](Json& d) { d["model"]["type"] = "WordPiece"; });
  refused("normalizer", [](Json& d) { d["normalizer"] = {{"type", "BertNormalizer"}}; });
  refused("pre_tokenizer", [](Json& d) { d["pre_tokenizer"] = {{"type", "Punctuation"}}; });
  refused("decoder", [](Json& d) { d["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}}; });
  refused("post_processor", [](Json& d) { d["post_processor"] = {{"type", "BertProcessing"}}; });
  refused("behavior", [&](Json& d) {
    d["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", pattern("String", " ")},
                          {"behavior", "MergedWithPrevious"},
                          {"invert", false}};
  });
  refused("single_word", [](Json& d) { d["added_tokens"][0]["single_word"] = true; });
  refused("dropout", [](Json& d) { d["model"]["dropout"] = 0.1; });
  refused("prefix", [](Json& d) { d["model"]["continuing_subword_prefix"] = "##"; });
  refused("unk", [](Json& d) { d["model"]["unk_token"] = "<unk>"; });
  refused("shared_id", [](Json& d) { d["model"]["vocab"]["shared"] = 7; });
  refused("pattern", [&](Json& d) {
    d["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", pattern("Regex", "(a")},
                          {"behavior", "Isolated"},
                          {"invert", false}};
  });
  refused("merge", [](Json& d) { d["model"]["merges"][0] = Json::array({"a"}); });
}

// fuzz_hf_encode's input: texts for the layouts of hf_layouts.h, besides fuzz_encode's.
void hf_texts() {
  put("hf_encode", "english.txt",
      "The quick brown fox's friend didn't jump; it'll be fine. 12345\n");
  put("hf_encode", "invalid_utf8.txt", "ok \xff\xfe bad \xc3 end \xed\xa0\x80 surrogate \xf4\x90");
  put("hf_encode", "spaces.txt", "   three leading, two trailing  \t\r\n\n x");
  put("hf_encode", "metaspace.txt", "\xE2\x96\x81the\xE2\x96\x81\xE2\x96\x81world \xE2\x96\x81");
  put("hf_encode", "added.txt",
      "<|endoftext|>Hello <mask> [SEP]  ab world<s>x</s><unk><|im_start|>user\nhi<|im_end|>"
      "<|begin_of_text|>");
  put("hf_encode", "unicode.txt",
      "na\xc3\xafve cafe\xcc\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xe2\x84\xaa "
      "\xcd\xbe \xef\xbc\xa1\xef\xbc\x91");
  put("hf_encode", "bom.txt", "\xef\xbb\xbfstart \xef\xbb\xbf mid\xef\xbb\xbf");
  put("hf_encode", "digits.txt", "1234567 3.14159 12,345 \xd9\xa3\xd9\xa4 0x1F");
}

// fuzz_cli's input: byte 0 picks the subcommand by its index in tools/llmcpu/commands.h's table
// (train, verify, sample, prepare, tokenize, topo, convert, bench, plot, version), then the words,
// separated by newlines.
void command_lines() {
  auto cli = [](char command, const std::string& words) { return std::string(1, command) + words; };
  put("cli", "train.txt",
      cli(0,
          "--model\ngpt2-d2\n-i\nx_*.bin\n--batch=4\n-t\n64\n--lr\n3e-4\n--no-shuffle\n--seed\n7\n"
          "--precision\nbf16\n--threads\n2\n--cpus\n0-1,3\n--bind\nspread\n--numa\noff"));
  put("cli", "train_bad.txt", cli(0, "--batch\nfour\n--steps=-1\n--no-shuffle=1\n--unknown\n-x"));
  put("cli", "verify.txt",
      cli(1, "--model\nm.bin\n--state\ns.bin\n--tolerance-logits\n1e-3\n--tolerance-grads=nan"));
  put("cli", "sample.txt",
      cli(2, "-e\nm.bin\n--prompt\nHello\n--tokens\n-3\n--top-k\n40\n--seed\n99"));
  put("cli", "prepare.txt",
      cli(3, "--input\na.txt\nb.txt\n-o\nout\n--name\nx\n--val-tokens\n100\n--shard-tokens=1000"));
  put("cli", "tokenize.txt", cli(4, "--decode\n--tokenizer\ntok\nfile.txt\nextra"));
  put("cli", "topo.txt", cli(5, "--threads\n3\n--smt\n--cpus\n0-3,8\n--bind\ncompact\n--json\n-h"));
  put("cli", "topo_ranks.txt", cli(5, "--topology\npackage:2 core:4 pu:2\n--ranks\n3\n--json"));
  put("cli", "convert.txt", cli(6, "in.bin\nout\n--dtype\nbf16\n--config=c.json"));
  put("cli", "bench.txt",
      cli(7, "--model\ngpt2-d2\n-b\n2\n-t\n64\n--targets\nscalar,avx2\n--reps\n3\n--format\ncsv"));
  put("cli", "plot.txt",
      cli(8, "a.log\nb.log\n-o\nloss.svg\n--width\n640\n--height=480\n--log-scale"));
  put("cli", "version.txt", cli(9, ""));
}

}  // namespace
}  // namespace llmcpu

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds TESTS_FUZZ_DIR (the source folder tests/fuzz)\n");
    return 2;
  }
  using namespace llmcpu;
  out_root = std::filesystem::absolute(argv[1]).lexically_normal().string();
  if (out_root.back() == '/') out_root.pop_back();
  try {
    checkpoints();
    token_shards();
    token_spans_files();
    debug_states();
    safetensors_files();
    gguf_files();
    train_states();
    resume_folders();
    tokenizer_files();
    tomls();
    texts();
    tokenizer_jsons();
    hf_texts();
    command_lines();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
