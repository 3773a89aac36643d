#!/usr/bin/env python3
"""layer-grams.py - a small numpy forward of a llama2.c v0 checkpoint (run.c's
mathematics), for tests: greedy generation to check it is faithful, the
calibration Grams of one layer's inputs, and a layer's weights as raw f32.

    layer-grams.py generate MODEL.bin TOK.bin STEPS PROMPT
        run.c's `-t 0 -n STEPS -i PROMPT` output (prompt included)
    layer-grams.py grams MODEL.bin TOK.bin TEXT LAYER FIT SEL WINDOW OUTPREFIX
        tokenizes TEXT (line by line, each with run.c's dummy prefix, one BOS
        in front), cuts FIT then SEL tokens into windows of WINDOW tokens,
        feeds each window's first WINDOW-1 tokens, and writes the mean Grams
        of layer LAYER's four inputs as NVGG files OUTPREFIX.{q,o,gate,down}.{fit,sel}.gram
    layer-grams.py weight MODEL.bin NAME LAYER OUT.raw
        NAME in wq wk wv wo w1 w2 w3: that matrix ([out][in], f32) to OUT.raw
"""
import struct
import sys

import numpy as np

MATS = ["wq", "wk", "wv", "wo", "w1", "w2", "w3"]


class Model:
    def __init__(self, path):
        raw = open(path, "rb").read()
        (self.dim, self.hidden, self.layers, self.heads, self.kv_heads, vocab,
         self.seq_len) = struct.unpack("<7i", raw[:28])
        self.vocab = abs(vocab)
        f = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
        d, h, L, kv = self.dim, self.hidden, self.layers, self.dim * self.kv_heads // self.heads
        self.hs = d // self.heads
        shapes = [("emb", (self.vocab, d)), ("rms_att", (L, d)), ("wq", (L, d, d)),
                  ("wk", (L, kv, d)), ("wv", (L, kv, d)), ("wo", (L, d, d)),
                  ("rms_ffn", (L, d)), ("w1", (L, h, d)), ("w2", (L, d, h)),
                  ("w3", (L, h, d)), ("rms_final", (d,))]
        off = 0
        for name, shape in shapes:
            size = int(np.prod(shape))
            setattr(self, name, f[off:off + size].reshape(shape))
            off += size
        self.raw32 = np.frombuffer(raw, dtype="<f4", offset=28)
        self.offsets = {}
        off = 0
        for name, shape in shapes:
            self.offsets[name] = (off, shape)
            off += int(np.prod(shape))


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w


def rope(x, pos, hs):
    """run.c's rotation of consecutive pairs (x: T x width)"""
    i = np.arange(0, x.shape[1], 2)
    freq = 1.0 / 10000.0 ** ((i % hs) / hs)
    ang = pos[:, None] * freq[None, :]
    c, s = np.cos(ang), np.sin(ang)
    out = x.copy()
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


def forward(m, tokens, taps=None):
    """logits (T x vocab) of a window from position 0; taps[l] collects inputs"""
    t = len(tokens)
    x = m.emb[tokens].copy()
    pos = np.arange(t, dtype=np.float64)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    group = m.heads // m.kv_heads
    for l in range(m.layers):
        xb = rmsnorm(x, m.rms_att[l])
        q = rope(xb @ m.wq[l].T, pos, m.hs)
        k = rope(xb @ m.wk[l].T, pos, m.hs)
        v = xb @ m.wv[l].T
        att = np.zeros((t, m.dim))
        for h in range(m.heads):
            kh = h // group
            qs, ks = slice(h * m.hs, (h + 1) * m.hs), slice(kh * m.hs, (kh + 1) * m.hs)
            sc = q[:, qs] @ k[:, ks].T / np.sqrt(m.hs) + mask
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            att[:, qs] = (sc / sc.sum(axis=1, keepdims=True)) @ v[:, ks]
        x = x + att @ m.wo[l].T
        xf = rmsnorm(x, m.rms_ffn[l])
        g, u = xf @ m.w1[l].T, xf @ m.w3[l].T
        hb = g / (1.0 + np.exp(-g)) * u
        x = x + hb @ m.w2[l].T
        if taps is not None and l in taps:
            for lead, val in (("q", xb), ("o", att), ("gate", xf), ("down", hb)):
                taps[l][lead].append(val)
    return rmsnorm(x, m.rms_final) @ m.emb.T


class Tok:
    def __init__(self, path):
        raw = open(path, "rb").read()
        off, self.pieces, self.scores = 4, [], []
        while off < len(raw):
            score, n = struct.unpack("<fi", raw[off:off + 8])
            self.pieces.append(raw[off + 8:off + 8 + n])
            self.scores.append(score)
            off += 8 + n
        self.ids = {p: i for i, p in enumerate(self.pieces)}

    def encode(self, text):
        """run.c encode without BOS/EOS: dummy prefix, code points, byte fallback, merges"""
        ids = [self.ids[b" "]] if text else []
        for ch in text:
            b = ch.encode("utf-8")
            ids.extend([self.ids[b]] if b in self.ids else [c + 3 for c in b])
        while True:
            best, at = -1e10, -1
            for i in range(len(ids) - 1):
                j = self.ids.get(self.pieces[ids[i]] + self.pieces[ids[i + 1]])
                if j is not None and self.scores[j] > best:
                    best, at, bid = self.scores[j], i, j
            if at < 0:
                return ids
            ids[at:at + 2] = [bid]

    def decode(self, prev, tok):
        p = self.pieces[tok]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        if p.startswith(b"<0x") and p.endswith(b">") and len(p) == 6:
            p = bytes([int(p[3:5], 16)])
        return p


def generate(m, tk, steps, prompt):
    toks = [1] + tk.encode(prompt)
    out, pos = b"", 0
    while pos < steps:
        logits = forward(m, np.array(toks[:pos + 1]))
        nxt = toks[pos + 1] if pos + 1 < len(toks) else int(np.argmax(logits[-1]))
        if nxt == 1:
            break
        out += tk.decode(toks[pos], nxt)
        if pos + 1 >= len(toks):
            toks.append(nxt)
        pos += 1
    return out.decode("utf-8", "replace")


def write_gram(path, xs):
    x = np.concatenate(xs)
    g = x.T @ x / len(x)
    with open(path, "wb") as f:
        f.write(struct.pack("<IIQ", 0x4E564747, g.shape[0], len(x)))
        f.write(g.astype("<f4").tobytes())


def grams(m, tk, text, layer, fit, sel, window, prefix):
    toks = [1]
    for line in open(text, encoding="utf-8").read().splitlines():
        if line.strip() and line.strip() != "<|endoftext|>":
            toks += tk.encode(line)
        if len(toks) >= fit + sel:
            break
    for part, (a, b) in (("fit", (0, fit)), ("sel", (fit, fit + sel))):
        taps = {layer: {"q": [], "o": [], "gate": [], "down": []}}
        for s in range(a, b, window):
            w = toks[s:min(s + window, b)]
            if len(w) >= 2:
                forward(m, np.array(w[:-1]), taps)
        for lead, xs in taps[layer].items():
            write_gram(f"{prefix}.{lead}.{part}.gram", xs)


def main():
    cmd = sys.argv[1]
    if cmd == "generate":
        m, tk = Model(sys.argv[2]), Tok(sys.argv[3])
        print(generate(m, tk, int(sys.argv[4]), sys.argv[5]))
    elif cmd == "grams":
        m, tk = Model(sys.argv[2]), Tok(sys.argv[3])
        grams(m, tk, sys.argv[4], *(int(x) for x in sys.argv[5:9]), sys.argv[9])
    elif cmd == "weight":
        m = Model(sys.argv[2])
        off, shape = m.offsets[sys.argv[3]]
        n = int(np.prod(shape[1:]))
        l = int(sys.argv[4])
        m.raw32[off + l * n:off + (l + 1) * n].astype("<f4").tofile(sys.argv[5])
    else:
        sys.exit(f"layer-grams.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
