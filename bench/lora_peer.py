#!/usr/bin/python3
"""LoRA training steps of a Llama-family preset, measured in one run on one machine:

  llmcpu full fine-tuning | llmcpu LoRA | a PyTorch LoRA of the same shape

  bench/lora_peer.py --preset smollm2-360m [--batch 4 --seq 1024 --r 16 --alpha 32 --steps 2
                     --warmup 1 --threads N --precision bf16 --skip-torch --skip-full
                     --base-quant int8,nf4 --rounds 1]

Prints each one's median step time (ms) after the warm-up steps, the ratios the issue asks for
(LoRA / full fine-tuning, PyTorch / llmcpu LoRA), the CPU, and a markdown row for
bench/RESULTS.md. Every run sees the same random tokens (B x T per step). With --rounds N the
llmcpu runs are repeated N times, the order turned round each time (full, LoRA, then LoRA, full,
...), and the LoRA / full ratio is the median of the rounds' own ratios: on a machine whose speed
drifts, a pair of runs next to each other is what compares.

The PyTorch side is written from PEFT's semantics (PEFT itself is not packaged for Debian):
peer_pytorch_llama.build_model's model (transformers' LlamaForCausalLM / Qwen2ForCausalLM, plain
PyTorch) with every parameter frozen (requires_grad False), and each linear map of the blocks
(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: all-linear) wrapped as PEFT's
lora.Linear: result = base(x) + lora_B(lora_A(dropout(x))) * (alpha / r), lora_A and lora_B
nn.Linear without bias (A kaiming-uniform(a = sqrt(5)), B zero), dropout the identity (p = 0).
torch.optim.AdamW(lr=1e-4, weight_decay=0.1) over the adapters' parameters only, the global
gradient norm taken as the trainer does, bf16 autocast in the forward pass (PyTorch's CPU
mixed precision) with --precision bf16. Run it with the faster of Debian 12's PyTorch 1.13 (with
libopenblas0) and 2.6 (../shared/tools/debian13-torch.sh python3 bench/lora_peer.py ...).
"""
import argparse
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_pytorch as peer  # noqa: E402
import peer_pytorch_llama as llama  # noqa: E402

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_lora(torch, model, r, alpha):
    """Freezes the model and wraps every targeted nn.Linear as PEFT's lora.Linear; returns the
    adapters' parameters."""
    nn = torch.nn

    class LoraLinear(nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.lora_A = nn.Linear(base.in_features, r, bias=False)
            self.lora_B = nn.Linear(r, base.out_features, bias=False)
            nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B.weight)
            self.scaling = alpha / r

        def forward(self, x):
            return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling

    for p in model.parameters():
        p.requires_grad_(False)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in TARGETS and isinstance(child, nn.Linear):
                setattr(module, name, LoraLinear(child))
    return [p for n, p in model.named_parameters() if "lora_" in n]


def time_torch_lora(torch, a):
    torch.manual_seed(1)
    model = llama.build_model(torch, a.config)
    params = add_lora(torch, model, a.r, a.alpha)
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    steps = []
    bf16 = a.precision == "bf16"
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x, y)
        loss.backward()
        torch.stack([p.grad.norm() for p in params]).norm().item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ms = 1e3 * (time.perf_counter() - t0)
        print(f"  PyTorch LoRA step {i + 1}: {ms:.0f} ms{' (warm-up)' if i < a.warmup else ''}, "
              f"loss {loss.item():.4f}", flush=True)
        if i >= a.warmup:
            steps.append(ms)
    return statistics.median(steps), sum(p.numel() for p in params)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", required=True, help="a Llama or Qwen2 preset of conf/models")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--steps", type=int, default=2, help="timed steps (median)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    ap.add_argument("--llmcpu-build", default=os.path.join(peer.REPO, "build"))
    ap.add_argument("--skip-torch", action="store_true", help="llmcpu's two runs only")
    ap.add_argument("--skip-full", action="store_true", help="no full fine-tuning run")
    ap.add_argument("--base-quant", default="",
                    help="also time llmcpu's LoRA step on these quantized bases (a comma list of "
                         "int8, nf4), each as a ratio to the LoRA step on the base as loaded")
    ap.add_argument("--skip-llmcpu", action="store_true", help="PyTorch's run only")
    ap.add_argument("--rounds", type=int, default=1,
                    help="llmcpu's runs this many times, in turned order; ratios per round")
    a = ap.parse_args()
    a.config = llama.read_preset(a.preset)
    a.vocab = a.config.V
    a.arch = "llama"
    print(f"CPU: {peer.cpu_description()}; {a.threads} threads; {a.preset} B={a.batch} "
          f"T={a.seq} {a.precision}, LoRA r={a.r} alpha={a.alpha:g} all-linear", flush=True)
    rows = {}
    rounds = []
    with tempfile.TemporaryDirectory() as work:
        if not a.skip_llmcpu:
            lora = ["--lora", str(a.r), "--lora-alpha", f"{a.alpha:g}"]
            runs = ([] if a.skip_full else [("full", [])]) + [("lora", lora)]
            runs += [(q, lora + ["--base-quant", q]) for q in a.base_quant.split(",") if q]
            for i in range(max(1, a.rounds)):
                this = {}
                for name, extra in (runs if i % 2 == 0 else runs[::-1]):
                    ms, note = time_llmcpu(a, work, extra)
                    print(f"llmcpu {name} (round {i + 1}): {ms} ms ({note})", flush=True)
                    this[name] = ms
                rounds.append(this)
            for name, _ in runs:
                got = [r[name] for r in rounds if r[name]]
                rows[name] = statistics.median(got) if len(got) == len(rounds) else None
    if not a.skip_torch:
        import torch
        torch.set_num_threads(a.threads)
        ms, n = time_torch_lora(torch, a)
        print(f"PyTorch {torch.__version__} LoRA: {ms:.0f} ms ({n} adapter parameters)")
        rows["torch"] = ms
    def ratio(top, bottom, what):
        if not (rows.get(top) and rows.get(bottom)):
            return
        each = [r[top] / r[bottom] for r in rounds]
        line = f"{what}: {statistics.median(each):.3f}"
        if len(each) > 1:
            line += " (the median of the rounds: " + ", ".join(f"{x:.3f}" for x in each) + ")"
        print(line)

    ratio("lora", "full", "LoRA / full fine-tuning step")
    for q in [q for q in a.base_quant.split(",") if q]:
        ratio(q, "lora", f"LoRA on a {q} base / on the {a.precision} base")
    if rows.get("torch") and rows.get("lora"):
        print(f"PyTorch LoRA / llmcpu LoRA step: {rows['torch'] / rows['lora']:.2f}")


def time_llmcpu(a, work, extra):
    """peer_pytorch.time_train with the LoRA flags added."""
    saved = a.precision
    args = argparse.Namespace(**vars(a))
    args.llmcpu_build = a.llmcpu_build
    original = peer.subprocess.run

    def run(cmd, **kw):
        return original(cmd + extra if cmd and cmd[0].endswith("llmcpu") else cmd, **kw)

    peer.subprocess.run = run
    try:
        return peer.time_train(args, saved, work)
    finally:
        peer.subprocess.run = original


if __name__ == "__main__":
    main()
