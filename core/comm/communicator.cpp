#include "core/comm/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "simd/error.h"

namespace llmcpu {

namespace {

class SingleProcess final : public Communicator {
 public:
  std::string describe() const override { return "single process"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void reduce_scatter_sum(float*, size_t) override {}
  void all_gather(float*, size_t) override {}
  void all_gather(uint16_t*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  void abort(int) override {}
};

}  // namespace

std::unique_ptr<Communicator> single_process_communicator() {
  return std::make_unique<SingleProcess>();
}

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

#ifndef LLMCPU_HAVE_MPI
std::string mpi_build() { return ""; }

std::unique_ptr<Communicator> world_communicator() {
  if (launched_by_mpirun()) {
    throw UsageError(
        "started by mpirun, but this llmcpu was built without MPI (LLMCPU_MPI off or Open MPI not "
        "found); install libopenmpi-dev and rebuild, or run without mpirun");
  }
  return single_process_communicator();
}
#endif

}  // namespace llmcpu
