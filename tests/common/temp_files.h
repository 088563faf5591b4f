// Files for tests of loaders and writers: whole files as bytes, a FileError check, and a fresh
// folder per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "simd/error.h"

namespace llmcpu::testing {

using Bytes = std::vector<uint8_t>;

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

template <typename T>
inline void append(Bytes& file, const T* data, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  file.insert(file.end(), p, p + n * sizeof(T));
}

// Runs `load`, which must throw a FileError for `path` whose message contains every one of `words`.
inline void expect_file_error(const std::function<void()>& load, const std::string& path,
                              std::initializer_list<std::string> words) {
  try {
    load();
    ADD_FAILURE() << path << ": loaded without an error";
  } catch (const FileError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(what.find(path), std::string::npos) << "the message does not name the file: " << what;
    for (const std::string& w : words) {
      EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing in: " << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": expected a FileError, got another exception: " << e.what();
  }
}

// A fresh folder per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // A parameterized test's names hold '/' (Suite/Name/0): one folder all the same.
    std::string name = "llmcpu_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                       std::to_string(::getpid());
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(std::filesystem::create_directories(dir_)) << dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::filesystem::path dir_;
};

}  // namespace llmcpu::testing
