#!/usr/bin/python3
"""Peak memory of a GPT-2 124M training run against the sequence length T.

Runs `llmcpu train --model gpt2-124m-2k` (maxT 2048) for a few steps at each T on random tokens and
prints one markdown table: T, the memory plan's total (what `train` prints before it allocates),
the peak resident set size the kernel reports for the process (ru_maxrss of the child), the plan
over the peak, the peak's ratio to T=256's, and the step time (the mean of the steps after the
first). With flash attention and the chunked head nothing grows with T^2: the peak must grow
linearly in T.

  bench/memory_vs_seq_len.py [--llmcpu build/llmcpu] [--precision bf16] [--batch 4]
                             [--seq-lens 256,512,1024,2048] [--steps 3] [--recompute none]
"""
import argparse
import array
import os
import random
import re
import resource
import subprocess
import sys
import tempfile


def write_shard(path, tokens):
    """An llm.c token shard: int32[256] header {20240520, 1, ntok}, then uint16 tokens."""
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(array.array("H", tokens).tobytes())


def run(args, T, shard):
    cmd = [args.llmcpu, "train", "--model", "gpt2-124m-2k", "--train-data", shard,
           "--batch", str(args.batch), "--seq-len", str(T), "--steps", str(args.steps),
           "--precision", args.precision, "--recompute", args.recompute, "--lr", "1e-4"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run(cmd, capture_output=True, text=True)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if out.returncode != 0:
        sys.exit(f"memory_vs_seq_len: T={T}: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    if peak_kib <= before:
        sys.exit("memory_vs_seq_len: run the lengths in increasing order (ru_maxrss is a maximum "
                 "over all children)")
    plan = re.search(r"total ([0-9.]+) MiB", out.stdout)
    steps = [float(m) for m in re.findall(r"\|\s+([0-9.]+) ms \|", out.stdout)]
    return float(plan.group(1)), peak_kib / 1024.0, sum(steps[1:]) / max(1, len(steps) - 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llmcpu", default="build/llmcpu")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--recompute", default="none")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seq-lens", default="256,512,1024,2048")
    args = p.parse_args()
    lens = sorted(int(t) for t in args.seq_lens.split(","))
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        shard = os.path.join(tmp, "random_train_000000.bin")
        n = args.batch * max(lens) * (args.steps + 1) + 1
        write_shard(shard, [rng.randrange(50257) for _ in range(n)])
        rows = [(T, *run(args, T, shard)) for T in lens]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"GPT-2 124M (maxT 2048), B={args.batch}, {args.precision}, recompute {args.recompute}, "
          f"{args.steps} steps, {cpu}\n")
    print("| T | plan MiB | peak RSS MiB | plan / peak | peak / T=%d's | T / %d | step ms |"
          % (lens[0], lens[0]))
    print("|---|---|---|---|---|---|---|")
    for T, plan, peak, ms in rows:
        print(f"| {T} | {plan:.0f} | {peak:.0f} | {plan / peak:.3f} | {peak / rows[0][2]:.2f} | "
              f"{T / lens[0]:.0f} | {ms:.0f} |")
    # Linear in T: the growth from each length to the next is the same per token (within 10%).
    per_token = [(b[2] - a[2]) / (b[0] - a[0]) for a, b in zip(rows, rows[1:])]
    if per_token:
        print("\nMiB per extra token of T: " + ", ".join(f"{x:.3f}" for x in per_token))


if __name__ == "__main__":
    main()
