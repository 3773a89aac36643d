#!/bin/bash
# an option that several tools take accepts one range in all of them
# (tools/tool.h): --bpw (0, 16), --kv-factor (0, 16), --threads 1 to 64,
# --rho [0, 1e6], --window 2 to 2^20, -l/--layer 0 to 2^20; each tool
# reports a value outside it as it reports its other bad values
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-encode.sh"
test_require_data stories260K.bin tok512.bin

test_expect_success 'setup: a layer, its Grams, a model and tokens' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	cmf-patch import --vocab "$NVG_DATA/tok512.bin" -o s.cmf "$NVG_DATA/stories260K.bin" &&
	"$NVG_PY" -c "import numpy as np; np.arange(600, dtype=\"<u4\").__mod__(500).astype(\"<u4\").tofile(\"tok.u32\")"
'

test_expect_success '--bpw: (0, 16) in blr-pack, nvg-encode and plan-alloc' '
	blr-pack rank --shape 64x64 --bpw 15.9 >out &&
	test_expect_code 2 blr-pack rank --shape 64x64 --bpw 16 2>err &&
	test_grep "^blr-pack: bad --bpw .16.: 16 is outside \(0, 16\)$" err &&
	test_expect_code 1 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 16 -o x.blr 2>err &&
	test_grep "invalid --bpw .16.: 16 is outside \(0, 16\)" err &&
	echo "tensor layer weights bpw error" >curves.txt &&
	test_expect_code 2 plan-alloc --bpw 16 curves.txt 2>err &&
	test_grep "16 is outside \(0, 16\)" err &&
	test_path_is_missing x.blr
'

test_expect_success '--kv-factor: (0, 16) in blr-pack and nvg-encode' '
	blr-pack rank --shape 64x64 --bpw 1 --kv-factor 15 >out &&
	test_expect_code 2 blr-pack rank --shape 64x64 --bpw 1 --kv-factor 16 2>err &&
	test_grep "16 is outside \(0, 16\)" err &&
	test_expect_code 1 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 1 --kv \
		--kv-factor 16 -o x.blr 2>err &&
	test_grep "invalid --kv-factor .16.: 16 is outside \(0, 16\)" err
'

test_expect_success '--threads: 1 to 64 in hctx-build and nvg-encode' '
	hctx-build --threads 64 fit.gram -o t64.hctx &&
	test_expect_code 1 hctx-build --threads 65 fit.gram -o t65.hctx 2>err &&
	test_grep "invalid --threads .65.: 65 is outside \[1, 64\]" err &&
	test_expect_code 1 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 1 --threads 65 \
		-o x.blr 2>err &&
	test_grep "invalid --threads .65.: 65 is outside \[1, 64\]" err &&
	test_path_is_missing t65.hctx x.blr
'

test_expect_success '--refine: 1 to 16, nvg only' '
	for s in 0 17; do
		test_expect_code 1 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram \
			--bpw 1 --refine $s -o x.blr 2>err &&
		test_grep "invalid --refine .$s.: $s is outside \[1, 16\]" err || return 1
	done &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 1 --refine 3 \
		-o x.blr 2>err &&
	test_grep "refine is nvg.s" err &&
	test_path_is_missing x.blr
'

test_expect_success '--rho: [0, 1e6] in hctx-build and nvg-encode' '
	test_expect_code 1 hctx-build --rho 1.1e6 fit.gram -o r.hctx 2>err &&
	test_grep "outside \[0, 1e\+06\]" err &&
	test_expect_code 1 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1 \
		--rho 1.1e6 -o x.blr 2>err &&
	test_grep "outside \[0, 1e\+06\]" err
'

test_expect_success '--window and the layer: the same bounds in gram-capture, cmf-eval, blr-tune' '
	for t in "gram-capture -m s.cmf --tokens tok.u32 -l 0 -o g" "cmf-eval -m s.cmf --tokens tok.u32" \
		"blr-tune --final-norm -m s.cmf --base s.cmf --tokens tok.u32 -o t.cmf"; do
		test_expect_code 2 $t --window 1048577 2>err &&
		test_grep "bad --window .1048577.: 1048577 is outside \[2, 1048576\]" err || return 1
	done &&
	test_expect_code 2 gram-capture -m s.cmf --tokens tok.u32 -l 1048577 -o g 2>err &&
	test_grep "bad -l .1048577.: 1048577 is outside \[0, 1048576\]" err &&
	test_expect_code 2 blr-tune --layer 1048577 -m s.cmf --tokens tok.u32 --patch a=b -o d 2>err &&
	test_grep "bad --layer .1048577.: 1048577 is outside \[0, 1048576\]" err
'

test_done
