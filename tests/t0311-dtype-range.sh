#!/bin/bash
# dtypes that cannot hold a value: import --dtype f16 and export --dtype f16
# refuse a BF16 weight beyond the F16 range by tensor and element, never
# storing an infinity; a BF16 model exports as BF16 by default, and import
# of that export gives the same bytes (cmf-patch(1), --dtype).
. "$(dirname "$0")/test-lib.sh"
REF="$NVG_TOP/tests/ref/hfmodel.py"

# st.py DIR: the name → (dtype, raw bytes) of every tensor of DIR/model.safetensors, printed sorted
cat >st.py <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
for k in sorted(h):
    if k != "__metadata__":
        a, b = h[k]["data_offsets"]
        print(k, h[k]["dtype"], raw[8 + n + a:8 + n + b].hex())
PY

test_expect_success 'setup: a random llama in BF16, one weight 99840 (beyond F16, exact in BF16)' '
	mkdir f32 bf &&
	"$NVG_PY" "$REF" make f32 "{\"model_type\": \"llama\", \"hidden_size\": 16,
		\"intermediate_size\": 24, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,
		\"vocab_size\": 32, \"tie_word_embeddings\": true}" 5 &&
	"$NVG_PY" - <<-\EOF &&
	import json, numpy as np
	from safetensors import serialize_file, TensorSpec
	from safetensors.numpy import load_file
	t = load_file("f32/model.safetensors")
	t["model.layers.0.mlp.up_proj.weight"].flat[3] = 99840.0
	keep = {}
	for k, v in t.items():
	    keep[k] = (v.astype("<f4").view("<u4") >> 16).astype("<u2")
	spec = {k: TensorSpec(dtype="bfloat16", shape=list(t[k].shape), data_ptr=v.ctypes.data,
	                      data_len=v.nbytes) for k, v in keep.items()}
	serialize_file(spec, "bf/model.safetensors", metadata={"format": "pt"})
	c = json.load(open("f32/config.json")); c["torch_dtype"] = "bfloat16"
	json.dump(c, open("bf/config.json", "w"))
	EOF
	cmf-patch import -o bf.cmf bf/model.safetensors
'

test_expect_success 'import --dtype f16 refuses the weight by tensor and element, writes nothing' '
	test_expect_code 1 cmf-patch import --dtype f16 -o f16.cmf bf/model.safetensors 2>err &&
	test_one_line_error err &&
	test_grep "tensor .model.layers.0.mlp.up_proj.weight. element 3 = 99840 is beyond the F16 range" err &&
	test_path_is_missing f16.cmf
'

test_expect_success 'export --dtype f16 refuses it too, leaving neither file' '
	mkdir e16 &&
	test_expect_code 1 cmf-patch export --dtype f16 -o e16/model.safetensors bf.cmf 2>err &&
	test_grep "element 3 = 99840 is beyond the F16 range" err &&
	test_path_is_missing e16/model.safetensors &&
	test_path_is_missing e16/config.json
'

test_expect_success 'a BF16 model exports as BF16 by default, and back: the same bytes' '
	mkdir ex &&
	cmf-patch export -o ex/model.safetensors bf.cmf &&
	test_grep "\"torch_dtype\":.*\"bfloat16\"" ex/config.json &&
	"$NVG_PY" st.py bf/model.safetensors >want &&
	"$NVG_PY" st.py ex/model.safetensors >got &&
	test_cmp want got &&
	cmf-patch import -o back.cmf ex/model.safetensors &&
	cmf-patch list bf.cmf >l1 && cmf-patch list back.cmf >l2 &&
	test_cmp l1 l2
'

test_expect_success 'import --dtype bf16 of the F32 model rounds to nearest even' '
	cmf-patch import --dtype bf16 -o b2.cmf f32/model.safetensors &&
	cmf-patch extract -o up.f32 b2.cmf model.layers.0.mlp.up_proj.weight &&
	"$NVG_PY" - <<-\EOF
	import numpy as np
	from safetensors.numpy import load_file
	w = load_file("f32/model.safetensors")["model.layers.0.mlp.up_proj.weight"].astype("<f4")
	u = w.view("<u4").astype(np.uint64)
	r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16
	want = r.astype("<u4").view("<f4")
	got = np.fromfile("up.f32", "<f4").reshape(w.shape)
	assert (got == want).all(), "bf16 rounding differs"
	EOF
'

test_done
