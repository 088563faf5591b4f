#!/usr/bin/python3
"""Runs `llmcpu train` on a fixture of tests/fixtures/make_fixture.py and checks what it prints and
logs against PyTorch's run of the same steps (called by ctest, next to check_train_losses.cmake).

Always: the log's `s:N trl:X` lines, one per step, within LOSS_LIMIT of NAME_losses.txt.
--grad-clip X (a fixture made with --grad-clip X): each step line's `norm` (before clipping, as
  torch.nn.utils.clip_grad_norm_ returns it) against NAME_norms.txt; that PyTorch did clip on some
  step; and, given --unclipped OTHER (the same fixture made without clipping), that the clipped
  losses differ from OTHER's by more than LOSS_LIMIT, so that a run ignoring --grad-clip fails.
--plugin P [--offload-layers N|all]: the same run with that part of the model on P's device (the
  limits are the same: the device computes in fp32 as the CPU does, within the same bounds).
--val-every K (a fixture made with --val-every K): the log's `s:N tel:X` lines at exactly the steps
  of NAME_val_losses.txt (0, K, 2K, ... and the last), each between the train loss of the step
  before and that of its own step (validation comes before the step's update, as in llm.c), within
  LOSS_LIMIT of PyTorch's mean loss over the validation batches; and that the validation loss moved
  by more than LOSS_LIMIT from one logged step to the next, so that a line logged at the wrong step
  fails.

LOSS_LIMIT is the limit the project holds 10 AdamW steps to (tests/unit/test_fixtures.cpp,
check_train_losses.cmake). At step 0 the weights are the same on both sides and the loss is off by
at most the logits' relative error (1e-5, core/verify/verify.h) times the loss (~7e-5 here); later
steps add the divergence of the two runs' weights, which has no closed form: Adam's first updates
are +-lr by the sign of each gradient component, so a component whose gradient lies within the fp32
rounding noise may step the other way. Measured on these fixtures: at most 1.5e-6. A validation loss
is taken at the same weights as the train loss of its step, so the same limit holds.
The norm is printed with 4 decimals: it is held to the gradients' relative limit (1e-4: the norm of
a difference bounds the difference of norms) plus half a unit of the last printed digit.
"""
import argparse
import os
import re
import subprocess
import sys

LOSS_LIMIT = 2e-4
GRAD_RELATIVE_LIMIT = 1e-4
NORM_PRINT_HALF_UNIT = 0.5e-4


def read_column(path, column=0):
    with open(path) as f:
        return [float(line.split()[column]) for line in f if line.strip()]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmcpu", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--grad-clip", type=float, default=0.0)
    ap.add_argument("--unclipped", help="name of the same fixture made without --grad-clip")
    ap.add_argument("--val-every", type=int, default=0)
    ap.add_argument("--val-batches", type=int, default=4)
    ap.add_argument("--plugin", help="an offload plugin: the run goes through it")
    ap.add_argument("--offload-layers", default="all")
    a = ap.parse_args()

    fixture = lambda suffix: os.path.join(a.dir, f"{a.name}_{suffix}")
    log = fixture("llmcpu_check_log.txt")
    cmd = [a.llmcpu, "train", "--model", fixture("model.bin"), "--train-data", fixture("train.bin"),
           "--batch", str(a.batch), "--seq-len", str(a.seq_len), "--steps", str(a.steps),
           "--lr", "1e-3", "--weight-decay", "0.01", "--no-shuffle", "--log", log]
    if a.grad_clip > 0:
        cmd += ["--grad-clip", repr(a.grad_clip)]
    if a.val_every > 0:
        cmd += ["--val-data", fixture("val.bin"), "--val-every", str(a.val_every),
                "--val-batches", str(a.val_batches)]
    if a.plugin:
        cmd += ["--plugin", a.plugin, "--offload-layers", a.offload_layers]
    print(" ".join(cmd))
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout)
    if run.returncode != 0:
        fail(f"llmcpu train exited with {run.returncode}")

    # The log: trl lines in step order, tel lines where validation ran.
    with open(log) as f:
        lines = [line.strip() for line in f if line.strip()]
    train, val, order = {}, {}, []
    for line in lines:
        m = re.fullmatch(r"s:(\d+) (trl|tel):(-?[0-9.]+)", line)
        if not m:
            fail(f"log line '{line}' is not 's:N trl:X' or 's:N tel:X'")
        step, kind, value = int(m.group(1)), m.group(2), float(m.group(3))
        (train if kind == "trl" else val)[step] = value
        order.append((step, kind))

    ref_losses = read_column(fixture("losses.txt"))
    if sorted(train) != list(range(a.steps)) or len(ref_losses) != a.steps:
        fail(f"expected train losses of steps 0..{a.steps - 1} from both sides, got llmcpu "
             f"{sorted(train)} and {len(ref_losses)} from PyTorch")
    for step, ref in enumerate(ref_losses):
        print(f"step {step}: train loss llmcpu {train[step]:.6f}, PyTorch {ref:.9f}")
        if not abs(train[step] - ref) <= LOSS_LIMIT:
            fail(f"step {step}: train loss {train[step]} against PyTorch's {ref}: more than "
                 f"{LOSS_LIMIT} apart")

    if a.grad_clip > 0:
        norms = [float(m.group(1)) for m in
                 re.finditer(r"step +\d+/\d+ \| loss [0-9.]+ \| lr \S+ \| norm +([0-9.]+) \|", run.stdout)]
        ref_norms = read_column(fixture("norms.txt"))
        if len(norms) != a.steps or len(ref_norms) != a.steps:
            fail(f"expected {a.steps} norms from each side, got {len(norms)} and {len(ref_norms)}")
        for step, (ours, ref) in enumerate(zip(norms, ref_norms)):
            limit = GRAD_RELATIVE_LIMIT * ref + NORM_PRINT_HALF_UNIT
            print(f"step {step}: norm llmcpu {ours:.4f}, PyTorch {ref:.9f} "
                  f"({'clipped' if ref > a.grad_clip else 'not clipped'})")
            if not abs(ours - ref) <= limit:
                fail(f"step {step}: gradient norm {ours} against PyTorch's {ref}: more than {limit} apart")
        if not any(ref > a.grad_clip for ref in ref_norms):
            fail(f"no step's norm exceeds --grad-clip {a.grad_clip}: nothing was clipped")
        if a.unclipped:
            other = read_column(os.path.join(a.dir, f"{a.unclipped}_losses.txt"))
            apart = max(abs(x - y) for x, y in zip(ref_losses, other))
            print(f"clipping moves PyTorch's losses by up to {apart:.2e}")
            if not apart > LOSS_LIMIT:
                fail(f"the clipped and unclipped PyTorch losses are within {LOSS_LIMIT}: this "
                     "fixture cannot tell clipping from none")

    if a.val_every > 0:
        with open(fixture("val_losses.txt")) as f:
            ref_val = [(int(s), float(v)) for s, v in (line.split() for line in f if line.strip())]
        expected_steps = [s for s, _ in ref_val]
        if sorted(val) != expected_steps:
            fail(f"validation lines at steps {sorted(val)}, expected {expected_steps}")
        for step, ref in ref_val:
            at = order.index((step, "tel"))
            if (step > 0 and order[at - 1] != (step - 1, "trl")) or \
               (step < a.steps and order[at + 1] != (step, "trl")):
                fail(f"s:{step} tel is not between the train losses of steps {step - 1} and {step}")
            print(f"step {step}: validation loss llmcpu {val[step]:.6f}, PyTorch {ref:.9f}")
            if not abs(val[step] - ref) <= LOSS_LIMIT:
                fail(f"step {step}: validation loss {val[step]} against PyTorch's {ref}: more than "
                     f"{LOSS_LIMIT} apart")
        moves = [abs(v1 - v0) for (_, v0), (_, v1) in zip(ref_val, ref_val[1:])]
        if not min(moves) > LOSS_LIMIT:
            fail(f"PyTorch's validation loss moves by only {min(moves)} between logged steps: a "
                 "line at the wrong step would pass")
    print("OK")


if __name__ == "__main__":
    main()
