// File helpers shared by the loaders and writers: a read-only memory map with bounds-checked views,
// an atomic writer (temporary file in the same folder, fsync, rename, fsync of the folder), so an
// existing file is replaced only by a complete new one, and an advisory lock on a folder. Errors name
// the file, the problem and the errno.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/fault.h"

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

// Writes to PATH.tmp.<pid> and renames it over PATH on commit(). Destroyed without commit() (or
// publish()), it removes the temporary file and leaves PATH as it was. Several files that belong
// together (a checkpoint's model and state files) are each written and finish()ed, then
// publish()ed one after the other, so a full disk or an I/O error is met before any rename.
// `fault_point` names the file for core/util/fault.h ("model-write", ...); empty: none.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path, const char* fault_point = "");
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(const void* data, size_t bytes);
  void finish();   // fsync and close the temporary file: its bytes are on disk
  void publish();  // rename it over PATH and fsync the folder, so that the rename is on disk too
  void commit() {
    finish();
    publish();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_path_;
  const char* fault_point_;
  FaultAction fault_ = FaultAction::kNone;
  size_t written_ = 0;
  int fd_ = -1;
  bool finished_ = false;
  bool published_ = false;
};

// "No space left on device (ENOSPC)": strerror with the errno's name.
std::string errno_message(int err);

// The temporary files AtomicFileWriter leaves when its process is killed mid-write:
// NAME.tmp.<digits> in `dir`. Only safe to remove by a process that holds the folder's lock.
std::vector<std::string> stale_temporary_files(const std::string& dir);

// An exclusive advisory lock (flock) on DIR/LOCK_NAME, held while the object lives, with this
// process's PID written into the file. A second holder is refused with a FileError naming the PID
// of the first. The lock goes with the process (also when it is killed); the file stays.
class FolderLock {
 public:
  FolderLock(const std::string& dir, const std::string& lock_name, const std::string& purpose);
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

}  // namespace llmcpu
