#!/bin/bash
# config.json: every key that changes the forward is honoured or refused by
# name at import, never ignored (cmf-patch(1), "config.json keys").  The
# model is stories260K exported to a Hugging Face directory, its config
# edited one key at a time.
. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin

# edit.py DIR KEY JSON-VALUE: a copy of hf/ as DIR with config.json's KEY set
# (the value null removes the key when the third argument is "-")
cat >edit.py <<'PY'
import json, shutil, sys
d, key, val = sys.argv[1:4]
shutil.copytree("hf", d)
c = json.load(open(d + "/config.json"))
if val == "-":
    c.pop(key, None)
else:
    c[key] = json.loads(val)
json.dump(c, open(d + "/config.json", "w"))
PY

# refused DIR KEY: the import fails in one line naming the key, nothing written
refused() {
	test_expect_code 1 cmf-patch import -o "$1.cmf" "$1/model.safetensors" 2>err &&
	test_one_line_error err &&
	test_grep "key '$2'" err &&
	test_path_is_missing "$1.cmf"
}

test_expect_success 'setup: stories260K as a Hugging Face directory' '
	cmf-patch import --from llama2c --vocab "$NVG_DATA/tok512.bin" -o s.cmf "$NVG_DATA/stories260K.bin" &&
	mkdir hf &&
	cmf-patch export -o hf/model.safetensors s.cmf &&
	cmf-patch import -o back.cmf hf/model.safetensors
'

test_expect_success 'keys of no effect on the forward are accepted (SmolLM2 and Qwen2 configs carry them)' '
	"$NVG_PY" - <<-\EOF &&
	import json, shutil
	shutil.copytree("hf", "inert")
	c = json.load(open("inert/config.json"))
	c.update({"attention_dropout": 0.0, "initializer_range": 0.02, "pretraining_tp": 1,
	          "use_cache": True, "transformers_version": "4.42.3", "pad_token_id": 2,
	          "is_llama_config": True, "rope_interleaved": False, "rope_scaling": None,
	          "mlp_bias": False, "attention_bias": False, "hidden_act": "silu", "layer_types": None,
	          "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 21,
	          "transformers.js_config": {"kv_cache_dtype": {"q4f16": "float16"}}})
	json.dump(c, open("inert/config.json", "w"))
	EOF
	cmf-patch import -o inert.cmf inert/model.safetensors
'

test_expect_success 'rope_scaling: a type, a key or a missing number the forward does not implement is refused' '
	for t in dynamic longrope ntk frobnicate; do
		"$NVG_PY" edit.py rs.$t rope_scaling "{\"rope_type\": \"$t\", \"factor\": 8.0}" &&
		refused rs.$t rope_scaling || return 1
	done &&
	test_grep "implements the RoPE types default, linear, llama3 and yarn" err &&
	"$NVG_PY" edit.py rs.ms rope_scaling "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"mscale\": 0.7}" &&
	refused rs.ms rope_scaling.mscale &&
	"$NVG_PY" edit.py rs.l3 rope_scaling "{\"rope_type\": \"llama3\", \"factor\": 8.0}" &&
	refused rs.l3 low_freq_factor &&
	"$NVG_PY" edit.py rs.neg rope_scaling "{\"type\": \"linear\", \"factor\": -2}" &&
	refused rs.neg factor
'

test_expect_success 'hidden_act relu, use_sliding_window on llama, interleaved RoPE: refused' '
	"$NVG_PY" edit.py act hidden_act "\"relu\"" && refused act hidden_act &&
	test_grep "implements silu, gelu and gelu_pytorch_tanh" err &&
	"$NVG_PY" edit.py sw use_sliding_window true && refused sw use_sliding_window &&
	"$NVG_PY" edit.py ri rope_interleaved true && refused ri rope_interleaved
'

test_expect_success 'biases the config promises and the files lack: refused, naming the tensor' '
	"$NVG_PY" edit.py mb mlp_bias true &&
	test_expect_code 1 cmf-patch import -o mb.cmf mb/model.safetensors 2>err &&
	test_one_line_error err &&
	test_grep "no tensor .model.layers.0.mlp.gate_proj.bias.: the arch .llama. has it" err &&
	test_path_is_missing mb.cmf &&
	"$NVG_PY" edit.py ab attention_bias true &&
	test_expect_code 1 cmf-patch import -o ab.cmf ab/model.safetensors 2>err &&
	test_grep "no tensor .model.layers.0.self_attn.q_proj.bias." err &&
	test_path_is_missing ab.cmf
'

test_expect_success 'a tensor no part of the forward reads is refused; old RoPE buffers are dropped' '
	"$NVG_PY" - <<-\EOF &&
	import numpy as np, shutil
	from safetensors.numpy import load_file, save_file
	for d, extra in (("xt", "model.layers.0.self_attn.frob.weight"),
	                 ("inv", "model.layers.0.self_attn.rotary_emb.inv_freq")):
	    shutil.copytree("hf", d)
	    t = load_file(d + "/model.safetensors")
	    t[extra] = np.ones(4, np.float32)
	    save_file(t, d + "/model.safetensors")
	EOF
	test_expect_code 1 cmf-patch import -o xt.cmf xt/model.safetensors 2>err &&
	test_one_line_error err &&
	test_grep "tensor .model.layers.0.self_attn.frob.weight. is not read by the forward" err &&
	test_path_is_missing xt.cmf &&
	cmf-patch import -o inv.cmf inv/model.safetensors &&
	cmf-patch list inv.cmf >inv.list &&
	! grep -q inv_freq inv.list
'

test_expect_success 'a model_type the forward does not run is refused at import; qwen3 wants its norms' '
	for t in gemma phi3 llama4; do
		"$NVG_PY" edit.py mt.$t model_type "\"$t\"" && refused mt.$t model_type || return 1
	done &&
	test_grep "runs llama, qwen2, qwen3 and mistral" err &&
	"$NVG_PY" edit.py mt.q3 model_type "\"qwen3\"" &&
	test_expect_code 1 cmf-patch import -o mt.q3.cmf mt.q3/model.safetensors 2>err &&
	test_grep "no tensor .model.layers.0.self_attn.q_norm.weight." err
'

test_expect_success 'a deliberately unknown key is refused by name' '
	"$NVG_PY" edit.py unk frobnicate_heads 3 &&
	refused unk frobnicate_heads &&
	test_grep "unknown key .frobnicate_heads." err
'

test_expect_success 'transformers 5 rope_parameters: read with its theta; with rope_scaling too, refused' '
	"$NVG_PY" - <<-\EOF &&
	import json, shutil
	for d, p in (("rp", {"rope_type": "default", "rope_theta": 500000.0}),
	             ("rpy", {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}),
	             ("rpx", {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0})):
	    shutil.copytree("hf", d)
	    c = json.load(open(d + "/config.json"))
	    c.pop("rope_theta")
	    c["rope_parameters"] = p
	    json.dump(c, open(d + "/config.json", "w"))
	shutil.copytree("rpy", "both")
	c = json.load(open("both/config.json"))
	c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
	json.dump(c, open("both/config.json", "w"))
	EOF
	cmf-patch import -o rp.cmf rp/model.safetensors &&
	cmf-patch info rp.cmf >info &&
	test_grep "^rope_theta: 500000$" info &&
	cmf-patch import -o rpy.cmf rpy/model.safetensors &&
	cmf-patch info rpy.cmf >info &&
	test_grep "^rope_scaling: yarn factor 4$" info &&
	refused rpx rope_parameters &&
	test_expect_code 1 cmf-patch import -o both.cmf both/model.safetensors 2>err &&
	test_grep "both .rope_scaling. and .rope_parameters. are set" err
'

test_expect_success 'tie_word_embeddings false without lm_head.weight is refused, not tied' '
	"$NVG_PY" edit.py untied tie_word_embeddings false &&
	test_expect_code 1 cmf-patch import -o untied.cmf untied/model.safetensors 2>err &&
	test_grep "tie_word_embeddings false, and there is no lm_head.weight" err &&
	test_path_is_missing untied.cmf
'

# the tensors config.json promises: the embeddings, the final norm and every
# tensor of each of its num_hidden_layers layers
test_expect_success 'a tensor config.json promises but the file lacks is refused by name' '
	for t in model.layers.4.mlp.down_proj.weight model.norm.weight; do
		rm -rf miss && mkdir miss && cp hf/config.json miss/ &&
		"$NVG_PY" -c "
import sys
from safetensors.numpy import load_file, save_file
t = load_file(\"hf/model.safetensors\")
del t[sys.argv[1]]
save_file(t, \"miss/model.safetensors\")" $t &&
		test_expect_code 1 cmf-patch import -o miss.cmf miss/model.safetensors 2>err &&
		test_one_line_error err &&
		test_grep "no tensor .$t.: the arch .llama. has it" err &&
		test_path_is_missing miss.cmf || return 1
	done
'

test_done
