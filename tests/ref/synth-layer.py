#!/usr/bin/env python3
"""synth-layer.py - a synthetic layer for the encoder tests and benchmarks.

    synth-layer.py layer M N SEED OUTDIR [TOKENS]
        writes OUTDIR/w.raw (M x N f32, row-major, decaying column spectrum)
        and OUTDIR/fit.gram, OUTDIR/sel.gram (NVGG: the mean Gram of TOKENS
        inputs each, three heavy channels, FIT and SEL drawn independently)
    synth-layer.py gram KIND N PATH
        a bad Gram: KIND indefinite (2x2 blocks [[1,2],[2,1]]: eigenvalues
        3 and -1, mean diagonal 1), nan (one off-diagonal pair NaN)
"""
import struct
import sys

import numpy as np


def write_gram(path, x):
    n, t = x.shape
    g = (x @ x.T) / t
    with open(path, "wb") as f:
        f.write(struct.pack("<IIQ", 0x4E564747, n, t))
        f.write(g.astype("<f4").tobytes())


def bad_gram(kind, n, path):
    g = np.eye(n)
    if kind == "indefinite":
        for i in range(0, n - 1, 2):
            g[i, i + 1] = g[i + 1, i] = 2.0
    elif kind == "nan":
        g[0, 1] = g[1, 0] = np.nan
    else:
        sys.exit(f"synth-layer.py: unknown gram kind {kind}")
    with open(path, "wb") as f:
        f.write(struct.pack("<IIQ", 0x4E564747, n, 100))
        f.write(g.astype("<f4").tobytes())


def main():
    if sys.argv[1] == "gram":
        bad_gram(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    m, n, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    out = sys.argv[5]
    t = int(sys.argv[6]) if len(sys.argv) > 6 else 1024
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, n)) * (1.0 + np.arange(n)) ** -0.4
    sc = np.exp(rng.standard_normal(n) * 0.8)
    sc[:3] *= 20.0
    mix = np.eye(n) + 0.1 * rng.standard_normal((n, n))
    w.astype("<f4").tofile(f"{out}/w.raw")
    for name in ("fit", "sel"):
        x = mix @ (sc[:, None] * rng.standard_normal((n, t)))
        write_gram(f"{out}/{name}.gram", x)


if __name__ == "__main__":
    main()
