#!/bin/bash
# hctx-build: the context file from a FIT Gram, and its refusals
. "$(dirname "$0")/test-lib.sh"

REF="$NVG_TOP/tests/ref"

test_expect_success '-h prints exactly the SYNOPSIS of hctx-build(1)' '
	test_man_synopsis man1/hctx-build.1 >expect &&
	test -s expect &&
	hctx-build -h >actual 2>err &&
	test_cmp expect actual &&
	test ! -s err &&
	hctx-build --version >v &&
	test_grep "^hctx-build \(nvgkit\) [0-9]+\.[0-9]+\.[0-9]+$" v
'

test_expect_success 'setup: a synthetic 96x64 layer' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	"$NVG_PY" "$REF/synth-layer.py" gram indefinite 64 indef.gram &&
	"$NVG_PY" "$REF/synth-layer.py" gram nan 64 nan.gram
'

test_expect_success 'a context: size 36 + 12n(n+1) + 12n, deterministic' '
	hctx-build fit.gram -o a.hctx &&
	hctx-build --rho 0.03 -o b.hctx fit.gram &&
	test "$(stat -c %s a.hctx)" = $((36 + 12 * 64 * 65 + 12 * 64)) &&
	cmp a.hctx b.hctx &&
	test_no_tmp_files
'

test_expect_success 'the header: magic, version, n, rho and the token count' '
	"$NVG_PY" -c "
import struct,sys
b=open(\"a.hctx\",\"rb\").read()
m,v,n,crc,rho,cnt=struct.unpack(\"<IIIIdQ\",b[:32])
assert (m,v,n,cnt)==(0x58544348,1,64,1024),(m,v,n,cnt)
assert rho==0.03,rho
import zlib
assert struct.unpack(\"<I\",b[-4:])[0]==zlib.crc32(b[:-4])
g=open(\"fit.gram\",\"rb\").read()[16:]
assert crc==zlib.crc32(g)
"
'

test_expect_success 'another rho gives another context' '
	hctx-build --rho 0.1 fit.gram -o c.hctx &&
	test_must_fail cmp -s a.hctx c.hctx
'

test_expect_success 'a Gram not positive definite after damping: names it, suggests --rho' '
	test_expect_code 1 hctx-build indef.gram -o x.hctx 2>err &&
	test_one_line_error err &&
	test_grep "indef.gram" err &&
	test_grep "larger --rho" err &&
	test_path_is_missing x.hctx &&
	test_no_tmp_files
'

test_expect_success 'the same Gram with a large enough rho works' '
	hctx-build --rho 1.5 indef.gram -o x.hctx
'

test_expect_success 'a Gram with NaN is refused' '
	test_expect_code 1 hctx-build nan.gram -o y.hctx 2>err &&
	test_one_line_error err &&
	test_grep "nan.gram" err &&
	test_path_is_missing y.hctx
'

test_expect_success 'a bad --rho is an error, a missing Gram a usage error' '
	test_expect_code 1 hctx-build --rho -1 fit.gram -o z.hctx 2>err &&
	test_one_line_error err &&
	test_expect_code 1 hctx-build --rho abc fit.gram -o z.hctx 2>err &&
	test_expect_code 2 hctx-build -o z.hctx 2>err &&
	test_expect_code 1 hctx-build missing.gram -o z.hctx 2>err &&
	test_one_line_error err &&
	test_path_is_missing z.hctx
'

test_done
