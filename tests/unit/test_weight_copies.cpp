// WeightCopies (core/model/weight_copies.h): each transition of its state table, checked from the
// rules as the header states them, on a model with and without a bf16 copy and a device.
#include <gtest/gtest.h>

#include "core/model/weight_copies.h"

namespace llmcpu {
namespace {

// A bf16 model with a configured device, every copy current.
WeightCopies bf16_with_device() {
  WeightCopies c(/*bf16=*/true);
  c.device_configured();
  return c;
}

TEST(WeightCopies, StartsCurrentWithTheCopiesAsked) {
  const WeightCopies fp32(false), bf16(true);
  EXPECT_FALSE(fp32.bf16_current());  // there is none
  EXPECT_FALSE(fp32.bf16_stale());
  EXPECT_TRUE(bf16.bf16_current());
  for (const WeightCopies* c : {&fp32, &bf16}) {
    EXPECT_FALSE(c->master_behind());
    EXPECT_FALSE(c->device_present());
    EXPECT_FALSE(c->device_stale());
    EXPECT_FALSE(c->device_holds_moments());
    EXPECT_TRUE(c->bf16_rebuildable());
    EXPECT_FALSE(c->master_released());
    EXPECT_FALSE(c->memory_shared_by_ranks());
  }
}

TEST(WeightCopies, AfterTheMasterIsWrittenTheCopiesAreStaleUntilRefreshed) {
  WeightCopies c = bf16_with_device();
  c.master_written();
  EXPECT_TRUE(c.bf16_stale());
  EXPECT_FALSE(c.bf16_current());
  EXPECT_TRUE(c.device_stale());
  EXPECT_FALSE(c.master_behind());
  c.bf16_refreshed();
  EXPECT_TRUE(c.bf16_current());
  EXPECT_TRUE(c.device_stale());  // each copy is refreshed on its own
  c.device_refreshed();
  EXPECT_FALSE(c.device_stale());
  EXPECT_TRUE(c.device_present());
}

TEST(WeightCopies, CopiesAModelLacksStayAbsent) {
  WeightCopies c(false);
  c.master_written();
  EXPECT_FALSE(c.bf16_stale());
  EXPECT_FALSE(c.device_stale());
  c.update_written();
  c.bf16_refreshed();
  c.device_refreshed();
  EXPECT_FALSE(c.bf16_current());
  EXPECT_FALSE(c.device_present());
  c.device_trained();  // no device: nothing trained, the master stays current
  EXPECT_FALSE(c.master_behind());
  EXPECT_FALSE(c.device_holds_moments());
}

TEST(WeightCopies, AnUpdateWritesTheMasterAndTheBf16CopyTogether) {
  WeightCopies c = bf16_with_device();
  c.update_written();
  EXPECT_TRUE(c.bf16_current());
  EXPECT_TRUE(c.device_stale());
}

TEST(WeightCopies, ADeviceThatTrainedIsAheadOfTheMasterUntilFetched) {
  WeightCopies c = bf16_with_device();
  c.master_written();
  c.device_trained();
  EXPECT_TRUE(c.master_behind());
  EXPECT_FALSE(c.device_stale());
  EXPECT_TRUE(c.device_holds_moments());
  c.bf16_refreshed();
  c.device_fetched();
  EXPECT_FALSE(c.master_behind());
  EXPECT_TRUE(c.bf16_stale());  // the master just read the device's newer weights
  EXPECT_TRUE(c.device_holds_moments());
  EXPECT_FALSE(c.device_stale());
}

TEST(WeightCopies, AFetchWithTheMasterCurrentChangesNothing) {
  WeightCopies c = bf16_with_device();
  c.device_fetched();
  EXPECT_TRUE(c.bf16_current());
  EXPECT_FALSE(c.master_behind());
  EXPECT_FALSE(c.device_stale());
}

TEST(WeightCopies, AnUpdateOfTheCpusPartsWhileTheDeviceIsAheadLeavesBothBehindUntilItTrains) {
  WeightCopies c = bf16_with_device();
  c.device_trained();
  c.update_written();
  EXPECT_TRUE(c.master_behind());
  EXPECT_TRUE(c.device_stale());
  c.device_trained();
  EXPECT_TRUE(c.master_behind());
  EXPECT_FALSE(c.device_stale());
}

TEST(WeightCopies, DetachingTheDeviceDropsItsCopyAndMoments) {
  WeightCopies c = bf16_with_device();
  c.device_trained();
  c.device_fetched();
  c.device_detached();
  EXPECT_FALSE(c.device_present());
  EXPECT_FALSE(c.device_stale());
  EXPECT_FALSE(c.device_holds_moments());
  EXPECT_FALSE(c.master_behind());
  c.master_written();
  EXPECT_FALSE(c.device_stale());  // no device: nothing to mark
  c.device_configured();
  EXPECT_TRUE(c.device_present());
  EXPECT_FALSE(c.device_stale());
  EXPECT_FALSE(c.device_holds_moments());
}

TEST(WeightCopies, AReleasedOrSharedMasterNoLongerRebuildsTheBf16Copy) {
  WeightCopies released(true);
  released.master_memory_released();
  EXPECT_TRUE(released.master_released());
  EXPECT_FALSE(released.bf16_rebuildable());
  EXPECT_TRUE(released.bf16_current());
  released.master_written();
  EXPECT_TRUE(released.bf16_stale());  // stale, and only its updater can make it current
  released.update_written();
  EXPECT_TRUE(released.bf16_current());

  WeightCopies shared(true);
  shared.master_written();
  shared.memory_shared();
  EXPECT_TRUE(shared.memory_shared_by_ranks());
  EXPECT_FALSE(shared.master_released());
  EXPECT_FALSE(shared.bf16_rebuildable());
  EXPECT_TRUE(shared.bf16_current());  // the ranks' shared copy is taken as current
}

}  // namespace
}  // namespace llmcpu
