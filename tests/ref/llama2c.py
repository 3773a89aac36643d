#!/usr/bin/env python3
"""llama2c.py - an independent numpy port of llama2.c run.c (forward and encode).

Reads llama2.c's own files directly (model .bin, legacy v0 header, and the
tokenizer .bin), nothing of nvgkit.  Used by the tests as the reference:

  llama2c.py encode TOK.bin TEXT_FILE OUT.u32      run.c encode(text, bos=1, eos=0)
  llama2c.py logits MODEL.bin IDS.u32 OUT.f32      logits (T × vocab) of a window, pos from 0
  llama2c.py nll MODEL.bin IDS.u32 W               mean NLL over windows of W tokens
  llama2c.py generate MODEL.bin TOK.bin PROMPT STEPS   run.c's greedy generate (-t 0 -n STEPS)
  llama2c.py hidden MODEL.bin IDS.u32 W L OUT.f32  states after layer L, windows of W
  llama2c.py qgram MODEL.bin IDS.u32 W L OUT.f32   mean Gram of layer L's attention-norm output

The forward follows run.c: one position at a time with a key/value cache,
the interleaved RoPE pairs (i, i+1) on the raw .bin weights, f32 numpy.
"""
import struct
import sys

import numpy as np


def load_model(path):
    raw = open(path, "rb").read()
    dim, hidden, nl, nh, nkv, vocab, seq = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    w = np.frombuffer(raw, dtype="<f4", offset=28)
    hs = dim // nh
    kvd = dim * nkv // nh
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = w[off:off + n].reshape(shape)
        off += n
        return a

    m = dict(dim=dim, hidden=hidden, nl=nl, nh=nh, nkv=nkv, vocab=vocab, seq=seq, hs=hs, kvd=kvd)
    m["emb"] = take(vocab, dim)
    m["rms_att"] = take(nl, dim)
    m["wq"] = take(nl, dim, dim)
    m["wk"] = take(nl, kvd, dim)
    m["wv"] = take(nl, kvd, dim)
    m["wo"] = take(nl, dim, dim)
    m["rms_ffn"] = take(nl, dim)
    m["w1"] = take(nl, hidden, dim)
    m["w2"] = take(nl, dim, hidden)
    m["w3"] = take(nl, hidden, dim)
    m["rms_final"] = take(dim)
    take(seq, hs // 2)
    take(seq, hs // 2)
    m["wcls"] = m["emb"] if shared else take(vocab, dim)
    return m


def rmsnorm(x, w):
    ss = np.float32(np.mean(x.astype(np.float32) ** 2)) + np.float32(1e-5)
    return (x * np.float32(1.0 / np.sqrt(ss))) * w


def forward(m, tokens, stop=None):
    """logits (T × vocab) of tokens at positions 0..T-1, run.c style; with
    stop = l, the hidden states (T × dim) after layer l instead (-1: the
    embeddings)."""
    nl, hs, nh, nkv = m["nl"], m["hs"], m["nh"], m["nkv"]
    kmul = nh // nkv
    T = len(tokens)
    kc = np.zeros((nl, T, m["kvd"]), np.float32)
    vc = np.zeros((nl, T, m["kvd"]), np.float32)
    out = np.zeros((T, m["vocab"]), np.float32)
    hid = np.zeros((T, m["dim"]), np.float32)
    for pos, tok in enumerate(tokens):
        x = m["emb"][tok].copy()
        if stop == -1:
            hid[pos] = x
            continue
        for l in range(nl):
            xb = rmsnorm(x, m["rms_att"][l])
            q = m["wq"][l] @ xb
            k = m["wk"][l] @ xb
            v = m["wv"][l] @ xb
            for i in range(0, m["dim"], 2):
                hd = i % hs
                freq = 1.0 / 10000.0 ** (hd / hs)
                val = pos * freq
                fcr, fci = np.float32(np.cos(val)), np.float32(np.sin(val))
                vecs = (q, k) if i < m["kvd"] else (q,)
                for vec in vecs:
                    v0, v1 = vec[i], vec[i + 1]
                    vec[i] = v0 * fcr - v1 * fci
                    vec[i + 1] = v0 * fci + v1 * fcr
            kc[l, pos] = k
            vc[l, pos] = v
            att_out = np.zeros(m["dim"], np.float32)
            for h in range(nh):
                qh = q[h * hs:(h + 1) * hs]
                g = h // kmul
                ks = kc[l, :pos + 1, g * hs:(g + 1) * hs]
                sc = ks @ qh / np.float32(np.sqrt(hs))
                sc = np.exp(sc - sc.max())
                sc /= sc.sum()
                att_out[h * hs:(h + 1) * hs] = sc @ vc[l, :pos + 1, g * hs:(g + 1) * hs]
            x = x + m["wo"][l] @ att_out
            xb = rmsnorm(x, m["rms_ffn"][l])
            h1 = m["w1"][l] @ xb
            h3 = m["w3"][l] @ xb
            hb = h1 * (np.float32(1.0) / (np.float32(1.0) + np.exp(-h1))) * h3
            x = x + m["w2"][l] @ hb
            if l == stop:
                hid[pos] = x
                break
        if stop is not None:
            continue
        x = rmsnorm(x, m["rms_final"])
        out[pos] = m["wcls"] @ x
    return hid if stop is not None else out


def windows(ids, w):
    """the windows of w tokens (those of < 2 dropped): the fed tokens of each"""
    return [ids[s:s + w][:-1] for s in range(0, len(ids), w) if len(ids[s:s + w]) >= 2]


def load_tok(path, vocab):
    raw = open(path, "rb").read()
    off = 4
    pieces, scores = [], []
    for _ in range(vocab):
        sc, n = struct.unpack_from("<fi", raw, off)
        off += 8
        pieces.append(raw[off:off + n])
        off += n
        scores.append(sc)
    return pieces, scores


def encode(pieces, scores, text):
    """run.c encode(text, bos=1, eos=0), the O(n^2) loop as written there."""
    lookup = {}
    for i, p in enumerate(pieces):
        lookup.setdefault(p, i)
    toks = [1]
    if text:
        toks.append(lookup[b" "])
    i = 0
    while i < len(text):
        j = i + 1
        while j < len(text) and j - i < 4 and (text[j] & 0xC0) == 0x80:
            j += 1
        cp = text[i:j]
        if cp in lookup:
            toks.append(lookup[cp])
        else:
            toks.extend(b + 3 for b in cp)
        i = j
    # run.c merges over the whole text; a newline has no piece and its
    # byte-fallback piece "<0x0A>" is part of no other piece, so no merge
    # crosses it: merging the lines one by one gives the same result in
    # far less time (checked here, not assumed)
    nl = lookup[b"<0x0A>"]
    assert b"\n" not in lookup
    assert not any(b"<0x0A>" in p for i, p in enumerate(pieces) if i != nl)
    body, line = [], []
    for t in toks[1:] + [nl]:
        if t == nl:
            body += merge(pieces, scores, lookup, line) + [nl]
            line = []
        else:
            line.append(t)
    body.pop()
    return [1] + body


def merge(pieces, scores, lookup, body):
    """run.c's loop: merge the best-scoring adjacent pair (leftmost) until none."""
    body = list(body)
    while True:
        best, bi, bid = -1e10, -1, -1
        for k in range(len(body) - 1):
            t = lookup.get(pieces[body[k]] + pieces[body[k + 1]], -1)
            if t != -1 and scores[t] > best:
                best, bi, bid = scores[t], k, t
        if bi < 0:
            return body
        body[bi:bi + 2] = [bid]


def decode(pieces, prev, tok):
    p = pieces[tok]
    if prev == 1 and p.startswith(b" "):
        p = p[1:]
    if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
        return bytes([int(p[3:5], 16)])
    return p


def main():
    cmd = sys.argv[1]
    if cmd == "encode":
        m_vocab = 512 if len(sys.argv) < 6 else int(sys.argv[5])
        pieces, scores = load_tok(sys.argv[2], m_vocab)
        ids = encode(pieces, scores, open(sys.argv[3], "rb").read())
        np.array(ids, "<u4").tofile(sys.argv[4])
    elif cmd == "logits":
        m = load_model(sys.argv[2])
        ids = np.fromfile(sys.argv[3], "<u4").tolist()
        forward(m, ids).astype("<f4").tofile(sys.argv[4])
    elif cmd == "nll":
        m = load_model(sys.argv[2])
        ids = np.fromfile(sys.argv[3], "<u4").tolist()
        w = int(sys.argv[4])
        tot, n = 0.0, 0
        for s in range(0, len(ids), w):
            win = ids[s:s + w]
            if len(win) < 2:
                continue
            lg = forward(m, win[:-1]).astype(np.float64)
            mx = lg.max(axis=1, keepdims=True)
            lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(axis=1))
            tot += float((lse - lg[np.arange(len(win) - 1), win[1:]]).sum())
            n += len(win) - 1
        print("%d %.9f" % (n, tot / n))
    elif cmd == "hidden":
        # hidden states after layer L of every window, rows in window order
        m = load_model(sys.argv[2])
        ids = np.fromfile(sys.argv[3], "<u4").tolist()
        w, layer = int(sys.argv[4]), int(sys.argv[5])
        rows = [forward(m, win, stop=layer) for win in windows(ids, w)]
        np.concatenate(rows).astype("<f4").tofile(sys.argv[6])
    elif cmd == "qgram":
        # the mean Gram of layer L's attention-norm output over every window
        m = load_model(sys.argv[2])
        ids = np.fromfile(sys.argv[3], "<u4").tolist()
        w, layer = int(sys.argv[4]), int(sys.argv[5])
        h = np.concatenate([forward(m, win, stop=layer - 1) for win in windows(ids, w)])
        a = np.stack([rmsnorm(x, m["rms_att"][layer]) for x in h]).astype(np.float64)
        (a.T @ a / len(a)).astype("<f4").tofile(sys.argv[6])
    elif cmd == "generate":
        m = load_model(sys.argv[2])
        pieces, scores = load_tok(sys.argv[3], m["vocab"])
        prompt = encode(pieces, scores, sys.argv[4].encode())
        steps = int(sys.argv[5])
        toks = list(prompt)
        out = b""
        pos = 0
        while pos < steps:
            if pos < len(prompt) - 1:
                nxt = prompt[pos + 1]
            else:
                nxt = int(np.argmax(forward(m, toks[:pos + 1])[pos]))
                toks.append(nxt)
            if nxt == 1:
                break
            out += decode(pieces, toks[pos], nxt)
            pos += 1
        sys.stdout.buffer.write(out + b"\n")
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
