// Training under faults, as a long run meets them: killed at a named point of a checkpoint write
// (the process SIGKILLs itself there through LLMCPU_FAULT, core/util/fault.h, so every run is the
// same), a full disk (a small tmpfs in a private mount namespace where one can be made, and a
// file-size limit everywhere), an I/O error, a folder that cannot be written, a second trainer on
// the same folder, a trainer writing the folder another resumes from (and the other way round),
// SIGTERM, a corrupt newest checkpoint, and steps whose gradients are not finite. In every case the
// previous checkpoint stays loadable, and where the run resumes, it ends with the same bytes as a
// run that was never disturbed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/io/token_shard.h"
#include "core/io/train_state.h"
#include "core/model/parameters.h"
#include "core/train/trainer.h"
#include "core/util/file.h"
#include "core/util/rng.h"
#include "tests/common/process.h"
#include "tests/common/temp_files.h"
#include "tests/unit/fixture_paths.h"

namespace llmcpu {
namespace {

namespace fs = std::filesystem;
using testing::fixture;
using testing::shell_quote;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

bool has_temporary_file(const std::string& dir) { return !stale_temporary_files(dir).empty(); }

// Whether the checkpoint of `step` in `dir` loads: the model file's header and length, the state's
// checksum, and every weight and moment finite.
void expect_sound_checkpoint(const std::string& dir, int64_t step) {
  SCOPED_TRACE(dir + " step " + std::to_string(step));
  const std::string model = checkpoint_model_path(dir, step);
  ASSERT_NO_THROW(read_checkpoint_header(model));
  const CheckpointInfo info = read_checkpoint_header(model);
  Model m(info.config);
  ASSERT_NO_THROW(load_checkpoint(model, m));
  EXPECT_FALSE(find_non_finite(m.params_flat(), m.layout())) << "model file";
  std::unique_ptr<TrainStateFile> state;
  ASSERT_NO_THROW(state = std::make_unique<TrainStateFile>(checkpoint_state_path(dir, step)));
  const size_t P = state->num_parameters();
  std::vector<float> w(P), mom1(P), mom2(P);
  state->read_tensors(w, mom1, mom2);
  const ParameterLayout layout(info.config);
  EXPECT_FALSE(find_non_finite(w.data(), layout)) << "master weights";
  EXPECT_FALSE(find_non_finite(mom1.data(), layout)) << "first moments";
  EXPECT_FALSE(find_non_finite(mom2.data(), layout)) << "second moments";
}

class Faults : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    Rng rng(9);
    std::vector<uint16_t> tokens(4000);
    for (auto& t : tokens) t = static_cast<uint16_t>(rng.below(311));  // the tiny fixture's V
    write_token_shard(path("train.bin"), tokens);
  }

  // `llmcpu train` on the tiny fixture, a checkpoint every 2 steps into `ckpt`, as shell words.
  std::string train_args(const std::string& ckpt, int steps, const std::string& extra = "") const {
    return "train --model " + shell_quote(fixture("tiny", "model.bin")) + " --train-data " +
           shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --threads 1 --steps " +
           std::to_string(steps) + " -n 2 -o " + shell_quote(ckpt) + " " + extra;
  }
  // The same, started in the background with LLMCPU_FAULT=`fault`; returns its wait status.
  int train_with_fault(const std::string& ckpt, int steps, const std::string& fault) {
    const std::string cmd = "LLMCPU_FAULT=" + fault + " exec " + LLMCPU_BINARY + " " +
                            train_args(ckpt, steps) + " > " + shell_quote(path("out.txt")) +
                            " 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  }
  std::string output() const {
    std::ifstream f(path("out.txt"));
    return {std::istreambuf_iterator<char>(f), {}};
  }
};

TEST_F(Faults, KilledAtEachPointOfACheckpointWriteResumesToTheSameBytes) {
  const std::string ref = path("ref");
  const auto r = testing::run_llmcpu(train_args(ref, 6));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* point : {"model-write", "state-write", "between-renames"}) {
    SCOPED_TRACE(point);
    const std::string ckpt = path(std::string("ck_") + point);
    // The second checkpoint (step 4) is where the process kills itself.
    const int status = train_with_fault(ckpt, 6, std::string("kill@") + point + "#2");
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << output();
    EXPECT_EQ(latest_checkpoint(ckpt), 2);
    expect_sound_checkpoint(ckpt, 2);
    EXPECT_FALSE(fs::exists(checkpoint_state_path(ckpt, 4)));
    // Killed mid-file, the temporary file is left; between the renames, the state's temporary.
    EXPECT_TRUE(has_temporary_file(ckpt));
    EXPECT_EQ(fs::exists(checkpoint_model_path(ckpt, 4)), std::string(point) == "between-renames");
    // Resumed, the run removes what the killed one left and ends as the undisturbed run did.
    const auto resumed = testing::run_llmcpu("train --resume " + shell_quote(ckpt) +
                                             " --train-data " + shell_quote(path("train.bin")) +
                                             " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 6 -n 2");
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + checkpoint_state_path(ckpt, 2)),
              std::string::npos)
        << resumed.output;
    EXPECT_NE(resumed.output.find("left by a killed run"), std::string::npos) << resumed.output;
    EXPECT_FALSE(has_temporary_file(ckpt));
    for (int64_t step : {4, 6}) {
      EXPECT_EQ(read_bytes(checkpoint_model_path(ckpt, step)),
                read_bytes(checkpoint_model_path(ref, step)))
          << "model, step " << step;
      EXPECT_EQ(read_bytes(checkpoint_state_path(ckpt, step)),
                read_bytes(checkpoint_state_path(ref, step)))
          << "state, step " << step;
    }
  }
}

TEST_F(Faults, InjectedIoErrorStopsTheRunAndKeepsThePreviousCheckpoint) {
  for (const auto& [fault, name] :
       {std::pair{"eio@model-write#2", "EIO"}, std::pair{"enospc@state-write#2", "ENOSPC"}}) {
    SCOPED_TRACE(fault);
    const std::string ckpt = path(std::string("ck_") + name);
    const int status = train_with_fault(ckpt, 6, fault);
    ASSERT_TRUE(WIFEXITED(status)) << output();
    EXPECT_NE(WEXITSTATUS(status), 0) << output();
    const std::string out = output();
    EXPECT_NE(out.find("(" + std::string(name) + ")"), std::string::npos) << out;
    EXPECT_NE(out.find(std::string(name) == "EIO" ? checkpoint_model_path(ckpt, 4)
                                                  : checkpoint_state_path(ckpt, 4)),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("the newest good checkpoint is " + checkpoint_model_path(ckpt, 2)),
              std::string::npos)
        << out;
    EXPECT_EQ(latest_checkpoint(ckpt), 2);
    expect_sound_checkpoint(ckpt, 2);
    EXPECT_FALSE(fs::exists(checkpoint_model_path(ckpt, 4))) << "nothing is renamed on failure";
    EXPECT_FALSE(has_temporary_file(ckpt));
  }
}

// Runs `script` in a private mount namespace with a tmpfs of `size` mounted on `mnt`; returns the
// outcome, or nullopt where this process can make no private mount namespace (no root and no user
// namespaces, or a chroot whose root is not a mount point).
std::optional<testing::Outcome> in_small_tmpfs(const std::string& mnt, const std::string& size,
                                               const std::string& script) {
  if (testing::run_shell("unshare --mount true 2>&1").status != 0) return std::nullopt;
  fs::create_directories(mnt);
  return testing::run_shell("unshare --mount sh -c " +
                            shell_quote("mount -t tmpfs -o size=" + size + " llmcpu-test " +
                                        shell_quote(mnt) + " || exit 99\n" + script) +
                            " 2>&1");
}

TEST_F(Faults, FullDiskStopsTheRunAndKeepsThePreviousCheckpoint) {
  // One checkpoint of the tiny model is ~1.2 MB (model 0.3 MB + state 0.9 MB): 2000 KiB holds the
  // first and the second's model file, and runs out in the second's state file.
  const std::string mnt = path("disk"), saved = path("saved");
  fs::create_directories(saved);
  const auto r = in_small_tmpfs(mnt, "2000k",
                                std::string(LLMCPU_BINARY) + " " + train_args(mnt + "/ck", 6) +
                                    "\necho \"exit status $?\"\ncp -a " + shell_quote(mnt + "/ck") +
                                    "/. " + shell_quote(saved) + "/");
  if (!r) GTEST_SKIP() << "no private mount namespace here (needs root or user namespaces)";
  EXPECT_NE(r->output.find("exit status 2"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find(mnt + "/ck/state_00000004.bin: write failed: No space left on device "
                                 "(ENOSPC)"),
            std::string::npos)
      << r->output;
  EXPECT_NE(r->output.find("the newest good checkpoint is " + mnt + "/ck/model_00000002.bin"),
            std::string::npos)
      << r->output;
  EXPECT_EQ(latest_checkpoint(saved), 2);
  expect_sound_checkpoint(saved, 2);
  EXPECT_FALSE(fs::exists(checkpoint_model_path(saved, 4)));
  EXPECT_FALSE(has_temporary_file(saved));
}

TEST_F(Faults, FileSizeLimitStopsTheRunAndKeepsThePreviousCheckpoint) {
  // The same failure where no mount namespace can be had: a file-size limit (RLIMIT_FSIZE, with
  // SIGXFSZ ignored) that the model file (0.3 MB) fits and the state file (0.9 MB) does not; the
  // kernel fails the write with EFBIG.
  const std::string ckpt = path("ck");
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  const auto r = testing::run_shell(
      "trap '' XFSZ; prlimit --fsize=600000 " + std::string(LLMCPU_BINARY) + " train --resume " +
      shell_quote(ckpt) + " --train-data " + shell_quote(path("train.bin")) +
      " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 4 2>&1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(
      r.output.find(checkpoint_state_path(ckpt, 4) + ": write failed: File too large (EFBIG)"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the newest good checkpoint is " + checkpoint_model_path(ckpt, 2)),
            std::string::npos)
      << r.output;
  EXPECT_EQ(latest_checkpoint(ckpt), 2);
  expect_sound_checkpoint(ckpt, 2);
  EXPECT_FALSE(fs::exists(checkpoint_model_path(ckpt, 4)));
  EXPECT_FALSE(has_temporary_file(ckpt));
}

TEST_F(Faults, RunThatCannotStartLeavesNoNewFolder) {
  // The folder is made and locked before the model is read; a run refused after that (a model file
  // that does not exist, a --seq-len the model cannot take) removes the folder it made...
  const std::string fresh = path("new") + "/ck";
  const auto missing =
      testing::run_llmcpu("train --model " + shell_quote(path("none.bin")) + " --train-data " +
                          shell_quote(path("train.bin")) + " -o " + shell_quote(fresh));
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_NE(missing.output.find(path("none.bin")), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(fresh)) << "a run that did not start left " << fresh;
  const auto too_long = testing::run_llmcpu(train_args(fresh, 2, "-t 100000"));
  EXPECT_EQ(too_long.status, 2) << too_long.output;
  EXPECT_NE(too_long.output.find("exceeds the model's maxT"), std::string::npos) << too_long.output;
  EXPECT_FALSE(fs::exists(fresh));
  // ...but a folder that was there is left as it was, lock file and checkpoints included.
  const std::string ckpt = path("ck");
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  EXPECT_EQ(testing::run_llmcpu(train_args(ckpt, 2, "-t 100000")).status, 2);
  EXPECT_TRUE(fs::exists(ckpt + "/train.lock"));
  EXPECT_EQ(latest_checkpoint(ckpt), 2);
  expect_sound_checkpoint(ckpt, 2);
}

TEST_F(Faults, ReadOnlyFolderIsRefusedBeforeTraining) {
  // A folder this user may not write (root writes anywhere, so as root the run is made as nobody).
  const std::string ckpt = path("ck");
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  const std::vector<uint8_t> model = read_bytes(checkpoint_model_path(ckpt, 2));
  fs::permissions(ckpt, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  fs::permissions(dir_, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  const std::string as =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const auto r = testing::run_shell(as + LLMCPU_BINARY + " train --resume " + shell_quote(ckpt) +
                                    " --train-data " + shell_quote(path("train.bin")) +
                                    " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 4 2>&1");
  fs::permissions(ckpt, fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(ckpt + "/train.lock: cannot create the lock file: Permission denied "
                                 "(EACCES)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step "), std::string::npos) << "trained although nothing can be saved";
  EXPECT_EQ(read_bytes(checkpoint_model_path(ckpt, 2)), model);
  expect_sound_checkpoint(ckpt, 2);
}

TEST_F(Faults, ReadOnlyFileSystemIsRefusedBeforeTraining) {
  const std::string mnt = path("disk"), saved = path("saved");
  fs::create_directories(saved);
  const std::string resume = std::string(LLMCPU_BINARY) + " train --resume " +
                             shell_quote(mnt + "/ck") + " --train-data " +
                             shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --steps 4";
  const auto r =
      in_small_tmpfs(mnt, "64m",
                     std::string(LLMCPU_BINARY) + " " + train_args(mnt + "/ck", 2) +
                         " > /dev/null || exit 3\n" + "mount -o remount,ro " + shell_quote(mnt) +
                         " || exit 4\n" + resume + "\necho \"exit status $?\"\ncp -a " +
                         shell_quote(mnt + "/ck") + "/. " + shell_quote(saved) + "/");
  if (!r) GTEST_SKIP() << "no private mount namespace here (needs root or user namespaces)";
  EXPECT_NE(r->output.find("exit status 2"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find(mnt + "/ck/train.lock: cannot create the lock file: Read-only file "
                                 "system (EROFS)"),
            std::string::npos)
      << r->output;
  EXPECT_EQ(r->output.find("step "), std::string::npos) << "trained although nothing can be saved";
  expect_sound_checkpoint(saved, 2);
}

TEST_F(Faults, SecondTrainerIsRefusedAndSigtermCheckpoints) {
  const std::string ckpt = path("ck");
  const std::string log = path("first.log");
  const pid_t first = testing::spawn_llmcpu(
      {"train", "--model", fixture("tiny", "model.bin"), "--train-data", path("train.bin"), "-b",
       "2", "-t", "13", "--steps", "1000000", "-o", ckpt, "--log", log, "--threads", "1"},
      path("first.txt"));
  ASSERT_GT(first, 0);
  // The first trainer holds the folder once its lock file names it, and has trained once it logs.
  const std::string lock = ckpt + "/train.lock";
  bool ready = false;
  for (int i = 0; i < 3000 && !ready; ++i) {
    std::ifstream f(lock), l(log);
    std::string pid, line;
    ready = std::getline(f, pid) && pid == std::to_string(first) && std::getline(l, line);
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ready) << "the first trainer did not start";
  const auto second = testing::run_llmcpu(train_args(ckpt, 4));
  EXPECT_EQ(second.status, 2) << second.output;
  EXPECT_NE(second.output.find(ckpt + ": in use by another llmcpu train (PID " +
                               std::to_string(first) + ", lock " + lock + ")"),
            std::string::npos)
      << second.output;
  // SIGTERM, what a scheduler sends before it kills: finish the step, checkpoint, exit 0.
  ASSERT_EQ(::kill(first, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(first, &status, 0), first);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by SIGTERM instead of stopping cleanly";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream l(log);
  int steps = 0;
  for (std::string line; std::getline(l, line);) ++steps;
  EXPECT_EQ(latest_checkpoint(ckpt), steps);
  expect_sound_checkpoint(ckpt, steps);
  // Once the first is gone, the folder is free again.
  const auto third = testing::run_llmcpu("train --resume " + shell_quote(ckpt) + " --train-data " +
                                         shell_quote(path("train.bin")) + " -b 2 -t 13 --steps " +
                                         std::to_string(steps + 1));
  EXPECT_EQ(third.status, 0) << third.output;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), {}};
}

// The message of the FileError that `make` throws ("" if none).
template <typename F>
std::string refusal(F make) {
  try {
    make();
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST_F(Faults, FolderLockSharesReadersAndKeepsWritersAlone) {
  const std::string dir = dir_.string(), lock = path("x.lock");
  const std::string self = std::to_string(::getpid());
  auto writer = [&] { return std::make_unique<FolderLock>(dir, "x.lock", "test"); };
  auto reader = [&] {
    return std::make_unique<FolderLock>(dir, "x.lock", "test", LockMode::kShared);
  };
  // flock conflicts between two opens of the file, in one process as between two: a writer keeps
  // readers out, and names itself.
  auto w = writer();
  EXPECT_EQ(read_text(lock), self + "\n");
  EXPECT_EQ(refusal(reader), dir + ": in use by another test writing it (PID " + self + ", lock " +
                                 lock + "); it can be read only while no process writes it");
  EXPECT_EQ(refusal(writer), dir + ": in use by another test (PID " + self + ", lock " + lock +
                                 "); one process per folder");
  w.reset();
  // Readers share it; each appends its line and leaves the writer's text before them alone.
  auto r1 = reader();
  auto r2 = reader();
  EXPECT_TRUE(r1->held() && r2->held());
  EXPECT_EQ(read_text(lock), self + "\n" + self + " shared\n" + self + " shared\n");
  // A writer is refused by them, naming the readers that still run (a PID above the kernel's
  // pid_max, 2^22, never does), each once.
  std::ofstream(lock, std::ios::app) << "4194305 shared\n";
  EXPECT_EQ(refusal(writer), dir + ": in use by another test reading it (PID " + self + ", lock " +
                                 lock + "); it can be written only while no process reads it");
  r1.reset();
  EXPECT_NE(refusal(writer), "");  // r2 still reads
  r2.reset();
  // Once all have gone, a writer takes it and its text is its PID alone.
  w = writer();
  EXPECT_EQ(read_text(lock), self + "\n");
}

// Starts `llmcpu ARGS` in the background and waits until it has trained (a line in `log`) while
// holding `lock` (whose first line is then its PID). Returns its PID, or -1 if it did not start.
pid_t start_training(const std::vector<std::string>& args, const std::string& lock,
                     const std::string& log, const std::string& output) {
  const pid_t pid = testing::spawn_llmcpu(args, output);
  for (int i = 0; pid > 0 && i < 3000; ++i) {
    std::ifstream f(lock), l(log);
    std::string first, line;
    if (std::getline(f, first) && first == std::to_string(pid) && std::getline(l, line)) {
      return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (pid > 0) ::kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  return -1;
}

// Stops a run started by start_training as a scheduler would (SIGTERM: it checkpoints and exits 0).
int stop_training(pid_t pid) {
  int status = 0;
  if (::kill(pid, SIGTERM) != 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(Faults, ResumeReadsUnderASharedLockThatKeepsWritersOut) {
  const std::string ckpt = path("ck"), lock = ckpt + "/train.lock";
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  const std::vector<std::string> common = {
      "--train-data", path("train.bin"), "-b", "2", "-t", "13", "--lr", "1e-3", "--threads", "1"};
  auto args = [&](std::vector<std::string> a) {
    a.insert(a.begin(), common.begin(), common.end());
    a.insert(a.begin(), "train");
    return a;
  };
  // A run that resumes from the folder and writes elsewhere reads it for as long as it runs...
  const pid_t reading = start_training(
      args({"--resume", ckpt, "-o", path("r1"), "--steps", "1000000", "--log", path("r1.log")}),
      path("r1") + "/train.lock", path("r1.log"), path("r1.txt"));
  ASSERT_GT(reading, 0) << read_text(path("r1.txt"));
  const std::string reader = std::to_string(reading);
  EXPECT_NE(read_text(lock).find(reader + " shared\n"), std::string::npos) << read_text(lock);
  // ... so a trainer that would write it is refused, naming the reader: resumed into it, or new.
  const std::string refused = ckpt + ": in use by another llmcpu train reading it (PID " + reader +
                              ", lock " + lock +
                              "); it can be written only while no process reads it";
  const auto resumed_into = testing::run_llmcpu("train --resume " + shell_quote(ckpt) +
                                                " --train-data " + shell_quote(path("train.bin")) +
                                                " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 4");
  EXPECT_EQ(resumed_into.status, 2) << resumed_into.output;
  EXPECT_NE(resumed_into.output.find(refused), std::string::npos) << resumed_into.output;
  const auto fresh_into = testing::run_llmcpu(train_args(ckpt, 4));
  EXPECT_EQ(fresh_into.status, 2) << fresh_into.output;
  EXPECT_NE(fresh_into.output.find(refused), std::string::npos) << fresh_into.output;
  EXPECT_EQ(latest_checkpoint(ckpt), 2);
  // A second reader shares it.
  const auto second = testing::run_llmcpu(
      "train --resume " + shell_quote(ckpt) + " -o " + shell_quote(path("r2")) + " --train-data " +
      shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 3");
  EXPECT_EQ(second.status, 0) << second.output;
  EXPECT_EQ(latest_checkpoint(path("r2")), 3);
  EXPECT_EQ(stop_training(reading), 0) << read_text(path("r1.txt"));

  // The other way round: while a trainer writes the folder, a run that would resume from it is
  // refused, naming the writer, and the folder it would have made is not left behind.
  const pid_t writing =
      start_training(args({"--resume", ckpt, "--steps", "1000000", "--log", path("w.log")}), lock,
                     path("w.log"), path("w.txt"));
  ASSERT_GT(writing, 0) << read_text(path("w.txt"));
  const auto reader_refused = testing::run_llmcpu(
      "train --resume " + shell_quote(ckpt) + " -o " + shell_quote(path("r3")) + " --train-data " +
      shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 3");
  EXPECT_EQ(reader_refused.status, 2) << reader_refused.output;
  EXPECT_NE(reader_refused.output.find(ckpt + ": in use by another llmcpu train writing it (PID " +
                                       std::to_string(writing) + ", lock " + lock +
                                       "); it can be read only while no process writes it"),
            std::string::npos)
      << reader_refused.output;
  EXPECT_FALSE(fs::exists(path("r3")));
  EXPECT_EQ(stop_training(writing), 0) << read_text(path("w.txt"));
}

TEST_F(Faults, ResumeIntoTheSameFolderTakesOnlyTheWritersLock) {
  const std::string ckpt = path("ck"), lock = ckpt + "/train.lock";
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  // -o absent, the same path, or another spelling of it: one folder, locked once (a second,
  // shared lock on it would refuse the run itself).
  int steps = 2;
  for (const std::string& out : {std::string(), ckpt, ckpt + "/.", path(".") + "/ck/"}) {
    SCOPED_TRACE(out);
    steps += 1;
    const auto r = testing::run_llmcpu(
        "train --resume " + shell_quote(ckpt) + (out.empty() ? "" : " -o " + shell_quote(out)) +
        " --train-data " + shell_quote(path("train.bin")) +
        " -b 2 -t 13 --lr 1e-3 --threads 1 --steps " + std::to_string(steps));
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(latest_checkpoint(ckpt), steps);
    EXPECT_EQ(read_text(lock).find("shared"), std::string::npos) << read_text(lock);
  }
  // And it is a writer's: refused while another process reads the folder.
  FolderLock reading(ckpt, "train.lock", "llmcpu train", LockMode::kShared);
  const auto r = testing::run_llmcpu(
      "train --resume " + shell_quote(ckpt) + " -o " + shell_quote(ckpt) + " --train-data " +
      shell_quote(path("train.bin")) + " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 9");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(ckpt + ": in use by another llmcpu train reading it (PID " +
                          std::to_string(::getpid()) + ", lock " + lock + ")"),
            std::string::npos)
      << r.output;
}

TEST_F(Faults, ResumeFromAFolderThatCannotBeWrittenReadsIt) {
  // Someone else's checkpoints (root writes anywhere, so as root the runs are made as nobody):
  // the lock file is there and opened for reading; where there is none and none can be made, the
  // run goes on unlocked and says so.
  const std::string ckpt = path("ck");
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 2)).status, 0);
  fs::permissions(dir_, fs::perms::all, fs::perm_options::add);
  const std::string as =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  auto resume_into = [&](const std::string& out) {
    return testing::run_shell(as + LLMCPU_BINARY + " train --resume " + shell_quote(ckpt) + " -o " +
                              shell_quote(out) + " --train-data " + shell_quote(path("train.bin")) +
                              " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 3 2>&1");
  };
  const auto read_only = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
  fs::permissions(ckpt, read_only, fs::perm_options::remove);
  const auto locked = resume_into(path("mine1"));
  EXPECT_EQ(locked.status, 0) << locked.output;
  EXPECT_EQ(locked.output.find("not locked"), std::string::npos) << locked.output;
  fs::permissions(ckpt, fs::perms::owner_write, fs::perm_options::add);
  fs::remove(ckpt + "/train.lock");
  fs::permissions(ckpt, read_only, fs::perm_options::remove);
  const auto unlocked = resume_into(path("mine2"));
  fs::permissions(ckpt, fs::perms::owner_write, fs::perm_options::add);
  EXPECT_EQ(unlocked.status, 0) << unlocked.output;
  EXPECT_NE(unlocked.output.find("train: --resume " + ckpt +
                                 " is not locked against writers (cannot create the lock file " +
                                 ckpt + "/train.lock: Permission denied (EACCES))"),
            std::string::npos)
      << unlocked.output;
  EXPECT_EQ(latest_checkpoint(path("mine1")), 3);
  EXPECT_EQ(latest_checkpoint(path("mine2")), 3);
}

TEST_F(Faults, ResumeSkipsCorruptNewestCheckpointsAndKeepsThem) {
  const std::string ckpt = path("ck");
  ASSERT_EQ(testing::run_llmcpu(train_args(ckpt, 6)).status, 0);
  // Step 6: a state file cut short; step 4: one flipped byte in the state; step 2 is sound.
  fs::resize_file(checkpoint_state_path(ckpt, 6),
                  fs::file_size(checkpoint_state_path(ckpt, 6)) / 2);
  {
    std::fstream f(checkpoint_state_path(ckpt, 4), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    const char c = static_cast<char>(f.get() ^ 0x10);
    f.seekp(1000);
    f.put(c);
  }
  const std::vector<uint8_t> bad6 = read_bytes(checkpoint_state_path(ckpt, 6));
  const std::vector<uint8_t> bad4 = read_bytes(checkpoint_state_path(ckpt, 4));
  const auto r = testing::run_llmcpu("train --resume " + shell_quote(ckpt) + " --train-data " +
                                     shell_quote(path("train.bin")) +
                                     " -b 2 -t 13 --lr 1e-3 --threads 1 --steps 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("skipping the checkpoint of step 6: " + checkpoint_state_path(ckpt, 6)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("skipping the checkpoint of step 4: " + checkpoint_state_path(ckpt, 4) +
                          ": checksum mismatch"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resumed from " + checkpoint_state_path(ckpt, 2) + " at step 2"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_bytes(checkpoint_state_path(ckpt, 6)), bad6) << "a bad checkpoint was touched";
  EXPECT_EQ(read_bytes(checkpoint_state_path(ckpt, 4)), bad4) << "a bad checkpoint was touched";
  expect_sound_checkpoint(ckpt, 3);
  // A model file cut short makes its checkpoint unsound too; with none sound, resume refuses.
  fs::resize_file(checkpoint_model_path(ckpt, 2), 100);
  fs::resize_file(checkpoint_model_path(ckpt, 3), 2000);
  const auto none = testing::run_llmcpu("train --resume " + shell_quote(ckpt) + " --train-data " +
                                        shell_quote(path("train.bin")) + " -b 2 -t 13 --steps 8");
  EXPECT_EQ(none.status, 2) << none.output;
  EXPECT_NE(none.output.find("none of its 4 checkpoints is sound"), std::string::npos)
      << none.output;
  EXPECT_NE(
      none.output.find("skipping the checkpoint of step 3: " + checkpoint_model_path(ckpt, 3)),
      std::string::npos)
      << none.output;
}

TEST_F(Faults, NonFiniteGradientSkipsTheUpdateAndNamesTheTensor) {
  const std::string ckpt = path("ck");
  const auto r =
      testing::run_llmcpu(train_args(ckpt, 5, "-n 1"), "LLMCPU_FAULT=nan@grad-attprojw#3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("warning: step 3/5: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the first non-finite gradient is attprojw (layer 1)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("update skipped (1 in a row"), std::string::npos) << r.output;
  // The norm reads "nan" whatever the NaN's sign bit (the C library prints "-nan").
  EXPECT_NE(r.output.find("gradient norm nan;"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("-nan"), std::string::npos) << r.output;
  // Step 3 changed nothing: its weights and moments are step 2's, and AdamW's count did not move.
  auto tensors = [&](int64_t step) {
    TrainStateFile f(checkpoint_state_path(ckpt, step));
    const size_t P = f.num_parameters();
    std::vector<float> all(3 * P);
    f.read_tensors({all.data(), P}, {all.data() + P, P}, {all.data() + 2 * P, P});
    return std::pair{all, f.state().adamw_t};
  };
  EXPECT_EQ(tensors(3).first, tensors(2).first);
  EXPECT_EQ(tensors(3).second, 2);
  EXPECT_NE(tensors(4).first, tensors(3).first);
  EXPECT_EQ(tensors(4).second, 3);
  for (int64_t step = 1; step <= 5; ++step) expect_sound_checkpoint(ckpt, step);
}

TEST_F(Faults, RunStopsAfterMaxBadStepsInARow) {
  // Two bad steps apart never stop a run with --max-bad-steps 2 ...
  const auto apart = testing::run_llmcpu(train_args(path("apart"), 6, "--max-bad-steps 2"),
                                         "LLMCPU_FAULT=nan@grad-wte#2,nan@grad-wte#4");
  EXPECT_EQ(apart.status, 0) << apart.output;
  // ... three in a row stop one with --max-bad-steps 3, naming the steps and the newest checkpoint.
  const std::string ckpt = path("ck");
  const auto r =
      testing::run_llmcpu(train_args(ckpt, 8, "--max-bad-steps 3"),
                          "LLMCPU_FAULT=nan@grad-lnfb#3,nan@grad-lnfb#4,nan@grad-lnfb#5");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("3 steps in a row (3 to 5) had a non-finite loss or gradient norm "
                          "(--max-bad-steps 3)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the first non-finite gradient is lnfb"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the newest good checkpoint is " + checkpoint_model_path(ckpt, 4)),
            std::string::npos)
      << r.output;
  EXPECT_EQ(latest_checkpoint(ckpt), 4);
  const auto zero = testing::run_llmcpu(train_args(path("z"), 2, "--max-bad-steps 0"));
  EXPECT_EQ(zero.status, 2);
  EXPECT_NE(
      zero.output.find("--max-bad-steps 0 is out of range: expected an integer in 1..2147483647"),
      std::string::npos)
      << zero.output;
}

TEST_F(Faults, AbsurdLearningRateNeverWritesANonFiniteCheckpoint) {
  // 1e30 overflows the forward pass after the first update; 3e38, just inside fp32 (--lr takes no
  // more), overflows the first update's own arithmetic (lr / (1 - beta1) is infinite in fp32).
  // Either way the run must stop with an error, and no file in the folder may hold a NaN or an
  // infinity.
  for (const char* lr : {"1e30", "3e38"}) {
    SCOPED_TRACE(lr);
    const std::string ckpt = path(std::string("ck_") + lr);
    const auto r =
        testing::run_llmcpu(train_args(ckpt, 20, std::string("-n 1 --max-bad-steps 3 --lr ") + lr));
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("training stopped"), std::string::npos) << r.output;
    for (int64_t step : list_checkpoints(ckpt)) expect_sound_checkpoint(ckpt, step);
  }
}

}  // namespace
}  // namespace llmcpu
