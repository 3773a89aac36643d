#!/usr/bin/env python3
"""samesigns.py A B: two BLR payloads (blr(5)) differ in their f16 scales only.

The header, the sizes and every sign bit must be equal; read here from the
format's layout, independently of the C reader.  Exit 1 with the reason.
"""
import struct
import sys

a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if len(a) != len(b) or a[:16] != b[:16]:
    sys.exit("size or header differs")
m, n, r, p = struct.unpack("<IIHB", a[4:15])
at = 16
for _ in range(p):
    at += 2 * (m + n + r)
    bits = r * (m + n) // 8
    if a[at:at + bits] != b[at:at + bits]:
        sys.exit("signs differ")
    at += bits
