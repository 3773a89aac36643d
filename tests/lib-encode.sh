# lib-encode.sh - what the nvg-encode tests (t020N) share: the independent
# Python decoder, fields of its output and of the report lines, and `fails`
REF="$NVG_TOP/tests/ref"

# check BLR W.raw M N [GRAM]: the payload decoded by tests/ref/blr.py
check() { "$NVG_PY" "$REF/blr.py" check "$@"; }
# field KEY FILE: the value after KEY
field() { sed -En "s/(^|.* )$1 ([^ ]*).*/\2/p" "$2"; }
# the report prints 4 decimals; the decoder sums in f64 from the same f16 scales
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 6e-5) }'; }
# the SEL error ending a report line
sel_of() { sed -n "s/.* sel \([0-9.]*\)$/\1/p" "$1"; }
# prof_count STAGE FILE: the count of a --profile stage ("| STAGE 1.23s/COUNT")
prof_count() { sed -n "s/.*| $1 [0-9.]*s\/\([0-9]*\) .*/\1/p" "$2"; }

# fails STATUS PATTERN args...: the status, the message (one line, or the
# usage hint after it for status 2), no out.blr
fails() {
	want=$1 pat=$2
	shift 2
	test_expect_code "$want" nvg-encode "$@" -o out.blr 2>err &&
	if test "$want" = 2; then
		test_grep "^Try .nvg-encode -h. for usage.$" err && sed -i 1q err
	fi &&
	test_one_line_error err &&
	test_grep "$pat" err &&
	test_path_is_missing out.blr &&
	test_no_tmp_files
}
