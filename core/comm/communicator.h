// The processes of a data-parallel run and the collectives training needs, behind one interface:
// rank and size, sum all-reduce, reduce-scatter and all-gather over evenly split shards,
// broadcast and barrier. Two worlds implement it: a single process (rank 0 of 1; a collective is
// a copy or nothing), which a plain `llmcpu train` and the tests use, and Open MPI
// (mpi_communicator.cpp, built with LLMCPU_MPI) under `mpirun -np N`. Every collective is blocking
// and must be called by every rank in the same order; results do not depend on timing.
// Deliberately not here: which buffers are reduced when (the trainer), thread placement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/util/shard.h"

namespace llmcpu {

// Memory that every rank of a world on one machine maps (an MPI-3 shared window): a block per
// rank, each rank reading and writing any of them. What a rank wrote before fence() is seen by
// every rank after it; between fences, no two ranks may touch the same bytes if one of them writes.
class SharedMemory {
 public:
  virtual ~SharedMemory() = default;
  // Rank r's block, 64-byte aligned (the same address range in every rank's view of it).
  virtual void* block(int rank) const = 0;
  // A barrier that also orders the memory: every rank waits here for the others.
  virtual void fence() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this machine
  int local_size() const { return local_size_; }
  // "single process" or "Open MPI 4.1.4, 4 ranks on 2 machines".
  virtual std::string describe() const = 0;

  // data (n) = the element-wise sum over ranks, on every rank.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  // In place: this rank's shard of data (n; shard_of(n, rank, size)) becomes the element-wise sum
  // of that shard over ranks; the rest of data is left unspecified (it may hold the sum too: on one
  // machine the MPI world all-reduces, which is faster there).
  virtual void reduce_scatter_sum(float* data, size_t n) = 0;
  // data (n): every rank's shard (shard_of(n, rank, size)) sent to every rank, in place.
  virtual void all_gather(float* data, size_t n) = 0;
  // The same for 16-bit elements (bf16 weights), moved as they are.
  virtual void all_gather(uint16_t* data, size_t n) = 0;
  // data (bytes) from `root` to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Collective. When every rank of the world is on this machine: memory shared by them, a block
  // of `bytes` for this rank (the ranks may ask for different sizes). Otherwise null: a single
  // process, ranks on several machines, LLMCPU_SHARED_MEMORY=0 in the environment (to run the
  // machines' path on one machine, for tests and measurements), or too little room where the
  // memory would live (a container's small /dev/shm), which `why_not` then explains.
  virtual std::unique_ptr<SharedMemory> share_memory(size_t bytes, std::string* why_not) {
    return nullptr;
  }
  // Whether share_memory will try (every rank on this machine, sharing not turned off), for plans
  // made before it is called; it can still find too little room.
  virtual bool may_share_memory() const { return false; }
  // A collective that waits longer than this for the other ranks ends this process (and so, through
  // mpirun, the job) with a message naming the rank and the collective: a hung rank must not hang
  // the rest forever. No effect in a single process.
  virtual void set_timeout(double seconds) {}
  // Ends every rank of the job with `code` (a rank that failed calls it so the others do not wait
  // in a collective forever). A single process just returns.
  virtual void abort(int code) = 0;

 protected:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

// A world of one process.
std::unique_ptr<Communicator> single_process_communicator();

// The MPI this build was compiled against ("Open MPI 4.1.4"), or "" when built without MPI.
std::string mpi_build();

// True when this process was started by mpirun (Open MPI's environment is set).
bool launched_by_mpirun();
// Under mpirun, the MPI world (initialising MPI, with threads: the calling thread and a
// communication thread may both make calls, one at a time); otherwise a single process. Throws
// UsageError under mpirun when this build has no MPI (LLMCPU_MPI off), and Error when MPI's
// thread support is too weak.
std::unique_ptr<Communicator> world_communicator();

}  // namespace llmcpu
