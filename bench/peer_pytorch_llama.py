"""The Llama-family side of bench/peer_pytorch.py (--arch llama --preset NAME): reads a preset's shape
from conf/models/NAME.toml and builds that model in plain PyTorch, for the training-step timing there.

The model is written from transformers' LlamaForCausalLM and Qwen2ForCausalLM (modeling_llama,
modeling_qwen2, modeling_rope_utils), not from llmcpu's code:

  x = embed_tokens[idx]                                   (B, T, C)
  per layer: x += o_proj(attn(rmsnorm_1(x)));  x += down(silu(gate(h)) * up(h)), h = rmsnorm_2(x)
  logits = head(rmsnorm(x)), head = embed_tokens (tied) or lm_head (V, C); loss = cross entropy

RMSNorm is w * x / sqrt(mean(x^2) + eps), computed in fp32. Attention has NH query heads of D over NKV
key/value heads; q and k are rotated by position p with rotate_half (element j < D/2 pairs with
j + D/2): q' = q cos(p f) + rotate_half(q) sin(p f), f the inverse frequencies of rope_theta (scaled
as rope_scaling says: linear or llama3). k and v are repeated per group (repeat_kv) and go to
scaled_dot_product_attention(is_causal=True) where torch has it (2.x), else to a masked softmax of
q.k / sqrt(D) in fp32, as transformers' eager path does. qwen2 has q/k/v biases. The vocabulary is
not padded (llmcpu computes Vp logits, a multiple of 64, so the comparison leans towards PyTorch).
Initialisation as transformers': every weight N(0, initializer_range), biases 0, norm weights 1.

Not here: loading trained weights, sliding-window attention (Mistral), KV caches, generation.
"""
import math
import os
import tomllib
import types

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESET_DIR = os.path.join(REPO, "conf", "models")
MODEL_TYPES = ("llama", "qwen2")
REQUIRED = {"hidden_size": int, "intermediate_size": int, "num_hidden_layers": int,
            "num_attention_heads": int, "num_key_value_heads": int, "max_position_embeddings": int,
            "vocab_size": int, "rope_theta": (int, float), "rms_norm_eps": (int, float),
            "tie_word_embeddings": bool}


class PresetError(ValueError):
    pass


def preset_path(name):
    """conf/models/NAME.toml, or NAME itself when it is a path to a .toml file."""
    if name.endswith(".toml") or os.sep in name:
        return name
    return os.path.join(PRESET_DIR, name + ".toml")


def read_preset(name):
    """The preset's shape as a namespace (C, H, L, NH, NKV, D, V, maxT, theta, eps, tie, bias,
    scaling, std); PresetError naming the file and the field when a key is missing or wrong."""
    path = preset_path(name)
    try:
        with open(path, "rb") as f:
            t = tomllib.load(f)
    except FileNotFoundError:
        have = sorted(n[:-5] for n in os.listdir(PRESET_DIR) if n.endswith(".toml"))
        raise PresetError(f"{path}: no such preset (conf/models/ has {', '.join(have)})") from None
    except tomllib.TOMLDecodeError as e:
        raise PresetError(f"{path}: not TOML ({e})") from None
    if t.get("model_type") not in MODEL_TYPES:
        raise PresetError(f"{path}: model_type {t.get('model_type')!r}: expected one of "
                          f"{', '.join(MODEL_TYPES)} (GPT-2 presets take --arch gpt2 --model)")
    for key, kind in REQUIRED.items():
        if not isinstance(t.get(key), kind) or (kind is not bool and t[key] <= 0):
            expected = {bool: "true or false", int: "a positive integer"}.get(kind, "a positive number")
            raise PresetError(f"{path}: {key} = {t.get(key)!r}: expected {expected}")
    c = types.SimpleNamespace(
        name=os.path.basename(path)[:-5], path=path, model_type=t["model_type"],
        C=t["hidden_size"], H=t["intermediate_size"], L=t["num_hidden_layers"],
        NH=t["num_attention_heads"], NKV=t["num_key_value_heads"], V=t["vocab_size"],
        maxT=t["max_position_embeddings"], theta=float(t["rope_theta"]), eps=float(t["rms_norm_eps"]),
        tie=t["tie_word_embeddings"], std=float(t.get("initializer_range", 0.02)),
        bias=t["model_type"] == "qwen2" or bool(t.get("attention_bias", False)),
        scaling=rope_scaling(path, t.get("rope_scaling")))
    c.D = t.get("head_dim") or c.C // c.NH
    if c.NH % c.NKV or (not t.get("head_dim") and c.C % c.NH):
        raise PresetError(f"{path}: num_attention_heads {c.NH} must be a multiple of "
                          f"num_key_value_heads {c.NKV}, and hidden_size {c.C} of it without head_dim")
    return c


def rope_scaling(path, s):
    if s is None:
        return None
    kind = s.get("rope_type", s.get("type"))
    need = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings")}.get(kind)
    if kind == "default":
        return None
    if need is None or any(not isinstance(s.get(k), (int, float)) for k in need):
        raise PresetError(f"{path}: [rope_scaling] rope_type {kind!r}: expected linear (factor) or "
                          "llama3 (factor, low_freq_factor, high_freq_factor, "
                          "original_max_position_embeddings)")
    return dict(s, rope_type=kind)


def shape_text(c):
    return (f"{c.model_type} L={c.L} NH={c.NH} NKV={c.NKV} D={c.D} C={c.C} H={c.H} V={c.V} "
            f"maxT={c.maxT}")


def attention_path(torch):
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return "scaled_dot_product_attention(is_causal=True)"
    return "masked softmax (this torch has no scaled_dot_product_attention)"


def inverse_frequencies(torch, c):
    """inv_freq (D/2,) as modeling_rope_utils: 1 / theta^(2j/D); linear divides it by factor; llama3
    divides the wavelengths above original/low_freq_factor by factor, keeps those below
    original/high_freq_factor and between them mixes: smooth = (original/wavelen - low)/(high - low),
    inv_freq = (1 - smooth) inv_freq/factor + smooth inv_freq."""
    inv_freq = 1.0 / (c.theta ** (torch.arange(0, c.D, 2, dtype=torch.int64).float() / c.D))
    s = c.scaling
    if s is None:
        return inv_freq
    if s["rope_type"] == "linear":
        return inv_freq / s["factor"]
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    original = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return torch.where(medium, smoothed, scaled)


def build_model(torch, c):
    nn, F = torch.nn, torch.nn.functional
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c.C))

        def forward(self, x):  # (B, T, C)
            dtype = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.eps)
            return self.weight * x.to(dtype)

    def rotate_half(x):  # (B, NH, T, D): [x1, x2] -> [-x2, x1]
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(x, n):  # (B, NKV, T, D) -> (B, NKV * n, T, D), each key/value head n times
        B, NKV, T, D = x.shape
        return x if n == 1 else x[:, :, None].expand(B, NKV, n, T, D).reshape(B, NKV * n, T, D)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(c.C, c.NH * c.D, bias=c.bias)
            self.k_proj = nn.Linear(c.C, c.NKV * c.D, bias=c.bias)
            self.v_proj = nn.Linear(c.C, c.NKV * c.D, bias=c.bias)
            self.o_proj = nn.Linear(c.NH * c.D, c.C, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, _ = x.shape
            q = self.q_proj(x).view(B, T, c.NH, c.D).transpose(1, 2)
            k = self.k_proj(x).view(B, T, c.NKV, c.D).transpose(1, 2)
            v = self.v_proj(x).view(B, T, c.NKV, c.D).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k, c.NH // c.NKV), repeat_kv(v, c.NH // c.NKV)
            if sdpa is not None:
                y = sdpa(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(2, 3)) / math.sqrt(c.D)
                att = att.masked_fill(mask, float("-inf"))
                y = F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype) @ v
            return self.o_proj(y.transpose(1, 2).reshape(B, T, c.NH * c.D))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(c.C, c.H, bias=False)
            self.up_proj = nn.Linear(c.C, c.H, bias=False)
            self.down_proj = nn.Linear(c.H, c.C, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(c.V, c.C)
            self.layers = nn.ModuleList([Layer() for _ in range(c.L)])
            self.norm = RMSNorm()
            self.lm_head = None if c.tie else nn.Linear(c.C, c.V, bias=False)
            self.register_buffer("inv_freq", inverse_frequencies(torch, c), persistent=False)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if name.endswith("bias"):
                        p.zero_()
                    elif p.dim() == 2:
                        p.normal_(0.0, c.std)

        def rotary(self, T):
            """cos, sin (T, D) of position p = 0 .. T-1, in fp32 (autocast off, as transformers)."""
            with torch.autocast("cpu", enabled=False):
                freqs = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()

        def forward(self, idx, targets):  # idx, targets (B, T)
            T = idx.shape[1]
            x = self.embed_tokens(idx)
            cos, sin = self.rotary(T)
            mask = None if sdpa is not None else torch.ones(T, T, dtype=torch.bool).triu(1)
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            x = self.norm(x)
            logits = F.linear(x, self.embed_tokens.weight) if c.tie else self.lm_head(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))

    return LlamaForCausalLM()
