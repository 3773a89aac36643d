#!/bin/bash
# blr-pack on bad input: exit 1, one line on stderr naming what is wrong,
# and no output file (nor temporary file) left behind
. "$(dirname "$0")/test-lib.sh"

# poke FILE OFFSET BYTES: overwrite bytes (printf escapes) in place
poke() {
	printf "$3" >.poke && dd if=.poke of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# bad SUBJECT-REGEX REASON-REGEX FILE: unpack, verify and info all refuse FILE
bad() {
	test_expect_code 1 blr-pack unpack -o out.f32 "$3" >out 2>err &&
	test ! -s out &&
	test_one_line_error err &&
	test_grep "^blr-pack: .*.$1.: .*$2" err &&
	test_path_is_missing out.f32 &&
	test_no_tmp_files &&
	test_expect_code 1 blr-pack verify --shape 24x16 "$3" 2>err &&
	test_one_line_error err &&
	test_expect_code 1 blr-pack info "$3" >out 2>err &&
	test_one_line_error err &&
	test ! -s out
}

# mutate OFFSET BYTES REASON-REGEX: a copy of the good payload with BYTES at OFFSET is refused
mutate() {
	cp good.blr m.blr && poke m.blr "$1" "$2" && bad m.blr "$3" m.blr
}

# 24x16, rank 16, 2 paths: a path is 2*(24+16+16) + 16*40/8 = 192 bytes;
# path 0: h at 16, g at 64, l at 96, S_U at 128, S_V at 176; path 1 at 208
test_expect_success 'set up: a valid payload' '
	"$NVG_PY" "$TEST_DIR/blr-writer.py" write good.blr 24 16 16 2 9 &&
	test $(wc -c <good.blr) -eq 400 &&
	blr-pack verify --shape 24x16 good.blr
'

test_expect_success 'a missing file' 'bad nothere.blr "No such file or directory" nothere.blr'
test_expect_success 'a directory instead of a file' 'mkdir dir.blr && bad dir.blr "is a directory" dir.blr'
test_expect_success 'an empty file' ': >empty.blr && bad empty.blr "0 bytes is shorter than the 16-byte BLR header" empty.blr'
for cut in 1 15 16 63 130 207 208 399; do
	test_expect_success "a payload cut short at $cut bytes" '
		head -c '$cut' good.blr >cut.blr && bad cut.blr "'$cut' bytes|size '$cut' bytes disagrees" cut.blr
	'
done
test_expect_success 'one byte too many' 'cp good.blr long.blr && printf "\000" >>long.blr && bad long.blr "size 401 bytes disagrees with the header" long.blr'
test_expect_success 'wrong magic' 'mutate 0 "BLR2" "magic 0x32524C42 is not BLR1"'
test_expect_success 'nonzero flags' 'mutate 15 "\200" "flags 0x80 are not 0"'
test_expect_success 'paths 0' 'mutate 14 "\000" "paths 0 is not 1 or 2"'
test_expect_success 'paths 3' 'mutate 14 "\003" "paths 3 is not 1 or 2"'
test_expect_success 'rank 0' 'mutate 12 "\000\000" "rank 0 is not a multiple of 8 in \[8, 16\]"'
test_expect_success 'rank 12, not a multiple of 8' 'mutate 12 "\014\000" "rank 12 is not a multiple of 8"'
test_expect_success 'rank 24, above the cap 16' 'mutate 12 "\030\000" "rank 24 is not a multiple of 8 in \[8, 16\]"'
test_expect_success 'd_out 0' 'mutate 4 "\000\000\000\000" "d_out 0 is outside"'
test_expect_success 'd_in 0' 'mutate 8 "\000\000\000\000" "d_in 0 is outside"'
test_expect_success 'd_in 4: below 8, not encodable' 'mutate 8 "\004\000\000\000" "not encodable"'
test_expect_success 'd_out too large for the bytes present' 'mutate 4 "\000\001\000\000" "size 400 bytes disagrees with the header \(256x16"'
test_expect_success 'd_in too large for the bytes present' 'mutate 8 "\377\377\377\377" "disagrees with the header"'
test_expect_success 'a NaN row scale (path 0 h[2])' 'mutate 20 "\001\176" "path 0: h\[2\] = nan is not finite"'
test_expect_success 'an infinite column scale (path 1 g[0])' 'mutate 256 "\000\374" "path 1: g\[0\] = -inf is not finite"'
test_expect_success 'a NaN rank scale (path 1 l[15])' 'mutate 318 "\000\177" "path 1: l\[15\] = nan is not finite"'

test_expect_success 'verify against another shape' '
	test_expect_code 1 blr-pack verify --shape 16x24 good.blr >out 2>err &&
	test ! -s out &&
	test_one_line_error err &&
	test_grep "^blr-pack: verify failed .good.blr.: shape 24x16 is not the expected 16x24" err
'

# gauge FACTOR-BYTES REASON-REGEX: the row factors are refused, no output left
bad_gauge() {
	test_expect_code 1 blr-pack gauge --undo d.f32 -o g.blr good.blr >out 2>err &&
	test_one_line_error err &&
	test_grep "^blr-pack: .*.d\.f32.: .*$1" err &&
	test_path_is_missing g.blr &&
	test_no_tmp_files
}

test_expect_success 'gauge: a factor file of the wrong length' '
	"$NVG_PY" -c "import numpy as np; np.ones(23, \"<f4\").tofile(\"d.f32\")" &&
	bad_gauge "size 92 bytes is not 24"
'
test_expect_success 'gauge: a zero factor' '
	"$NVG_PY" -c "import numpy as np; d = np.ones(24, \"<f4\"); d[5] = 0; d.tofile(\"d.f32\")" &&
	bad_gauge "row factor 5 = 0 is not finite and nonzero"
'
test_expect_success 'gauge: a NaN factor' '
	"$NVG_PY" -c "import numpy as np; d = np.ones(24, \"<f4\"); d[7] = np.nan; d.tofile(\"d.f32\")" &&
	bad_gauge "value nan at row 7"
'
test_expect_success 'gauge: an infinite factor' '
	"$NVG_PY" -c "import numpy as np; d = np.ones(24, \"<f4\"); d[0] = -np.inf; d.tofile(\"d.f32\")" &&
	bad_gauge "value inf at row 0"
'
test_expect_success 'gauge: a factor that overflows an f16 scale' '
	"$NVG_PY" -c "import numpy as np; d = np.ones(24, \"<f4\"); d[3] = 1e-9; d.tofile(\"d.f32\")" &&
	bad_gauge "h\[3\] = .* is beyond the f16 range"
'
test_expect_success 'gauge: a missing factor file' '
	rm -f d.f32 && bad_gauge "No such file"
'

test_expect_success 'an output directory that does not exist' '
	test_expect_code 1 blr-pack unpack -o no/such/dir/w.f32 good.blr 2>err &&
	test_one_line_error err &&
	test_grep "^blr-pack: cannot write .no/such/dir/w.f32.: cannot create .no/such/dir/w.f32.: No such file" err &&
	test_path_is_missing no
'

test_expect_success 'a full device on standard output (unpack)' '
	test_expect_code 1 blr-pack unpack good.blr >/dev/full 2>err &&
	test_one_line_error err &&
	test_grep "No space left on device" err
'

test_expect_success 'info of several files stops at the first bad one, naming it' '
	{ echo "file good.blr" && blr-pack info good.blr && echo "file nothere.blr"; } >expect &&
	test_expect_code 1 blr-pack info good.blr nothere.blr good.blr >actual 2>err &&
	test_cmp expect actual &&
	test_one_line_error err &&
	test_grep "^blr-pack: .*nothere.blr.: No such file or directory" err
'

test_expect_success 'a full device on standard output (info)' '
	test_expect_code 1 blr-pack info good.blr >/dev/full 2>err &&
	test_one_line_error err &&
	test_grep "^blr-pack: write to standard output failed: No space left on device" err
'

# binary output to a terminal: run under script(1), which gives the tool a pty
on_tty() {
	script -qec "$*" /dev/null >tty.out
}

test_expect_success 'unpack refuses a terminal' '
	test_expect_code 1 on_tty blr-pack unpack good.blr &&
	tr -d "\r" <tty.out >msg &&
	test_one_line_error msg &&
	test_grep "^blr-pack: cannot write .standard output.: refusing to write binary data to a terminal" msg
'

test_expect_success 'gauge refuses a terminal' '
	"$NVG_PY" -c "import numpy as np; np.ones(24, \"<f4\").tofile(\"d.f32\")" &&
	test_expect_code 1 on_tty blr-pack gauge --undo d.f32 good.blr &&
	tr -d "\r" <tty.out >msg &&
	test_one_line_error msg &&
	test_grep "refusing to write binary data to a terminal" msg
'

test_done
