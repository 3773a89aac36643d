#!/bin/bash
# nvg-encode: every bad input is one clear line, exit 1 (2 for usage, 3 for
# a refused payload), and no output left behind
. "$(dirname "$0")/test-lib.sh"

. "$TEST_DIR/lib-encode.sh"
ENC="-w w.raw --shape 96x64 --fit fit.gram --sel sel.gram"

test_expect_success 'setup: a layer, a narrower Gram, bad Grams and matrices' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	mkdir g32 other && "$NVG_PY" "$REF/synth-layer.py" layer 8 32 2 g32 &&
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 3 other &&
	"$NVG_PY" "$REF/synth-layer.py" gram indefinite 64 indef.gram &&
	"$NVG_PY" "$REF/synth-layer.py" gram nan 64 nan.gram &&
	"$NVG_PY" -c "
import numpy as np
w=np.fromfile(\"w.raw\",dtype=\"<f4\").reshape(96,64).copy()
w[5,7]=np.nan; w.tofile(\"wnan.raw\")
w[5,7]=np.inf; w.tofile(\"winf.raw\")
(np.ones((96,64))*3e30).astype(\"<f4\").tofile(\"whuge.raw\")" &&
	hctx-build fit.gram -o fit.hctx &&
	hctx-build g32/fit.gram -o n32.hctx &&
	hctx-build other/fit.gram -o other.hctx &&
	cp fit.hctx bad.hctx && printf "\\001" | dd of=bad.hctx bs=1 seek=200 conv=notrunc 2>/dev/null
'

test_expect_success 'W width differs from the Gram width' '
	fails 1 "g32/fit.gram.*32 wide, but W has 64 columns" -w w.raw --shape 96x64 --fit g32/fit.gram --sel g32/sel.gram --bpw 1
'
test_expect_success 'W with NaN or infinity' '
	fails 1 "wnan.raw.*not finite" -w wnan.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1 &&
	fails 1 "winf.raw.*not finite" -w winf.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1 &&
	fails 1 "wnan.raw.*not finite" --method dual-svid -w wnan.raw --shape 96x64 --bpw 1
'
test_expect_success 'a FIT or SEL Gram with NaN' '
	fails 1 "nan.gram" -w w.raw --shape 96x64 --fit nan.gram --sel sel.gram --bpw 1 &&
	fails 1 "nan.gram" -w w.raw --shape 96x64 --fit fit.gram --sel nan.gram --bpw 1
'
test_expect_success 'a Gram not positive definite after damping names it and --rho' '
	fails 1 "indef.gram.*larger --rho" -w w.raw --shape 96x64 --fit indef.gram --sel sel.gram --bpw 1
'
test_expect_success 'a context of another width, of another Gram, or corrupted' '
	fails 1 "n32.hctx.*32 wide" $ENC --hctx n32.hctx --bpw 1 &&
	fails 1 "other.hctx.*another Gram" $ENC --hctx other.hctx --bpw 1 &&
	fails 1 "bad.hctx.*crc" $ENC --hctx bad.hctx --bpw 1 &&
	fails 1 "missing.hctx" $ENC --hctx missing.hctx --bpw 1
'
test_expect_success '--bpw at or below 0, at or above 16, or not a number' '
	for b in 0 -1 16 17 abc nan inf 1x ""; do
		fails 1 "invalid --bpw" $ENC --bpw "$b" || return 1
	done
'
test_expect_success '--paths and --method unknown' '
	fails 1 "invalid --paths .3.: expected auto, 1 or 2" $ENC --bpw 1 --paths 3 &&
	fails 1 "invalid --method .svd.: expected nvg or dual-svid" $ENC --bpw 1 --method svd
'
test_expect_success 'a shape with min(m,n) < 8' '
	fails 1 "invalid --shape .4x64.*< 8" -w w.raw --shape 4x64 --fit fit.gram --sel sel.gram --bpw 1 &&
	fails 1 "invalid --shape .96x7.*< 8" --method dual-svid -w w.raw --shape 96x7 --bpw 1 &&
	fails 1 "invalid --shape" --method dual-svid -w w.raw --shape 96 --bpw 1
'
test_expect_success 'a raw file whose size is not m*n*4' '
	fails 1 "w.raw.*size 24576" --method dual-svid -w w.raw --shape 96x63 --bpw 1 &&
	fails 1 "missing.raw" --method dual-svid -w missing.raw --shape 96x64 --bpw 1
'
test_expect_success 'bad --rho, --threads, --kv-factor, --row-gauge, --head-blocks' '
	fails 1 "invalid --rho" $ENC --bpw 1 --rho -0.5 &&
	fails 1 "invalid --threads" $ENC --bpw 1 --threads 0 &&
	fails 1 "invalid --kv-factor" $ENC --bpw 1 --kv --kv-factor 0 &&
	fails 1 "invalid --row-gauge" $ENC --bpw 1 --row-gauge E --head-blocks 12x8 &&
	fails 1 "invalid --head-blocks.*cover 80 rows" $ENC --bpw 1 --row-gauge invE --head-blocks 10x8
'
test_expect_success 'usage errors exit 2' '
	fails 2 "missing --bpw" $ENC &&
	fails 1 "invalid --threads-max" $ENC --bpw 1 --threads 1 --threads-max 0 &&
	fails 2 "--threads-max needs --threads, and at least as many" $ENC --bpw 1 --threads-max 2 &&
	fails 2 "--threads-max needs --threads, and at least as many" $ENC --bpw 1 --threads 2 \
		--threads-max 1 &&
	fails 2 "missing --shape" -w w.raw --fit fit.gram --sel sel.gram --bpw 1 &&
	fails 2 "nvg needs --fit" -w w.raw --shape 96x64 --fit fit.gram --bpw 1 &&
	fails 2 "exactly one of" $ENC --target-raw w.raw --bpw 1 &&
	fails 2 "not with --hctx" $ENC --hctx fit.hctx --rho 0.1 --bpw 1 &&
	fails 2 "go together" $ENC --bpw 1 --head-blocks 12x8 &&
	test_expect_code 2 nvg-encode --bogus $ENC --bpw 1 -o out.blr 2>err &&
	test_grep "bogus" err && test_path_is_missing out.blr
'
test_expect_success 'a payload the packer refuses: exit 3, "blr refused"' '
	fails 3 "blr refused .whuge.raw.*f16" --method dual-svid -w whuge.raw --shape 96x64 --bpw 1
'

test_done
