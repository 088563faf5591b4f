// Model preset files (core/model/preset.h): a valid one gives its shape; a missing key, an unknown
// key, a value of the wrong type, a value out of range, channels that heads do not divide and a
// file that is not TOML are each refused with a message naming the file and the key (or line), by
// the loader and through `llmcpu train --model FILE.toml`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/model/preset.h"
#include "simd/error.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;

const char* const kValid[] = {"layers = 2", "heads = 3", "channels = 48", "max_seq_len = 32",
                              "vocab_size = 311"};

class ModelPreset : public testing::TempDirTest {
 protected:
  // A preset of the valid lines, with `key`'s line replaced by `line` (dropped if empty), and any
  // `extra` line appended.
  std::string write(const std::string& key, const std::string& line,
                    const std::string& extra = "") {
    const std::string path = (dir_ / ("preset_" + std::to_string(count_++) + ".toml")).string();
    std::ofstream f(path);
    for (const char* valid : kValid) {
      if (std::string(valid).rfind(key + " ", 0) != 0) {
        f << valid << "\n";
      } else if (!line.empty()) {
        f << line << "\n";
      }
    }
    if (!extra.empty()) f << extra << "\n";
    return path;
  }

  // Expects load_model_preset(path) to throw UsageError with "PATH: MESSAGE".
  static void expect_refused(const std::string& path, const std::string& message) {
    try {
      load_model_preset(path);
      ADD_FAILURE() << "accepted " << path << ", expected: " << message;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": " + message), std::string::npos) << e.what();
    }
  }

  int count_ = 0;
};

TEST_F(ModelPreset, ValidFileGivesItsShape) {
  const ModelConfig c = load_model_preset(write("", ""));
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 3);
  EXPECT_EQ(c.channels, 48);
  EXPECT_EQ(c.max_seq_len, 32);
  EXPECT_EQ(c.vocab_size, 311);
  EXPECT_EQ(c.padded_vocab_size, 384);  // 311 rounded up to a multiple of 128
}

TEST_F(ModelPreset, MissingKeyIsNamed) {
  for (const char* key : {"layers", "heads", "channels", "max_seq_len", "vocab_size"}) {
    expect_refused(write(key, ""), std::string("missing key '") + key + "'");
  }
}

TEST_F(ModelPreset, UnknownKeyIsNamed) {
  expect_refused(write("", "", "dropout = 0.1"), "unknown key 'dropout'");
  expect_refused(write("layers", "layer = 2"), "unknown key 'layer'");  // a misspelt one
  expect_refused(write("", "", "[model]\nlayers = 2"), "unknown key 'model'");
}

TEST_F(ModelPreset, WrongTypeIsNamed) {
  expect_refused(write("layers", "layers = \"2\""),
                 "key 'layers' must be an integer in 1..4096, got a string");
  expect_refused(write("channels", "channels = 48.0"),
                 "key 'channels' must be an integer in 1..65536, got a floating-point");
  expect_refused(write("heads", "heads = true"),
                 "key 'heads' must be an integer in 1..4096, got a boolean");
  expect_refused(write("vocab_size", "vocab_size = [311]"),
                 "key 'vocab_size' must be an integer in 1..16777216, got an array");
}

TEST_F(ModelPreset, ValueOutOfRangeIsNamed) {
  const struct {
    const char* key;
    const char* line;
    const char* message;
  } cases[] = {
      {"layers", "layers = 0", "key 'layers' must be an integer in 1..4096, got 0"},
      {"layers", "layers = 4097", "key 'layers' must be an integer in 1..4096, got 4097"},
      {"heads", "heads = -3", "key 'heads' must be an integer in 1..4096, got -3"},
      {"channels", "channels = 65537", "key 'channels' must be an integer in 1..65536, got 65537"},
      {"max_seq_len", "max_seq_len = 16777217",
       "key 'max_seq_len' must be an integer in 1..16777216, got 16777217"},
      {"vocab_size", "vocab_size = 0", "key 'vocab_size' must be an integer in 1..16777216, got 0"},
      {"vocab_size", "vocab_size = 9999999999",
       "key 'vocab_size' must be an integer in 1..16777216, got 9999999999"},
      {"channels", "channels = 50", "key 'channels' (50) must be a multiple of key 'heads' (3)"},
  };
  for (const auto& c : cases) expect_refused(write(c.key, c.line), c.message);
}

TEST_F(ModelPreset, FileThatIsNotTomlNamesTheLine) {
  const std::string path = write("heads", "heads = = 3");
  try {
    load_model_preset(path);
    ADD_FAILURE() << "accepted " << path;
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not valid TOML"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at line 2"), std::string::npos) << e.what();
  }
}

TEST_F(ModelPreset, TrainNamesTheFileAndTheKey) {
  const std::string path = write("layers", "layers = 0");
  const testing::Outcome r =
      testing::run_llmcpu("train --model " + path + " --train-data " +
                          testing::fixture("tiny", "train.bin") + " --steps 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(path + ": key 'layers' must be an integer in 1..4096, got 0"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace llmcpu
