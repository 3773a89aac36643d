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
	          "mlp_bias": False, "attention_bias": False, "hidden_act": "silu",
	          "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 21,
	          "transformers.js_config": {"kv_cache_dtype": {"q4f16": "float16"}}})
	json.dump(c, open("inert/config.json", "w"))
	EOF
	cmf-patch import -o inert.cmf inert/model.safetensors
'

test_expect_success 'rope_scaling of every type is refused (llama3, linear, yarn, dynamic)' '
	for t in llama3 linear yarn dynamic; do
		"$NVG_PY" edit.py rs.$t rope_scaling "{\"rope_type\": \"$t\", \"factor\": 8.0}" &&
		refused rs.$t rope_scaling || return 1
	done &&
	test_grep "RoPE scaling is not implemented" err
'

test_expect_success 'hidden_act other than silu, mlp_bias, llama attention_bias, sliding windows, interleaved RoPE: refused' '
	"$NVG_PY" edit.py act hidden_act "\"gelu\"" && refused act hidden_act &&
	test_grep "only silu" err &&
	"$NVG_PY" edit.py mb mlp_bias true && refused mb mlp_bias &&
	"$NVG_PY" edit.py ab attention_bias true && refused ab attention_bias &&
	"$NVG_PY" edit.py sw use_sliding_window true && refused sw use_sliding_window &&
	"$NVG_PY" edit.py ri rope_interleaved true && refused ri rope_interleaved
'

test_expect_success 'a model_type the forward does not run is refused at import' '
	for t in qwen3 mistral gemma; do
		"$NVG_PY" edit.py mt.$t model_type "\"$t\"" && refused mt.$t model_type || return 1
	done &&
	test_grep "runs llama and qwen2" err
'

test_expect_success 'a deliberately unknown key is refused by name' '
	"$NVG_PY" edit.py unk frobnicate_heads 3 &&
	refused unk frobnicate_heads &&
	test_grep "unknown key .frobnicate_heads." err
'

test_expect_success 'transformers 5 rope_parameters: the default type read, others refused' '
	"$NVG_PY" - <<-\EOF &&
	import json, shutil
	for d, p in (("rp", {"rope_type": "default", "rope_theta": 500000.0}),
	             ("rpy", {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0})):
	    shutil.copytree("hf", d)
	    c = json.load(open(d + "/config.json"))
	    c.pop("rope_theta")
	    c["rope_parameters"] = p
	    json.dump(c, open(d + "/config.json", "w"))
	EOF
	cmf-patch import -o rp.cmf rp/model.safetensors &&
	cmf-patch info rp.cmf >info &&
	test_grep "^rope_theta: 500000$" info &&
	refused rpy rope_parameters
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
		test_grep "config.json promises 5 layers, and tensor .$t. is missing" err &&
		test_path_is_missing miss.cmf || return 1
	done
'

test_done
