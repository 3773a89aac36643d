"""blr-writer.py - an independent implementation of blr(5) in numpy, for the tests.

Written from the man page, not from common/blr.c: it packs payloads, computes
what they dequantize to, what a row-gauge undo must give, and the rank rule in
exact rational arithmetic.

  write OUT M N R P SEED [--no-numpy]
                           payload OUT (exact scales), and OUT.numpy.f32: numpy's W
  gauge IN FACTORS OUT     the payload IN with every path's h divided by FACTORS (f32)
  svid W M N R OUT         a data-free one-path payload of a raw f32 matrix (demo)
  rank CASES EXPECT        the seed's grid: the cases, and the rule's answers
"""
import struct
import sys
from fractions import Fraction
from math import floor

import numpy as np


def payload(m, n, r, paths):
    head = struct.pack("<IIIHBB", 0x31524C42, m, n, r, len(paths), 0)
    body = b""
    for h, g, l, su, sv in paths:
        body += h.astype("<f2").tobytes() + g.astype("<f2").tobytes() + l.astype("<f2").tobytes()
        # entry (i,k) is bit (i*r+k) mod 8 of byte (i*r+k)//8, 1 = +1
        for s in (su, sv):
            body += np.packbits((s.reshape(-1) > 0).astype(np.uint8), bitorder="little").tobytes()
    return head + body


def dequantize(r, paths):
    w = 0
    for h, g, l, su, sv in paths:
        a = h.astype(np.float64)[:, None] * su * l.astype(np.float64)[None, :]
        b = sv * g.astype(np.float64)[:, None]
        w = w + a @ b.T
    return np.asarray(w, dtype=np.float64).astype("<f4")


def random_f16(rng, size, lo, hi, signed):
    # f16 values with exponents in [lo, hi): 2^e (1 + u)
    v = np.ldexp(1.0 + rng.random(size), rng.integers(lo, hi, size)).astype(np.float16)
    if signed:
        v = v * rng.choice(np.array([-1, 1], dtype=np.float16), size)
    return v


def write(out, m, n, r, p, seed, numpy_w=True):
    rng = np.random.default_rng(seed)
    paths = []
    for _ in range(p):
        # |h|, |g| in [0.5, 1) and l in [2^-6, 2^-2): every sum of products is
        # exact in f64, so any correct dequantizer gives these floats exactly
        h = random_f16(rng, m, -1, 0, True)
        g = random_f16(rng, n, -1, 0, True)
        l = random_f16(rng, r, -6, -2, False)
        su = rng.choice([-1.0, 1.0], (m, r))
        sv = rng.choice([-1.0, 1.0], (n, r))
        paths.append((h, g, l, su, sv))
    with open(out, "wb") as f:
        f.write(payload(m, n, r, paths))
    if numpy_w:
        with open(out + ".numpy.f32", "wb") as f:
            f.write(dequantize(r, paths).tobytes())


def gauge(src, factors, out):
    b = bytearray(open(src, "rb").read())
    m, n, r, p = struct.unpack_from("<IIHB", b, 4)
    d = np.frombuffer(open(factors, "rb").read(), dtype="<f4").astype(np.float64)
    one = 2 * (m + n + r) + r * (m + n) // 8
    for q in range(p):
        off = 16 + q * one
        h = np.frombuffer(bytes(b[off:off + 2 * m]), dtype="<f2").astype(np.float64)
        b[off:off + 2 * m] = (h / d).astype(np.float32).astype("<f2").tobytes()
    open(out, "wb").write(bytes(b))


def rank1_abs(x):
    # |x| ~ u v^T with u, v >= 0: the top singular pair of |x| (Perron)
    u, s, vt = np.linalg.svd(np.abs(x), full_matrices=False)
    return np.abs(u[:, 0]) * np.sqrt(s[0]), np.abs(vt[0]) * np.sqrt(s[0])


def svid(src, m, n, r, out):
    # a data-free one-path BLR of a raw f32 matrix: W ~ A B^T by truncated SVD,
    # then each factor as its signs times a rank-1 fit of its magnitudes
    # (LittleBit's SVID): A ~ diag(h) S_U diag(la), B ~ diag(g) S_V diag(lb)
    w = np.fromfile(src, dtype="<f4").astype(np.float64).reshape(m, n)
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    a, b = u[:, :r] * np.sqrt(s[:r]), vt[:r].T * np.sqrt(s[:r])
    h, la = rank1_abs(a)
    g, lb = rank1_abs(b)
    f16 = lambda v: v.astype(np.float16)
    path = (f16(h), f16(g), f16(la * lb), np.where(a >= 0, 1.0, -1.0), np.where(b >= 0, 1.0, -1.0))
    with open(out, "wb") as f:
        f.write(payload(m, n, r, [path]))


def rank(m, n, b, p, k):
    s = m + n
    target = Fraction(b) * Fraction(k) * m * n
    rstar = floor((target / p - 16 * s) / (s + 16))
    r = 8 * floor(Fraction(rstar, 8))
    cap = 8 * (min(m, n) // 8)
    clip = "-"
    if r < 8:
        r, clip = 8, "floor"
    elif r > cap:
        r, clip = cap, "cap"
    bits = p * (r * s + 16 * (s + r))
    return "paths %d rank %d bpw %.6f bits %d clip %s" % (p, r, bits / (m * n), bits, clip)


def rank_grid(cases, expect):
    # the seed's grid: the cases to ask, and the answers, paths 1 then 2
    with open(cases, "w") as c, open(expect, "w") as e:
        for m in (32, 64, 256, 1024, 2048):
            for n in (32, 64, 256, 1024, 3584):
                for b in ("0.05", "0.11", "0.2", "0.55", "0.56", "1.0", "1.5", "4.0"):
                    for k in ("0.5", "1.0", "2.0"):
                        c.write("%dx%d %s %s\n" % (m, n, b, k))
                        for p in (1, 2):
                            e.write(rank(m, n, b, p, k) + "\n")


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "write":
        write(a[1], *map(int, a[2:7]), numpy_w="--no-numpy" not in a)
    elif a[0] == "gauge":
        gauge(a[1], a[2], a[3])
    elif a[0] == "svid":
        svid(a[1], int(a[2]), int(a[3]), int(a[4]), a[5])
    elif a[0] == "rank":
        rank_grid(a[1], a[2])
    else:
        sys.exit("blr-writer.py: unknown command " + a[0])
