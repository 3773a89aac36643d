#!/bin/bash
# gram-capture on stories260K: states and Grams against the numpy port of
# run.c, the state chain against a run from the embeddings, patches against
# the same payload applied to the model, filter and merge modes

. "$(dirname "$0")/test-lib.sh"
test_require_data stories260K.bin tok512.bin tinystories-sample.txt

REF="$NVG_TOP/tests/ref/llama2c.py"
D="$NVG_DATA"
Q="model.layers.1.self_attn.q_proj.weight"

test_expect_success 'setup: the model and 1200 tokens of held-out text' '
	cmf-patch import --vocab "$D/tok512.bin" -o s.cmf "$D/stories260K.bin" &&
	head -c 6000 "$D/tinystories-sample.txt" >t.txt &&
	cmf-eval -m s.cmf --text t.txt --tokenize all.u32 &&
	head -c 4800 all.u32 >tok.u32
'

# rows of 64 hidden states of magnitude ≤ ~5 after two layers of f32 sums;
# summation order is all that differs: 1e-5 absolute
cat >cmp_rows.py <<'PY'
import sys, numpy as np
skip = int(sys.argv[3])
a = np.fromfile(sys.argv[1], "<f4")[skip:]; b = np.fromfile(sys.argv[2], "<f4")
assert a.size == b.size and a.size > 0, (a.size, b.size)
err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
print("max difference", err)
assert err < float(sys.argv[4])
PY

test_expect_success 'S_1 and S_2 equal the numpy hidden states after layers 0 and 1' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 0 --window 128 --next-state S1 &&
	gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 128 --state S1 --next-state S2 &&
	"$NVG_PY" "$REF" hidden "$D/stories260K.bin" tok.u32 128 0 h0.f32 &&
	"$NVG_PY" "$REF" hidden "$D/stories260K.bin" tok.u32 128 1 h1.f32 &&
	"$NVG_PY" cmp_rows.py S1 h0.f32 14 1e-5 &&
	"$NVG_PY" cmp_rows.py S2 h1.f32 14 1e-5 &&
	test $(stat -c %s S2) = $((56 + 4 * 64 * (1200 - 10)))
'

# the Gram of the attention-norm output: f64 sums of f32 products, 1e-6
test_expect_success 'the q Gram of layer 2 equals numpy'"'"'s' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 2 --window 128 --state S2 -o viaS &&
	"$NVG_PY" "$REF" qgram "$D/stories260K.bin" tok.u32 128 2 qg.f32 &&
	"$NVG_PY" cmp_rows.py viaS.q.gram qg.f32 4 1e-6 &&
	od -An -tu8 -j8 -N8 viaS.q.gram >count &&
	test $(cat count) = 1190
'

# the same computations in the same order: the files agree to the bit
test_expect_success 'Grams through --state equal those of a run from the embeddings' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 2 --window 128 -o direct &&
	for lead in q o gate down; do
		cmp viaS.$lead.gram direct.$lead.gram || return 1
	done
'

test_expect_success '--next-state without patches is the plain forward'"'"'s hidden state' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 128 --next-state S2direct &&
	cmp S2 S2direct
'

test_expect_success 'FIT and SEL: eight Grams with their token counts' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 0 --fit-tokens 800 --sel-tokens 300 \
		--window 128 -o split &&
	for lead in q o gate down; do
		test -f split.$lead.fit.gram && test -f split.$lead.sel.gram || return 1
	done &&
	test $(od -An -tu8 -j8 -N8 split.q.fit.gram) = $((800 - 7)) &&
	test $(od -An -tu8 -j8 -N8 split.down.sel.gram) = $((300 - 3)) &&
	test $(stat -c %s split.down.fit.gram) = $((16 + 4 * 172 * 172)) &&
	test_no_tmp_files
'

test_expect_success 'a patch of layer 1 equals the same payload applied to the model' '
	"$NVG_PY" "$NVG_TOP/tests/blr-writer.py" write p.blr 64 64 16 1 7 &&
	gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 128 --state S1 \
		--patch "$Q=p.blr" --next-state S2p -o patched &&
	cmf-patch apply -o applied.cmf s.cmf "$Q=p.blr" &&
	gram-capture -q -m applied.cmf --tokens tok.u32 -l 1 --window 128 --state S1 \
		--next-state S2a -o applied &&
	cmp S2p S2a &&
	cmp patched.o.gram applied.o.gram &&
	! cmp -s S2p S2
'

test_expect_success 'filter mode: the Gram of raw rows equals numpy'"'"'s, split and merged' '
	"$NVG_PY" -c "import numpy as np; np.random.default_rng(3).standard_normal((500, 24)).astype(\"<f4\").tofile(\"rows.f32\")" &&
	gram-capture -n 24 -o all rows.f32 &&
	gram-capture -n 24 --fit-tokens 300 --sel-tokens 200 -o part <rows.f32 &&
	gram-capture --merge -o merged.gram part.fit.gram part.sel.gram &&
	"$NVG_PY" -c "
import numpy as np
x = np.fromfile(\"rows.f32\", \"<f4\").reshape(500, 24).astype(np.float64)
np.float32(x.T @ x / 500).astype(\"<f4\").tofile(\"want.f32\")
f = x[:300]; np.float32(f.T @ f / 300).astype(\"<f4\").tofile(\"wantfit.f32\")" &&
	"$NVG_PY" cmp_rows.py all.gram want.f32 4 1e-6 &&
	"$NVG_PY" cmp_rows.py part.fit.gram wantfit.f32 4 1e-6 &&
	"$NVG_PY" cmp_rows.py merged.gram want.f32 4 1e-6 &&
	test $(od -An -tu8 -j8 -N8 merged.gram) = 500
'

test_expect_success 'filter mode -o - writes the one Gram to stdout; --merge without -o too' '
	gram-capture -n 24 -o - rows.f32 >out.gram &&
	cmp all.gram out.gram &&
	test_path_is_missing ./-.gram &&
	gram-capture --merge part.fit.gram part.sel.gram >m.gram &&
	cmp merged.gram m.gram &&
	gram-capture --merge -o - part.fit.gram part.sel.gram >m2.gram &&
	cmp merged.gram m2.gram
'

test_expect_success '-o - with several Grams to write is a usage error' '
	test_expect_code 2 gram-capture -n 24 --fit-tokens 300 --sel-tokens 200 -o - rows.f32 >out 2>err &&
	test_grep "^gram-capture: -o - writes one Gram to standard output: the split writes two$" err &&
	test_expect_code 2 gram-capture -q -m s.cmf --tokens tok.u32 -l 0 -o - >out 2>err &&
	test_grep "model mode writes one a lead" err &&
	test_path_is_missing ./-.gram ./-.q.gram &&
	test ! -s out
'

# the scratch of a window is W² scores: sized by the windows the tokens
# make, --window 2^20 (4 TiB of scores) is one window of all the tokens
test_expect_success 'a window beyond the tokens costs no more than the tokens' '
	gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 1048576 -o big &&
	gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 1200 -o one &&
	for lead in q o gate down; do
		cmp one.$lead.gram big.$lead.gram || return 1
	done &&
	test_expect_code 2 gram-capture -q -m s.cmf --tokens tok.u32 -l 1 --window 1048577 -o no 2>err &&
	test_grep "bad --window" err
'

test_expect_success 'text input gives the Grams of its tokens' '
	head -c 3000 t.txt >short.txt &&
	cmf-eval -m s.cmf --text short.txt --tokenize short.u32 &&
	gram-capture -q -m s.cmf --text short.txt -l 0 --window 64 -o fromtext &&
	gram-capture -q -m s.cmf --tokens short.u32 -l 0 --window 64 -o fromids &&
	cmp fromtext.down.gram fromids.down.gram
'

test_expect_success '-h prints the synopsis of gram-capture(1)' '
	gram-capture -h >usage &&
	test_grep "^gram-capture --merge" usage &&
	gram-capture --version >v && test_grep "^gram-capture \(nvgkit\)" v
'

test_expect_success '-h prints the SYNOPSIS of gram-capture(1)' '
	test_man_synopsis man1/gram-capture.1 >syn &&
	tr -s " \t\n" " " <syn | sed "s/^ //; s/ \$//" >want &&
	gram-capture -h >usage &&
	tr -s " \t\n" " " <usage | sed "s/^ //; s/ \$//" >got &&
	test_cmp want got
'

test_done
