# shellcheck shell=bash
# lib-bench.sh - sourced by the benchmarks.  bench_setup NAME (the encoder's)
# makes $work (removed on exit), $thr (--threads THREADS, or nothing) and
# $work/dgemm-rate (tests/bench/dgemm-rate.c built against OpenBLAS); needs
# NVG_TOP, THREADS, CC, PKG_CONFIG.  median, bench_rank, and bench_sgemm_rate
# TOP (the forward's and the tuning's).
bench_setup() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# shellcheck disable=SC2034 # read by the benchmark that sources this
	thr=${THREADS:+--threads $THREADS}
	# shellcheck disable=SC2046
	"$CC" -O2 -o "$work/dgemm-rate" "$NVG_TOP/tests/bench/dgemm-rate.c" \
		$("$PKG_CONFIG" --cflags --libs openblas)
}

# bench_rank M N BPW: the rank of a two-path payload of an M x N matrix at
# BPW (2·r·(M + N) sign bits of M·N·BPW, r a multiple of 8, at least 8), as
# the benchmarks' blr-writer.py payloads take it
bench_rank() {
	awk -v m="$1" -v n="$2" -v b="$3" \
		'BEGIN { r = int(b * m * n / (2 * (m + n)) / 8) * 8; print r < 8 ? 8 : r }'
}

# median of the numbers on stdin
median() {
	sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# bench_sgemm_rate TOP: ./sgemm-rate (TOP/tests/bench/sgemm-rate.c built
# against OpenBLAS), then the OpenBLAS core and the thread counts printed
bench_sgemm_rate() {
	# shellcheck disable=SC2046
	${CC:-cc} -O2 -o sgemm-rate "$1/tests/bench/sgemm-rate.c" \
		$(${PKG_CONFIG:-pkg-config} --cflags --libs openblas) || return 1
	echo "OpenBLAS: $(OPENBLAS_VERBOSE=2 ./sgemm-rate 8 8 8 1 2>&1 | grep -i core | head -1)"
	echo "threads: ${OPENBLAS_NUM_THREADS:-default}, cpus: $(nproc)"
}
