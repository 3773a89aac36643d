"""nvgg-fixtures.py - NVGG files for tool tests, written from nvgg(5) with numpy.

  nvgg-fixtures.py DIR N COUNT SEED
writes into DIR:
  good.nvgg        a valid Gram: the mean of x x^T over COUNT random rows of width N
  good.f32         the same rows, raw f32 (COUNT x N), for tools that accumulate
  empty.nvgg       0 bytes
  header.nvgg      the 16-byte header alone
  magic.nvgg       wrong magic
  n0.nvgg          n = 0
  count0.nvgg      count = 0
  overflow.nvgg    n = 2^32-1 (16 + 4 n^2 overflows 64 bits)
  short.nvgg       the body one f32 short
  long.nvgg        one f32 too many
  nan.nvgg         a NaN off the diagonal
  inf.nvgg         an infinity on the diagonal
  asym.nvgg        G[0,1] != G[1,0] beyond the tolerance
  negdiag.nvgg     a negative diagonal entry
Every bad file must be refused by any NVGG reader (exit 1, one line, no output).
"""
import os
import struct
import sys

import numpy as np


def gram(n, count, rows):
    g = (rows.astype(np.float64).T @ rows.astype(np.float64)) / count
    return g.astype("<f4")


def image(magic, n, count, body):
    return struct.pack("<IIQ", magic, n, count) + body.tobytes()


def main(out, n, count, seed):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((count, n)).astype("<f4")
    g = gram(n, count, rows)
    M = 0x4E564747
    files = {
        "good": image(M, n, count, g),
        "empty": b"",
        "header": struct.pack("<IIQ", M, n, count),
        "magic": image(0x4E564748, n, count, g),
        "n0": image(M, 0, count, g),
        "count0": image(M, n, 0, g),
        "overflow": image(M, 0xFFFFFFFF, count, g),
        "short": image(M, n, count, g)[:-4],
        "long": image(M, n, count, g) + b"\0\0\0\0",
    }
    for name, i, j, v in (("nan", 0, 1, np.nan), ("inf", 1, 1, np.inf),
                          ("asym", 0, 1, None), ("negdiag", 1, 1, -1.0)):
        b = g.copy()
        b[i, j] = b[i, j] + 1.0 + abs(b[i, i]) if v is None else v
        files[name] = image(M, n, count, b)
    os.makedirs(out, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(out, name + ".nvgg"), "wb") as f:
            f.write(data)
    rows.tofile(os.path.join(out, "good.f32"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
