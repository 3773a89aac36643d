#!/bin/bash
# cmf-patch import: llama2.c and GGUF stories260K agree bit for bit, the RoPE
# rows reproduce llama2.c's attention, CMF opens in Python's safetensors,
# and safetensors written by Python import (one file, sharded, F32/F16/BF16).

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin stories260K.gguf

# every tensor of a CMF read by the reference safetensors package equals
# what cmf-patch extract wrote for it (NAME.f32 files in the given directory)
cat >st_compare.py <<'EOF'
import sys, numpy as np
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
d = sys.argv[2]
names = [l.split("\t")[0] for l in open(sys.argv[3])]
assert sorted(names) == sorted(t), (sorted(names), sorted(t))
for n in names:
    got = np.fromfile(d + "/" + n + ".f32", dtype="<f4")
    want = t[n].astype(np.float32).ravel()
    assert got.shape == want.shape and np.array_equal(got, want), n
print(len(names), "tensors equal")
EOF

# llama2.c's attention scores (interleaved RoPE on the .bin's own rows, read
# here independently) against rotate-half RoPE on the imported q/k rows
cat >rope_check.py <<'EOF'
import sys, numpy as np
from safetensors.numpy import load_file
raw = np.fromfile(sys.argv[1], dtype="<i4", count=7)
dim, hid, L, H, KV, V, S = (int(x) for x in raw)
w = np.fromfile(sys.argv[1], dtype="<f4", offset=28)
hs = dim // H
o = V * dim + L * dim
wq = w[o:o + dim * dim].reshape(dim, dim); o += L * dim * dim
wk = w[o:o + KV * hs * dim].reshape(KV * hs, dim)
t = load_file(sys.argv[2])
q_hf = t["model.layers.0.self_attn.q_proj.weight"].astype(np.float64)
k_hf = t["model.layers.0.self_attn.k_proj.weight"].astype(np.float64)
rng = np.random.default_rng(5)
x = rng.standard_normal(dim)
worst = 0.0
for pos in (0, 1, 7, 100):
    # llama2.c run.c: pairs (i, i+1), i even, angle pos / 10000^((i % hs) / hs)
    q = wq.astype(np.float64) @ x
    k = wk.astype(np.float64) @ x
    for v in (q, k):
        for i in range(0, v.size, 2):
            a = pos * 10000.0 ** (-(i % hs) / hs)
            c, s = np.cos(a), np.sin(a)
            v[i], v[i + 1] = v[i] * c - v[i + 1] * s, v[i] * s + v[i + 1] * c
    # Hugging Face rotate-half: pairs (j, j + hs/2), angle pos / 10000^(2j/hs)
    def rot(v):
        v = v.reshape(-1, hs).copy()
        j = np.arange(hs // 2)
        a = pos * 10000.0 ** (-2.0 * j / hs)
        c, s = np.cos(a), np.sin(a)
        x1, x2 = v[:, :hs // 2].copy(), v[:, hs // 2:].copy()
        v[:, :hs // 2] = x1 * c - x2 * s
        v[:, hs // 2:] = x2 * c + x1 * s
        return v
    qh, kh = rot(q_hf @ x), rot(k_hf @ x)
    ql, kl = q.reshape(H, hs), k.reshape(KV, hs)
    for h in range(H):
        g = h // (H // KV)
        worst = max(worst, abs(ql[h] @ kl[g] - qh[h] @ kh[g]))
# both sides are float64 sums of the same products in another order
assert worst < 1e-9, worst
print("max |score difference|", worst)
EOF

cat >write_st.py <<'EOF'
import json, sys, numpy as np
from safetensors import serialize_file, TensorSpec
from safetensors.numpy import save_file
rng = np.random.default_rng(11)
cfg = {"model_type": "llama", "hidden_size": 16, "intermediate_size": 32,
       "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
       "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "vocab_size": 8,
       "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": [2, 3]}
json.dump(cfg, open("st/config.json", "w"))
# the shards carry lm_head: untied there
json.dump(dict(cfg, tie_word_embeddings=False), open("sh/config.json", "w"))
a = rng.standard_normal((8, 16)).astype(np.float32)
b = rng.standard_normal((16, 16)).astype(np.float16)
c = rng.standard_normal((32, 16)).astype(np.float32)
e = rng.standard_normal((8, 16)).astype(np.float16)
np.save("st/a.npy", a); np.save("st/b.npy", b); np.save("st/c.npy", c)
# bf16: the top halves of c's f32 bits (truncated, a value bf16 holds exactly)
cb = (c.view(np.uint32) >> 16).astype(np.uint16)
np.save("st/cb.npy", (cb.astype(np.uint32) << 16).view(np.float32))
# the tensors the arch has beyond the ones under test (a model missing one is refused)
shapes = {"model.norm.weight": (16,), "model.layers.0.input_layernorm.weight": (16,),
          "model.layers.0.post_attention_layernorm.weight": (16,),
          "model.layers.0.self_attn.q_proj.weight": (16, 16),
          "model.layers.0.self_attn.k_proj.weight": (8, 16),
          "model.layers.0.self_attn.v_proj.weight": (8, 16),
          "model.layers.0.self_attn.o_proj.weight": (16, 16),
          "model.layers.0.mlp.gate_proj.weight": (32, 16),
          "model.layers.0.mlp.up_proj.weight": (32, 16),
          "model.layers.0.mlp.down_proj.weight": (16, 32)}
def rest(*have):
    return {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items() if k not in have}
save_file(dict(rest("model.layers.0.self_attn.q_proj.weight"), **{
          "model.embed_tokens.weight": a, "model.layers.0.self_attn.q_proj.weight": b}),
          "st/model.safetensors")
save_file(rest("model.layers.0.mlp.up_proj.weight"), "sh/model-00003-of-00003.safetensors")
serialize_file({"model.embed_tokens.weight": TensorSpec(dtype="float32", shape=[8, 16], data_ptr=a.ctypes.data, data_len=a.nbytes),
                "lm_head.weight": TensorSpec(dtype="float16", shape=[8, 16], data_ptr=e.ctypes.data, data_len=e.nbytes)},
               "sh/model-00001-of-00002.safetensors", metadata={"format": "pt"})
serialize_file({"model.layers.0.mlp.up_proj.weight": TensorSpec(dtype="bfloat16", shape=[32, 16], data_ptr=cb.ctypes.data, data_len=cb.nbytes)},
               "sh/model-00002-of-00002.safetensors", metadata=None)
json.dump({"metadata": {}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00001-of-00002.safetensors",
    "model.layers.0.mlp.up_proj.weight": "model-00002-of-00002.safetensors",
    **{k: "model-00003-of-00003.safetensors" for k in rest("model.layers.0.mlp.up_proj.weight")}}},
    open("sh/model.safetensors.index.json", "w"))
EOF

# raw f32 of a tensor saved by numpy (np.save) for byte comparison with extract
cat >npy_f32.py <<'EOF'
import sys, numpy as np
np.load(sys.argv[1]).astype(np.float32).astype("<f4").tofile(sys.argv[2])
EOF

extract_all() {
	mkdir -p "$2" &&
	cmf-patch list "$1" >"$2.list" &&
	while IFS='	' read -r name rest; do
		cmf-patch extract -o "$2/$name.f32" "$1" "$name" || return 1
	done <"$2.list"
}

test_expect_success 'import stories260K.bin with tok512.bin' '
	cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o bin.cmf "$NVG_DATA/stories260K.bin" &&
	cmf-patch info bin.cmf >info &&
	test_grep "^layers: 5$" info &&
	test_grep "^kv_heads: 4$" info &&
	test_grep "^tied: yes$" info &&
	test_grep "^parameters: 260032$" info &&
	test_grep "^tokenizer: llama, 512 tokens$" info &&
	test_grep "^provenance: \\{\"import\":\\{\"from\":\"llama2c\",\"file\":\"stories260K.bin\",\"vocab\":\"tok512.bin\"\\}\\}$" info
'

test_expect_success 'import stories260K.gguf' '
	cmf-patch import -o gguf.cmf "$NVG_DATA/stories260K.gguf" &&
	cmf-patch info gguf.cmf >ginfo &&
	test_grep "^tensors: 47$" ginfo &&
	test_grep "^tied: yes$" ginfo
'

test_expect_success 'the .bin and the .gguf give the same tensors bit for bit' '
	extract_all bin.cmf xb &&
	extract_all gguf.cmf xg &&
	cut -f1-5 xb.list >names.b && cut -f1-5 xg.list >names.g &&
	test_cmp names.b names.g &&
	test $(wc -l <xb.list) -eq 47 &&
	for f in xb/*.f32; do cmp "$f" "xg/${f#xb/}" || exit 1; done
'

test_expect_success 'list tags body linears and shows HF shapes' '
	test_grep "^model.layers.4.self_attn.k_proj.weight	F32	32x64	8192	-	L4 k$" xb.list &&
	test_grep "^model.layers.0.mlp.down_proj.weight	F32	64x172	44032	-	L0 down$" xb.list &&
	test_grep "^model.embed_tokens.weight	F32	512x64	131072	-	-$" xb.list &&
	test_no_grep "lm_head" xb.list
'

test_expect_success 'rotate-half on the imported q/k reproduces llama2.c attention scores' '
	"$NVG_PY" rope_check.py "$NVG_DATA/stories260K.bin" bin.cmf
'

test_expect_success 'a cmf-patch CMF opens in Python safetensors, every tensor equal' '
	"$NVG_PY" st_compare.py bin.cmf xb xb.list &&
	"$NVG_PY" st_compare.py gguf.cmf xg xg.list
'

test_expect_success 'verify on a fresh import' '
	cmf-patch verify bin.cmf >out &&
	test_grep "47 tensors, every CRC-32 matches" out
'

test_expect_success 'safetensors written by Python import (F32, F16 kept)' '
	mkdir st sh &&
	"$NVG_PY" write_st.py &&
	cmf-patch import -o st.cmf st/model.safetensors &&
	cmf-patch list st.cmf >st.list &&
	test_grep "^model.layers.0.self_attn.q_proj.weight	F16	16x16	512	-	L0 q$" st.list &&
	cmf-patch info st.cmf >st.info &&
	test_grep "^tied: yes$" st.info &&
	test_grep "^eos: 2$" st.info &&
	cmf-patch extract -o a.f32 st.cmf model.embed_tokens.weight &&
	cmf-patch extract -o b.f32 st.cmf model.layers.0.self_attn.q_proj.weight &&
	"$NVG_PY" npy_f32.py st/a.npy a.want && "$NVG_PY" npy_f32.py st/b.npy b.want &&
	cmp a.f32 a.want && cmp b.f32 b.want
'

test_expect_success 'sharded safetensors through model.safetensors.index.json (BF16 kept)' '
	cmf-patch import -o sh.cmf sh/model.safetensors.index.json &&
	cmf-patch list sh.cmf >sh.list &&
	test $(wc -l <sh.list) -eq 12 &&
	test_grep "^model.layers.0.mlp.up_proj.weight	BF16	32x16	1024	-	L0 up$" sh.list &&
	test_grep "^lm_head.weight	F16	8x16" sh.list &&
	cmf-patch info sh.cmf >sh.info &&
	test_grep "^tied: no$" sh.info &&
	cmf-patch extract -o c.f32 sh.cmf model.layers.0.mlp.up_proj.weight &&
	"$NVG_PY" npy_f32.py st/cb.npy c.want &&
	cmp c.f32 c.want
'

test_expect_success 'a model directory imports through its index' '
	cmf-patch import -o dir.cmf sh &&
	cmf-patch list dir.cmf >dir.list &&
	test_cmp sh.list dir.list &&
	cmf-patch import -o dir1.cmf st/ &&
	cmf-patch list dir1.cmf >dir1.list &&
	test_cmp st.list dir1.list
'

test_expect_success '--dtype f16 converts with round to nearest even (numpy agrees)' '
	cmf-patch import --dtype f16 -o st16.cmf st/model.safetensors &&
	cmf-patch list st16.cmf >st16.list &&
	test_grep "^model.embed_tokens.weight	F16	8x16	256" st16.list &&
	cmf-patch extract -o a16.f32 st16.cmf model.embed_tokens.weight &&
	"$NVG_PY" -c "import numpy as np; np.load(\"st/a.npy\").astype(np.float16).astype(\"<f4\").tofile(\"a16.want\")" &&
	cmp a16.f32 a16.want
'

test_expect_success 'no temporary files left' '
	test_no_tmp_files
'

test_done
