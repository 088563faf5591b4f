// The Open MPI world (LLMCPU_MPI builds): MPI is initialised on first use with
// MPI_THREAD_SERIALIZED or better and finalised at exit. Shards follow shard_of, so uneven sizes
// use the v-variants of the collectives; large ones go in pieces of at most 8 MB.
#include <mpi.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/communicator.h"
#include "simd/error.h"

namespace llmcpu {

namespace {

void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(status, text, &len);
  throw Error(std::string("MPI: ") + call + " failed: " + std::string(text, len));
}

// Ends the process when a collective has waited longer than the timeout. Collectives mark their
// start and end; a thread looks twice a second.
class Watchdog {
 public:
  ~Watchdog() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void start(double seconds, int rank) {
    limit_ms_ = int64_t(seconds * 1000);
    rank_ = rank;
    if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
  }
  void enter(const char* call) {
    call_ = call;
    since_ms_ = now_ms();
  }
  void leave() { since_ms_ = 0; }

 private:
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void watch() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const int64_t since = since_ms_;
      if (since != 0 && now_ms() - since > limit_ms_) {
        std::fprintf(stderr,
                     "llmcpu: rank %d: %s has waited %.0f s for the other ranks (--comm-timeout "
                     "%.0f): one of them is hung or lost; ending the job\n",
                     rank_, call_.load(), (now_ms() - since) / 1000.0, limit_ms_ / 1000.0);
        std::fflush(stderr);
        std::_Exit(3);  // mpirun ends the other ranks when one exits without finalizing
      }
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> since_ms_{0}, limit_ms_{0};
  std::atomic<const char*> call_{""};
  int rank_ = 0;
  std::thread thread_;
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

// Marks a collective for the watchdog for as long as it runs.
struct Collective {
  explicit Collective(const char* call) { watchdog().enter(call); }
  ~Collective() { watchdog().leave(); }
};

// A shared window over MPI_COMM_WORLD (every rank on this machine), in a passive epoch on every
// rank for its whole life (lock_all), so that MPI_Win_sync orders the loads and stores around
// each barrier.
class MpiSharedMemory final : public SharedMemory {
 public:
  MpiSharedMemory(size_t bytes, int ranks) : blocks_(ranks) {
    MPI_Info info;
    MPI_Info_create(&info);
    // Each rank's block in pages of its own, placed by whoever touches them first (NUMA).
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void* mine = nullptr;
    const int status =
        MPI_Win_allocate_shared(MPI_Aint(bytes + kAlign), 1, info, MPI_COMM_WORLD, &mine, &win_);
    MPI_Info_free(&info);
    check(status, "MPI_Win_allocate_shared");
    MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN);
    for (int r = 0; r < ranks; ++r) {
      MPI_Aint size = 0;
      int unit = 0;
      void* base = nullptr;
      check(MPI_Win_shared_query(win_, r, &size, &unit, &base), "MPI_Win_shared_query");
      const uintptr_t at = (reinterpret_cast<uintptr_t>(base) + kAlign - 1) / kAlign * kAlign;
      blocks_[r] = reinterpret_cast<void*>(at);
    }
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
  }
  ~MpiSharedMemory() override {
    // Freeing is collective: a rank leaving by an exception does not wait for the others here
    // (it ends the job instead), and the memory goes with the process.
    if (std::uncaught_exceptions() > 0) return;
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  void* block(int rank) const override { return blocks_[rank]; }
  void fence() override {
    Collective c("MPI_Barrier");
    check(MPI_Win_sync(win_), "MPI_Win_sync");
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    check(MPI_Win_sync(win_), "MPI_Win_sync");
  }

 private:
  static constexpr uintptr_t kAlign = 64;
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<void*> blocks_;
};

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      // The communication thread shares its cores with the compute threads: waiting in MPI by
      // spinning would take their cycles (2 ranks x 1 thread on 2 cores: 2.1 s per step of GPT-2
      // 124M spinning, 1.6-1.8 s yielding; bench/RESULTS.md). A value set by the user wins.
      setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      if (provided < MPI_THREAD_SERIALIZED) {
        throw Error("MPI: the library provides thread level " + std::to_string(provided) +
                    ", llmcpu needs MPI_THREAD_SERIALIZED (a communication thread)");
      }
      std::atexit([] {
        int finalised = 0;
        MPI_Finalized(&finalised);
        if (!finalised) MPI_Finalize();
      });
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    int leaders = local_rank_ == 0 ? 1 : 0;
    check(MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
    machines_ = leaders;
    reduce_scatter_in_rounds_ = machines_ > 1;
    if (const char* how = std::getenv("LLMCPU_REDUCE_SCATTER")) {
      const std::string h = how;
      if (h != "rounds" && h != "allreduce") {
        throw UsageError("LLMCPU_REDUCE_SCATTER=" + h + ": expected rounds or allreduce");
      }
      reduce_scatter_in_rounds_ = h == "rounds";
    }
    if (const char* shared = std::getenv("LLMCPU_SHARED_MEMORY")) {
      const std::string s = shared;
      if (s != "0" && s != "1") throw UsageError("LLMCPU_SHARED_MEMORY=" + s + ": expected 0 or 1");
      share_memory_ = s == "1";
    }
    MPI_Comm_free(&local);
    counts_.resize(size_);
    displs_.resize(size_);
  }

  std::string describe() const override {
    int major = 0, minor = 0, release = 0;
#ifdef OMPI_MAJOR_VERSION
    major = OMPI_MAJOR_VERSION, minor = OMPI_MINOR_VERSION, release = OMPI_RELEASE_VERSION;
#endif
    return "Open MPI " + std::to_string(major) + "." + std::to_string(minor) + "." +
           std::to_string(release) + ", " + std::to_string(size_) + " ranks on " +
           std::to_string(machines_) + (machines_ == 1 ? " machine" : " machines");
  }

  void all_reduce_sum(float* data, size_t n) override { reduce_in_chunks(data, n, MPI_FLOAT); }
  void all_reduce_sum(double* data, size_t n) override { reduce_in_chunks(data, n, MPI_DOUBLE); }

  void set_timeout(double seconds) override { watchdog().start(seconds, rank_); }

  void reduce_scatter_sum(float* data, size_t n) override {
    // On one machine a whole all-reduce is cheaper: shared memory makes its twice the bytes nearly
    // free, while a balanced reduce-scatter must first assemble its input (below): 512 MB of fp32
    // over 2 ranks took 88 ms all-reduced, 136 ms reduce-scattered (bench_allreduce). Between
    // machines the link is the cost, and the reduce-scatter moves half the bytes.
    // LLMCPU_REDUCE_SCATTER=rounds|allreduce overrides the choice (for measuring, and the tests).
    if (!reduce_scatter_in_rounds_) return reduce_in_chunks(data, n, MPI_FLOAT);
    Collective c("MPI_Reduce_scatter");
    // In rounds that take the next chunk of every rank's shard, so that every rank has its share
    // of each round (Open MPI 4.1's reduce-scatter ran at 0.06 GB/s on a round where one rank's
    // count was 0, or whose counts exceeded 8 MB, against 3-4 GB/s balanced: bench_allreduce). The
    // chunks are not adjacent in data, so a round's input is assembled in scratch, in rank order.
    const size_t chunk = kPieceBytes / sizeof(float) / size_;
    const Shard own = shard_of(n, rank_, size_);
    for (size_t k = 0; k * chunk < shard_of(n, 0, size_).count; ++k) {
      size_t at = 0;
      for (int r = 0; r < size_; ++r) {
        const Shard s = shard_of(n, r, size_);
        const size_t begin = std::min(s.count, k * chunk), end = std::min(s.count, begin + chunk);
        counts_[r] = int(end - begin);
        if (end > begin) {
          std::memcpy(scratch_in_.data() + at, data + s.begin + begin,
                      (end - begin) * sizeof(float));
        }
        at += end - begin;
      }
      check(MPI_Reduce_scatter(scratch_in_.data(), scratch_.data(), counts_.data(), MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD),
            "MPI_Reduce_scatter");
      if (counts_[rank_] > 0) {
        std::memcpy(data + own.begin + k * chunk, scratch_.data(), counts_[rank_] * sizeof(float));
      }
    }
  }

  void all_gather(float* data, size_t n) override { gather_in_pieces(data, n, MPI_FLOAT); }
  void all_gather(uint16_t* data, size_t n) override { gather_in_pieces(data, n, MPI_UINT16_T); }

  void broadcast(void* data, size_t bytes, int root) override {
    Collective c("MPI_Bcast");
    char* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const int count = int(std::min<size_t>(bytes - done, kMaxCount));
      check(MPI_Bcast(p + done, count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
      done += count;
    }
  }

  void barrier() override {
    Collective c("MPI_Barrier");
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

  bool may_share_memory() const override { return machines_ == 1 && share_memory_; }

  std::unique_ptr<SharedMemory> share_memory(size_t bytes, std::string* why_not) override {
    if (!may_share_memory()) return nullptr;
    // Open MPI backs the window with a file in osc_sm_backing_directory (/dev/shm), whose pages
    // are only taken when touched: a tmpfs too small for them (Docker's /dev/shm is 64 MB) would
    // end the job with SIGBUS mid-run. Rank 0 looks, and every rank follows its answer.
    double total = double(bytes) + 2 * 4096;  // the window's alignment, per rank
    all_reduce_sum(&total, 1);
    char reason[512] = "";
    if (rank_ == 0) {
      const char* dir = std::getenv("OMPI_MCA_osc_sm_backing_directory");
      if (!dir) dir = "/dev/shm";
      struct statvfs fs;
      if (statvfs(dir, &fs) == 0 && double(fs.f_bavail) * double(fs.f_frsize) < total) {
        std::snprintf(reason, sizeof reason,
                      "%s has %.1f MiB free, the ranks' shared weights and gradients need %.1f MiB "
                      "(in a container: a larger --shm-size; or --mca osc_sm_backing_directory "
                      "DIR on a local file system with room)",
                      dir, double(fs.f_bavail) * double(fs.f_frsize) / 1048576.0,
                      total / 1048576.0);
      }
    }
    broadcast(reason, sizeof reason, 0);
    if (reason[0] != '\0') {
      if (why_not) *why_not = reason;
      return nullptr;
    }
    return std::make_unique<MpiSharedMemory>(bytes, size_);
  }

 private:
  static constexpr size_t kMaxCount = 1u << 30;  // MPI counts are ints
  // Collectives go out in pieces of at most this many bytes: Open MPI 4.1's all-reduce for larger
  // messages ran at 0.2-0.3 GB/s against 5 GB/s up to 16 MB on the machine of bench/RESULTS.md
  // (bench_allreduce), and pieces keep the sums independent of the message size all the same.
  static constexpr size_t kPieceBytes = size_t(8) << 20;

  template <typename T>
  void reduce_in_chunks(T* data, size_t n, MPI_Datatype type) {
    Collective c("MPI_Allreduce");
    for (size_t done = 0; done < n;) {
      const int count = int(std::min<size_t>(n - done, kPieceBytes / sizeof(T)));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      done += count;
    }
  }

  template <typename T>
  void gather_in_pieces(T* data, size_t n, MPI_Datatype type) {
    Collective c("MPI_Allgatherv");
    for (size_t a = 0; a < n; a += kPieceBytes / sizeof(T)) {
      const size_t b = std::min(n, a + kPieceBytes / sizeof(T));
      piece_layout(n, a, b);
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data + a, counts_.data(),
                           displs_.data(), type, MPI_COMM_WORLD),
            "MPI_Allgatherv");
    }
  }

  // counts_ and displs_ for the piece [a, b) of n elements sharded by shard_of: each rank's part
  // of the piece is where its shard meets it (shards are contiguous in rank order, so the parts
  // are too); displacements count from a.
  void piece_layout(size_t n, size_t a, size_t b) {
    for (int r = 0; r < size_; ++r) {
      const Shard s = shard_of(n, r, size_);
      const size_t begin = std::clamp(s.begin, a, b), end = std::clamp(s.begin + s.count, a, b);
      counts_[r] = int(end - begin);
      displs_[r] = int(begin - a);
    }
  }

  int machines_ = 1;
  bool reduce_scatter_in_rounds_ = false;  // else all-reduce (reduce_scatter_sum)
  bool share_memory_ = true;               // on one machine (share_memory)
  std::vector<int> counts_, displs_;
  // A reduce-scatter round's input (all ranks' chunks) and this rank's part of its sum.
  std::vector<float> scratch_in_ = std::vector<float>(kPieceBytes / sizeof(float));
  std::vector<float> scratch_ = std::vector<float>(kPieceBytes / sizeof(float));
};

}  // namespace

std::string mpi_build() {
#ifdef OMPI_MAJOR_VERSION
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) +
         "." + std::to_string(OMPI_RELEASE_VERSION);
#else
  return "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
}

std::unique_ptr<Communicator> world_communicator() {
  if (!launched_by_mpirun()) return single_process_communicator();
  return std::make_unique<MpiWorld>();
}

}  // namespace llmcpu
