#!/usr/bin/python3
"""`llmcpu convert --adapter` (a PEFT LoRA adapter merged into its base, core/lora/merge.h) against
PEFT's merge_and_unload as tests/fixtures/make_lora_fixture.py computes it, on its fixture NAME
in DIR:

  check_lora_merge.py LLMCPU DIR NAME

The fixture's NAME_merged/ holds the base NAME_hf/ with each targeted weight replaced by
W + scaling B A computed in float64 from the stored tensors and rounded to the base's dtype.
llmcpu merges in the same order of operations: each element's sum over r of B[i, k] A[k, j]
(products of two floats, exact in double) accumulated in double, times scaling (a double), added
to W in double and rounded to fp32 once. The two float64 values can differ only through the
order of the r-term sum (torch's B @ A against k in order): a few float64 ulps, each 2^-29 of an
fp32 ulp, which change the fp32 rounding only where the float64 value lies that close to a
midpoint between two floats, a chance of about 2^-27 per element. So over the fixtures' tens of
thousands of elements the merged weights are expected bit for bit (measured: 0 elements differ
on every case, fp32 and bf16 bases; summing k in reverse gives the same bits too), and a 1-ulp
difference is not allowed for. A bf16 base's merge is rounded twice here, float64 -> fp32 -> bf16,
as it is in PyTorch too (a float64 tensor's .to(torch.bfloat16) converts through float), so it is
exact as well. Every tensor the adapter does not touch must come through the conversion
unchanged, bit for bit.
What bit for bit tells apart (measured by redoing the fixtures' merge in PyTorch): summing and
scaling in fp32 changes 35 to 45% of the merged fp32 elements; rounding scaling B A to fp32 before
adding it to W, 26 to 30%; a float scaling, 18% where the scaling is not a float (the rsLoRA case
of tests/lora_merge.cmake, 7 / sqrt(3)) and none where it is (the other cases' 1.5, 2 and 4). On
a bf16 base none of these shows: bf16's rounding hides them.

Llama family: convert NAME_hf --adapter NAME_adapter to a folder in the base's dtype, and compare
its tensors, name by name, with NAME_merged/'s.
GPT-2 (llm.c's files), both directions convert has:
  1. NAME_hf --adapter -> an llm.c checkpoint (.bin), converted back to safetensors (lossless in
     fp32) and compared;
  2. NAME_hf -> an llm.c checkpoint, that --adapter -> a safetensors folder, compared.
GPT-2's files name the tensors without GPT2LMHeadModel's "transformer." prefix and store neither
lm_head.weight (tied: NAME_merged's must equal wte) nor the attn.bias mask buffers (skipped).
"""
import json
import os
import re
import struct
import subprocess
import sys

import torch


def fail(msg):
    sys.exit(f"check_lora_merge.py: {msg}")


DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
INTS = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def read_safetensors(path):
    """name -> tensor in its stored dtype."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data, out = blob[8 + n:], {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            fail(f"{path}: {name} has dtype {e['dtype']}")
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out


def read_folder(folder):
    """A model folder's tensors: model.safetensors or the shards its index names."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for f in files:
        out.update(read_safetensors(os.path.join(folder, f)))
    return out


def ordered_bits(t):
    """The float's bits as integers ordered as the floats are (-0 and +0 both 0): |a - b| of two
    of them is the number of representable values between, the distance in ulps."""
    i = t.contiguous().view(INTS[t.dtype]).to(torch.int64)
    sign = 1 << (8 * t.element_size() - 1)
    return torch.where(i < 0, -(i + sign), i)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout


def gpt2_names(tensors):
    """GPT-2's tensors by their GPT2Model names, the mask buffers left out."""
    out = {}
    for name, t in tensors.items():
        name = name[len("transformer."):] if name.startswith("transformer.") else name
        if re.fullmatch(r"h\.\d+\.attn\.(bias|masked_bias)", name):
            continue
        out[name] = t
    return out


def compare(ours, want, base, merged_names, what):
    """Every tensor of `want` (NAME_merged's) against `ours`, bit for bit; returns the summary."""
    if set(ours) != set(want):
        fail(f"{what}: tensors {sorted(set(ours) ^ set(want))} are in one file only")
    merged_elements = changed = 0
    for name in sorted(want):
        a, w = ours[name], want[name]
        if a.dtype != w.dtype or a.shape != w.shape:
            fail(f"{what}: {name} is {a.dtype} {tuple(a.shape)}, NAME_merged's "
                 f"{w.dtype} {tuple(w.shape)}")
        ulps = (ordered_bits(a) - ordered_bits(w)).abs()
        differ = int((ulps > 0).sum())
        if name in merged_names:
            merged_elements += w.numel()
            changed += int((ordered_bits(base[name]) != ordered_bits(w)).sum())
        if differ:
            where = int(ulps.flatten().argmax())
            fail(f"{what}: {name}{' (merged)' if name in merged_names else ''}: {differ} of "
                 f"{w.numel()} elements differ from NAME_merged's, up to {int(ulps.max())} ulp "
                 f"(element {where}: {a.flatten()[where].item()!r} against "
                 f"{w.flatten()[where].item()!r})")
    if merged_elements == 0 or changed == 0:
        fail(f"{what}: the merge changed nothing ({merged_elements} merged elements)")
    return (f"{len(merged_names)} merged weights ({merged_elements} elements, {changed} changed "
            f"from the base) and {len(want) - len(merged_names)} other tensors bit for bit")


def expect_merged_line(stdout, adapter, n):
    if f"+ adapter {adapter}" not in stdout or f"{n} modules merged" not in stdout:
        fail(f"convert's line does not say the adapter's {n} modules were merged:\n{stdout}")


def check_llama(llmcpu, d, name, run_info, modules):
    dtype = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}[run_info["dtype"]]
    adapter, out = f"{d}/{name}_adapter", f"{d}/{name}_llmcpu_merged"
    stdout = run([llmcpu, "convert", f"{d}/{name}_hf", out, "--adapter", adapter,
                  "--dtype", dtype])
    expect_merged_line(stdout, adapter, len(modules))
    want, base = read_folder(f"{d}/{name}_merged"), read_folder(f"{d}/{name}_hf")
    names = {m + ".weight" for m in modules}
    return [compare(read_folder(out), want, base, names, f"{name} ({dtype})")]


def check_gpt2(llmcpu, d, name, run_info, modules):
    if run_info["dtype"] != "f32":
        fail(f"{name}: a GPT-2 fixture in {run_info['dtype']}: only f32 is checked here")
    adapter, pre = f"{d}/{name}_adapter", f"{d}/{name}_llmcpu"
    want = gpt2_names(read_folder(f"{d}/{name}_merged"))
    base = gpt2_names(read_folder(f"{d}/{name}_hf"))
    if not torch.equal(want.pop("lm_head.weight"), want["wte.weight"]):
        fail(f"{name}_merged: lm_head.weight is not wte.weight (GPT-2 ties them)")
    names = {m[len("transformer."):] + ".weight" for m in modules}
    # 1. Hugging Face + adapter -> llm.c, back to Hugging Face.
    stdout = run([llmcpu, "convert", f"{d}/{name}_hf", f"{pre}_merged.bin", "--adapter", adapter])
    expect_merged_line(stdout, adapter, len(modules))
    run([llmcpu, "convert", f"{pre}_merged.bin", f"{pre}_merged_hf"])
    out = [compare(gpt2_names(read_folder(f"{pre}_merged_hf")), want, base, names,
                   f"{name} (safetensors + adapter -> llm.c)")]
    # 2. Hugging Face -> llm.c, that + adapter -> Hugging Face.
    run([llmcpu, "convert", f"{d}/{name}_hf", f"{pre}_base.bin"])
    stdout = run([llmcpu, "convert", f"{pre}_base.bin", f"{pre}_merged_from_llmc", "--adapter",
                  adapter])
    expect_merged_line(stdout, adapter, len(modules))
    out.append(compare(gpt2_names(read_folder(f"{pre}_merged_from_llmc")), want, base, names,
                       f"{name} (llm.c + adapter -> safetensors)"))
    return out


def main():
    if len(sys.argv) != 4:
        fail("usage: check_lora_merge.py LLMCPU DIR NAME")
    llmcpu, d, name = sys.argv[1:]
    run_info = json.load(open(f"{d}/{name}_lora.json"))
    modules = run_info["modules"]
    check = check_gpt2 if run_info["model_type"] == "gpt2" else check_llama
    for line in check(llmcpu, d, name, run_info, modules):
        print(f"check_lora_merge.py: {name}: {line}")
    print("check_lora_merge.py: OK")


if __name__ == "__main__":
    main()
