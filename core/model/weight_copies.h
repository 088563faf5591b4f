// Which copy of a model's weights is current. The weights live in up to three copies: the fp32
// master (always), the bf16 working copy (a bf16 model) and a device's copy of the part it owns
// (once the device is configured). This value type records, for each, whether it holds the newest
// weights, through named transitions (what just happened to one copy) and queries (what a pass must
// bring up to date first). Model keeps one and does the copying itself; the checks are per pass,
// never per op. Deliberately not here: the copying, the memory, the device.
//
// What "current" means for each copy:
//   master  current, or behind: the device changed its part (its AdamW) since the master last read
//           it. The master's other parts are current either way.
//   bf16    current when it equals bf16(master) where the model reads it, else stale. Rebuilt from
//           the master, until the master is released (ZeRO-1) or the memory shared by the ranks of
//           a machine: from then on only its updater keeps it current, and a rebuild is refused.
//   device  absent (no device, or not configured for the planned shape), current (equal to the
//           master's part, or ahead of it: see master) or stale (the master was written since).
//   moments whether the device's AdamW ran: its moments are state that configuring would drop.
//
// The transitions ("-": unchanged; a copy the model lacks stays absent):
//
//   transition              the caller first makes sure  master   bf16     device   moments
//   master_written          master not behind            -        stale    stale    -
//   update_written          bf16 current                 -        current  stale    -
//   bf16_refreshed          bf16 rebuildable             -        current  -        -
//   device_configured       master not behind            -        -        current  -
//   device_refreshed        the device is present        -        -        current  -
//   device_trained          the device is present        behind   -        current  held
//   device_fetched          -                            current  stale(1) -        -
//   device_detached         master not behind            current  -        absent   none
//   master_memory_released  bf16 current                 -        -        -        -      (2)
//   master_memory_restored  the master refilled          -        stale    -        -      (3)
//   memory_shared           -                            -        current  -        -      (2)
//
//   (1) stale only when the master was behind: it has just read the device's newer weights.
//   (2) from then on the bf16 copy is kept by its updater alone (not rebuildable).
//   (3) after master_memory_released only: the master is whole again (refilled from what the model
//       computed with) and the bf16 copy is rebuilt from it, as at first.
//
// device_detached also starts a configuration (the device holds no copy until it succeeds).
//
// update_written is an optimizer's pass that wrote the master and the bf16 copy together
// (Bf16Kernels::adamw_update). After update_written on a master that is behind (the CPU's
// optimizer wrote its parts while the device's part stays newer on the device), both the master
// and the device lag somewhere until device_trained; a read of the master fetches first.
#pragma once

namespace llmcpu {

class WeightCopies {
 public:
  // A model's copies at construction: the master, and the bf16 copy if `bf16`; both current.
  explicit WeightCopies(bool bf16) : bf16_(bf16 ? State::kCurrent : State::kAbsent) {}

  // Transitions (see the table above).
  void master_written() {
    mark_stale(bf16_);
    mark_stale(device_);
  }
  void update_written() {
    if (bf16_ != State::kAbsent) bf16_ = State::kCurrent;
    mark_stale(device_);
  }
  void bf16_refreshed() {
    if (bf16_ != State::kAbsent) bf16_ = State::kCurrent;
  }
  void device_configured() { device_ = State::kCurrent; }
  void device_refreshed() {
    if (device_ != State::kAbsent) device_ = State::kCurrent;
  }
  void device_trained() {
    if (device_ == State::kAbsent) return;
    device_ = State::kCurrent;
    master_behind_ = moments_ = true;
  }
  void device_fetched() {
    if (master_behind_) mark_stale(bf16_);
    master_behind_ = false;
  }
  void device_detached() {
    device_ = State::kAbsent;
    master_behind_ = moments_ = false;
  }
  void master_memory_released() { keeper_ = Bf16Keeper::kReleased; }
  void master_memory_restored() {
    keeper_ = Bf16Keeper::kMaster;
    mark_stale(bf16_);
  }
  void memory_shared() {
    bf16_refreshed();
    keeper_ = Bf16Keeper::kShared;
  }

  // Queries.
  bool master_behind() const { return master_behind_; }
  bool bf16_current() const { return bf16_ == State::kCurrent; }  // false without a bf16 copy
  bool bf16_stale() const { return bf16_ == State::kStale; }
  // Whether the bf16 copy can be rebuilt from the master (false once released or shared).
  bool bf16_rebuildable() const { return keeper_ == Bf16Keeper::kMaster; }
  bool master_released() const { return keeper_ == Bf16Keeper::kReleased; }
  bool memory_shared_by_ranks() const { return keeper_ == Bf16Keeper::kShared; }
  bool device_present() const { return device_ != State::kAbsent; }
  bool device_stale() const { return device_ == State::kStale; }
  bool device_holds_moments() const { return moments_; }

 private:
  enum class State : unsigned char { kAbsent, kCurrent, kStale };
  // Who keeps the bf16 copy current: the master (rebuilt from it), or its updater alone.
  enum class Bf16Keeper : unsigned char { kMaster, kReleased, kShared };
  static void mark_stale(State& s) {
    if (s != State::kAbsent) s = State::kStale;
  }

  State bf16_;
  State device_ = State::kAbsent;
  bool master_behind_ = false;
  bool moments_ = false;
  Bf16Keeper keeper_ = Bf16Keeper::kMaster;
};

}  // namespace llmcpu
