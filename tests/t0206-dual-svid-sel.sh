#!/bin/bash
# nvg-encode --method dual-svid --sel: the SEL Gram only measures the stored
# payload (same bytes without it); the figure is the payload's relative SEL
# error, as nvg reports its own
. "$(dirname "$0")/test-lib.sh"

. "$TEST_DIR/lib-encode.sh"
frob_of() { sed -n "s/.* frob \([0-9.]*\).*/\1/p" "$1"; }
D="--method dual-svid -w w.raw --shape 96x64 --bpw 3"

test_expect_success 'setup: two synthetic 96x64 layers, a narrower one' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	mkdir two g32 && "$NVG_PY" "$REF/synth-layer.py" layer 96 64 2 two &&
	"$NVG_PY" "$REF/synth-layer.py" layer 8 32 3 g32 &&
	"$NVG_PY" "$REF/synth-layer.py" gram nan 64 nan.gram
'

test_expect_success 'with --sel: the same bytes and frob, " sel X" appended' '
	nvg-encode $D -o plain.blr >lp 2>err &&
	test ! -s err &&
	nvg-encode $D --sel sel.gram -o s.blr >ls 2>err &&
	test ! -s err &&
	cmp plain.blr s.blr &&
	test_grep "^P2 r32 frob [0-9.]+ sel [0-9.]+$" ls &&
	test "$(sed "s/ sel [0-9.]*$//" ls)" = "$(cat lp)" &&
	test_no_tmp_files
'

test_expect_success 'the reported SEL error is the payload decoded on the SEL Gram' '
	check s.blr w.raw 96 64 sel.gram >dec &&
	close "$(field herr dec)" "$(sel_of ls)" &&
	close "$(field frob dec)" "$(frob_of ls)" ||
	{ cat ls dec; false; }
'

test_expect_success 'another SEL Gram, another figure; the same bytes' '
	nvg-encode $D --sel fit.gram -o f.blr >lf &&
	cmp plain.blr f.blr &&
	check f.blr w.raw 96 64 fit.gram >decf &&
	close "$(field herr decf)" "$(sel_of lf)" &&
	test "$(sel_of lf)" != "$(sel_of ls)"
'

test_expect_success 'payload to stdout: the report with its SEL error on stderr' '
	nvg-encode $D --sel sel.gram -o - >o.blr 2>err &&
	cmp plain.blr o.blr &&
	test_cmp ls err
'

test_expect_success 'one path, and --fit beside --sel: still only measured' '
	nvg-encode $D --paths 1 -o p1.blr >l1 &&
	nvg-encode $D --paths 1 --fit fit.gram --sel sel.gram -o p1s.blr >l1s &&
	cmp p1.blr p1s.blr &&
	test_grep "^P1 r[0-9]+ frob [0-9.]+ sel [0-9.]+$" l1s &&
	check p1s.blr w.raw 96 64 sel.gram >d1 &&
	close "$(field herr d1)" "$(sel_of l1s)"
'

test_expect_success 'several tensors share the SEL Gram: each line has its error' '
	nvg-encode --method dual-svid --bpw 3 --shape 96x64 --sel sel.gram \
		-w w.raw -o m1.blr -w two/w.raw -o m2.blr >lm 2>err &&
	test "$(wc -l <lm)" = 2 &&
	cmp plain.blr m1.blr &&
	sed -n 1p lm >lm1 && test_cmp ls lm1 &&
	sed -n 2p lm >lm2 &&
	check m2.blr two/w.raw 96 64 sel.gram >d2 &&
	close "$(field herr d2)" "$(sel_of lm2)"
'

test_expect_success 'a SEL Gram of another width: exit 1, named, no payload' '
	fails 1 "g32/sel.gram.*32 wide, but W has 64 columns" $D --sel g32/sel.gram &&
	fails 1 "g32/sel.gram.*32 wide, but W has 64 columns" --method dual-svid --bpw 3 \
		--shape 96x64 --sel g32/sel.gram -w w.raw -o out.blr -w two/w.raw
'

test_expect_success 'a SEL Gram with NaN or missing: exit 1, no payload' '
	fails 1 "nan.gram" $D --sel nan.gram &&
	fails 1 "missing.gram" $D --sel missing.gram
'

test_expect_success 'dual-svid still takes no context: usage error' '
	hctx-build fit.gram -o fit.hctx &&
	fails 2 "dual-svid reads no context" $D --sel sel.gram --hctx fit.hctx
'

test_done
