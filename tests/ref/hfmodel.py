#!/usr/bin/env python3
"""hfmodel.py - random Hugging Face-layout models and an independent numpy forward.

Written from the transformers modeling code's mathematics (Llama, Qwen2,
Qwen3, Mistral), nothing of nvgkit:

  hfmodel.py make DIR CONFIG_JSON SEED     DIR/config.json and DIR/model.safetensors:
                                           the config given, random f32 weights with
                                           every tensor that config implies
  hfmodel.py shards DIR CONFIG_JSON SEED   make's model in f16, one safetensors shard a
                                           layer (and the embedding's, the head's) with
                                           DIR/model.safetensors.index.json: a 7B-sized
                                           model without holding it whole
  hfmodel.py nll DIR IDS.u32 W [--plain]   mean NLL over windows of W tokens (each
                                           window restarts at position 0 and scores
                                           its tokens 2..W), in f64

--plain runs the same weights as a plain Llama (no RoPE scaling, biases,
heads' norms or window; silu): the tests use it to show that each feature
changes the answer, so that a forward ignoring it would fail.
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def geometry(c):
    # Qwen3Config's head_dim is 128 when absent; the others' hidden / heads
    hd = c.get("head_dim") or (128 if c["model_type"] == "qwen3"
                               else c["hidden_size"] // c["num_attention_heads"])
    return hd, c["num_attention_heads"], c.get("num_key_value_heads") or c["num_attention_heads"]


def features(c):
    """what the config implies, as the transformers classes read it"""
    mt = c["model_type"]
    f = {"qkv_bias": False, "o_bias": False, "mlp_bias": False, "qk_norm": mt == "qwen3",
         "act": c.get("hidden_act", "silu"), "window": None, "window_from": 0,
         "rope": c.get("rope_scaling") or c.get("rope_parameters")}
    if mt == "qwen2":
        f["qkv_bias"] = True
    if mt in ("llama", "qwen3") and c.get("attention_bias"):
        f["qkv_bias"] = f["o_bias"] = True
    if mt == "llama" and c.get("mlp_bias"):
        f["mlp_bias"] = True
    if mt == "mistral":  # MistralConfig's window is 4096 when the key is absent
        f["window"] = c.get("sliding_window", 4096)
    if mt in ("qwen2", "qwen3") and c.get("use_sliding_window"):
        f["window"] = c["sliding_window"]
        f["window_from"] = c.get("max_window_layers", 28)
    return f


def groups(c, seed):
    """the random weights a group at a time (the embedding, each layer, the
    final norm and head), the tensors of each in the order drawn"""
    r = np.random.default_rng(int(seed))
    h, ff, nl, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hd, nh, nkv = geometry(c)
    f = features(c)

    def mat(t, name, rows, cols, gain=1.0):
        t[name] = (r.standard_normal((rows, cols)) * gain / math.sqrt(cols)).astype(np.float32)

    def vec(t, name, n, mean, sd):
        t[name] = (mean + sd * r.standard_normal(n)).astype(np.float32)

    yield "embed", {"model.embed_tokens.weight": r.standard_normal((V, h)).astype(np.float32)}
    for l in range(nl):
        p, t = "model.layers.%d." % l, {}
        vec(t, p + "input_layernorm.weight", h, 1.0, 0.2)
        vec(t, p + "post_attention_layernorm.weight", h, 1.0, 0.2)
        mat(t, p + "self_attn.q_proj.weight", nh * hd, h, 3.0)
        mat(t, p + "self_attn.k_proj.weight", nkv * hd, h, 3.0)
        mat(t, p + "self_attn.v_proj.weight", nkv * hd, h)
        mat(t, p + "self_attn.o_proj.weight", h, nh * hd)
        mat(t, p + "mlp.gate_proj.weight", ff, h, 2.0)
        mat(t, p + "mlp.up_proj.weight", ff, h)
        mat(t, p + "mlp.down_proj.weight", h, ff)
        if f["qkv_bias"]:
            vec(t, p + "self_attn.q_proj.bias", nh * hd, 0.0, 0.5)
            vec(t, p + "self_attn.k_proj.bias", nkv * hd, 0.0, 0.5)
            vec(t, p + "self_attn.v_proj.bias", nkv * hd, 0.0, 0.5)
        if f["o_bias"]:
            vec(t, p + "self_attn.o_proj.bias", h, 0.0, 0.5)
        if f["mlp_bias"]:
            vec(t, p + "mlp.gate_proj.bias", ff, 0.0, 0.5)
            vec(t, p + "mlp.up_proj.bias", ff, 0.0, 0.5)
            vec(t, p + "mlp.down_proj.bias", h, 0.0, 0.5)
        if f["qk_norm"]:
            vec(t, p + "self_attn.q_norm.weight", hd, 1.0, 0.3)
            vec(t, p + "self_attn.k_norm.weight", hd, 1.0, 0.3)
        yield "layer%d" % l, t
    t = {}
    vec(t, "model.norm.weight", h, 1.0, 0.2)
    if not c.get("tie_word_embeddings", False):
        mat(t, "lm_head.weight", V, h, 2.0)
    yield "head", t


def make(d, config, seed):
    c = json.loads(config)
    t = {}
    for _, g in groups(c, seed):
        t.update(g)
    json.dump(c, open(d + "/config.json", "w"), indent=1)
    save_file(t, d + "/model.safetensors")


def shards(d, config, seed):
    """make's model in f16, a shard a group and an index: one layer in memory at a time"""
    c = json.loads(config)
    wm = {}
    for name, g in groups(c, seed):
        save_file({k: v.astype(np.float16) for k, v in g.items()}, d + "/" + name + ".safetensors")
        wm.update({k: name + ".safetensors" for k in g})
    json.dump(c, open(d + "/config.json", "w"), indent=1)
    json.dump({"metadata": {}, "weight_map": wm}, open(d + "/model.safetensors.index.json", "w"),
              indent=1)


def inv_freq(c, hd):
    """RoPE's inverse frequencies and the cos/sin scale (transformers' rope_utils)"""
    rs = c.get("rope_scaling") or c.get("rope_parameters") or {}
    base = c.get("rope_theta") or rs.get("rope_theta") or 10000.0
    inv = 1.0 / base ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        return inv / rs["factor"], 1.0
    if kind == "llama3":
        fac, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wl = 2 * math.pi / inv
        out = np.where(wl > old / lo, inv / fac, inv)
        sm = (old / wl - lo) / (hi - lo)
        mid = ~(wl < old / hi) & ~(wl > old / lo)
        return np.where(mid, (1 - sm) * out / fac + sm * out, out), 1.0
    if kind == "yarn":
        fac = rs["factor"]
        ctx = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
        bf, bs = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr(rot):
            return hd * math.log(ctx / (rot * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = max(math.floor(corr(bf)), 0), min(math.ceil(corr(bs)), hd - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(hd // 2) - lo) / (hi - lo), 0, 1)
        extra = 1 - ramp
        att = rs.get("attention_factor") or 0.1 * math.log(fac) + 1.0
        return (inv / fac) * (1 - extra) + inv * extra, att
    return inv, 1.0


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def act(name, x):
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    if name == "gelu":
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if name in ("gelu_pytorch_tanh", "gelu_new"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    raise SystemExit("hfmodel.py: activation %s" % name)


def rope(v, cos, sin):
    """rotate-half on (T × heads × hd)"""
    half = v.shape[-1] // 2
    a, b = v[..., :half], v[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def logits(c, W, ids, plain):
    f = features(c)
    if plain:
        f = {"qkv_bias": False, "o_bias": False, "mlp_bias": False, "qk_norm": False,
             "act": "silu", "window": None, "window_from": 0, "rope": None}
        c = dict(c, rope_scaling=None, rope_parameters=None)
    hd, nh, nkv = geometry(c)
    eps = c.get("rms_norm_eps", 1e-6)
    T = len(ids)
    inv, att = inv_freq(c, hd)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang) * att, np.sin(ang) * att
    x = W["model.embed_tokens.weight"][ids].astype(np.float64)

    def lin(p, name, y):
        out = y @ W[p + name + ".weight"].T
        return out + W[p + name + ".bias"] if f[{"self_attn.q_proj": "qkv_bias",
                                                 "self_attn.k_proj": "qkv_bias",
                                                 "self_attn.v_proj": "qkv_bias",
                                                 "self_attn.o_proj": "o_bias"}.get(name, "mlp_bias")] else out

    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        a = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(p, "self_attn.q_proj", a).reshape(T, nh, hd)
        k = lin(p, "self_attn.k_proj", a).reshape(T, nkv, hd)
        v = lin(p, "self_attn.v_proj", a).reshape(T, nkv, hd)
        if f["qk_norm"]:
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        t_, j_ = np.arange(T)[:, None], np.arange(T)[None, :]
        see = j_ <= t_
        if f["window"] and l >= f["window_from"]:
            see &= t_ - j_ < f["window"]
        o = np.zeros((T, nh, hd))
        for hh in range(nh):
            g = hh // (nh // nkv)
            s = q[:, hh, :] @ k[:, g, :].T / math.sqrt(hd)
            s = np.where(see, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            o[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        x = x + lin(p, "self_attn.o_proj", o.reshape(T, nh * hd))
        m = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        m = act(f["act"], lin(p, "mlp.gate_proj", m)) * lin(p, "mlp.up_proj", m)
        x = x + lin(p, "mlp.down_proj", m)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return rmsnorm(x, W["model.norm.weight"], eps) @ head.T.astype(np.float64)


def nll(d, ids_path, w, plain):
    c = json.load(open(d + "/config.json"))
    W = {k: v.astype(np.float64) for k, v in load_file(d + "/model.safetensors").items()}
    ids = np.fromfile(ids_path, dtype="<u4")
    tot, n = 0.0, 0
    for s in range(0, len(ids), w):
        win = ids[s:s + w]
        if len(win) < 2:
            continue
        lg = logits(c, W, win[:-1], plain)
        mx = lg.max(axis=1, keepdims=True)
        lse = (mx + np.log(np.exp(lg - mx).sum(axis=1, keepdims=True)))[:, 0]
        tot += float((lse - lg[np.arange(len(win) - 1), win[1:]]).sum())
        n += len(win) - 1
    print(n, "%.9f" % (tot / n))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "shards":
        shards(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "nll":
        nll(sys.argv[2], sys.argv[3], int(sys.argv[4]), "--plain" in sys.argv[5:])
    else:
        raise SystemExit(__doc__)
