#!/bin/bash
# blr-pack rank: DESIGN.md's rule, everywhere on the seed's grid
. "$(dirname "$0")/test-lib.sh"

# 600 runs: under SAN=1 the leak check at each exit is a third of the time,
# and the rank path allocates nothing (the other tests keep the leak check)
test_expect_success 'the seed grid: every answer is the rule computed in exact rationals' '
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" &&
	"$NVG_PY" "$TEST_DIR/blr-writer.py" rank cases expect &&
	test $(wc -l <cases) -eq 600 &&
	while read shape b k; do
		blr-pack rank --shape $shape --bpw $b --kv-factor $k >>actual 2>>err || exit 1
	done <cases &&
	test_cmp expect actual &&
	test ! -s err
'

test_expect_success 'without --paths: one line per path count, 1 then 2' '
	cat >expect <<-\EOT &&
	paths 1 rank 1104 bpw 0.547928 bits 9192704 clip -
	paths 2 rank 544 bpw 0.547913 bits 9192448 clip -
	EOT
	blr-pack rank --shape 4096x4096 --bpw 0.55 >actual &&
	test_cmp expect actual
'

# floor: 32x32 at 0.05 bits is 51.2 bits, below rank 8 (p=1: 8*64 + 16*72 = 1664 bits)
test_expect_success 'a request below the floor is raised to rank 8 and says floor' '
	echo "paths 1 rank 8 bpw 1.625000 bits 1664 clip floor" >expect &&
	blr-pack rank --shape 32x32 --bpw 0.05 --paths 1 >actual &&
	test_cmp expect actual
'

# cap: 64x64 at 8 bits would be rank > 64; rank 64 is 64*128 + 16*192 = 11264 bits
test_expect_success 'a request above the cap stops at the cap and says cap' '
	echo "paths 1 rank 64 bpw 2.750000 bits 11264 clip cap" >expect &&
	blr-pack rank --shape 64x64 --bpw 8 --paths 1 >actual &&
	test_cmp expect actual
'

# 2 paths, kv factor 2: target 2*0.25*1024*256 = 131072 bits, 65536 a path:
# r* = (65536 - 16*1280) / 1296 = 34.8, rank 32: 2*(32*1280 + 16*1312) = 123904 bits
test_expect_success '--kv-factor multiplies the target' '
	echo "paths 2 rank 32 bpw 0.472656 bits 123904 clip -" >expect &&
	blr-pack rank --shape 1024x256 --bpw 0.25 --paths 2 --kv-factor 2 >actual &&
	test_cmp expect actual
'

test_expect_success 'a shape with a side below 8 is not encodable: exit 3, one line' '
	test_expect_code 3 blr-pack rank --shape 7x4096 --bpw 1 >out 2>err &&
	test ! -s out &&
	test_one_line_error err &&
	test_grep "^blr-pack: no rank for .7x4096.: .*not encodable" err
'

test_done
