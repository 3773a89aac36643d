#!/bin/bash
# NVGG files written from nvgg(5) by numpy (tests/nvgg-fixtures.py, which the
# tools that read NVGG use for their bad-input tests) against common/nvgg.c:
# the good one reads back with its n, count and sum, each bad one is refused
# for its own reason
. "$(dirname "$0")/test-lib.sh"

check() {
	"$NVG_BUILD/unit/test-nvgg" --check "$@"
}

test_expect_success 'set up: the fixtures' '
	"$NVG_PY" "$TEST_DIR/nvgg-fixtures.py" fx 6 20 3 &&
	test $(wc -c <fx/good.nvgg) -eq $((16 + 4 * 6 * 6))
'

test_expect_success 'the good Gram reads back: n, count, and the sum numpy computes' '
	"$NVG_PY" -c "import numpy as np; g = np.fromfile(\"fx/good.nvgg\", \"<f4\", offset=16); print(\"n 6 count 20 sum %.9g\" % g.astype(np.float64).sum())" >expect &&
	check fx/good.nvgg >actual &&
	test_cmp expect actual
'

# refused NAME REASON-REGEX
refused() {
	test_expect_code 1 check "fx/$1.nvgg" >out &&
	test $(wc -l <out) -eq 1 &&
	test_grep "$2" out
}

test_expect_success 'empty' 'refused empty "0 bytes is shorter than the 16-byte NVGG header"'
test_expect_success 'header only' 'refused header "size 16 bytes disagrees with n 6"'
test_expect_success 'wrong magic' 'refused magic "magic 0x4E564748 is not NVGG"'
test_expect_success 'n = 0' 'refused n0 "^n 0 is outside"'
test_expect_success 'count = 0' 'refused count0 "^count 0"'
test_expect_success 'n·n overflowing' 'refused overflow "n 4294967295: 16 \+ 4·n² overflows"'
test_expect_success 'a short body' 'refused short "size 156 bytes disagrees with n 6"'
test_expect_success 'a long body' 'refused long "size 164 bytes disagrees with n 6"'
test_expect_success 'NaN' 'refused nan "G\[0,1\] = nan is not finite"'
test_expect_success 'infinity' 'refused inf "G\[1,1\] = inf is not finite"'
test_expect_success 'asymmetric' 'refused asym "not symmetric: G\[0,1\]"'
test_expect_success 'a negative diagonal' 'refused negdiag "diagonal G\[1,1\] = -1 is negative"'
test_expect_success 'a missing file' 'refused missing "No such file"'

test_done
