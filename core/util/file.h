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
  // The pages holding [p, p + bytes), a range inside the mapping, leave this process's resident
  // memory (read from the file again if touched): a reader done with a part of a large file lets it
  // go. Nothing outside the mapping is touched.
  void let_go(const uint8_t* p, size_t bytes) const;

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

// An advisory lock (flock) on DIR/LOCK_NAME, held while the object lives: exclusive for a process
// that writes the folder, shared for one that only reads it, so that one writer alone or any number
// of readers together hold it. A process that conflicts is refused with a FileError naming the
// folder and the PID of the holder ("in use by another PURPOSE (PID 12, lock DIR/train.lock); one
// process per folder", "... PURPOSE writing it ...", "... PURPOSE reading it (PIDs 12, 34, ...").
// The lock goes with the process (also when it is killed); the file stays.
// The file's text says who holds it, a line per holder. A writer, alone, replaces it with "PID\n";
// a reader appends "PID shared\n" in one O_APPEND write, so readers never tear each other's lines
// and never touch a writer's (they hold only while no writer does). A refused process names the
// first line's PID when a writer holds the lock, and the PIDs of the "shared" lines that are still
// running when readers do (a reader that has gone leaves its line until the next writer's replaces
// the text; those lines are skipped).
// A shared lock on a folder this user cannot write (someone else's checkpoints, a read-only disk)
// opens an existing lock file for reading; where none exists and none can be made, nothing is
// locked: held() is false and why_not() says why, for the caller to report.
enum class LockMode { kExclusive, kShared };

class FolderLock {
 public:
  FolderLock(const std::string& dir, const std::string& lock_name, const std::string& purpose,
             LockMode mode = LockMode::kExclusive);
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();
  const std::string& path() const { return path_; }
  bool held() const { return fd_ >= 0; }
  const std::string& why_not() const { return why_not_; }

 private:
  std::string path_;
  std::string why_not_;
  int fd_ = -1;
};

inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

}  // namespace llmcpu
