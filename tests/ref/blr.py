#!/usr/bin/env python3
"""blr.py - an independent numpy reader of BLR payloads and a numpy
dual-SVID, for the encoder tests (not used by the tools).

    blr.py check PAYLOAD W.raw M N [GRAM.nvgg]
        prints "r R p P bytes B frob F herr E" for the dequantized payload
        (herr: sqrt(tr(E G E^T)/tr(W G W^T)) on the Gram, when given)
    blr.py dual-svid W.raw M N R P
        prints "frob F" of a dual-SVID built with numpy's SVD, rounded to f16
        the way the container stores it
"""
import struct
import sys

import numpy as np


def read_raw(path, m, n):
    return np.fromfile(path, dtype="<f4").astype(np.float64).reshape(m, n)


def read_gram(path):
    with open(path, "rb") as f:
        magic, n, _count = struct.unpack("<IIQ", f.read(16))
        assert magic == 0x4E564747
        return np.frombuffer(f.read(), dtype="<f4").astype(np.float64).reshape(n, n)


def bits(buf, off, rows, r):
    nbytes = (rows * r + 7) // 8
    b = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=off)
    flat = np.unpackbits(b, bitorder="little")[: rows * r]
    return (flat.astype(np.float64) * 2 - 1).reshape(rows, r), off + nbytes


def f16(buf, off, k):
    v = np.frombuffer(buf, dtype="<f2", count=k, offset=off).astype(np.float64)
    return v, off + 2 * k


def dequantize(buf):
    magic, m, n, r, p, flags = struct.unpack("<IIIHBB", buf[:16])
    assert magic == 0x31524C42 and flags == 0 and p in (1, 2)
    assert len(buf) == 16 + p * (2 * (m + n + r) + r * (m + n) // 8)
    off, w = 16, np.zeros((m, n))
    for _ in range(p):
        h, off = f16(buf, off, m)
        g, off = f16(buf, off, n)
        lam, off = f16(buf, off, r)
        su, off = bits(buf, off, m, r)
        sv, off = bits(buf, off, n, r)
        w += (h[:, None] * su * lam[None, :]) @ (g[:, None] * sv).T
    return w, m, n, r, p


def rank1_pos(a):
    c = a.shape[1]
    v = np.full(c, 1.0 / np.sqrt(c))
    for _ in range(60):
        v2 = a.T @ (a @ v)
        v2 /= max(np.linalg.norm(v2), 1e-300)
        diff = np.linalg.norm(v2 - v)
        v = v2
        if diff < 1e-9:
            break
    u = a @ v
    s = np.linalg.norm(u)
    u /= max(s, 1e-300)
    left, right = np.sqrt(s) * u, np.sqrt(s) * v
    return np.maximum(left, 1e-12 * left.max()), np.maximum(right, 1e-12 * right.max())


def svid(t, r):
    u, s, vt = np.linalg.svd(t, full_matrices=False)
    up = u[:, :r] * np.sqrt(s[:r])
    vp = vt[:r].T * np.sqrt(s[:r])
    h, lu = rank1_pos(np.abs(up))
    g, lv = rank1_pos(np.abs(vp))
    return [h, np.where(up >= 0, 1.0, -1.0), lu * lv, np.where(vp >= 0, 1.0, -1.0), g]


def stored(path):
    h, su, lam, sv, g = path
    a, c = np.sqrt(np.mean(h * h)), np.sqrt(np.mean(g * g))
    q = lambda x: x.astype(np.float32).astype(np.float16).astype(np.float64)
    lam = lam * a * c
    lam = np.where((lam != 0) & ((q(lam) == 0) | (np.abs(lam) < 6.1e-5)), 0.0, lam)
    return [q(h / a), su, q(lam), sv, q(g / c)]


def recon(path):
    h, su, lam, sv, g = path
    return (h[:, None] * su * lam[None, :]) @ (g[:, None] * sv).T


def main():
    cmd = sys.argv[1]
    if cmd == "check":
        buf = open(sys.argv[2], "rb").read()
        m, n = int(sys.argv[4]), int(sys.argv[5])
        w = read_raw(sys.argv[3], m, n)
        what, pm, pn, r, p = dequantize(buf)
        assert (pm, pn) == (m, n), f"payload {pm}x{pn}, expected {m}x{n}"
        e = w - what
        out = f"r {r} p {p} bytes {len(buf)} frob {np.linalg.norm(e) / np.linalg.norm(w):.6f}"
        if len(sys.argv) > 6:
            g = read_gram(sys.argv[6])
            herr = np.sqrt(np.sum((e @ g) * e) / np.sum((w @ g) * w))
            out += f" herr {herr:.6f}"
        print(out)
    elif cmd == "dual-svid":
        m, n, r, p = (int(x) for x in sys.argv[3:7])
        w = read_raw(sys.argv[2], m, n)
        paths = [svid(w, r)]
        if p == 2:
            paths.append(svid(w - recon(paths[0]), r))
        what = sum(recon(stored(x)) for x in paths)
        print(f"frob {np.linalg.norm(w - what) / np.linalg.norm(w):.6f}")
    else:
        sys.exit(f"blr.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
