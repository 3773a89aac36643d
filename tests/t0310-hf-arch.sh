#!/bin/bash
# the architectures and config features that import honours, run by the
# forward as tests/ref/hfmodel.py (an independent numpy forward of the
# transformers models, in f64) runs them, on random Hugging Face-layout
# models: Llama with rope_scaling llama3 (also with Llama 3.1's own
# values), linear and yarn, transformers 5's rope_parameters,
# attention_bias and mlp_bias, head_dim given, gelu and gelu_pytorch_tanh;
# Qwen2 with its sliding window; Qwen3 (q_norm, k_norm); Mistral's window.
# Each model's mean NLL agrees with the reference to 1e-4 nats, and the
# reference run without the feature differs by more than 1e-3, so that a
# forward ignoring the feature fails.  Export writes the features back, and
# transformers' own AutoConfig reads each export as it reads its source.
. "$(dirname "$0")/test-lib.sh"
REF="$NVG_TOP/tests/ref/hfmodel.py"

geo='"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
     "num_key_value_heads": 2, "vocab_size": 64, "rms_norm_eps": 1e-5, "max_position_embeddings": 64'

# nll FILE: the mean NLL of a cmf-eval output or of a reference line "N NLL"
nll() {
	sed -n 's/^nll //p; s/^[0-9][0-9]* //p' "$1"
}

# near A B TOL: |A − B| ≤ TOL;  far A B TOL: |A − B| > TOL
near() {
	awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; exit !(d <= t && d >= -t) }'
}
far() {
	! near "$@"
}

# check NAME CONFIG [any]: made, imported, scored as the reference (1e-4 nats); unless
# the third argument is "any", the feature matters (the plain run differs by > 1e-3)
check() {
	mkdir "$1" &&
	"$NVG_PY" "$REF" make "$1" "{$geo, $2}" 7 &&
	cmf-patch import -o "$1.cmf" "$1/model.safetensors" &&
	cmf-eval -q -m "$1.cmf" --tokens ids.u32 --window 48 >"$1.eval" &&
	"$NVG_PY" "$REF" nll "$1" ids.u32 48 >"$1.ref" &&
	"$NVG_PY" "$REF" nll "$1" ids.u32 48 --plain >"$1.plain" &&
	echo "$1: nvgkit $(nll "$1.eval"), reference $(nll "$1.ref"), plain $(nll "$1.plain")" &&
	near "$(nll "$1.eval")" "$(nll "$1.ref")" 1e-4 &&
	{ test "${3:-}" = any || far "$(nll "$1.plain")" "$(nll "$1.ref")" 1e-3; }
}

test_expect_success 'setup: 192 random token ids (four windows of 48)' '
	"$NVG_PY" -c "import numpy as np; np.random.default_rng(3).integers(0, 64, 192).astype(\"<u4\").tofile(\"ids.u32\")"
'

test_expect_success 'llama: rope_scaling llama3 (every band of the wavelengths)' '
	check l3 "\"model_type\": \"llama\", \"rope_theta\": 10000.0, \"tie_word_embeddings\": true,
		\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,
		\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 128}"
'

test_expect_success 'llama: rope_scaling llama3 with Llama 3.1 values, head_dim 16' '
	check l31 "\"model_type\": \"llama\", \"rope_theta\": 500000.0, \"head_dim\": 16,
		\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,
		\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}" any
'

test_expect_success 'llama: rope_scaling linear (the legacy "type" key)' '
	check lin "\"model_type\": \"llama\", \"rope_theta\": 10000.0,
		\"rope_scaling\": {\"type\": \"linear\", \"factor\": 4.0}"
'

test_expect_success 'llama: rope_scaling yarn, its attention factor by default' '
	check yarn "\"model_type\": \"llama\", \"rope_theta\": 10000.0,
		\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0,
		\"original_max_position_embeddings\": 32}"
'

test_expect_success 'transformers 5: rope_parameters with its own rope_theta' '
	check rp "\"model_type\": \"llama\",
		\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 100.0}"
'

test_expect_success 'llama: attention_bias (q, k, v, o) and mlp_bias, head_dim 16' '
	check bias "\"model_type\": \"llama\", \"attention_bias\": true, \"mlp_bias\": true,
		\"head_dim\": 16"
'

test_expect_success 'llama: hidden_act gelu, and gelu_pytorch_tanh' '
	check gelu "\"model_type\": \"llama\", \"hidden_act\": \"gelu\"" &&
	check gelut "\"model_type\": \"llama\", \"hidden_act\": \"gelu_pytorch_tanh\""
'

test_expect_success 'qwen2: q/k/v biases and the sliding window from max_window_layers' '
	check q2w "\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 6,
		\"max_window_layers\": 1, \"rope_theta\": 1000000.0"
'

test_expect_success 'qwen3: q_norm and k_norm before RoPE, head_dim 16, an untied head' '
	check q3 "\"model_type\": \"qwen3\", \"head_dim\": 16, \"attention_bias\": false,
		\"use_sliding_window\": false, \"sliding_window\": null, \"tie_word_embeddings\": false"
'

test_expect_success 'mistral: the sliding window on every layer' '
	check mis "\"model_type\": \"mistral\", \"sliding_window\": 6, \"head_dim\": 8"
'

test_expect_success 'keys left out read as transformers reads them: Qwen3 head_dim 128, Mistral window 4096' '
	check q3d "\"model_type\": \"qwen3\"" any &&
	cmf-patch info q3d.cmf >info && test_grep "^head_dim: 128" info &&
	check misd "\"model_type\": \"mistral\"" any &&
	cmf-patch info misd.cmf >info && test_grep "^sliding_window: 4096 from layer 0" info &&
	mkdir q3h &&
	"$NVG_PY" "$REF" make q3h "{$geo, \"model_type\": \"qwen3\", \"head_dim\": 8}" 7 &&
	"$NVG_PY" -c "import json; p = \"q3h/config.json\"; c = json.load(open(p)); del c[\"head_dim\"]; json.dump(c, open(p, \"w\"))" &&
	test_expect_code 1 cmf-patch import -o q3h.cmf q3h/model.safetensors 2>err &&
	test_grep "q_proj.weight. has shape 32x32, the arch says 512x32" err
'

test_expect_success 'cmf-patch info names the features' '
	cmf-patch info q3.cmf >info &&
	test_grep "^qk_norm: yes" info &&
	cmf-patch info bias.cmf >info &&
	test_grep "^biases: q k v o gate up down" info &&
	cmf-patch info yarn.cmf >info &&
	test_grep "^rope_scaling: yarn factor 4" info &&
	cmf-patch info q2w.cmf >info &&
	test_grep "^sliding_window: 6 from layer 1" info
'

test_expect_success 'export writes the features into config.json, and import of it is the same model' '
	for m in l3 yarn bias gelut q2w q3 mis; do
		mkdir ex.$m &&
		cmf-patch export -o ex.$m/model.safetensors $m.cmf &&
		cmf-patch import -o back.$m.cmf ex.$m/model.safetensors &&
		cmf-eval -q -m back.$m.cmf --tokens ids.u32 --window 48 >back.$m.eval &&
		test "$(nll $m.eval)" = "$(nll back.$m.eval)" &&
		"$NVG_PY" "$REF" nll ex.$m ids.u32 48 >ex.$m.ref &&
		near "$(nll ex.$m.ref)" "$(nll $m.ref)" 1e-9 || return 1
	done &&
	test_grep "\"gelu_pytorch_tanh\"" ex.gelut/config.json &&
	test_grep "Qwen3ForCausalLM" ex.q3/config.json &&
	test_grep "MistralForCausalLM" ex.mis/config.json
'

# rp is left out: transformers 4.57 predates rope_parameters (transformers 5's)
test_expect_success 'transformers reads each export as it reads the source (tests/ref/hfsame.py)' '
	for m in l3 l31 lin yarn bias gelu gelut q2w q3 mis q3d misd; do
		test -d ex.$m || { mkdir ex.$m && cmf-patch export -o ex.$m/model.safetensors $m.cmf; } &&
		"$NVG_PY" "$TEST_DIR/ref/hfsame.py" $m ex.$m || return 1
	done &&
	mkdir other &&
	"$NVG_PY" -c "import json; c = json.load(open(\"ex.mis/config.json\")); c[\"sliding_window\"] = 7; json.dump(c, open(\"other/config.json\", \"w\"))" &&
	test_must_fail "$NVG_PY" "$TEST_DIR/ref/hfsame.py" mis other 2>err &&
	test_grep "windows" err
'

test_done
