#!/usr/bin/env python3
"""hfsame.py A B: transformers reads two Hugging Face model directories as the
same model.

Each config.json is read by transformers' own AutoConfig (offline, no torch:
configuration only), and every attribute that changes the forward is
compared: the configuration class and the architecture, the geometry, the
norm's epsilon, RoPE (theta and the scaling as transformers normalises it),
the biases, the activation, the tied head, and the sliding windows as
transformers resolves them per layer.  Used on a source directory and on
`cmf-patch export` of its import, it says that a user's transformers builds
the same model from the export.  Exit 1 naming the first difference.
"""
import math
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
from transformers import AutoConfig  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402


def head_dim(c):
    hd = getattr(c, "head_dim", None)
    return hd if hd is not None else c.hidden_size // c.num_attention_heads


def rope(c):
    """theta and the scaling, as transformers' RoPE initialisation reads them
    (modeling_rope_utils: yarn's beta_fast 32, beta_slow 1 and attention
    factor 0.1·ln(factor) + 1 when absent)"""
    s = getattr(c, "rope_scaling", None) or {}
    s = {k: v for k, v in s.items() if v is not None}
    kind = s.pop("rope_type", s.pop("type", "default"))
    s.pop("type", None)
    if kind == "yarn":
        s.setdefault("beta_fast", 32)
        s.setdefault("beta_slow", 1)
        s.setdefault("attention_factor", 0.1 * math.log(s["factor"]) + 1.0)
    return float(c.rope_theta), kind, sorted((k, round(float(v), 12)) for k, v in s.items())


def biases(c):
    """the projections with a bias, as each model class builds them"""
    if c.model_type == "qwen2":
        return "q k v"
    if c.model_type == "mistral":
        return ""
    att = "q k v o" if getattr(c, "attention_bias", False) else ""
    mlp = "gate up down" if c.model_type == "llama" and getattr(c, "mlp_bias", False) else ""
    return (att + " " + mlp).strip()


def windows(c):
    """the window each layer attends over (None: the whole window)"""
    n = c.num_hidden_layers
    w = getattr(c, "sliding_window", None)
    types = getattr(c, "layer_types", None)
    if types is not None:
        return [w if t == "sliding_attention" else None for t in types]
    if c.model_type in ("qwen2", "qwen3"):
        if not getattr(c, "use_sliding_window", False):
            return [None] * n
        return [w if i >= c.max_window_layers else None for i in range(n)]
    return [w] * n


def reading(d):
    c = AutoConfig.from_pretrained(d)
    return [
        ("class", type(c).__name__),
        # the class AutoModelForCausalLM builds: the first architecture, else the model type's
        ("architecture", (getattr(c, "architectures", None)
                          or [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[c.model_type]])[0]),
        ("hidden_size", c.hidden_size),
        ("intermediate_size", c.intermediate_size),
        ("num_hidden_layers", c.num_hidden_layers),
        ("num_attention_heads", c.num_attention_heads),
        ("num_key_value_heads", c.num_key_value_heads),
        ("head_dim", head_dim(c)),
        ("vocab_size", c.vocab_size),
        ("rms_norm_eps", c.rms_norm_eps),
        ("rope", rope(c)),
        ("biases", biases(c)),
        ("hidden_act", c.hidden_act),
        ("tie_word_embeddings", c.tie_word_embeddings),
        ("windows", windows(c)),
    ]


a, b = reading(sys.argv[1]), reading(sys.argv[2])
for (k, x), (_, y) in zip(a, b):
    if x != y:
        sys.exit(f"{k}: {x!r} in {sys.argv[1]}, {y!r} in {sys.argv[2]}")
