#include "core/util/file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/util/fault.h"
#include "simd/error.h"

namespace llmcpu {

namespace {
std::string errno_text() { return errno_message(errno); }
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, "cannot open for reading: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw FileError(path, "cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FileError(path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      throw FileError(path, "cannot map into memory: " + why);
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

const int32_t* MappedFile::llmc_header(const char* what) const {
  if (size_ < kLlmcHeaderBytes) {
    throw FileError(path_, std::string("too short for a ") + what + ": " + std::to_string(size_) +
                               " bytes, the header alone is " + std::to_string(kLlmcHeaderBytes));
  }
  return reinterpret_cast<const int32_t*>(data_);
}

void MappedFile::expect_size(size_t expected, const std::string& expectation) const {
  if (size_ == expected) return;
  throw FileError(path_, "file is " + std::to_string(size_) + " bytes, but " + expectation + " is " +
                             std::to_string(expected) + " bytes" +
                             (size_ < expected ? " (truncated?)" : ""));
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, const char* fault_point)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())), fault_point_(fault_point) {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw FileError(path_, "cannot create " + tmp_path_ + ": " + errno_text());
  if (*fault_point_) fault_ = fault_at(fault_point_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!published_) ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (fault_ != FaultAction::kNone && written_ > 0 && bytes > 1) {
    // An injected fault (core/util/fault.h) halfway through the file: half of this piece lands.
    const FaultAction fault = std::exchange(fault_, FaultAction::kNone);
    write(p, bytes / 2);
    if (fault == FaultAction::kKill) fault_kill_now();
    errno = fault == FaultAction::kEnospc ? ENOSPC : EIO;
    throw FileError(path_, "write failed: " + errno_text() + " (injected by LLMCPU_FAULT)");
  }
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw FileError(path_, "write failed: " + errno_text());
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::finish() {
  if (::fsync(fd_) != 0) throw FileError(path_, "fsync failed: " + errno_text());
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw FileError(path_, "close failed: " + errno_text());
  finished_ = true;
}

void AtomicFileWriter::publish() {
  if (!finished_) finish();
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    throw FileError(path_, "cannot rename " + tmp_path_ + " into place: " + errno_text());
  }
  published_ = true;
  // Make the rename itself durable: without the folder's fsync a crash may forget it.
  const size_t slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : path_.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw FileError(dir, "cannot open the folder to fsync it: " + errno_text());
  const int rc = ::fsync(dfd);
  const std::string why = rc != 0 ? errno_text() : "";
  ::close(dfd);
  if (rc != 0) throw FileError(dir, "fsync of the folder failed: " + why);
}

std::string errno_message(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string(std::strerror(err)) + " (" + (name ? name : "errno " + std::to_string(err)) + ")";
}

std::vector<std::string> stale_temporary_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 == name.size()) continue;
    if (name.find_first_not_of("0123456789", at + 5) != std::string::npos) continue;
    if (entry.is_regular_file(ec)) found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

FolderLock::FolderLock(const std::string& dir, const std::string& lock_name,
                       const std::string& purpose)
    : path_((std::filesystem::path(dir) / lock_name).string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw FileError(path_, "cannot create the lock file: " + errno_text());
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    [[maybe_unused]] const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = pid;
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK) {
      throw FileError(dir, "in use by another " + purpose + " (PID " +
                               (holder.empty() ? "unknown" : holder) + ", lock " + path_ +
                               "); one process per folder");
    }
    throw FileError(path_, "cannot lock: " + errno_message(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock itself holds; only the PID shown to a second process would be missing.
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace llmcpu
