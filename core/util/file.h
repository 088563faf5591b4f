// File helpers shared by the loaders and writers: a read-only memory map with bounds-checked views,
// and an atomic writer (temporary file in the same folder, fsync, rename), so an existing file is
// replaced only by a complete new one. Errors name the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmcpu {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_; }

  // The 256 int32 header every llm.c file starts with; throws if the file is shorter.
  const int32_t* llmc_header(const char* what) const;
  // Throws FileError "file is N bytes, but <expectation> is M bytes (truncated?)" unless the file is
  // exactly `expected` bytes long; `expectation` says what the header implies ("a debug state of ...").
  void expect_size(size_t expected, const std::string& expectation) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Writes to PATH.tmp.<pid> and renames it over PATH on commit(). Destroyed without commit(), it
// removes the temporary file and leaves PATH as it was.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(const void* data, size_t bytes);
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
};

inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

}  // namespace llmcpu
