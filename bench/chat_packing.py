#!/usr/bin/env python3
"""Packed rows against one example per row, training on chat data: tokens per second and the share
of padding.

  /usr/bin/python3 bench/chat_packing.py --tokenizer DIR [--chat-template FILE] [--mb 4]
      [--batch 2] [--seq-len 2048] [--steps 4] [--threads N] [--out DIR] [--llmcpu build/llmcpu]

Makes a chat JSONL of --mb megabytes with bench/make_chat_jsonl.py (UltraChat 200k's published
shape: rounds, turn lengths), prepares it with `llmcpu prepare --format chat` and the tokenizer
folder's template (loss on the assistant turns), then trains a model of SmolLM2-135M's shape (its
vocabulary sized to the tokenizer's, random weights) for --steps steps on it twice: --pack on and
--pack off. For each: the padding share train prints, the median step time of the steps after the
first, the positions per second (B*T per step over the step's time) and the examples' tokens per
second (positions that hold an example's token, the padding left out), which is what a run gets
through its data at. The ratio of the two runs' example tokens per second is the figure to record.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        print(out.stdout)
        sys.exit(f"{cmd[0]} exited with {out.returncode}")
    return out.stdout


def model_preset(path, tokenizer_dir):
    """SmolLM2-135M's shape with a vocabulary that holds every id of the tokenizer."""
    with open(os.path.join(tokenizer_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    vocab = (max(ids) + 1 + 63) // 64 * 64
    with open(path, "w") as f:
        f.write('model_type = "llama"\nhidden_size = 576\nintermediate_size = 1536\n'
                "num_hidden_layers = 30\nnum_attention_heads = 9\nnum_key_value_heads = 3\n"
                f"max_position_embeddings = 8192\nvocab_size = {vocab}\nrope_theta = 100000.0\n"
                "rms_norm_eps = 1e-5\ntie_word_embeddings = true\n")


def train(a, preset, pack):
    metrics = os.path.join(a.out, f"metrics_{pack}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [a.llmcpu, "train", "--model", preset,
           "--train-data", os.path.join(a.out, "chat_train_*.bin"), "--batch", str(a.batch),
           "--seq-len", str(a.seq_len), "--steps", str(a.steps), "--lr", "1e-4",
           "--precision", a.precision, "--pack", pack, "--metrics", metrics]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    out = run(cmd)
    m = re.search(r"examples (?:packed into|in) (\d+) rows of \d+ tokens[^(]*\(([\d.]+)% padding\)",
                  out)
    if not m:
        print(out)
        sys.exit("train did not print how it laid out the examples")
    rows, padding = int(m.group(1)), float(m.group(2)) / 100
    with open(metrics) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    ms = statistics.median(s["ms"] for s in steps[1:])
    positions = a.batch * a.seq_len / (ms / 1000)
    return {"rows": rows, "padding": padding, "ms": ms, "positions_per_s": positions,
            "example_tokens_per_s": positions * (1 - padding)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="a tokenizer folder (tokenizer.json)")
    ap.add_argument("--chat-template", help="a template file (default: the folder's)")
    ap.add_argument("--mb", type=float, default=4)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="/tmp/llmcpu_chat_packing")
    ap.add_argument("--llmcpu", default="build/llmcpu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    jsonl = os.path.join(a.out, "chat.jsonl")
    run([sys.executable, os.path.join(HERE, "make_chat_jsonl.py"), jsonl, "--mb", str(a.mb)])
    prep = [a.llmcpu, "prepare", "--format", "chat", "--input", jsonl, "--tokenizer",
            a.tokenizer, "--out-dir", a.out, "--name", "chat", "--val-tokens", "0"]
    if a.chat_template:
        prep += ["--chat-template", a.chat_template]
    print(run(prep))
    preset = os.path.join(a.out, "model.toml")
    model_preset(preset, a.tokenizer)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown CPU")
    results = {pack: train(a, preset, pack) for pack in ("on", "off")}
    print(f"\n{cpu}, {os.cpu_count()} CPUs; B={a.batch} T={a.seq_len} {a.precision}, "
          f"{a.steps} steps (median of steps 2..)")
    for pack, r in results.items():
        print(f"--pack {pack:3}: {r['rows']:6d} rows, padding {100 * r['padding']:5.1f}%, "
              f"step {r['ms'] / 1000:7.2f} s, {r['positions_per_s']:8.0f} positions/s, "
              f"{r['example_tokens_per_s']:8.0f} example tokens/s")
    ratio = results["on"]["example_tokens_per_s"] / results["off"]["example_tokens_per_s"]
    print(f"packed / one example per row: {ratio:.2f}x example tokens per second")


if __name__ == "__main__":
    main()
