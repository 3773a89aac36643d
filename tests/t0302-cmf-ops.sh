#!/bin/bash
# cmf-patch apply, report, truncate, export, verify on stories260K with BLR
# payloads written by an independent Python writer of blr(5).

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin

# blr.py M N R P SEED OUT: a payload of fixed-seed scales and signs, and
# OUT.want, its matrix sum_p diag(h) S_U diag(l) S_V^T diag(g) in float64
cat >blr.py <<'EOF'
import sys, numpy as np
m, n, r, p, seed = (int(x) for x in sys.argv[1:6])
rng = np.random.default_rng(seed)
out = bytearray(np.array([0x31524C42, m, n], dtype="<u4").tobytes())
out += np.array([r], dtype="<u2").tobytes() + bytes([p, 0])
W = np.zeros((m, n))
for _ in range(p):
    h = rng.uniform(0.5, 1.5, m).astype(np.float16)
    g = rng.uniform(0.5, 1.5, n).astype(np.float16)
    l = rng.uniform(0.01, 0.1, r).astype(np.float16)
    su = rng.integers(0, 2, (m, r)).astype(np.uint8)
    sv = rng.integers(0, 2, (n, r)).astype(np.uint8)
    for a in (h, g, l):
        out += a.astype("<f2").tobytes()
    # entry (i,k) is bit (i*r+k) mod 8 of byte (i*r+k)/8, 1 = +1
    out += np.packbits(su.ravel(), bitorder="little").tobytes()
    out += np.packbits(sv.ravel(), bitorder="little").tobytes()
    SU, SV = 2.0 * su - 1, 2.0 * sv - 1
    W += (h.astype(float)[:, None] * SU * l.astype(float)) @ (SV.T * g.astype(float)[None, :])
open(sys.argv[6], "wb").write(out)
W.astype("<f8").tofile(sys.argv[6] + ".want")
EOF

# near.py GOT.f32 WANT.f64: equal within f32 rounding of a rank-r sum
cat >near.py <<'EOF'
import sys, numpy as np
got = np.fromfile(sys.argv[1], dtype="<f4").astype(float)
want = np.fromfile(sys.argv[2], dtype="<f8")
assert got.shape == want.shape, (got.shape, want.shape)
# f32 products and sums over rank 8 of O(1) terms: relative error well under 1e-5
err = np.abs(got - want).max() / np.abs(want).max()
assert err < 1e-5, err
EOF

# bits.py: the report's totals recomputed from the container formula
cat >bits.py <<'EOF'
def bits(m, n, r, p): return p * (r * (m + n) + 16 * (m + n + r))
blr = [(64, 64, 8, 1), (32, 64, 8, 2)]
bb = sum(bits(*t) for t in blr); bw = sum(m * n for m, n, _, _ in blr)
per_layer = [64 * 64, 32 * 64, 32 * 64, 64 * 64, 172 * 64, 172 * 64, 64 * 172]
aw = 5 * sum(per_layer)
ab = 32 * (aw - bw) + bb
print("blr body: %.4f bpw over %d weights" % (bb / bw, bw))
print("all layer projections: %.4f bpw over %d weights" % (ab / aw, aw))
EOF

Q=model.layers.0.self_attn.q_proj.weight
K=model.layers.1.self_attn.k_proj.weight

test_expect_success 'setup: import and payloads' '
	cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o src.cmf "$NVG_DATA/stories260K.bin" &&
	"$NVG_PY" blr.py 64 64 8 1 1 q.blr &&
	"$NVG_PY" blr.py 32 64 8 2 2 k.blr &&
	"$NVG_PY" blr.py 64 32 8 1 3 wrong.blr
'

test_expect_success 'apply two payloads' '
	cmf-patch apply src.cmf $Q=q.blr $K=k.blr -o out.cmf &&
	cmf-patch list out.cmf >list &&
	test_grep "^$Q	U8	64x64	$(stat -c %s q.blr)	blr	L0 q$" list &&
	test_grep "^$K	U8	32x64	$(stat -c %s k.blr)	blr	L1 k$" list &&
	test $(wc -l <list) -eq 47 &&
	cmf-patch info out.cmf >info &&
	test_grep "^blr tensors: 2$" info &&
	test_grep "^tokenizer: llama, 512 tokens$" info &&
	cmf-patch verify out.cmf
'

test_expect_success 'the payload bytes are stored unchanged' '
	"$NVG_PY" -c "
from safetensors.numpy import load_file
t = load_file(\"out.cmf\")
assert t[\"$Q\"].tobytes() == open(\"q.blr\", \"rb\").read()
assert t[\"$K\"].tobytes() == open(\"k.blr\", \"rb\").read()
"
'

test_expect_success 'extract dequantizes a BLR tensor' '
	cmf-patch extract -o q.f32 out.cmf $Q &&
	"$NVG_PY" near.py q.f32 q.blr.want &&
	cmf-patch extract -o k.f32 out.cmf $K &&
	"$NVG_PY" near.py k.f32 k.blr.want
'

test_expect_success 'the other tensors are untouched' '
	cmf-patch extract -o v.src src.cmf model.layers.0.self_attn.v_proj.weight &&
	cmf-patch extract -o v.out out.cmf model.layers.0.self_attn.v_proj.weight &&
	cmp v.src v.out
'

test_expect_success 'report: per-tensor codec, rank, paths, bpw and the two totals' '
	cmf-patch report out.cmf >report &&
	test_grep "^$Q	blr	8	1	0.7812$" report &&
	test_grep "^$K	blr	8	2	2.3750$" report &&
	test_grep "^model.layers.0.mlp.up_proj.weight	F32	-	-	32.0000$" report &&
	"$NVG_PY" bits.py >totals.want &&
	tail -n 2 report >totals &&
	test_cmp totals.want totals &&
	test $(wc -l <report) -eq 37
'

test_expect_success 'a payload of another shape fails the whole apply' '
	test_expect_code 1 cmf-patch apply src.cmf $K=k.blr $Q=wrong.blr -o bad.cmf 2>err &&
	test_one_line_error err &&
	test_grep "wrong.blr" err &&
	test_grep "64x64" err &&
	test_path_is_missing bad.cmf
'

test_expect_success 'an unknown tensor name fails the whole apply' '
	test_expect_code 1 cmf-patch apply src.cmf $Q=q.blr model.layers.9.mlp.up_proj.weight=q.blr -o bad.cmf 2>err &&
	test_one_line_error err &&
	test_grep "model.layers.9.mlp.up_proj.weight" err &&
	test_path_is_missing bad.cmf
'

test_expect_success 'a payload that is not BLR fails' '
	cmf-patch extract -o junk src.cmf $Q &&
	test_expect_code 1 cmf-patch apply src.cmf $Q=junk -o bad.cmf 2>err &&
	test_one_line_error err &&
	test_path_is_missing bad.cmf
'

test_expect_success 'apply refuses to overwrite its input' '
	cp src.cmf same.cmf &&
	test_expect_code 1 cmf-patch apply same.cmf $Q=q.blr -o same.cmf 2>err &&
	test_one_line_error err &&
	cmp same.cmf src.cmf
'

test_expect_success 'truncate keeps layers 0..N-1 and updates the arch' '
	cmf-patch truncate --layers 2 -o t2.cmf out.cmf &&
	cmf-patch info t2.cmf >t2.info &&
	test_grep "^layers: 2$" t2.info &&
	test_grep "^blr tensors: 2$" t2.info &&
	cmf-patch list t2.cmf >t2.list &&
	test $(wc -l <t2.list) -eq 20 &&
	test_no_grep "model.layers.2" t2.list &&
	test_grep "^model.norm.weight" t2.list &&
	cmf-patch verify t2.cmf
'

test_expect_success 'truncate drops multi-token-prediction heads' '
	mkdir mt &&
	"$NVG_PY" -c "
import json, numpy as np
from safetensors.numpy import save_file
shapes = [(\"input_layernorm\", (8,)), (\"self_attn.q_proj\", (8, 8)), (\"self_attn.k_proj\", (8, 8)),
          (\"self_attn.v_proj\", (8, 8)), (\"self_attn.o_proj\", (8, 8)),
          (\"post_attention_layernorm\", (8,)), (\"mlp.gate_proj\", (16, 8)),
          (\"mlp.up_proj\", (16, 8)), (\"mlp.down_proj\", (8, 16))]
t = {\"model.layers.%d.%s.weight\" % (l, n): np.zeros(s, np.float32) for l in (0, 1) for n, s in shapes}
t.update({\"model.embed_tokens.weight\": np.zeros((4, 8), np.float32),
          \"model.norm.weight\": np.zeros(8, np.float32),
          \"model.mtp.0.proj.weight\": np.zeros((8, 8), np.float32)})
save_file(t, \"mt/model.safetensors\")
json.dump({\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16,
           \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"vocab_size\": 4}, open(\"mt/config.json\", \"w\"))
open(\"names.want\", \"w\").write(\"\".join(n + \"\\n\" for n in [\"model.embed_tokens.weight\"] +
    [\"model.layers.0.%s.weight\" % n for n, s in shapes] + [\"model.norm.weight\"]))
" &&
	cmf-patch import -o mt.cmf mt/model.safetensors &&
	cmf-patch truncate --layers 1 -o mt1.cmf mt.cmf &&
	cmf-patch list mt1.cmf >mt1.list &&
	cut -f1 mt1.list >names &&
	test_cmp names.want names
'

test_expect_success 'truncate beyond the layer count fails' '
	test_expect_code 1 cmf-patch truncate --layers 6 -o t6.cmf src.cmf 2>err &&
	test_one_line_error err &&
	test_grep "6" err &&
	test_path_is_missing t6.cmf
'

test_expect_success 'export: plain safetensors with BLR dequantized, and config.json' '
	mkdir hf &&
	cmf-patch export -o hf/model.safetensors out.cmf &&
	"$NVG_PY" -c "
import json, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
t = load_file(\"hf/model.safetensors\")
assert len(t) == 47
q = t[\"$Q\"]
assert q.dtype == np.float32 and q.shape == (64, 64)
assert np.array_equal(q.ravel(), np.fromfile(\"q.f32\", dtype=\"<f4\"))
with safe_open(\"hf/model.safetensors\", \"np\") as f:
    assert f.metadata() == {\"format\": \"pt\"}, f.metadata()
c = json.load(open(\"hf/config.json\"))
assert c[\"architectures\"] == [\"LlamaForCausalLM\"] and c[\"model_type\"] == \"llama\"
assert c[\"num_key_value_heads\"] == 4 and c[\"tie_word_embeddings\"] is True
assert c[\"torch_dtype\"] == \"float32\"
"
'

test_expect_success 'export --dtype f16 rounds like numpy' '
	mkdir hf16 &&
	cmf-patch export --dtype f16 -o hf16/model.safetensors out.cmf &&
	"$NVG_PY" -c "
import numpy as np
from safetensors.numpy import load_file
t = load_file(\"hf16/model.safetensors\")
q = t[\"$Q\"]
assert q.dtype == np.float16
assert np.array_equal(q.ravel(), np.fromfile(\"q.f32\", dtype=\"<f4\").astype(np.float16))
"
'

test_expect_success 'an exported file imports back to the same tensors' '
	cmf-patch import -o back.cmf hf/model.safetensors &&
	cmf-patch extract -o q.back back.cmf $Q &&
	cmp q.f32 q.back
'

test_expect_success 'verify detects a changed byte' '
	cp out.cmf broken.cmf &&
	printf "\\001" | dd of=broken.cmf bs=1 seek=$(( $(stat -c %s broken.cmf) - 10 )) conv=notrunc 2>/dev/null &&
	test_expect_code 1 cmf-patch verify broken.cmf 2>err &&
	test_one_line_error err &&
	test_grep "model.norm.weight" err &&
	test_grep "CRC-32" err
'

test_expect_success 'no temporary files left' '
	test_no_tmp_files
'

test_done
