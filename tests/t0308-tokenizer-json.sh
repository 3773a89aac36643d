#!/bin/bash
# Hugging Face tokenizer.json at import (cmf-patch(1), "TOKENIZER.JSON"):
# byte-level BPE (GPT-2's pattern; SmolLM2's digits one by one; Llama 3's
# and Qwen2's split patterns, Qwen2's after NFC) and sentencepiece-style BPE with byte
# fallback (tok512 written as Llama 2's tokenizer.json is), each trained or
# written by the tokenizers library (tests/hftok.py) and giving its ids on
# held-out TinyStories, on training text with <|endoftext|> in it and on a
# torture text; --text, TEXT= and --generate on the import; the hint for a
# model without a tokenizer; bad tokenizer files refused in one line with
# nothing written.
. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin tinystories-sample.txt tinystories-train-sample.txt

HFTOK=$NVG_TOP/tests/hftok.py

test_expect_success 'setup: stories260K as a Hugging Face directory; the texts' '
	cmf-patch import --from llama2c --vocab "$NVG_DATA/tok512.bin" -o s.cmf "$NVG_DATA/stories260K.bin" &&
	mkdir hf &&
	cmf-patch export -o hf/model.safetensors s.cmf &&
	head -c 200000 "$NVG_DATA/tinystories-sample.txt" >held.txt &&
	head -c 100000 "$NVG_DATA/tinystories-train-sample.txt" >train.txt &&
	test_grep "^<\|endoftext\|>$" train.txt &&
	"$NVG_PY" "$HFTOK" torture torture.txt
'

# same_ids DIR [TEXT...]: the model beside DIR/tokenizer.json imports, and its
# ids are the library's on each TEXT.txt (held, train and torture by default)
same_ids() {
	d=$1 &&
	shift &&
	cp hf/model.safetensors hf/config.json "$d"/ &&
	cmf-patch import -o "$d.cmf" "$d" &&
	for t in ${@:-held train torture}; do
		cmf-eval -m "$d.cmf" --text $t.txt --tokenize "$d.$t.u32" &&
		"$NVG_PY" "$HFTOK" encode "$d" $t.txt "$d.$t.want" &&
		cmp "$d.$t.u32" "$d.$t.want" || return 1
	done
}

test_expect_success 'byte-level BPE with digits one by one (SmolLM2 style): the library'"'"'s ids' '
	"$NVG_PY" "$HFTOK" bytelevel bl "$NVG_DATA/tinystories-train-sample.txt" 512 digits &&
	same_ids bl &&
	cmf-patch info bl.cmf >info &&
	test_grep "^tokenizer: gpt2, 512 tokens, [0-9]+ merges$" info &&
	test $(stat -c %s bl.held.u32) -gt 100000
'

test_expect_success 'byte-level BPE, GPT-2 pattern, a template adding <|im_start|> and <|im_end|>' '
	"$NVG_PY" "$HFTOK" bytelevel bt "$NVG_DATA/tinystories-train-sample.txt" 512 template &&
	same_ids bt &&
	test $(od -An -tu4 -N4 bt.held.u32) -eq 1 &&
	test $(od -An -tu4 -j $(($(stat -c %s bt.held.u32) - 4)) bt.held.u32) -eq 2
'

test_expect_success 'byte-level BPE after a Split by Llama 3'"'"'s pattern, ignore_merges: the library'"'"'s ids' '
	"$NVG_PY" "$HFTOK" bytelevel l3 "$NVG_DATA/tinystories-train-sample.txt" 512 llama3 &&
	same_ids l3 &&
	test $(od -An -tu4 -N4 l3.held.u32) -eq 1 &&
	od -An -tu4 -v -w4 l3.torture.u32 >ids &&
	test_grep "^ +510$" ids
'

# NFC as the library does it, on every canonically decomposable code point
# (as it is and decomposed) and marks of mixed classes in random orders
test_expect_success 'NFC, then a Split by Qwen2'"'"'s pattern: the library'"'"'s ids' '
	"$NVG_PY" "$HFTOK" bytelevel q2 "$NVG_DATA/tinystories-train-sample.txt" 512 qwen2 &&
	"$NVG_PY" "$HFTOK" nfctext nfc.txt &&
	same_ids q2 held train torture nfc &&
	"$NVG_PY" -c "import sys, unicodedata as u
t = open(sys.argv[1], encoding=\"utf-8\").read()
sys.exit(u.normalize(\"NFC\", t) == t)" nfc.txt
'

test_expect_success 'sentencepiece-style BPE with byte fallback (tok512 as Llama 2'"'"'s tokenizer.json)' '
	"$NVG_PY" "$HFTOK" llama2c sp "$NVG_DATA/tok512.bin" &&
	same_ids sp &&
	cmf-patch info sp.cmf >info &&
	test_grep "^tokenizer: llama, 512 tokens$" info
'

test_expect_success 'sentencepiece-style BPE by a Metaspace pre-tokenizer, prepend_scheme first and always' '
	printf "</s> a</s>b <s>  x\n</s>" >added.txt &&
	"$NVG_PY" "$HFTOK" llama2c mf "$NVG_DATA/tok512.bin" first &&
	same_ids mf held train torture added &&
	"$NVG_PY" "$HFTOK" llama2c ma "$NVG_DATA/tok512.bin" always &&
	same_ids ma held train torture added &&
	test_must_fail cmp -s mf.added.u32 ma.added.u32
'

test_expect_success 'held-out text: the ids and perplexity of the import equal the llama2.c import' '
	cmf-eval -m s.cmf --text held.txt --tokenize s.held.u32 &&
	cmp s.held.u32 sp.held.u32 &&
	cmf-eval -q -m s.cmf --text held.txt --limit 2048 --window 256 >l2c.out &&
	cmf-eval -q -m sp.cmf --text held.txt --limit 2048 --window 256 >hf.out &&
	grep -E "^(predicted|nll|ppl) " l2c.out >want &&
	grep -E "^(predicted|nll|ppl) " hf.out >got &&
	test_cmp want got
'

test_expect_success '--generate on the import continues a prompt as the llama2.c import does' '
	printf "Once upon a time" >prompt.txt &&
	cmf-eval -m s.cmf --text prompt.txt --generate 40 >want &&
	cmf-eval -m sp.cmf --text prompt.txt --generate 40 >got &&
	test_cmp want got &&
	test_grep "^Once upon a time, there was a little girl named Lily" got
'

# convert.mk of the one-layer model, small calibration settings
conv1() {
	make -s -f "$NVG_TOP/pipelines/convert.mk" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 \
		E2E_FIT_TOKENS=1024 MODEL=bl1.cmf BPW=2.5 -j2 "$@"
}

test_expect_success 'TEXT= of convert.mk on the import converts as the library'"'"'s ids do' '
	cmf-patch truncate --layers 1 -o bl1.cmf bl.cmf &&
	conv1 TEXT=train.txt OUT=ctext 2>err &&
	conv1 TOKENS=bl.train.want OUT=cids 2>err &&
	for f in ctext/L0/*.gram ctext/L0/*.blr; do
		cmp "$f" "cids/L0/${f##*/}" || return 1
	done &&
	test_cmp cids/model.cmf.blr.txt ctext/model.cmf.blr.txt
'

test_expect_success 'a model without a tokenizer: --text fails with a hint' '
	cmf-patch import -o bare.cmf hf &&
	cmf-patch info bare.cmf >info &&
	test_grep "^tokenizer: none$" info &&
	test_expect_code 1 cmf-eval -m bare.cmf --text held.txt --tokenize x.u32 2>err &&
	test_one_line_error err &&
	test_grep "tokenizer.json" err &&
	test_grep "\-\-tokens" err &&
	test_path_is_missing x.u32
'

# edit.py SRC DST STATEMENT: a copy of SRC as DST, STATEMENT run on its
# tokenizer.json as t (on its tokenizer_config.json when it starts with "c:")
cat >edit.py <<'PY'
import json, shutil, sys
src, dst, stmt = sys.argv[1:4]
shutil.copytree(src, dst)
name = "tokenizer_config.json" if stmt.startswith("c:") else "tokenizer.json"
p = dst + "/" + name
t = json.load(open(p))
exec(stmt[2:] if stmt.startswith("c:") else stmt)
json.dump(t, open(p, "w"))
PY

# pieces of bytes 0x01 and 0x02 (in the torture text) given other names, their merges gone
NOBYTES='m = t["model"]; v = m["vocab"]
for c in "\u0101", "\u0102":
    v["x" + c] = v.pop(c)
    m["merges"] = [x for x in m["merges"] if c not in x[0] + x[1]]'
UNK='m["unk_token"] = "<|endoftext|>"'

test_expect_success 'byte-level: bytes without a piece are dropped, or unk (fused), as by the library' '
	"$NVG_PY" edit.py bl drop "$NOBYTES" &&
	"$NVG_PY" edit.py bl unk "$NOBYTES; $UNK" &&
	"$NVG_PY" edit.py bl fuse "$NOBYTES; $UNK; m[\"fuse_unk\"] = True" &&
	for d in drop unk fuse; do
		cmf-patch import -o $d.cmf $d &&
		cmf-eval -m $d.cmf --text torture.txt --tokenize $d.u32 &&
		"$NVG_PY" "$HFTOK" encode $d torture.txt $d.want &&
		cmp $d.u32 $d.want || return 1
	done &&
	test $(stat -c %s drop.u32) -lt $(stat -c %s fuse.u32) &&
	test $(stat -c %s fuse.u32) -lt $(stat -c %s unk.u32)
'

# the bad files, one a line: category|source|copy|edit.py's statement|what the error says
cat >cases <<'CASES'
type|sp|notobj|t = [t]|not a JSON object
type|sp|vlist|t["model"]["vocab"] = []|model.vocab is missing or not an object
type|sp|vstr|t["model"]["vocab"]["a"] = "x"|model.vocab\[.a.\] = "x" is not a token id
type|sp|mint|t["model"]["merges"][3] = 7|model.merges\[3\] is not
type|sp|acont|t["added_tokens"][0]["content"] = 5|added_tokens\[0\]: .content. is missing or not a string
type|sp|ctype|c:t["eos_token"] = 3|tokenizer_config.json.: eos_token is not a string
id|sp|dupid|t["model"]["vocab"]["zz"] = 300|model.vocab: id 300 is
id|sp|far|t["model"]["vocab"]["zz"] = 99999|model.vocab\[.zz.\] = 99999 is not a token id below [0-9]+
id|sp|neg|t["model"]["vocab"]["zz"] = -3|= -3 is not a token id
id|sp|frac|t["model"]["vocab"]["zz"] = 1.5|= 1.5 is not a token id
id|sp|hole|del t["model"]["vocab"]["e"]|= 511 is not a token id below 511
id|sp|aid|t["added_tokens"][1]["id"] = 7|added_tokens\[1\]: .<s>. has id 7, but the tokenizers library gives it 1
id|bl|anew|t["added_tokens"][-1]["id"] = 600|added_tokens\[3\]: .once upon. has id 600, but the tokenizers library gives it 511
id|sp|atwice|t["added_tokens"].append(dict(t["added_tokens"][1]))|added_tokens\[3\]: id 1 is there twice
id|sp|many|t["model"]["vocab"]["zz"] = 512|has 513 tokens, more than the model.s vocab_size 512
id|sp|cbos|c:t["bos_token"] = "<bos>"|tokenizer_config.json.: bos_token .<bos>. is not a token
merge|sp|munk|t["model"]["merges"].append(["zzz", "q"])|model.merges\[[0-9]+\]: .zzz. is not in the vocabulary
merge|sp|mcat|t["model"]["merges"].append(["<0x41>", "<0x42>"])|model.merges\[[0-9]+\]: .<0x41><0x42>. is not in the vocabulary
merge|sp|mtwice|t["model"]["merges"].append(t["model"]["merges"][0])|model.merges\[[0-9]+\]: .* is there twice
merge|bl|mstr|t["model"]["merges"][0] = "a b c"|model.merges\[0\] is not
merge|sp|nobyte|v = t["model"]["vocab"]; v["zz"] = v.pop("<0x7F>")|model.vocab has no piece for byte 0x7F
refuse|sp|uni|t["model"]["type"] = "Unigram"|model.type .Unigram. is not implemented
refuse|sp|nfkc|t["normalizer"] = {"type": "NFKC"}|normalizer .NFKC. is not implemented
refuse|sp|meta|t["normalizer"] = None; t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}|Metaspace: only replacement U.2581 with split false
refuse|mf|meta2|t["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}|Metaspace after a Replace or Prepend normalizer
refuse|sp|whsp|t["pre_tokenizer"] = {"type": "WhitespaceSplit"}|pre_tokenizer .WhitespaceSplit. is not implemented
refuse|bl|split|t["pre_tokenizer"]["pretokenizers"][0] = {"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Isolated", "invert": False}|pre_tokenizer .Split. of the pattern .x. is not implemented
refuse|l3|splitb|t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"|only behavior Isolated, invert false
refuse|l3|splitre|t["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = True|use_regex true after a Split is not implemented
refuse|bl|nosplit|t["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = False|use_regex false without a Split
refuse|bl|aps|t["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True|add_prefix_space true is not implemented
refuse|sp|ign|t["model"]["ignore_merges"] = True|ignore_merges true is not implemented for sentencepiece
refuse|sp|dropout|t["model"]["dropout"] = 0.1|model.dropout is not null
refuse|sp|lstrip|t["added_tokens"][1]["lstrip"] = True|added_tokens\[1\]: lstrip true is not implemented
refuse|sp|rob|t["post_processor"] = {"type": "RobertaProcessing"}|post_processor .RobertaProcessing. is not implemented
refuse|sp|trunc2|t["truncation"] = {"max_length": 8}|truncation or padding is not null
refuse|sp|nobf|t["model"]["byte_fallback"] = False|byte_fallback false is not implemented
refuse|sp|top|t["frobnicate"] = 1|unknown key .frobnicate.
CASES

# refused DIR PATTERN: the import fails in one line matching PATTERN, nothing written
refused() {
	test_expect_code 1 cmf-patch import -o "$1.cmf" "$1" 2>err &&
	test_one_line_error err &&
	test_grep "$2" err &&
	test_path_is_missing "$1.cmf" &&
	test_no_tmp_files
}

# refused_cases CATEGORY: each case of the category is refused
refused_cases() {
	grep "^$1|" cases >this &&
	while IFS="|" read -r cat src dir stmt pat; do
		"$NVG_PY" edit.py "$src" "$dir" "$stmt" &&
		refused "$dir" "$pat" || { echo "case '$dir' ($cat) failed" >&2; return 1; }
	done <this
}

test_expect_success 'truncated JSON and the wrong types are refused, naming the field' '
	cp -r sp trunc && head -c 5000 sp/tokenizer.json >trunc/tokenizer.json &&
	refused trunc "tokenizer.json. is not valid JSON \(at byte [0-9]+ of 5000\)" &&
	refused_cases type
'

test_expect_success 'duplicate ids, holes, out-of-range ids, bos naming no token: refused' '
	refused_cases id
'

test_expect_success 'merges of unknown pieces, or whose concatenation is none, or twice: refused' '
	refused_cases merge
'

test_expect_success 'what the import does not implement is refused by name' '
	refused_cases refuse &&
	test $(grep -c "" cases) -eq 38
'

test_done
