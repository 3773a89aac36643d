#!/bin/bash
# every bad NVGG file of the issue through the two tools that read NVGG
# (gram-capture --merge, hctx-build): exit 1, one line naming the file and
# the reason, no output file; and the merge by count through the tool equals
# numpy's count-weighted mean bit for bit
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'set up: fixtures (tests/nvgg-fixtures.py) and two shards' '
	"$NVG_PY" "$TEST_DIR/nvgg-fixtures.py" fx 6 20 3 &&
	"$NVG_PY" "$TEST_DIR/nvgg-fixtures.py" s2 6 7 4 &&
	gram-capture --merge -o ok.gram fx/good.nvgg fx/good.nvgg &&
	rm ok.gram
'

# bad NAME REASON-REGEX: both readers refuse fx/NAME.nvgg
bad() {
	test_expect_code 1 gram-capture --merge -o m.gram fx/good.nvgg "fx/$1.nvgg" >out 2>err &&
	test ! -s out &&
	test_one_line_error err &&
	test_grep "^gram-capture: .*.fx/$1\.nvgg.: $2" err &&
	test_path_is_missing m.gram &&
	test_expect_code 1 hctx-build -o h.hctx "fx/$1.nvgg" >out 2>err &&
	test ! -s out &&
	test_one_line_error err &&
	test_grep "^hctx-build: .*.fx/$1\.nvgg.: $2" err &&
	test_path_is_missing h.hctx &&
	test_no_tmp_files
}

test_expect_success 'an empty file' 'bad empty "0 bytes is shorter than the 16-byte NVGG header"'
test_expect_success 'a header without a body' 'bad header "size 16 bytes disagrees with n 6"'
test_expect_success 'wrong magic' 'bad magic "magic 0x4E564748 is not NVGG"'
test_expect_success 'n = 0' 'bad n0 "n 0 is outside \[1, 4294967295\]"'
test_expect_success 'count = 0' 'bad count0 "count 0"'
test_expect_success 'n·n overflowing' 'bad overflow "n 4294967295: 16 \+ 4·n² overflows"'
test_expect_success 'a short body' 'bad short "size 156 bytes disagrees with n 6"'
test_expect_success 'a body too long' 'bad long "size 164 bytes disagrees with n 6"'
test_expect_success 'NaN' 'bad nan "G\[0,1\] = nan is not finite"'
test_expect_success 'infinity' 'bad inf "G\[1,1\] = inf is not finite"'
test_expect_success 'asymmetric' 'bad asym "not symmetric: G\[0,1\] = .* but G\[1,0\] = "'
test_expect_success 'a negative diagonal' 'bad negdiag "diagonal G\[1,1\] = -1 is negative"'
test_expect_success 'a missing file' 'bad missing "No such file"'

test_expect_success 'merge by count: numpy count-weighted mean in f64, stored f32, bit for bit' '
	gram-capture --merge -o m.gram fx/good.nvgg s2/good.nvgg &&
	"$NVG_PY" -c "
import struct, sys
import numpy as np
def rd(p):
    b = open(p, \"rb\").read()
    n, c = struct.unpack_from(\"<IQ\", b, 4)
    return n, c, np.frombuffer(b, \"<f4\", offset=16).astype(np.float64)
n, ca, a = rd(\"fx/good.nvgg\")
_, cb, b = rd(\"s2/good.nvgg\")
g = ((ca * a + cb * b) / (ca + cb)).astype(\"<f4\")
open(\"expect.gram\", \"wb\").write(struct.pack(\"<IIQ\", 0x4E564747, n, ca + cb) + g.tobytes())
" &&
	cmp expect.gram m.gram
'

test_done
