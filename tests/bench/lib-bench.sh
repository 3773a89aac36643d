# shellcheck shell=bash
# lib-bench.sh - sourced by the encoder benchmarks: bench_setup NAME makes
# $work (removed on exit), $thr (--threads THREADS, or nothing) and
# $work/dgemm-rate (tests/bench/dgemm-rate.c built against OpenBLAS).
# Needs NVG_TOP, THREADS, CC, PKG_CONFIG.
bench_setup() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# shellcheck disable=SC2034 # read by the benchmark that sources this
	thr=${THREADS:+--threads $THREADS}
	# shellcheck disable=SC2046
	"$CC" -O2 -o "$work/dgemm-rate" "$NVG_TOP/tests/bench/dgemm-rate.c" \
		$("$PKG_CONFIG" --cflags --libs openblas)
}
