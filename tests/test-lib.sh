# test-lib.sh - the shell test harness (after git's t/test-lib.sh), TAP out.
#
#   . "$(dirname "$0")/test-lib.sh"
#   test_expect_success 'title' 'commands && chained && with &&'
#   test_done
#
# Each script runs in its own empty trash directory under $NVG_BUILD/trash,
# with the tools under test first on PATH ($NVG_BIN).  EXE_PREFIX (valgrind,
# a sanitizer wrapper) wraps every tool.  Real data is read from $NVG_DATA;
# a missing data file is a failure, never a skip.

set -u
test_count=0
test_failures=0

TEST_NAME=$(basename "$0" .sh)
TEST_DIR=$(cd "$(dirname "$0")" && pwd)
NVG_TOP=${NVG_TOP:-$(cd "$TEST_DIR/.." && pwd)}
NVG_BIN=${NVG_BIN:-$NVG_TOP/bin}
NVG_BUILD=${NVG_BUILD:-$NVG_TOP/build}
NVG_DATA=${NVG_DATA:-$NVG_TOP/../shared/data}
NVG_PY=${NVG_PY:-$NVG_BUILD/venv/bin/python3}
export NVG_TOP NVG_BIN NVG_BUILD NVG_DATA NVG_PY

# a test's own make runs alone: not in the jobserver of the make that runs the
# tests (`make check -j2`), whose -j beside the test's own makes a sub-make
# warn "-j2 forced in submake" on stderr
unset MAKEFLAGS MFLAGS MAKELEVEL

TRASH="$NVG_BUILD/trash/$TEST_NAME"
rm -rf "$TRASH"
mkdir -p "$TRASH" || { echo "Bail out! cannot create $TRASH"; exit 1; }

# the tools, wrapped by EXE_PREFIX when one is given
if [ -n "${EXE_PREFIX:-}" ]; then
	mkdir -p "$TRASH/.wrap"
	for t in "$NVG_BIN"/*; do
		[ -x "$t" ] || continue
		printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$EXE_PREFIX" "$t" >"$TRASH/.wrap/${t##*/}"
		chmod +x "$TRASH/.wrap/${t##*/}"
	done
	PATH="$TRASH/.wrap:$PATH"
else
	PATH="$NVG_BIN:$PATH"
fi
export PATH
cd "$TRASH" || exit 1

# test_expect_success 'title' 'commands': ok or not ok on stdout, a failure's output and commands on stderr
test_expect_success() {
	test_count=$((test_count + 1))
	if (eval "$2") >"$TRASH/.out.$test_count" 2>&1; then
		echo "ok $test_count - $1"
	else
		test_failures=$((test_failures + 1))
		echo "not ok $test_count - $1"
		# on stderr, which prove shows when it hides the TAP stream
		{
			echo "# $TEST_NAME: not ok $test_count - $1"
			sed -e 's/^/#   /' "$TRASH/.out.$test_count" | tail -n 40
			printf '#   commands:\n'
			printf '%s\n' "$2" | sed -e 's/^/#   > /'
		} >&2
	fi
	rm -f "$TRASH/.out.$test_count"
}

# test_must_fail cmd...: cmd must exit 1..125 (a crash or a signal is not a failure we want)
test_must_fail() {
	"$@"
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "test_must_fail: '$*' succeeded" >&2
		return 1
	elif [ $rc -gt 125 ]; then
		echo "test_must_fail: '$*' died with status $rc" >&2
		return 1
	fi
	return 0
}

# test_expect_code N cmd...: cmd must exit with exactly N
test_expect_code() {
	want=$1
	shift
	"$@"
	rc=$?
	if [ $rc -ne "$want" ]; then
		echo "test_expect_code: '$*' exited $rc, want $want" >&2
		return 1
	fi
	return 0
}

# test_cmp expect actual
test_cmp() {
	diff -u "$1" "$2"
}

# test_grep pattern file: like grep, but shows the file when it does not match
test_grep() {
	if ! grep -E -e "$1" "$2" >/dev/null; then
		echo "test_grep: no line matches '$1' in $2:" >&2
		sed -e 's/^/| /' "$2" >&2
		return 1
	fi
}

# test_no_grep pattern file
test_no_grep() {
	if grep -E -e "$1" "$2" >/dev/null; then
		echo "test_no_grep: a line matches '$1' in $2" >&2
		return 1
	fi
}

# test_path_is_missing path...: nothing was written
test_path_is_missing() {
	for p; do
		if [ -e "$p" ]; then
			echo "test_path_is_missing: '$p' exists" >&2
			return 1
		fi
	done
}

# test_no_tmp_files [dir]: no temporary output left behind: a tool's
# NAME.tmp.PID, convert.mk's and convert-lib.sh's NAME.tmp
test_no_tmp_files() {
	left=$(find "${1:-.}" \( -name '*.tmp.*' -o -name '*.tmp' \) -print)
	if [ -n "$left" ]; then
		echo "test_no_tmp_files: left behind: $left" >&2
		return 1
	fi
}

# test_one_line_error file: exactly one line on stderr, in the tool's form
test_one_line_error() {
	n=$(wc -l <"$1")
	if [ "$n" -ne 1 ]; then
		echo "test_one_line_error: $n lines in $1:" >&2
		cat "$1" >&2
		return 1
	fi
	test_grep "^[a-z0-9-]+: " "$1"
}

# test_skip_all reason: the whole script skipped, with its reason, before any
# test (TAP's "1..0 # SKIP"); only for what the machine cannot do, never data
test_skip_all() {
	echo "1..0 # SKIP $*"
	cd "$NVG_BUILD" && rm -rf "$TRASH"
	exit 0
}

# test_require_data file...: real data files must be present (a failure, not a skip)
test_require_data() {
	for f; do
		if [ ! -r "$NVG_DATA/$f" ]; then
			echo "Bail out! missing data file $NVG_DATA/$f (set NVG_DATA)"
			exit 1
		fi
	done
}

# test_man_synopsis PAGE [WIDTH]: the SYNOPSIS lines of man/PAGE as mandoc
# renders them (WIDTH columns when given), one per line, indentation removed
test_man_synopsis() {
	mandoc -Tascii ${2:+-Owidth=$2} "$NVG_TOP/man/$1" >.man-page &&
	sed -e "s/.\x08//g" .man-page >.man-plain &&
	sed -n -e "/^SYNOPSIS/,/^DESCRIPTION/p" .man-plain >.man-syn &&
	sed -e "1d" -e "\$d" -e "/^ *\$/d" -e "s/^ *//" .man-syn
}

test_done() {
	echo "1..$test_count"
	if [ "$test_failures" -eq 0 ]; then
		cd "$NVG_BUILD" && rm -rf "$TRASH"
		exit 0
	fi
	echo "# failed $test_failures among $test_count test(s)"
	exit 1
}
