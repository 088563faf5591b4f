#!/usr/bin/env python3
"""Writes a Hugging Face Llama folder of random weights in a preset's shape, for the memory and time
of loading a model that does not fit in memory in fp32 (an 8B folder is 16 GB in bf16, 32 GB in fp32).

  /usr/bin/python3 bench/make_hf_llama.py --preset conf/models/llama-3.1-8b.toml --out DIR

DIR gets config.json (the preset's keys, as the preset files take config.json's names) and the
weights in bf16 as save_pretrained shards them: model-0000K-of-0000N.safetensors of at most
--shard-gb GB each, with model.safetensors.index.json. Matrices are N(0, 0.02), norms 1. The
tensors are drawn and written one at a time, so the script holds one tensor (in fp32) at a time.
Needs PyTorch (Debian's python3-torch) for the random numbers and the bf16 rounding.
"""
import argparse
import json
import os
import tomllib

import torch


def tensors(cfg):
    """(name, shape) of every tensor, in save_pretrained's order."""
    C, H, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = cfg.get("head_dim", C // cfg["num_attention_heads"])
    Q, KV = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    out = [("model.embed_tokens.weight", (V, C))]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (C,)),
                (p + "self_attn.q_proj.weight", (Q, C)),
                (p + "self_attn.k_proj.weight", (KV, C)),
                (p + "self_attn.v_proj.weight", (KV, C)),
                (p + "self_attn.o_proj.weight", (C, Q)),
                (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (H, C)),
                (p + "mlp.up_proj.weight", (H, C)),
                (p + "mlp.down_proj.weight", (C, H))]
    out.append(("model.norm.weight", (C,)))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (V, C)))
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def shards_of(specs, limit):
    """The tensors cut into consecutive shards of at most `limit` bytes (one tensor at least)."""
    shards, current, size = [], [], 0
    for name, shape in specs:
        nbytes = numel(shape) * 2
        if current and size + nbytes > limit:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape))
        size += nbytes
    shards.append(current)
    return shards


def write_shard(path, specs, gen):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in specs:
        nbytes = numel(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape in specs:
            if len(shape) == 1:
                t = torch.ones(shape, dtype=torch.bfloat16)
            else:
                t = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
            f.write(t.view(torch.int16).numpy().tobytes())
    return offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True, help="a conf/models/ TOML of a Llama model")
    ap.add_argument("--out", required=True, help="the folder to write")
    ap.add_argument("--shard-gb", type=float, default=5.0, help="most GB per shard (default 5)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with open(a.preset, "rb") as f:
        cfg = tomllib.load(f)
    if cfg.get("model_type") != "llama":
        raise SystemExit(f"{a.preset}: model_type is {cfg.get('model_type')!r}; this writes llama only")
    os.makedirs(a.out, exist_ok=True)
    config = dict(cfg, architectures=["LlamaForCausalLM"], hidden_act="silu", torch_dtype="bfloat16")
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    gen = torch.Generator().manual_seed(a.seed)
    shards = shards_of(tensors(cfg), int(a.shard_gb * 1e9))
    weight_map, total = {}, 0
    for i, specs in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(a.out, name), specs, gen)
        weight_map.update({n: name for n, _ in specs})
        print(f"{name}: {len(specs)} tensors", flush=True)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    print(f"{a.out}: {total / 1e9:.2f} GB of bf16 weights in {len(shards)} shards")


if __name__ == "__main__":
    main()
