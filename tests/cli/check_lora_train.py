#!/usr/bin/python3
"""`llmcpu train` of a LoRA adapter against the float64 PEFT-semantics reference of
tests/fixtures/make_lora_fixture.py, on its fixture NAME in DIR:

  check_lora_train.py LLMCPU DIR NAME [--precision bf16] [--recompute R] [--fresh]

Trains --steps (lora.json's) AdamW steps from NAME_adapter/ (lora.json's lr, weight decay,
betas, eps and clipping) on NAME_train.bin in order, with --save (and lora.json's --base-quant:
the reference then ran on the quantized base's decoded weights), and checks:
  - each logged loss against the reference's NAME_losses.txt: within 2e-4 in fp32, 1e-2 in bf16
    (the limits of the model's own training fixtures, tests/llama_fixtures.cmake);
  - the saved adapter_config.json is NAME_adapter/'s, byte for byte (PEFT's file for the same
    adapter, written by the fixture script from PEFT 0.17.1's keys);
  - the saved adapter_model.safetensors has PEFT's layout (the fixture's tensor names, shapes and
    dtypes, the safetensors library's header order and padding) and, in fp32, each tensor within
    1e-5 of the reference's final.NAME (relative, in the 2-norm; a bf16 file's tensor adds its
    rounding, 2^-8, an f16 one 2^-11); in bf16 within max(2e-2, 0.1 s lr / rms), rms the root
    mean square of the reference's tensor: a step moves an element by lr m/sqrt(v),
    |m/sqrt(v)| <= 1 in AdamW's first steps, and the bf16 gradients' relative error (at most 1e-1,
    the model's bf16 gradient limit, core/verify/verify.h) changes that by at most its own
    fraction, so after s steps an element is within 0.1 s lr of the reference: 1e-3 for the
    fixtures' 10 steps at lr 1e-3, against LoRA elements of root mean square 0.065 or more
    (kaiming-uniform 1/sqrt(in), in <= 80, over sqrt(3)): 1.5e-2, within 2e-2; the
    modules_to_save copies (lora.json's "copies") hold the base's values, of rms 0.1 to 1 for
    embeddings and norm weights but 0.02 for GPT-2's LayerNorm biases: 5e-2 there;
  - `--steps 0` saves NAME_adapter/ back byte for byte (both files), the copies included.
With --fresh the run starts instead from a new adapter (--lora R --lora-alpha A --lora-targets
T [--lora-rslora] [--lora-train M] from lora.json, M its modules_to_save; the fixture made with
--init-lora-weights true): the saved adapter_config.json must be the fixture's byte for byte
(init_lora_weights true, the same target_modules as PEFT saves them, modules_to_save as given),
the tensors the fixture's (names, shapes, dtypes, the library's order), every lora_B zero after 0
steps, every lora_A within PEFT's kaiming-uniform bound 1/sqrt(in_features), not all zero, and
every modules_to_save copy equal to the base's tensor in NAME_hf/ (a tied head's: the
embedding's), exactly: PEFT's copies start as copy.deepcopy of their modules.
"""
import json
import math
import os
import struct
import subprocess
import sys

import torch

# safetensors' Dtype enum order: the library writes tensors by dtype, the last first, then by name.
DTYPE_ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
               "F32", "F64", "I64", "U64"]
FLOATS = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
UNIT = {"F32": 0.0, "BF16": 2.0 ** -8, "F16": 2.0 ** -11}  # a file's rounding, beyond fp32's


def fail(msg):
    sys.exit(f"check_lora_train.py: {msg}")


def read_safetensors(path):
    """(header entries in file order, name -> float64 tensor). Checks PEFT's layout: metadata
    {"format": "pt"} first, tensors packed by dtype (widest first, as the safetensors library
    orders them: F32 before BF16) then name, padding with spaces."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n]
    if n % 8 or len(text) - len(text.rstrip(b" ")) >= 8:
        fail(f"{path}: header of {n} bytes is not padded to 8 with spaces")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    if pairs[0] != ("__metadata__", [("format", "pt")]):
        fail(f"{path}: the first header entry is {pairs[0]}, expected __metadata__ format pt")
    names = [k for k, _ in pairs[1:]]
    meta = dict(pairs[1:])
    order = [(-DTYPE_ORDER.index(dict(meta[k])["dtype"]), k) for k in names]
    if order != sorted(order):
        fail(f"{path}: tensors not in the safetensors library's order (dtype, then name)")
    data, out, end = blob[8 + n:], {}, 0
    for name in names:
        e = dict(meta[name])
        a, b = e["data_offsets"]
        if a != end:
            fail(f"{path}: {name} starts at {a}, not {end}")
        raw = data[a:b]
        if e["dtype"] not in FLOATS:
            fail(f"{path}: {name} has dtype {e['dtype']}")
        t = torch.frombuffer(bytearray(raw), dtype=FLOATS[e["dtype"]])
        out[name] = t.to(torch.float64).reshape(e["shape"])
        end = b
    if end != len(data):
        fail(f"{path}: {len(data) - end} bytes after the last tensor")
    return [(k, dict(v)["dtype"], dict(v)["shape"]) for k, v in pairs[1:]], out


def train(llmcpu, d, name, run, extra, steps, save, log):
    B, T = run["batch"], run["seq_len"]
    model = f"{name}_hf" if d == "." else os.path.join(d, f"{name}_hf")
    cmd = [llmcpu, "train", "--model", model,
           "--train-data", os.path.join(d, f"{name}_train.bin"), "--batch", str(B),
           "--seq-len", str(T), "--steps", str(steps), "--lr", repr(run["lr"]),
           "--weight-decay", repr(run["weight_decay"]), "--grad-clip", repr(run["grad_clip"]),
           "--no-shuffle", "--save", save, "--log", log] + extra
    if run["betas"] != [0.9, 0.999] or run["eps"] != 1e-8:
        fail("the fixture's betas and eps must be AdamW's defaults, which train uses")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        fail(__doc__)
    llmcpu, d, name = args[:3]
    opts = args[3:]
    fresh = "--fresh" in opts
    opts = [o for o in opts if o != "--fresh"]
    bf16 = "bf16" in opts
    run = json.load(open(os.path.join(d, f"{name}_lora.json")))
    if run.get("base_quant", "none") != "none":  # the reference's base is the quantized one
        opts += ["--base-quant", run["base_quant"]]
    steps = run["steps"]
    adapter = os.path.join(d, f"{name}_adapter")
    if fresh:
        targets = run["target_modules"]
        start = ["--lora", str(run["r"]), "--lora-alpha", str(run["lora_alpha"]),
                 "--lora-targets", ",".join(targets)] + (["--lora-rslora"] if run["use_rslora"]
                                                         else [])
        if run.get("modules_to_save"):
            start += ["--lora-train", ",".join(run["modules_to_save"])]
        # PEFT keeps the path the base was loaded from: the fixture's NAME_hf, relative.
        os.chdir(d)
        save = f"{name}_llmcpu_fresh"
        train(llmcpu, ".", name, run, start + opts, 0, save, f"{name}_fresh_log.txt")
        got = open(os.path.join(save, "adapter_config.json"), "rb").read()
        if got != open(os.path.join(f"{name}_adapter", "adapter_config.json"), "rb").read():
            fail(f"{save}/adapter_config.json differs from the fixture's:\n{got.decode()}")
        layout, tensors = read_safetensors(os.path.join(save, "adapter_model.safetensors"))
        want, _ = read_safetensors(os.path.join(f"{name}_adapter", "adapter_model.safetensors"))
        if layout != want:
            fail(f"tensor names, dtypes or shapes differ from the fixture's adapter: {layout} vs "
                 f"{want}")
        base = read_folder(f"{name}_hf")
        copies = 0
        for n, t in tensors.items():
            if not n.endswith((".lora_A.weight", ".lora_B.weight")):
                own = n[len("base_model.model."):]
                if own == "lm_head.weight" and own not in base:
                    own = "model.embed_tokens.weight"  # a tied head is the embedding
                if own not in base or not torch.equal(t, base[own]):
                    fail(f"{n}: a new modules_to_save copy is not the base's {own}")
                copies += 1
            if n.endswith("lora_B.weight") and t.abs().max() != 0:
                fail(f"{n}: a new adapter's B must be zero")
            if n.endswith("lora_A.weight"):
                bound = 1 / math.sqrt(t.shape[1])
                if t.abs().max() > bound or t.abs().max() < bound / 2:
                    fail(f"{n}: max |A| = {t.abs().max():.4g}, expected within the bound "
                         f"{bound:.4g} and near it")
        print(f"{name}: a new adapter's config is PEFT's, B = 0, A within 1/sqrt(in)" +
              (f", {copies} modules_to_save tensors equal to the base's" if copies else ""))
        return

    # The runs of each precision write files of their own (ctest runs them side by side).
    tag = "bf16" if bf16 else "fp32"
    # Steps 0: the adapter back as it was read.
    save0 = os.path.join(d, f"{name}_llmcpu_{tag}_steps0")
    train(llmcpu, d, name, run, ["--adapter", adapter] + opts, 0, save0,
          os.path.join(d, f"{name}_{tag}_steps0_log.txt"))
    for f in ("adapter_config.json", "adapter_model.safetensors"):
        if open(os.path.join(save0, f), "rb").read() != open(os.path.join(adapter, f), "rb").read():
            fail(f"{save0}/{f} is not {adapter}/{f} byte for byte")

    save = os.path.join(d, f"{name}_llmcpu_{tag}_adapter")
    log = os.path.join(d, f"{name}_llmcpu_{tag}_lora_log.txt")
    train(llmcpu, d, name, run, ["--adapter", adapter] + opts, steps, save, log)
    ours = [float(line.split("trl:")[1]) for line in open(log) if "trl:" in line]
    ref = [float(line) for line in open(os.path.join(d, f"{name}_losses.txt"))]
    if len(ours) != steps or len(ref) != steps:
        fail(f"{len(ours)} losses logged, {len(ref)} in the reference, expected {steps}")
    tol = 1e-2 if bf16 else 2e-4
    worst = max(abs(a - b) for a, b in zip(ours, ref))
    if worst > tol:
        fail(f"losses differ by up to {worst:.3g} > {tol}: {ours} vs {ref}")
    if open(os.path.join(save, "adapter_config.json"), "rb").read() != \
            open(os.path.join(adapter, "adapter_config.json"), "rb").read():
        fail(f"{save}/adapter_config.json differs from {adapter}'s")
    layout, tensors = read_safetensors(os.path.join(save, "adapter_model.safetensors"))
    want, _ = read_safetensors(os.path.join(adapter, "adapter_model.safetensors"))
    if [(n, s) for n, _, s in layout] != [(n, s) for n, _, s in want]:
        fail(f"tensor names or shapes differ from the fixture's adapter: {layout} vs {want}")
    if [d for _, d, _ in layout] != [d for _, d, _ in want]:
        fail(f"tensor dtypes differ from the fixture's adapter: {layout} vs {want}")
    _, reference = read_safetensors_any(os.path.join(d, f"{name}_reference.safetensors"))
    dtype = {n: d for n, d, _ in layout}
    worst = 0.0
    for n, t in tensors.items():
        r = reference[f"final.{n}"]
        rms = float(r.pow(2).mean().sqrt())
        # A bf16 or f16 tensor is saved rounded: its unit roundoff more, relative, in the 2-norm.
        rel_tol = (max(2e-2, 0.1 * steps * run["lr"] / rms) if bf16 else 1e-5) + UNIT[dtype[n]]
        rel = float((t - r).norm() / r.norm())
        worst = max(worst, rel)
        if rel > rel_tol:
            fail(f"{n}: after {steps} steps {rel:.3g} from the reference (limit {rel_tol:.3g})")
    print(f"{name}: {steps} steps, losses within {tol} (largest difference "
          f"{max(abs(a - b) for a, b in zip(ours, ref)):.2e}), final adapter within "
          f"{worst:.2e} of the reference, PEFT's files")


def read_folder(folder):
    """A model folder's tensors (model.safetensors or its shards), float64, by name."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            out.update(read_safetensors_any(os.path.join(folder, f))[1])
    return out


def read_safetensors_any(path):
    """The reference file: make_llama_fixture's writer, any dtype, no layout checks."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    meta = json.loads(blob[8:8 + n])
    data, out = blob[8 + n:], {}
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32,
              "BF16": torch.bfloat16, "F16": torch.float16}
    for k, e in meta.items():
        if k == "__metadata__":
            continue
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dtypes[e["dtype"]])
        out[k] = t.to(torch.float64).reshape(e["shape"])
    return None, out


if __name__ == "__main__":
    main()
