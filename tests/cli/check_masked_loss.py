#!/usr/bin/python3
"""Training on examples with loss masks (token shards with .spans sidecars) against PyTorch
(ctest MaskedLoss.*).

Writes a GPT-2 of tests/fixtures/make_fixture.py's construction (random weights, an llm.c
checkpoint) and shards of examples of varied lengths with a .spans sidecar each, written here from
the format's description in docs/formats.md (not by llmcpu). Each example's trained spans are drawn
at random (an "answer" at its end, sometimes a second one inside, some examples with none), so
micro-batches hold different numbers of counted targets.

Runs `llmcpu train` for a few AdamW steps of 4 micro-batches of B rows: in one process
(accumulating 4), and with --mpirun under mpirun at 2 ranks (2 each). --pack on|off picks the rows:
  off: one example per row, padded;
  on:  examples packed into rows in order while they fit, attention within each example and its
       positions restarting at 0 (the block-diagonal mask and position ids of transformers'
       DataCollatorWithFlattening).
--plugin P [--offload-layers N|all]: the one-process run with that part of the model on P's
device (the CPU computes the rest; with all, the device computes the head and the masked loss),
and a packed run with the plugin is refused before its first step.
Resuming: a shuffled run stopped after 2 steps and resumed (--resume) logs the same losses, digit
for digit, as the same run uninterrupted: the rows and their order are exactly those again.
PyTorch (float64) computes the same steps from the published semantics: per step the rows of its 4
micro-batches, cross-entropy with ignore_index over every row at once with reduction "sum", divided
by the number of counted targets (transformers' Trainer with num_items_in_batch), then AdamW. The
validation loss is the same sum over the validation rows divided by their count.

Limits: LOSS_LIMIT of tests/cli/check_train_against_pytorch.py (2e-4, the project's limit for a few
AdamW steps of fp32 against float64; its derivation is there); runs at 1 and 2 ranks sum the same
terms in another order, so they agree within 1e-5 relative (as tests/comm/check_data_parallel.py).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from make_fixture import GPT, header, llmc_tensors, randomize, token_stream, write  # noqa: E402

LOSS_LIMIT = 2e-4
RANKS_RELATIVE = 1e-5
L, NH, C, V, MAXT = 2, 4, 32, 311, 32
B, T, MICRO, STEPS, VAL_BATCHES = 2, 16, 4, 4, 3
SPANS_MAGIC, SPANS_VERSION = 20261207, 1


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def make_examples(count, gen, stream):
    """`count` examples of 2..T tokens (a few of exactly T) cut from the stream, and their trained
    spans as (begin, end) offsets inside each example (begin >= 1)."""
    examples, spans, at = [], [], 0
    for i in range(count):
        n = T if i % 7 == 3 else int(torch.randint(2, T + 1, (1,), generator=gen))
        examples.append(stream[at:at + n].tolist())
        at += n
        mine = []
        if i % 5 != 4:  # every fifth example has nothing to train on
            answer = int(torch.randint(1, n, (1,), generator=gen))
            if answer > 3 and i % 3 == 0:  # a second, earlier span
                mine.append((1, answer // 2))
            mine.append((answer, n))
        spans.append(mine)
    return examples, spans


def write_shard(path, examples, spans):
    tokens = np.array([t for e in examples for t in e], dtype=np.uint16)
    write(path, header(20240520, 1, len(tokens)), tokens)
    starts = np.cumsum([0] + [len(e) for e in examples[:-1]]).astype(np.uint64)
    bounds = []
    for start, mine in zip(starts, spans):
        for b, e in mine:
            bounds += [int(start) + b, int(start) + e]
    head = np.zeros(256, dtype=np.int32)
    head[0], head[1] = SPANS_MAGIC, SPANS_VERSION
    counts = np.array([len(tokens), len(examples), len(bounds) // 2], dtype=np.uint64)
    head_bytes = bytearray(head.tobytes())
    head_bytes[8:32] = counts.tobytes()
    write(path[: -len(".bin")] + ".spans", bytes(head_bytes), starts,
          np.array(bounds, dtype=np.uint64))


def rows_of(examples, spans, pack):
    """Rows of T positions: (inputs, targets with -100 where masked, position ids, example ids)."""
    rows, cur = [], []
    for e, s in zip(examples, spans):
        if cur and (not pack or sum(len(x[0]) for x in cur) + len(e) > T):
            rows.append(cur)
            cur = []
        cur.append((e, s))
    rows.append(cur)
    out = []
    for r in rows:
        inputs, targets, pos, seg = [], [], [], []
        for k, (e, s) in enumerate(r):
            trained = set(j for b, end in s for j in range(b, end))
            for i, tok in enumerate(e):
                inputs.append(tok)
                targets.append(e[i + 1] if i + 1 < len(e) and i + 1 in trained else -100)
                pos.append(i)
                seg.append(k)
        pad = T - len(inputs)
        inputs += [0] * pad
        targets += [-100] * pad
        pos += list(range(pad))
        seg += [len(r)] * pad
        out.append((inputs, targets, pos, seg))
    return out


def forward(model, rows):
    """The model on rows with a block-diagonal causal mask and per-example positions."""
    idx = torch.tensor([r[0] for r in rows])
    pos = torch.tensor([r[2] for r in rows])
    seg = torch.tensor([r[3] for r in rows])
    n = idx.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    allowed = causal & (seg[:, :, None] == seg[:, None, :])  # (rows, T, T)
    x = model.wte(idx) + model.wpe(pos)
    for block in model.h:
        h = block.ln_1(x)
        q, k, v = block.c_attn(h).split(C, dim=2)
        hs = C // NH
        q, k, v = (t.view(len(rows), n, NH, hs).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / hs ** 0.5
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(len(rows), n, C)
        x = x + block.c_proj(y)
        x = x + block.c_fcproj(F.gelu(block.c_fc(block.ln_2(x)), approximate="tanh"))
    return model.ln_f(x) @ model.wte.weight.t()


def masked_loss(model, rows):
    """Sum of the counted targets' cross-entropies over `rows`, over their count."""
    targets = torch.tensor([r[1] for r in rows]).view(-1)
    logits = forward(model, rows)
    total = F.cross_entropy(logits.view(-1, V), targets, ignore_index=-100, reduction="sum")
    count = int((targets != -100).sum())
    return total / max(count, 1)


def pytorch_run(model, train_rows, val_rows):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999),
                            eps=1e-8, foreach=False)
    rows_per_step = B * MICRO
    losses, val_losses = [], []
    for step in range(STEPS + 1):
        if step in (0, STEPS):
            with torch.no_grad():
                val_losses.append((step, masked_loss(model, val_rows[: B * VAL_BATCHES]).item()))
        if step == STEPS:
            break
        rows = train_rows[step * rows_per_step:(step + 1) * rows_per_step]
        loss = masked_loss(model, rows)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, dict(val_losses)


def read_log(path):
    train, val = {}, {}
    with open(path) as f:
        for line in f:
            m = re.fullmatch(r"s:(\d+) (trl|tel):(-?[0-9.]+)", line.strip())
            if m:
                (train if m.group(2) == "trl" else val)[int(m.group(1))] = float(m.group(3))
    return train, val


def train(a, args, what, prefix=()):
    cmd = list(prefix) + [a.llmcpu, "train"] + args
    print(" ".join(cmd))
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=400)
    print(run.stdout)
    if run.returncode != 0:
        fail(f"llmcpu train ({what}) exited with {run.returncode}")
    return run.stdout


def check_resume(a, workdir):
    """A shuffled run of STEPS steps against the same run stopped at 2 and resumed."""
    common = ["--model", os.path.join(workdir, "model.bin"),
              "--train-data", os.path.join(workdir, "train.bin"), "--batch", str(B),
              "--seq-len", str(T), "--total-batch", str(B * T * MICRO), "--lr", "1e-3",
              "--seed", "11", "--pack", a.pack]
    whole, part = (os.path.join(workdir, f"resume_{n}.txt") for n in ("whole", "part"))
    ckpt = os.path.join(workdir, "resume_ckpt")
    train(a, common + ["--steps", str(STEPS), "--log", whole], "shuffled")
    train(a, common + ["--steps", "2", "--checkpoint-dir", ckpt], "first 2 steps")
    train(a, common + ["--steps", str(STEPS), "--resume", ckpt, "--log", part], "resumed")
    ref, resumed = read_log(whole)[0], read_log(part)[0]
    for step in range(2, STEPS):
        print(f"resume step {step}: {resumed.get(step)}, uninterrupted {ref[step]}")
        if resumed.get(step) != ref[step]:
            fail(f"the resumed run's step {step} logged {resumed.get(step)}, the uninterrupted "
                 f"run's {ref[step]}")


def llmcpu_run(a, workdir, ranks):
    log = os.path.join(workdir, f"log_{a.pack}_{ranks}.txt")
    args = ["--model", os.path.join(workdir, "model.bin"),
            "--train-data", os.path.join(workdir, "train.bin"),
            "--val-data", os.path.join(workdir, "val.bin"), "--val-every", str(STEPS),
            "--val-batches", str(VAL_BATCHES), "--batch", str(B), "--seq-len", str(T),
            "--total-batch", str(B * T * MICRO), "--steps", str(STEPS), "--lr", "1e-3",
            "--weight-decay", "0.01", "--no-shuffle", "--pack", a.pack, "--log", log]
    prefix = []
    if a.plugin:
        args += ["--plugin", a.plugin, "--offload-layers", a.offload_layers]
    if ranks > 1:
        prefix = ["timeout", "300", a.mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to",
                  "none", "-x", "OMP_NUM_THREADS=1"]
    out = train(a, args, f"{ranks} rank(s)", prefix)
    rows_note = "examples packed into" if a.pack == "on" else "one example per row"
    if rows_note not in out:
        fail(f"train did not say how it laid out the examples ('{rows_note}')")
    return read_log(log)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llmcpu", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pack", choices=["on", "off"], required=True)
    ap.add_argument("--mpirun", help="also run at 2 ranks under this mpirun")
    ap.add_argument("--plugin", help="an offload plugin: the run goes through it")
    ap.add_argument("--offload-layers", default="all")
    ap.add_argument("--resume", action="store_true", help="also check a resumed shuffled run")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    torch.manual_seed(5)
    gen = torch.Generator().manual_seed(5)
    model = GPT(L, NH, C, V, MAXT)
    randomize(model, gen, L)
    model = model.to(torch.float64)
    Vp = (V + 127) // 128 * 128
    write(os.path.join(a.out, "model.bin"), header(20240326, 3, MAXT, V, L, NH, C, Vp),
          *llmc_tensors(model, L, Vp))

    stream = token_stream(V, 20000, gen)
    train_ex, train_spans = make_examples(160, gen, stream)
    val_ex, val_spans = make_examples(40, gen, stream[10000:])
    write_shard(os.path.join(a.out, "train.bin"), train_ex, train_spans)
    write_shard(os.path.join(a.out, "val.bin"), val_ex, val_spans)
    train_rows = rows_of(train_ex, train_spans, a.pack == "on")
    val_rows = rows_of(val_ex, val_spans, a.pack == "on")
    if len(train_rows) < STEPS * B * MICRO:
        fail(f"only {len(train_rows)} training rows for {STEPS} steps")
    counts = [sum(t != -100 for r in train_rows[k * B:(k + 1) * B] for t in r[1])
              for k in range(MICRO)]
    if len(set(counts)) == 1:
        fail(f"the first step's micro-batches all count {counts[0]} targets: a mean of means "
             "would pass unnoticed")

    ref_losses, ref_val = pytorch_run(model, train_rows, val_rows)
    runs = {1: llmcpu_run(a, a.out, 1)}
    if a.mpirun:
        runs[2] = llmcpu_run(a, a.out, 2)
    for ranks, (train, val) in runs.items():
        if sorted(train) != list(range(STEPS)) or sorted(val) != [0, STEPS]:
            fail(f"{ranks} rank(s): logged steps {sorted(train)}, validations {sorted(val)}")
        for step, ref in enumerate(ref_losses):
            print(f"{ranks} rank(s) step {step}: loss {train[step]:.6f}, PyTorch {ref:.6f}")
            if abs(train[step] - ref) > LOSS_LIMIT:
                fail(f"{ranks} rank(s) step {step}: loss {train[step]} against PyTorch's {ref}")
        for step, ref in ref_val.items():
            print(f"{ranks} rank(s) validation at {step}: {val[step]:.6f}, PyTorch {ref:.6f}")
            if abs(val[step] - ref) > LOSS_LIMIT:
                fail(f"{ranks} rank(s) validation at step {step}: {val[step]} against {ref}")
    if a.resume:
        check_resume(a, a.out)
    if a.plugin:  # packed rows cannot go to the device: refused by name before any step
        cmd = [a.llmcpu, "train", "--model", os.path.join(a.out, "model.bin"), "--train-data",
               os.path.join(a.out, "train.bin"), "--batch", str(B), "--seq-len", str(T),
               "--steps", "1", "--pack", "on", "--plugin", a.plugin, "--offload-layers", "all"]
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=400)
        print(run.stdout)
        stepped = re.search(r"step +1/", run.stdout)
        if run.returncode == 0 or "--pack off" not in run.stdout or stepped:
            fail("a packed run with a device plugin was not refused before its first step")
    if 2 in runs:
        for step in range(STEPS):
            one, two = runs[1][0][step], runs[2][0][step]
            if abs(one - two) > RANKS_RELATIVE * abs(one) + 0.5e-6:  # + half the log's last digit
                fail(f"step {step}: 1 rank {one} against 2 ranks {two}")
    print("OK")


if __name__ == "__main__":
    main()
