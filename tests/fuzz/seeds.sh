#!/bin/bash
# seeds.sh DIR: seed corpora for the fuzz targets of tests/fuzz/README from
# the real data ($NVG_DATA) and the project's own tools ($NVG_BIN): DIR/T/
# for each target T.  Run by `make fuzz` (build-fuzz/corpus/.ok).
set -e
C=$1
D=$NVG_DATA
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export PATH="$NVG_BIN:$PATH"

# llama2.c: the stories260K checkpoint and its tokenizer; token ids and text
cat "$D/stories260K.bin" >"$C/llama2c/stories260K"
cat "$D/tok512.bin" >"$C/tok512/tok512"
cmf-patch import --vocab "$D/tok512.bin" -o "$T/s.cmf" "$D/stories260K.bin"
head -c 2000 "$D/tinystories-sample.txt" >"$T/t.txt"
cmf-eval -m "$T/s.cmf" --text "$T/t.txt" --tokenize "$T/all.u32"
head -c 160 "$T/all.u32" >"$C/ids/a"
for k in 0 1 2; do
	{ printf "\\$k"; head -c 600 "$T/t.txt"; } >"$C/text/$k"
done

# a state after layer 0 of 40 tokens, and the provenance cmf-patch wrote
gram-capture -q -m "$T/s.cmf" --tokens "$C/ids/a" -l 0 --window 20 \
	--fit-tokens 20 --sel-tokens 20 --next-state "$C/state/a"
cmf-patch info "$T/s.cmf" >"$T/info"
{ sed -n 's/^provenance: //p' "$T/info" | tr -d '\n'; printf '\0';
  printf '{"weight_quant":{"method":"nvg","bpw":0.9},"blr":{"plan":"p.plan"}}'; } >"$C/prov/a"
printf '{"weight_quant":{"method":"nvg"}}' >"$C/prov/b"

# a context from the Gram of 100 raw rows of width 8
"$NVG_PY" -c "import numpy as np; np.random.default_rng(1).standard_normal((100, 8)).astype('<f4').tofile('$T/rows.f32')"
cp "$T/rows.f32" "$C/rawf32/rows"
gram-capture -n 8 -o "$T/g" "$T/rows.f32"
hctx-build "$T/g.gram" -o "$C/hctx/a"

# curves of 2 layers x 2 tensors, and plan-alloc's plans of them
for l in 0 1; do for t in q down; do for b in 0.25 0.5 1 2; do
	echo "model.layers.$l.$t.weight $l $((100 * (l + 1))) $b $(awk -v b=$b -v l=$l 'BEGIN { print (1 + l) * exp(-b) }')"
done; done; done >"$C/curves/a"
plan-alloc -q --bpw 0.8 -o "$C/plan/a" "$C/curves/a"
plan-alloc -q --bpw 12 --granularity layer --keep 1 -o "$C/plan/b" "$C/curves/a"
printf 'keep layer 3\nkeep tensor lm_head.weight\nlayer 0 0.5\ntensor model.layers.1.mlp.down_proj.weight 1.25 # more\n2 0.75\n' >"$C/plan/c"

# a Hugging Face model directory: config.json, a NUL, model.safetensors
cfg='{"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}'
mkdir "$T/hf"
"$NVG_PY" "$NVG_TOP/tests/ref/hfmodel.py" make "$T/hf" "$cfg" 1
{ cat "$T/hf/config.json"; printf '\0'; cat "$T/hf/model.safetensors"; } >"$C/safetensors/a"

# Hugging Face tokenizer files, as the tokenizers library writes them (tests/hftok.py):
# tokenizer.json, a NUL, tokenizer_config.json; byte-level BPE of each pre-tokenizer
# kind and tok512 as Llama 2's sentencepiece-style tokenizer.json
head -c 20000 "$D/tinystories-train-sample.txt" >"$T/train.txt"
for k in digits template llama3 qwen2; do
	"$NVG_PY" "$NVG_TOP/tests/hftok.py" bytelevel "$T/tok-$k" "$T/train.txt" 300 $k
	{ cat "$T/tok-$k/tokenizer.json"; printf '\0'; cat "$T/tok-$k/tokenizer_config.json"; } \
		>"$C/hftok/$k"
done
"$NVG_PY" "$NVG_TOP/tests/hftok.py" llama2c "$T/tok-sp" "$D/tok512.bin" first
{ cat "$T/tok-sp/tokenizer.json"; printf '\0'; cat "$T/tok-sp/tokenizer_config.json"; } >"$C/hftok/sp"
