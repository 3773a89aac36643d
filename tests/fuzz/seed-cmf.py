# seed-cmf.py BLR OUT: a small cmf file for the fuzz corpus: an F32 matrix, an
# F16 vector and the BLR payload BLR as a U8 tensor, with cmf.codec and
# cmf.crc32 (zlib's CRC-32 of each tensor's bytes) in __metadata__
import json, struct, sys, zlib

blr = open(sys.argv[1], "rb").read()
tensors = [
    ("w", "F32", [2, 3], struct.pack("<6f", 1, -2, 0.5, 3, 0, -1)),
    ("g", "F16", [4], struct.pack("<4e", 1, 0.25, -2, 8)),
    ("b", "U8", [len(blr)], blr),
]
hdr, off, data = {}, 0, b""
for name, dt, shape, raw in tensors:
    hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
    off += len(raw)
    data += raw
hdr["__metadata__"] = {
    "cmf.codec": json.dumps({"b": "blr"}),
    "cmf.crc32": json.dumps({n: zlib.crc32(r) for n, _, _, r in tensors}),
}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + data)
