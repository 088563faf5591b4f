#!/usr/bin/python3
"""Training-step time of llmcpu against PyTorch on this CPU, in one run, for the same GPT-2 or
Llama-family shape, batch and thread count. Prints ms/step (median of --steps after --warmup) for

  PyTorch fp32             model and AdamW in fp32
  PyTorch bf16             the same under torch.autocast('cpu', dtype=torch.bfloat16): matmuls in
                           bf16, fp32 master weights and AdamW, as PyTorch users train in bf16
  llmcpu fp32 / bf16       bench_step (LLMCPU_PRECISION=fp32|bf16), or `llmcpu train` on a shard of
                           random tokens for shapes bench_step does not have (see --llmcpu-via)

and the ratios PyTorch / llmcpu for each precision (above 1: llmcpu is faster).

The PyTorch model is llm.c's GPT-2 (train_gpt2.py), written here independently of llmcpu: tanh GELU,
layernorm eps 1e-5, lm_head tied to wte, causal attention with a mask (torch 1.13 has no
scaled_dot_product_attention), vocabulary unpadded (50257 logits; llmcpu computes 50304, so the
comparison leans towards PyTorch). A step is forward, backward, the global gradient norm and AdamW
(lr 1e-4, weight decay 0.1), as bench_step times it.

With --arch llama --preset NAME the shape is conf/models/NAME.toml's (llama or qwen2), the PyTorch
model is transformers' LlamaForCausalLM written out in bench/peer_pytorch_llama.py (RMSNorm, rotary
embedding, grouped-query attention through scaled_dot_product_attention where torch has it, SwiGLU,
tied or untied head), llmcpu runs `llmcpu train --model conf/models/NAME.toml` on random tokens, and
--threads defaults to every CPU this process may use.

  /usr/bin/python3 bench/peer_pytorch.py                         # GPT-2 124M, B=4 T=64, 2 threads
  /usr/bin/python3 bench/peer_pytorch.py --model d6 --steps 10 --llmcpu-build build-simd
  /usr/bin/python3 bench/peer_pytorch.py --layers 4 --heads 4 --channels 256 --llmcpu-via train
  /usr/bin/python3 bench/peer_pytorch.py --arch llama --preset llama-d2 --batch 2 --seq-len 64 --steps 2
  /usr/bin/python3 bench/peer_pytorch.py --arch llama --preset smollm2-135m --batch 4 --seq-len 1024

Where a PyTorch runs that llmcpu cannot run beside (a newer one in a Debian 13 chroot, say, where
llmcpu built on Debian 12 lacks its libraries), time PyTorch there with --only-torch --results-out
FILE, then llmcpu on the host with --only-llmcpu --results-in FILE, which prints both and the ratios:

  python3 bench/peer_pytorch.py --arch llama --preset smollm2-135m --seq-len 1024 \
      --only-torch --results-out torch26.json                      # in the chroot, torch 2.6
  /usr/bin/python3 bench/peer_pytorch.py --arch llama --preset smollm2-135m --seq-len 1024 \
      --only-llmcpu --results-in torch26.json                      # on the host

Not here: correctness (tests/ compare llmcpu with PyTorch), other frameworks (llm.c's figures are
in bench/RESULTS.md), several processes at once (everything runs one after the other).
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import peer_pytorch_llama as llama

# (layers, heads, channels) of the presets in conf/models/; vocabulary 50257, maxT 1024 for all.
PRESETS = {"d2": (2, 2, 128), "d4": (4, 4, 256), "d6": (6, 6, 384), "124m": (12, 12, 768)}
# bench_step's benchmarks: preset -> its name there; each runs at B=4, T=64 only.
BENCH_STEP_NAMES = {"d2": "gpt2_d2", "d6": "gpt2_d6", "124m": "gpt2_124m"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_description():
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
    return f"{model} ({os.cpu_count()} logical CPUs; {' '.join(isa) or 'no AVX2'})"


# ----------------------------------------------------------------------------------------------
# PyTorch


def build_model(torch, L, NH, C, V, maxT):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.c_fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x, mask):
            B, T, _ = x.shape
            hs = C // NH
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = F.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            return x + self.c_fcproj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C, eps=1e-5)
            self.register_buffer("mask", torch.ones(maxT, maxT, dtype=torch.bool).triu(1))
            with torch.no_grad():  # GPT-2 initialisation, as llm.c's train_gpt2.py
                for name, p in self.named_parameters():
                    if name.endswith("bias"):
                        p.zero_()
                    elif p.dim() == 2:
                        std = 0.02 / math.sqrt(2 * L) if "c_proj" in name or "c_fcproj" in name else 0.02
                        p.normal_(0.0, std)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for block in self.h:
                x = block(x, self.mask)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # lm_head tied to wte
            return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))

    return GPT()


def time_pytorch(torch, a, bf16):
    """ms per step (median after warmup) and the median split into forward / backward / update."""
    torch.manual_seed(1)
    if a.arch == "llama":
        model = llama.build_model(torch, a.config)
    else:
        model = build_model(torch, a.layers, a.heads, a.channels, a.vocab, a.max_seq_len)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    steps, loss = [], None
    for i in range(a.warmup + a.steps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.stack([p.grad.norm() for p in params]).norm().item()  # the global norm, no clip
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        cpu = time.process_time() - c0
        if i >= a.warmup:
            steps.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2))
        # CPU time well below threads x wall time: the process waited (other load, page faults).
        print(f"  PyTorch {'bf16' if bf16 else 'fp32'} step {i + 1}: {1e3 * (t3 - t0):.1f} ms"
              f"{' (warm-up)' if i < a.warmup else ''}, CPU {1e3 * cpu:.0f} ms, loss "
              f"{loss.item():.4f}", flush=True)
    median = statistics.median(s[0] for s in steps)
    split = [statistics.median(s[k] for s in steps) for k in (1, 2, 3)]
    return 1e3 * median, split


# ----------------------------------------------------------------------------------------------
# llmcpu


def llmcpu_env(a, precision):
    env = dict(os.environ)
    env["LLMCPU_THREADS"] = str(a.threads)
    env["OMP_NUM_THREADS"] = str(a.threads)
    env["LLMCPU_PRECISION"] = precision
    return env


def binary_mentions(path, text):
    with open(path, "rb") as f:
        return text.encode() in f.read()


def time_bench_step(a, preset, precision):
    """(ms per step, note) from bench_step: the median over --llmcpu-reps repetitions of its mean
    step time; None with the reason when it cannot give one."""
    exe = os.path.join(a.llmcpu_build, "bench_step")
    if not os.path.exists(exe):
        return None, f"{exe} not found (cmake --build {a.llmcpu_build} --target bench_step)"
    if precision != "fp32" and not binary_mentions(exe, "LLMCPU_PRECISION"):
        return None, "not available: this bench_step ignores LLMCPU_PRECISION (fp32 only)"
    name = BENCH_STEP_NAMES[preset]
    cmd = [exe, f"--benchmark_filter=BM_TrainStep/{name}/", "--benchmark_format=json",
           f"--benchmark_repetitions={a.llmcpu_reps}"]
    print(f"  $ LLMCPU_PRECISION={precision} LLMCPU_THREADS={a.threads} {' '.join(cmd)}", flush=True)
    r = subprocess.run(cmd, env=llmcpu_env(a, precision), capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"bench_step failed ({r.returncode}): {r.stderr.strip()[-300:]}"
    out = r.stdout[r.stdout.index("{"):]  # the placement line comes first
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    if not runs:
        return None, "bench_step ran no benchmark (filter matched nothing)"
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    ms = [b["real_time"] * scale[b.get("time_unit", "ns")] for b in runs]
    label = runs[0].get("label", "")
    if precision != "fp32" and "fp32" in label:
        return None, f"not available: bench_step's label '{label}' says fp32"
    split = ", ".join(f"{k} {runs[0][k]:.0f}%" for k in ("fwd%", "bwd%", "adamw%") if k in runs[0])
    iters = runs[0].get("iterations", 0)
    return statistics.median(ms), (f"bench_step, {label}; median of {len(ms)} repetitions of the "
                                   f"mean of {iters} steps; {split}")


def write_shard(path, ntok, vocab):
    """llm.c's token shard: magic 20240520 version 1 with uint16 tokens, or for vocabularies above
    65536 magic 20240801 version 7 with uint32 tokens; a 256-int32 header, then the tokens."""
    import numpy as np

    wide = vocab > 65536
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240801, 7, ntok) if wide else (20240520, 1, ntok)
    tokens = np.random.default_rng(7).integers(0, vocab, ntok, dtype=np.int64)
    tokens = tokens.astype(np.uint32 if wide else np.uint16)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def time_train(a, precision, workdir):
    """(ms per step, note) from `llmcpu train` on random tokens: the median of the per-step times
    it prints, after --warmup steps."""
    exe = os.path.join(a.llmcpu_build, "llmcpu")
    if not os.path.exists(exe):
        return None, f"{exe} not found (cmake --build {a.llmcpu_build} --target llmcpu)"
    total = a.warmup + a.steps
    shard = os.path.join(workdir, "random_train.bin")
    if not os.path.exists(shard):
        write_shard(shard, (total + 2) * a.batch * a.seq + 1, a.vocab)
    model = a.config.path if a.arch == "llama" else os.path.join(workdir, "model.toml")
    if a.arch == "gpt2":
        with open(model, "w") as f:
            f.write(f"layers = {a.layers}\nheads = {a.heads}\nchannels = {a.channels}\n"
                    f"max_seq_len = {a.max_seq_len}\nvocab_size = {a.vocab}\n")
    cmd = [exe, "train", "--model", model, "--train-data", shard, "--batch", str(a.batch),
           "--seq-len", str(a.seq), "--steps", str(total), "--lr", "1e-4", "--weight-decay", "0.1",
           "--threads", str(a.threads)]
    if precision != "fp32":
        cmd += ["--precision", precision]
    print(f"  $ {' '.join(cmd)}", flush=True)
    r = subprocess.run(cmd, env=llmcpu_env(a, precision), capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr.strip() or r.stdout.strip())[-300:]
        if precision != "fp32" and "precision" in err:
            return None, f"not available: llmcpu train does not take --precision {precision} ({err})"
        return None, f"llmcpu train failed ({r.returncode}): {err}"
    ms = []
    for line in r.stdout.splitlines():  # "step    3/7 | loss ... | 1234.5 ms | ..."
        if line.startswith("step "):
            field = [p.strip() for p in line.split("|") if p.strip().endswith(" ms")]
            if field:
                ms.append(float(field[0][:-3]))
    if len(ms) != total:
        return None, f"llmcpu train printed {len(ms)} step times, expected {total}"
    return statistics.median(ms[a.warmup:]), (f"llmcpu train, median of {a.steps} steps after "
                                              f"{a.warmup} warm-up")


# ----------------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2",
                    help="gpt2 (default: --model and the shape flags) or llama (--preset)")
    ap.add_argument("--model", choices=sorted(PRESETS),
                    help="GPT-2 preset shape (default 124m); --layers/--heads/--channels override it")
    ap.add_argument("--preset", dest="llama_preset", metavar="NAME",
                    help="llama: conf/models/NAME.toml (llama-d2, smollm2-135m ...) or a .toml file")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--channels", type=int)
    ap.add_argument("--vocab", type=int, help="GPT-2 vocabulary (default 50257)")
    ap.add_argument("--max-seq-len", type=int, help="GPT-2 maxT (default 1024)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", "--seq-len", dest="seq", type=int, default=64,
                    help="tokens per sequence T (default 64)")
    ap.add_argument("--threads", type=int, help="PyTorch's and llmcpu's threads (default 2 for "
                    "gpt2, every CPU this process may use for llama)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps (median), default 5")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first, default 2")
    ap.add_argument("--precisions", default="fp32,bf16", help="comma-separated subset of fp32,bf16")
    ap.add_argument("--llmcpu-build", default=os.path.join(REPO, "build"),
                    help="build folder with bench_step and llmcpu (default: build/ of this checkout)")
    ap.add_argument("--llmcpu-via", choices=["auto", "bench_step", "train", "both", "none"],
                    default="auto", help="auto: bench_step where it has the shape, else llmcpu train")
    ap.add_argument("--llmcpu-reps", type=int, default=3, help="bench_step repetitions, default 3")
    ap.add_argument("--only-torch", action="store_true",
                    help="time PyTorch alone (--llmcpu-via none), e.g. in a Debian 13 chroot")
    ap.add_argument("--only-llmcpu", action="store_true",
                    help="time llmcpu alone; PyTorch's rows can come from --results-in")
    ap.add_argument("--results-out", metavar="FILE", help="write this run's rows as JSON")
    ap.add_argument("--results-in", metavar="FILE", help="add PyTorch's rows of an earlier run of "
                    "the same shape, B, T and threads (its --results-out), e.g. torch 2.6's")
    a = ap.parse_args()
    errors = []
    (llama_shape if a.arch == "llama" else gpt2_shape)(a, errors)
    if errors:
        ap.error("; ".join(errors))
    a.precisions = [p.strip() for p in a.precisions.split(",") if p.strip()]
    if any(p not in ("fp32", "bf16") for p in a.precisions) or not a.precisions:
        errors.append(f"--precisions '{','.join(a.precisions)}': expected fp32, bf16 or both")
    if not 0 < a.seq <= a.max_seq_len:
        errors.append(f"--seq {a.seq}: expected 1 .. the model's maxT ({a.max_seq_len})")
    for flag in ("batch", "threads", "steps", "llmcpu_reps"):
        if getattr(a, flag) < 1:
            errors.append(f"--{flag.replace('_', '-')} {getattr(a, flag)}: expected at least 1")
    if a.warmup < 0:
        errors.append(f"--warmup {a.warmup}: expected 0 or more")
    if a.only_torch and a.only_llmcpu:
        errors.append("--only-torch and --only-llmcpu: expected one of them at most")
    if errors:
        ap.error("; ".join(errors))
    a.llmcpu_via = "none" if a.only_torch else a.llmcpu_via
    return a


def gpt2_shape(a, errors):
    """Fills a's GPT-2 shape (layers, heads, channels, vocab, max_seq_len, preset, shape)."""
    if a.llama_preset is not None:
        errors.append("--preset is for --arch llama; a GPT-2 shape takes --model and --layers/"
                      "--heads/--channels")
    a.model = a.model or "124m"
    L, NH, C = PRESETS[a.model]
    custom = any(v is not None for v in (a.layers, a.heads, a.channels))
    a.layers, a.heads, a.channels = a.layers or L, a.heads or NH, a.channels or C
    a.vocab, a.max_seq_len = a.vocab or 50257, a.max_seq_len or 1024
    a.preset = None if custom or a.vocab != 50257 or a.max_seq_len != 1024 else a.model
    a.threads = 2 if a.threads is None else a.threads
    if a.channels % a.heads:
        errors.append(f"--channels {a.channels} is not a multiple of --heads {a.heads}")
    if a.layers < 1:
        errors.append(f"--layers {a.layers}: expected at least 1")
    a.shape = f"L={a.layers} NH={a.heads} C={a.channels} V={a.vocab} maxT={a.max_seq_len}"


def llama_shape(a, errors):
    """Reads --preset's file into a.config and fills vocab, max_seq_len, preset and shape."""
    gpt2_flags = ("model", "layers", "heads", "channels", "vocab", "max_seq_len")
    given = [f"--{f.replace('_', '-')}" for f in gpt2_flags if getattr(a, f) is not None]
    if given:
        errors.append(f"{', '.join(given)}: GPT-2 shape flags; a Llama shape is --preset's file")
    if a.llama_preset is None:
        errors.append("--arch llama needs --preset NAME (conf/models/NAME.toml, e.g. smollm2-135m)")
        return
    try:
        a.config = llama.read_preset(a.llama_preset)
    except llama.PresetError as e:
        errors.append(f"--preset {a.llama_preset}: {e}")
        return
    a.vocab, a.max_seq_len, a.preset = a.config.V, a.config.maxT, None
    a.threads = len(os.sched_getaffinity(0)) if a.threads is None else a.threads
    a.shape = llama.shape_text(a.config)


def save_results(path, a, torch_version, results):
    rows = [[who, p, ms, note] for (who, p), (ms, note) in results.items()]
    with open(path, "w") as f:
        json.dump({"shape": a.shape, "batch": a.batch, "seq": a.seq, "threads": a.threads,
                   "torch": torch_version, "cpu": cpu_description(), "rows": rows}, f, indent=1)
    print(f"rows written to {path}")


def load_results(path, a):
    """PyTorch's rows of an earlier run (--results-out) of this shape, B, T and thread count, each
    labelled with its torch version."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--results-in {path}: cannot read it ({e}); expected a --results-out file")
    here = {"shape": a.shape, "batch": a.batch, "seq": a.seq, "threads": a.threads}
    diff = [f"{k} {r.get(k)!r} there, {v!r} here" for k, v in here.items() if r.get(k) != v]
    if diff:
        raise SystemExit(f"--results-in {path}: another run's shape ({'; '.join(diff)})")
    other = "" if r.get("cpu") == cpu_description() else " (another CPU than this one!)"
    print(f"PyTorch rows from {path}: torch {r.get('torch')}, CPU {r.get('cpu')}{other}")
    return {(f"PyTorch {r.get('torch')}", p): (ms, note) for who, p, ms, note in r["rows"]
            if who == "PyTorch"}


def print_header(a, torch):
    print(f"CPU: {cpu_description()}")
    if torch is not None:
        config = torch.__config__.show()
        blas = next((w.split("=")[1].rstrip(",") for w in config.split() if w.startswith("BLAS_INFO=")),
                    "?")
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS {blas} (fp32 "
              f"matmuls), oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'} (bf16 "
              f"matmuls); Python {platform.python_version()}")
        if a.arch == "llama":
            print(f"attention: {llama.attention_path(torch)}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    name = a.config.name if a.arch == "llama" else a.preset or "custom shape"
    print(f"model: {a.shape} ({name}), B={a.batch} T={a.seq}; "
          f"{a.steps} timed steps after {a.warmup} warm-up\n", flush=True)


def time_llmcpu(a):
    """{(who, precision): (ms or None, note)} from bench_step and/or llmcpu train (--llmcpu-via)."""
    via, results = a.llmcpu_via, {}
    in_bench_step = a.preset in BENCH_STEP_NAMES and (a.batch, a.seq) == (4, 64)
    if via == "auto":
        via = "bench_step" if in_bench_step else "train"
    if via in ("bench_step", "both") and not in_bench_step:
        print(f"bench_step has no benchmark for {a.shape} at B={a.batch} T={a.seq} (it has GPT-2 "
              f"{', '.join(BENCH_STEP_NAMES)} at B=4 T=64); using llmcpu train")
        via = "train"
    sources = {"both": ["bench_step", "train"], "none": []}.get(via, [via])
    with tempfile.TemporaryDirectory(prefix="llmcpu_peer_") as workdir:
        for src in sources:
            who = "llmcpu" if len(sources) == 1 else f"llmcpu ({src})"
            for p in a.precisions:
                if src == "bench_step":
                    results[(who, p)] = time_bench_step(a, a.preset, p)
                else:
                    results[(who, p)] = time_train(a, p, workdir)
    return results


def print_table(a, results):
    print(f"\n| {a.shape}, B={a.batch} T={a.seq}, {a.threads} threads | ms/step | how |")
    print("|---|---|---|")
    for (who, p), (ms, note) in results.items():
        print(f"| {who} {p} | {'n/a' if ms is None else f'{ms:.1f}'} | {note} |")
    print()
    torches = list(dict.fromkeys(w for w, _ in results if w.startswith("PyTorch")))
    for who in dict.fromkeys(w for w, _ in results if not w.startswith("PyTorch")):
        for peer in torches:
            for p in a.precisions:
                torch_ms, mine = results.get((peer, p), (None, ""))[0], results.get((who, p), (None, ""))
                if torch_ms is None or mine[0] is None:
                    why = "no PyTorch time" if torch_ms is None else mine[1]
                    print(f"{peer} {p} / {who} {p}: n/a ({why})")
                else:
                    print(f"{peer} {p} / {who} {p}: {torch_ms / mine[0]:.2f}x "
                          f"({torch_ms:.1f} / {mine[0]:.1f} ms)")


def main():
    a = parse_args()
    results = {}  # (who, precision) -> (ms or None, note)
    torch = None
    if not a.only_llmcpu:
        import torch

        torch.set_num_threads(a.threads)
        torch.set_flush_denormal(True)  # llmcpu flushes denormals too
    print_header(a, torch)
    if a.results_in:
        results.update(load_results(a.results_in, a))
    for p in a.precisions if torch is not None else []:
        ms, split = time_pytorch(torch, a, bf16=(p == "bf16"))
        total = sum(split)
        note = "median; " + ", ".join(f"{k} {100 * v / total:.0f}%"
                                     for k, v in zip(("fwd", "bwd", "norm+adamw"), split))
        results[("PyTorch", p)] = (ms, note)
    results.update(time_llmcpu(a))
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print_table(a, results)
    if a.results_out:
        save_results(a.results_out, a, torch.__version__ if torch else None, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
