#!/usr/bin/env python3
"""Data-parallel training against a single process (ctest DataParallel.*).

Trains the tiny fixture with the same --total-batch (4 micro-batches of B*T tokens per step) in one
process and under mpirun at 2 and 4 ranks. The ranks split the same tokens and average the same
gradients, so only the order of the fp32 sums differs: every step's loss, and the weights after one
step, agree within 1e-5 relative (bf16: 2^-8, one bf16 unit in the last place, as a weight's bf16
rounding may land on the other side). Over 10 steps AdamW amplifies such differences (an element
whose gradient is near zero can change the sign of its update), so the final weights are held to
the same run's own sensitivity: one process regrouping the very same tokens (B=4 x 2 micro-batches
instead of B=2 x 4) moves them by some amount, and the ranks may move them at most twice that (or,
in bf16, whose model file rounds every weight, by up to one bf16 unit in the last place). A
shuffled 2-rank run is checked on its losses; two identical 2-rank runs must write byte-identical
files: nothing may depend on timing.
"""
import argparse
import array
import math
import os
import re
import subprocess
import sys

STEPS = 10


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    if p.returncode != 0:
        sys.exit(f"{what} exited with {p.returncode}:\n{p.stdout}")
    return p.stdout


def losses(output, what, count=STEPS):
    found = [float(m) for m in re.findall(r"^step +\d+/\d+ \| loss ([-0-9.e+naif]+)", output, re.M)]
    if len(found) != count:
        sys.exit(f"{what}: expected {count} step lines, found {len(found)}:\n{output}")
    return found


def weights(path):
    """The parameters of an llm.c model file as floats (version 3: fp32, version 5: bf16)."""
    with open(path, "rb") as f:
        header = array.array("i", f.read(256 * 4))
        body = f.read()
    if header[1] == 3:
        return array.array("f", body)
    if header[1] == 5:
        halves = array.array("H", body)
        return array.array("f", array.array("I", [h << 16 for h in halves]).tobytes())
    sys.exit(f"{path}: unexpected model file version {header[1]}")


def relative_norm(a, b):
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(y * y for y in b))
    return num / den


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmcpu", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bound = 1e-5 if a.precision == "fp32" else 2.0**-8

    def train(ranks, save, steps=STEPS, batch=2, shuffle=False, extra=(), dry=False):
        args = [a.llmcpu, "train", "--model", os.path.join(a.fixtures, "tiny_model.bin"),
                "--train-data", os.path.join(a.fixtures, "tiny_train.bin"), "-b", str(batch),
                "-t", "8", "--total-batch", "64", "--steps", str(steps), "--lr", "1e-3",
                "--weight-decay", "0.1", "--precision", a.precision]
        args += list(extra) + (["--save", save] if save else [])
        if not shuffle:
            args.append("--no-shuffle")
        args += ["--seed", "3"]  # last: the refusal test changes it on one rank
        if dry:
            return args
        if ranks == 0:
            return run(args, "llmcpu train (one process)")
        return run(["timeout", "120", a.mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to",
                    "none", "-x", "OMP_NUM_THREADS=1"] + args, f"mpirun -np {ranks} llmcpu train")

    def path(name):
        return os.path.join(a.out, name)

    failures = []

    def check(ok, message):
        if not ok:
            failures.append(message)

    base = losses(train(0, path("one.bin")), "one process")
    base_w = weights(path("one.bin"))
    train(0, path("one_step.bin"), steps=1)
    train(0, path("regrouped.bin"), batch=4)
    floor = relative_norm(weights(path("regrouped.bin")), base_w)
    print(f"one process, B=4 x 2 against B=2 x 4: final weights relative difference {floor:.2e}")
    for n in (2, 4):
        ours = losses(train(n, path(f"ranks{n}.bin")), f"{n} ranks")
        for i, (x, y) in enumerate(zip(ours, base)):
            check(abs(x - y) <= bound * abs(y), f"{n} ranks, step {i + 1}: loss {x} vs {y}")
        train(n, path(f"ranks{n}_step.bin"), steps=1)
        first = relative_norm(weights(path(f"ranks{n}_step.bin")), weights(path("one_step.bin")))
        final = relative_norm(weights(path(f"ranks{n}.bin")), base_w)
        print(f"{n} ranks: weights after 1 step {first:.2e}, after {STEPS} steps {final:.2e}")
        check(first <= bound, f"{n} ranks: weights after one step differ by {first:.2e}")
        check(final <= max(2 * floor, bound), f"{n} ranks: final weights differ by {final:.2e}, "
              f"more than twice the one-process regrouping's {floor:.2e} (and than {bound:.1e})")
    shuffled = losses(train(0, path("one_shuffled.bin"), shuffle=True), "one process, shuffled")
    ours = losses(train(2, path("ranks2_shuffled.bin"), shuffle=True), "2 ranks, shuffled")
    for i, (x, y) in enumerate(zip(ours, shuffled)):
        check(abs(x - y) <= bound * abs(y), f"2 ranks shuffled, step {i + 1}: loss {x} vs {y}")
    check(shuffled != base, "shuffling did not change the batches")
    train(2, path("ranks2_again.bin"))
    with open(path("ranks2_again.bin"), "rb") as x, open(path("ranks2.bin"), "rb") as y:
        check(x.read() == y.read(), "two identical 2-rank runs wrote different model files")
    if a.precision == "fp32":
        resume_and_refusals(a, train, path, check)
    if failures:
        sys.exit("\n".join(failures))
    print(f"{a.precision}: 2 and 4 ranks match one process; reruns byte-identical")


def resume_and_refusals(a, train, path, check):
    """A 2-rank run resumed at 2 ranks is bit-exact; at 1 and 4 ranks it goes on within 1e-5.
    Ranks started with different flags are refused, naming the flag."""
    import shutil
    ck = path("ck")
    shutil.rmtree(ck, ignore_errors=True)
    full = losses(train(2, path("ck_full.bin"), extra=["--checkpoint-dir", ck,
                                                       "--checkpoint-every", "5"]), "2 ranks")
    for n in (2, 1, 4):
        resumed_dir = path(f"ck_resume{n}")
        shutil.rmtree(resumed_dir, ignore_errors=True)
        os.makedirs(resumed_dir)
        for name in ("model_00000005.bin", "state_00000005.bin"):
            shutil.copy(os.path.join(ck, name), resumed_dir)
        out = train(n, path(f"resumed{n}.bin"), extra=["--resume", resumed_dir])
        ours = losses(out, f"resumed at {n} ranks", STEPS - 5)
        if n == 2:
            check(ours == full[5:], f"resumed at 2 ranks: losses {ours} vs {full[5:]}")
            with open(path("resumed2.bin"), "rb") as x, open(path("ck_full.bin"), "rb") as y:
                check(x.read() == y.read(), "resumed at 2 ranks: the final model file differs")
        else:
            for i, (x, y) in enumerate(zip(ours, full[5:])):
                check(abs(x - y) <= 1e-5 * abs(y), f"resumed at {n} ranks, step {i + 6}: {x} vs {y}")
    killed_rank_ends_the_job(a, train, path, check)
    # Rank 1 with another --seed: refused by name, the job ends with an error.
    base = train(0, None, dry=True)
    cmd = ["timeout", "120", a.mpirun, "--oversubscribe", "--bind-to", "none", "-x",
           "OMP_NUM_THREADS=1", "-np", "1"] + base + [":", "-np", "1"] + base[:-1] + ["4"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    check(p.returncode != 0, "ranks with different --seed were not refused")
    check("error on rank 1 of 2: this rank has --seed: 4, rank 0 has 3" in p.stdout,
          f"the refusal does not name the rank and the flag:\n{p.stdout}")


def start_and_hit_rank_1(a, train, ck, what, extra=()):
    """Starts a long 2-rank run checkpointing into ck, waits for its first checkpoint, sends `what`
    (a signal) to rank 1 and returns the job's output, exit code and seconds from the signal to the
    job's end (None when rank 1 could not be found)."""
    import shutil
    import signal
    import time
    shutil.rmtree(ck, ignore_errors=True)
    args = train(2, None, steps=100000,
                 extra=["--checkpoint-dir", ck, "--checkpoint-every", "20"] + list(extra), dry=True)
    job = subprocess.Popen(["timeout", "300", a.mpirun, "-np", "2", "--oversubscribe", "--bind-to",
                            "none", "-x", "OMP_NUM_THREADS=1"] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(ck, "state_00000020.bin")) and time.time() < deadline:
        time.sleep(0.05)
    def parent(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return 0

    victim = None  # rank 1 of this job: our llmcpu, below our timeout/mpirun, with rank 1's env
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        ancestors, p = [], int(pid)
        for _ in range(4):
            p = parent(p)
            ancestors.append(p)
        if (b"OMPI_COMM_WORLD_RANK=1" in env and argv0 == a.llmcpu.encode() and
                job.pid in ancestors):
            victim = int(pid)
    if victim is None or job.poll() is not None:
        job.kill()
        return job.communicate()[0], None, None
    os.kill(victim, what)
    hit = time.time()
    try:
        out, _ = job.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        job.kill()
        out, _ = job.communicate()
    took = time.time() - hit
    try:
        os.kill(victim, signal.SIGKILL)  # a stopped rank that outlived the job
    except OSError:
        pass
    return out, job.returncode, took


def killed_rank_ends_the_job(a, train, path, check):
    """SIGKILL to rank 1 mid-run ends the whole job within 30 s, and the newest complete checkpoint
    resumes; a rank that hangs (SIGSTOP) ends it once --comm-timeout has passed."""
    import signal
    ck = path("ck_killed")
    out, code, took = start_and_hit_rank_1(a, train, ck, signal.SIGKILL)
    check(took is not None, f"could not find rank 1 of a running 2-rank job to kill:\n{out}")
    if took is None:
        return
    print(f"rank 1 killed: the job ended {took:.1f} s later with exit code {code}")
    check(took <= 30, f"the job outlived its killed rank by {took:.0f} s")
    check(code != 0, "a job with a killed rank exited 0")
    check("signal 9" in out, f"mpirun does not say that a rank was killed:\n{out[-2000:]}")
    steps = sorted(int(f[6:14]) for f in os.listdir(ck) if f.startswith("state_") and f.endswith(".bin"))
    check(bool(steps), "no complete checkpoint survived")
    if steps:
        out = train(2, None, steps=steps[-1] + 3, extra=["--resume", ck])
        check("step " in out and "error" not in out, f"the surviving checkpoint did not resume:\n{out}")

    out, code, took = start_and_hit_rank_1(a, train, path("ck_hung"), signal.SIGSTOP,
                                           extra=["--comm-timeout", "3"])
    check(took is not None, f"could not find rank 1 of a running 2-rank job to stop:\n{out}")
    if took is None:
        return
    print(f"rank 1 stopped: the job ended {took:.1f} s later with exit code {code}")
    check(took <= 15, f"a hung rank kept the job waiting {took:.0f} s with --comm-timeout 3")
    check(code != 0, "a job with a hung rank exited 0")
    check("rank 0: MPI_Allreduce has waited" in out and "--comm-timeout 3" in out,
          f"the timeout does not say which rank gave up and why:\n{out[-2000:]}")


if __name__ == "__main__":
    main()
