// The Open MPI world (LLMCPU_MPI builds): MPI is initialised on first use with
// MPI_THREAD_SERIALIZED or better and finalised at exit. Shards follow shard_of, so uneven sizes use
// the v-variants of the collectives.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
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

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
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

  void all_reduce_sum(float* data, size_t n) override {
    reduce_in_chunks(data, n, MPI_FLOAT);
  }
  void all_reduce_sum(double* data, size_t n) override {
    reduce_in_chunks(data, n, MPI_DOUBLE);
  }

  void reduce_scatter_sum(const float* in, float* out, size_t n) override {
    layout(n);
    check(MPI_Reduce_scatter(in, out, counts_.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Reduce_scatter");
  }

  void all_gather(float* data, size_t n) override {
    layout(n);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts_.data(), displs_.data(),
                         MPI_FLOAT, MPI_COMM_WORLD),
          "MPI_Allgatherv");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (size_t done = 0; done < bytes;) {
      const int count = int(std::min<size_t>(bytes - done, kMaxCount));
      check(MPI_Bcast(p + done, count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
      done += count;
    }
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  static constexpr size_t kMaxCount = 1u << 30;  // MPI counts are ints

  template <typename T>
  void reduce_in_chunks(T* data, size_t n, MPI_Datatype type) {
    for (size_t done = 0; done < n;) {
      const int count = int(std::min<size_t>(n - done, kMaxCount));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      done += count;
    }
  }

  // counts_ and displs_ for shards of n elements.
  void layout(size_t n) {
    if (n / size_ + 1 > kMaxCount) {
      throw Error("MPI: a shard of " + std::to_string(n / size_) + " elements exceeds MPI's int counts");
    }
    for (int r = 0; r < size_; ++r) {
      const Shard s = shard_of(n, r, size_);
      counts_[r] = int(s.count);
      displs_[r] = int(s.begin);  // n < size * 2^30 keeps this within int for the sizes we use
    }
  }

  int machines_ = 1;
  std::vector<int> counts_, displs_;
};

}  // namespace

std::unique_ptr<Communicator> world_communicator() {
  if (!launched_by_mpirun()) return single_process_communicator();
  return std::make_unique<MpiWorld>();
}

}  // namespace llmcpu
