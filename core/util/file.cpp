#include "core/util/file.h"

#include <fcntl.h>
#include <signal.h>
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

void MappedFile::let_go(const uint8_t* p, size_t bytes) const {
  if (!data_ || bytes == 0 || p < data_ || bytes > size_ || p - data_ > ptrdiff_t(size_ - bytes)) {
    return;
  }
  // The mapping starts on a page and is never written: its pages come back from the file as they
  // were, so the range may be rounded out to whole pages.
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = uintptr_t(p) / page * page;
  const uintptr_t last = (uintptr_t(p) + bytes + page - 1) / page * page;
  madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
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

namespace {

// "PID 12", "PIDs 12, 34" or "PID unknown".
std::string pid_list(const std::vector<std::string>& pids) {
  if (pids.empty()) return "PID unknown";
  std::string out = pids.size() == 1 ? "PID " : "PIDs ";
  for (size_t i = 0; i < pids.size(); ++i) out += (i ? ", " : "") + pids[i];
  return out;
}

// Who holds a lock file whose text is `text` (FolderLock's format: "PID\n" of a writer, or lines
// "PID shared\n" of readers): the writer's PID, or the readers' that still run.
std::vector<std::string> lock_holders(const std::string& text, bool readers) {
  std::vector<std::string> pids;
  size_t at = 0;
  for (bool first = true; at < text.size(); first = false) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const size_t digits = std::min(line.find_first_not_of("0123456789"), line.size());
    if (digits == 0 || digits > 9) continue;
    const std::string pid = line.substr(0, digits), rest = line.substr(digits);
    if (!readers) {  // the writer replaced the text with its own line
      if (first && rest.empty()) pids.push_back(pid);
      break;
    }
    if (rest != " shared") continue;
    if (::kill(std::stoi(pid), 0) != 0 && errno != EPERM) continue;  // a reader that has gone
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  }
  return pids;
}

}  // namespace

FolderLock::FolderLock(const std::string& dir, const std::string& lock_name,
                       const std::string& purpose, LockMode mode)
    : path_((std::filesystem::path(dir) / lock_name).string()) {
  const bool shared = mode == LockMode::kShared;
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (shared ? O_APPEND : 0), 0644);
  bool writable = fd_ >= 0;
  if (!writable && shared && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    const std::string why = errno_text();
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);  // a reader's lock needs no write access
    if (fd_ < 0) {
      why_not_ = "cannot create the lock file " + path_ + ": " + why;
      return;
    }
  }
  if (fd_ < 0) throw FileError(path_, "cannot create the lock file: " + errno_text());
  if (::flock(fd_, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int err = errno;
    // Refused: by a writer, unless a reader's lock can be had now (then readers hold it).
    const bool by_readers = err == EWOULDBLOCK && !shared && ::flock(fd_, LOCK_SH | LOCK_NB) == 0;
    std::string text(64 * 1024, '\0');
    const ssize_t n = ::pread(fd_, text.data(), text.size(), 0);
    text.resize(n > 0 ? size_t(n) : 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw FileError(path_, "cannot lock: " + errno_message(err));
    const std::string holders = pid_list(lock_holders(text, by_readers)) + ", lock " + path_;
    if (by_readers) {
      throw FileError(dir, "in use by another " + purpose + " reading it (" + holders +
                               "); it can be written only while no process reads it");
    }
    if (shared) {
      throw FileError(dir, "in use by another " + purpose + " writing it (" + holders +
                               "); it can be read only while no process writes it");
    }
    throw FileError(dir,
                    "in use by another " + purpose + " (" + holders + "); one process per folder");
  }
  // Failed writes of the text leave the lock held; only the PID shown to a refused process is lost.
  if (!writable) return;
  const std::string line = std::to_string(::getpid()) + (shared ? " shared\n" : "\n");
  if (!shared && ::ftruncate(fd_, 0) != 0) return;
  [[maybe_unused]] const ssize_t n =
      shared ? ::write(fd_, line.data(), line.size()) : ::pwrite(fd_, line.data(), line.size(), 0);
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace llmcpu
