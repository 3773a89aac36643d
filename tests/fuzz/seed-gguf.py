# seed-gguf.py OUT: a small one-layer llama GGUF for the fuzz corpus: F32,
# F16 and Q8_0 tensors, the llama hyperparameters and a 4-piece tokenizer
import struct, sys

HID, FFN, VOC, HEADS, KVH = 32, 64, 4, 4, 2
out = bytearray()


def put(fmt, *v):
    out.extend(struct.pack("<" + fmt, *v))


def string(s):
    b = s.encode()
    put("Q", len(b))
    out.extend(b)


def kv(key, typ, fmt=None, value=None):
    string(key)
    put("I", typ)
    if typ == 8:
        string(value)
    else:
        put(fmt, value)


def kv_array(key, elem, values):
    string(key)
    put("IIQ", 9, elem, len(values))
    for v in values:
        if elem == 8:
            string(v)
        else:
            put({6: "f", 5: "i"}[elem], v)


def data(typ, rows, cols, seed):
    vals = [((i * 37 + seed * 11) % 17 - 8) / 8.0 for i in range(rows * cols)]
    if typ == 0:
        return struct.pack("<%df" % len(vals), *vals)
    if typ == 1:
        return struct.pack("<%de" % len(vals), *vals)
    b = bytearray()  # Q8_0: per 32 values an f16 scale and 32 int8
    for k in range(0, len(vals), 32):
        b += struct.pack("<e", 1 / 127) + bytes((int(v * 127) & 0xFF) for v in vals[k:k + 32])
    return bytes(b)


kvd = HID // HEADS * KVH
tensors = [("token_embd.weight", 8, VOC, HID), ("blk.0.attn_norm.weight", 0, 1, HID),
           ("blk.0.attn_q.weight", 8, HID, HID), ("blk.0.attn_k.weight", 0, kvd, HID),
           ("blk.0.attn_v.weight", 1, kvd, HID), ("blk.0.attn_output.weight", 0, HID, HID),
           ("blk.0.ffn_norm.weight", 0, 1, HID), ("blk.0.ffn_gate.weight", 1, FFN, HID),
           ("blk.0.ffn_up.weight", 0, FFN, HID), ("blk.0.ffn_down.weight", 0, HID, FFN),
           ("output_norm.weight", 0, 1, HID)]
out.extend(b"GGUF")
put("IQQ", 3, len(tensors), 13)
kv("general.architecture", 8, value="llama")
kv("llama.embedding_length", 4, "I", HID)
kv("llama.feed_forward_length", 4, "I", FFN)
kv("llama.block_count", 4, "I", 1)
kv("llama.attention.head_count", 4, "I", HEADS)
kv("llama.attention.head_count_kv", 4, "I", KVH)
kv("llama.rope.freq_base", 6, "f", 10000.0)
kv("tokenizer.ggml.model", 8, value="llama")
kv_array("tokenizer.ggml.tokens", 8, ["<unk>", "<s>", "</s>", "\u2581hi"])
kv_array("tokenizer.ggml.scores", 6, [0.0, -1.0, -2.0, -3.0])
kv_array("tokenizer.ggml.token_type", 5, [2, 3, 3, 1])
kv("tokenizer.ggml.bos_token_id", 4, "I", 1)
kv("tokenizer.ggml.eos_token_id", 4, "I", 2)
blobs, off = [], 0
for i, (name, typ, rows, cols) in enumerate(tensors):
    string(name)
    if rows == 1:
        put("IQ", 1, cols)
    else:
        put("IQQ", 2, cols, rows)
    put("IQ", typ, off)
    b = data(typ, rows, cols, i)
    b += bytes(-len(b) % 32)
    blobs.append(b)
    off += len(b)
out.extend(bytes(-len(out) % 32))
for b in blobs:
    out.extend(b)
open(sys.argv[1], "wb").write(out)
