#!/bin/bash
# blr-pack info, verify, unpack, gauge on payloads written by an independent
# implementation of blr(5) (tests/blr-writer.py, numpy)
. "$(dirname "$0")/test-lib.sh"

writer() {
	"$NVG_PY" "$TEST_DIR/blr-writer.py" "$@"
}

test_expect_success 'set up: payloads from the numpy writer' '
	writer write a.blr 40 24 16 2 1 &&
	writer write b.blr 72 136 64 1 2 &&
	writer write c.blr 8 8 8 2 3 &&
	test $(wc -c <a.blr) -eq $((16 + 2 * (2 * (40 + 24 + 16) + 16 * (40 + 24) / 8)))
'

# 2 paths: bits 2*(16*64 + 16*(64+16)) = 4608, bpw 4608/960 = 4.8
test_expect_success 'info: the header, bytes, bits and bits per weight' '
	cat >expect <<-\EOT &&
	shape 40x24
	rank 16
	paths 2
	bytes 592
	bits 4608
	bpw 4.800000
	EOT
	blr-pack info a.blr >out &&
	head -n 6 out >actual &&
	test_cmp expect actual
'

test_expect_success 'info: one line of scale ranges per path, within the writer ranges' '
	blr-pack info a.blr >out &&
	test $(grep -c "^path " out) -eq 2 &&
	awk "/^path / { if (\$4 < 0.5 || \$5 >= 1 || \$7 < 0.5 || \$8 >= 1 || \$10 < 2^-6 || \$11 >= 0.25 || \$4 > \$5) exit 1; n++ } END { exit n != 2 }" out
'

test_expect_success 'info reads standard input' '
	blr-pack info a.blr >expect &&
	blr-pack info <a.blr >actual &&
	test_cmp expect actual &&
	blr-pack info - <a.blr >actual &&
	test_cmp expect actual
'

test_expect_success 'info of several files: each one'"'"'s lines after "file NAME", in order' '
	for f in a.blr b.blr c.blr a.blr; do
		echo "file $f" && blr-pack info $f || return 1
	done >expect &&
	blr-pack info a.blr b.blr c.blr a.blr >actual &&
	test_cmp expect actual
'

test_expect_success 'verify: the right shape passes silently' '
	blr-pack verify --shape 40x24 a.blr >out 2>err &&
	test ! -s out && test ! -s err
'

for p in a b c; do
	test_expect_success "unpack $p.blr: the same floats as numpy's own dequantization" '
		blr-pack unpack -o $p.f32 $p.blr &&
		cmp $p.f32 $p.blr.numpy.f32 &&
		test_no_tmp_files
	'
done

test_expect_success 'unpack to standard output (a file) and from standard input' '
	blr-pack unpack <b.blr >b2.f32 &&
	cmp b2.f32 b.blr.numpy.f32
'

test_expect_success 'unpack -o replaces an existing file atomically' '
	echo old >r.f32 &&
	blr-pack unpack -o r.f32 c.blr &&
	cmp r.f32 c.blr.numpy.f32 &&
	test_no_tmp_files
'

test_expect_success 'gauge --undo: every path h divided by the factors, as numpy does it' '
	"$NVG_PY" -c "import numpy as np; np.random.default_rng(5).uniform(0.6, 1.9, 40).astype(\"<f4\").tofile(\"d.f32\")" &&
	writer gauge a.blr d.f32 expect.blr &&
	blr-pack gauge --undo d.f32 -o got.blr a.blr &&
	cmp expect.blr got.blr &&
	! cmp -s a.blr got.blr &&
	blr-pack verify --shape 40x24 got.blr &&
	test_no_tmp_files
'

test_expect_success 'gauge to standard output' '
	blr-pack gauge --undo d.f32 a.blr >got2.blr &&
	cmp expect.blr got2.blr
'

test_expect_success 'gauge with factors of 1 leaves the payload as it was' '
	"$NVG_PY" -c "import numpy as np; np.ones(40, \"<f4\").tofile(\"one.f32\")" &&
	blr-pack gauge --undo one.f32 -o same.blr a.blr &&
	cmp a.blr same.blr
'

test_expect_success 'gauge refuses to write over its inputs' '
	cp a.blr in.blr &&
	test_expect_code 1 blr-pack gauge --undo d.f32 -o in.blr in.blr 2>err &&
	test_one_line_error err &&
	test_grep "^blr-pack: cannot write .in.blr.: it is an input$" err &&
	cmp a.blr in.blr &&
	cp d.f32 d2.f32 &&
	test_expect_code 1 blr-pack gauge --undo d2.f32 -o d2.f32 a.blr 2>err &&
	test_one_line_error err &&
	cmp d.f32 d2.f32
'

test_done
