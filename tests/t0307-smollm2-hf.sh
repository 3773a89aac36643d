#!/bin/bash
# SmolLM2-135M from a Hugging Face directory: the GGUF import exported to
# safetensors and config.json, with the tokenizer.json that the tokenizers
# library writes from the GGUF's vocabulary and merges (tests/hftok.py).
# Imported again, it gives the GGUF import's token ids and perplexity, and
# the library's ids on a torture text.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-smollm2.sh"
test_require_data tinystories-sample.txt

HFTOK=$NVG_TOP/tests/hftok.py

test_expect_success 'setup: the GGUF import as a Hugging Face directory with its tokenizer.json' '
	smollm2_gguf &&
	cmf-patch import --dtype f16 -o gguf.cmf "$GGUF" &&
	mkdir hf &&
	cmf-patch export --dtype f16 -o hf/model.safetensors gguf.cmf &&
	"$NVG_PY" "$HFTOK" fromcmf hf gguf.cmf &&
	cmf-patch import -o hf.cmf hf &&
	cmf-patch info hf.cmf >info &&
	test_grep "^tokenizer: gpt2, 49152 tokens, 48900 merges$" info &&
	test_grep "^bos: 1$" info &&
	cmf-patch list gguf.cmf >want &&
	cmf-patch list hf.cmf >got &&
	test_cmp want got
'

test_expect_success 'held-out text: the ids of the GGUF import and of the tokenizers library' '
	head -c 40000 "$NVG_DATA/tinystories-sample.txt" >t.txt &&
	cmf-eval -m gguf.cmf --text t.txt --tokenize gguf.u32 &&
	cmf-eval -m hf.cmf --text t.txt --tokenize hf.u32 &&
	"$NVG_PY" "$HFTOK" encode hf t.txt lib.u32 &&
	test $(stat -c %s hf.u32) -gt 30000 &&
	cmp gguf.u32 hf.u32 &&
	cmp lib.u32 hf.u32
'

# the GGUF import reads <|im_start|> in a text as text, the Hugging Face one as the token
test_expect_success 'torture text: the library'"'"'s ids; without added tokens in it, the GGUF import'"'"'s' '
	"$NVG_PY" "$HFTOK" torture tt.txt &&
	cmf-eval -m hf.cmf --text tt.txt --tokenize hf.tt.u32 &&
	"$NVG_PY" "$HFTOK" encode hf tt.txt lib.tt.u32 &&
	cmp lib.tt.u32 hf.tt.u32 &&
	grep -v "<|" tt.txt >plain.txt &&
	cmf-eval -m gguf.cmf --text plain.txt --tokenize gguf.plain.u32 &&
	cmf-eval -m hf.cmf --text plain.txt --tokenize hf.plain.u32 &&
	cmp gguf.plain.u32 hf.plain.u32
'

test_expect_success 'perplexity over two 512-token windows equals the GGUF import'"'"'s' '
	cmf-eval -q -m gguf.cmf --text t.txt --limit 1024 --window 512 >gguf.out &&
	cmf-eval -q -m hf.cmf --text t.txt --limit 1024 --window 512 >hf.out &&
	grep -E "^(predicted|nll|ppl) " gguf.out >want &&
	grep -E "^(predicted|nll|ppl) " hf.out >got &&
	test_cmp want got &&
	cat got
'

test_done
