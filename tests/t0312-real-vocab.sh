#!/bin/bash
# Real tokenizers against the ids Hugging Face's tokenizers gave: llama.cpp's
# vocab-only GGUFs of Llama 3 (llama-bpe), Qwen2, GPT-2, Llama 2 (llama-spm)
# and Phi-3 with its 46 test texts each (tests/lib-vocab.sh).  Each
# vocabulary comes into a model by import --vocab from the GGUF, and again
# from the tokenizer.json that the tokenizers library writes from it
# (tests/hftok.py fromcmf, checked first against the same ids); cmf-eval
# --tokenize gives every text's ids after the bos the tokenizer adds.  Bad
# --vocab files are refused in one line with nothing written.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-vocab.sh"
test_require_data tok512.bin

REF=$NVG_TOP/tests/ref/hfmodel.py
HFTOK=$NVG_TOP/tests/hftok.py
CASES=$NVG_TOP/tests/vocabcases.py

test_expect_success 'setup: the vocabularies; a random llama with room for 152064 tokens' '
	vocab_files &&
	mkdir m small &&
	"$NVG_PY" "$REF" make m "{\"model_type\": \"llama\", \"hidden_size\": 8,
		\"intermediate_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,
		\"vocab_size\": 152064, \"tie_word_embeddings\": true}" 3 &&
	"$NVG_PY" "$REF" make small "{\"model_type\": \"llama\", \"hidden_size\": 8,
		\"intermediate_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,
		\"vocab_size\": 32064, \"tie_word_embeddings\": true}" 3
'

# the bos each adds, as its Hugging Face tokenizer does: Llama 3's template
# adds <|begin_of_text|>, Llama 2 and Phi-3 add <s>; Qwen2 and GPT-2 none
prefix() {
	case $1 in llama-bpe) echo 128000 ;; llama-spm | phi-3) echo 1 ;; *) echo - ;; esac
}

for v in $VOCAB_NAMES; do
	test_expect_success "$v: import --vocab of the GGUF; cmf-eval gives the ids of every text" '
		g=$VOCAB_DIR/ggml-vocab-'$v'.gguf &&
		cmf-patch import --vocab "$g" -o '$v'.cmf m &&
		"$NVG_PY" "$CASES" tool "$(command -v cmf-eval)" '$v'.cmf "$g.inp" "$g.out" '$(prefix $v)'
	'

	test_expect_success "$v: its tokenizer.json, by the library and by an import of it" '
		g=$VOCAB_DIR/ggml-vocab-'$v'.gguf &&
		"$NVG_PY" "$HFTOK" fromcmf hf-'$v' '$v'.cmf &&
		"$NVG_PY" "$CASES" lib hf-'$v' "$g.inp" "$g.out" &&
		cp m/config.json m/model.safetensors hf-'$v'/ &&
		cmf-patch import -o hf-'$v'.cmf hf-'$v' &&
		"$NVG_PY" "$CASES" tool "$(command -v cmf-eval)" hf-'$v'.cmf "$g.inp" "$g.out" '$(prefix $v)'
	'
done

test_expect_success 'both imports carry the same vocabulary' '
	for v in $VOCAB_NAMES; do
		cmf-patch info $v.cmf | grep "^tokenizer:" >want &&
		cmf-patch info hf-$v.cmf | grep "^tokenizer:" >got &&
		test_cmp want got || return 1
	done &&
	cmf-patch info llama-bpe.cmf >info &&
	test_grep "^tokenizer: gpt2, 128256 tokens, 280147 merges$" info &&
	test_grep "^bos: 128000$" info
'

test_expect_success '--vocab replaces the tokenizer a source has, and provenance names it' '
	cmf-patch import --vocab "$VOCAB_DIR/ggml-vocab-llama-spm.gguf" -o again.cmf hf-qwen2 &&
	cmf-patch info again.cmf >info &&
	test_grep "^tokenizer: llama, 32000 tokens$" info &&
	test_grep "^bos: 1$" info &&
	test_grep "^provenance: .*\"vocab\":\"ggml-vocab-llama-spm.gguf\"" info &&
	g=$VOCAB_DIR/ggml-vocab-llama-spm.gguf &&
	"$NVG_PY" "$CASES" tool "$(command -v cmf-eval)" again.cmf "$g.inp" "$g.out" 1
'

test_expect_success 'a vocabulary larger than the model is refused, from a GGUF or a tokenizer.json' '
	test_expect_code 1 cmf-patch import --vocab "$VOCAB_DIR/ggml-vocab-llama-bpe.gguf" \
		-o big.cmf small 2>err &&
	test_one_line_error err &&
	test_grep "has 128256 tokens, more than the model.s vocab_size 32064" err &&
	test_expect_code 1 cmf-patch import --vocab hf-qwen2/tokenizer.json -o big.cmf small 2>err &&
	test_one_line_error err &&
	test_grep "has 151936 tokens, more than the model.s vocab_size 32064" err &&
	test_path_is_missing big.cmf
'

test_expect_success 'a GGUF without a tokenizer, a llama2.c tokenizer for another source, a bad tokenizer.json' '
	printf "GGUF\003\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0" >empty.gguf &&
	test_expect_code 1 cmf-patch import --vocab empty.gguf -o bad.cmf m 2>err &&
	test_one_line_error err &&
	test_grep "empty.gguf. has no tokenizer" err &&
	test_expect_code 1 cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o bad.cmf m 2>err &&
	test_one_line_error err &&
	test_grep "is neither a GGUF nor a tokenizer.json" err &&
	echo "{\"model\": {\"type\": \"Unigram\"}}" >bad.json &&
	test_expect_code 1 cmf-patch import --vocab bad.json -o bad.cmf m 2>err &&
	test_one_line_error err &&
	test_grep "bad.json" err &&
	test_path_is_missing bad.cmf &&
	test_no_tmp_files .
'

test_done
