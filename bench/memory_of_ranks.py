#!/usr/bin/python3
"""The memory of a machine running several ranks of `llmcpu train` against their memory plans.

Runs `mpirun -np N llmcpu train --model gpt2-124m` (ZeRO-1, one thread a rank) on random tokens in
fp32 and bf16, with the ranks' weights shared (the default on one machine) and not
(LLMCPU_SHARED_MEMORY=0), samples every 0.3 s the Rss and Pss (/proc/PID/smaps_rollup) of every
llmcpu process, and prints one markdown table: the plan of one rank (rank 0's "memory: ... total"
line) and of the machine (N of them: each rank is charged its share of what the ranks share), the
machine's peak (the largest sum of Pss over the ranks: Pss splits a shared page between the
processes that map it, so the sum counts it once), their ratio, and the largest Rss of a process.

  bench/memory_of_ranks.py [--llmcpu build/llmcpu] [--mpirun mpirun] [--np 2] [--batch 4]
                           [--seq-len 64] [--steps 6] [--precisions fp32,bf16]

As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the
environment, and in containers OMPI_MCA_btl_vader_single_copy_mechanism=none.
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

from memory_vs_seq_len import write_shard  # the same folder: llm.c's token shard writer


def llmcpu_processes(root):
    """The pids of the llmcpu processes below `root`."""
    procs = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        procs.append((int(pid), ppid, comm))
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid, _ in procs:
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return [pid for pid, _, comm in procs if pid in tree and comm == "llmcpu"]


def rollup_mib(pid):
    """Rss and Pss of a process in MiB (smaps_rollup)."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0] in ("Rss:", "Pss:"):
                fields[parts[0][:-1]] = int(parts[1]) / 1024.0
    return fields.get("Rss", 0.0), fields.get("Pss", 0.0)


def run(args, precision, shared, shard):
    cmd = [args.mpirun, "-np", str(args.np), "--oversubscribe", "--bind-to", "none",
           "-x", "OMP_NUM_THREADS=1"]
    if not shared:
        cmd += ["-x", "LLMCPU_SHARED_MEMORY=0"]
    cmd += [args.llmcpu, "train", "--model", "gpt2-124m", "--train-data", shard,
            "--batch", str(args.batch), "--seq-len", str(args.seq_len),
            "--total-batch", str(args.np * args.batch * args.seq_len), "--steps", str(args.steps),
            "--precision", precision, "--lr", "1e-4"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout))
    reader.start()
    machine, rss = 0.0, 0.0
    while proc.poll() is None:
        total = 0.0
        for pid in llmcpu_processes(proc.pid):
            try:
                r, p = rollup_mib(pid)
            except OSError:
                continue
            total += p
            rss = max(rss, r)
        machine = max(machine, total)
        time.sleep(0.3)
    reader.join()
    text = "".join(out)
    if proc.returncode != 0:
        sys.exit(f"memory_of_ranks: {' '.join(cmd)} failed:\n{text}")
    plan = re.search(r"total ([0-9.]+) MiB", text)
    if not plan:
        sys.exit(f"memory_of_ranks: no memory plan in the output of {' '.join(cmd)}:\n{text}")
    if shared != ("one copy in memory shared" in text):
        sys.exit(f"memory_of_ranks: the weights were {'not ' if shared else ''}shared:\n{text}")
    return float(plan.group(1)), machine, rss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llmcpu", default="build/llmcpu")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--precisions", default="fp32,bf16")
    args = p.parse_args()
    rng = random.Random(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        shard = os.path.join(tmp, "random_train_000000.bin")
        n = args.np * args.batch * args.seq_len * (args.steps + 1) + 1
        write_shard(shard, [rng.randrange(50257) for _ in range(n)])
        for precision in args.precisions.split(","):
            for shared in (True, False):
                rows.append((precision, shared, *run(args, precision, shared, shard)))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"GPT-2 124M, {args.np} ranks x 1 thread, ZeRO-1, B={args.batch}, T={args.seq_len}, "
          f"{args.steps} steps, {cpu}\n")
    print("| precision | weights | plan of a rank MiB | plan of the machine MiB | "
          "machine peak (sum of Pss) MiB | plan / peak | peak Rss of a rank MiB |")
    print("|---|---|---|---|---|---|---|")
    for precision, shared, plan, machine, rss in rows:
        print(f"| {precision} | {'shared' if shared else 'each rank its own'} | {plan:.0f} | "
              f"{args.np * plan:.0f} | {machine:.0f} | {args.np * plan / machine:.3f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
