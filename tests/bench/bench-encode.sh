#!/bin/bash
# bench-encode.sh - wall time, per-stage profile, flops, GFLOP/s against the
# machine's measured dgemm rate, and peak RSS of hctx-build, nvg-encode (nvg,
# P auto) and dual-svid on synthetic layers.  Not a test: `make bench`.
#
#   RUNS=3 SHAPES="576x1536 1536x576 2048x2048" BPWS="0.55 1.0" THREADS=
#   ENCODERS="default:"
#
# ENCODERS lists nvg encoders to set side by side, each LABEL:OPTIONS with
# the options' spaces written as commas ("direct:--g-solve,direct pcg:"
# compares the direct g solve with the default); each gets a row per shape
# and budget with its SEL error, and every row after the first its flops,
# time and SEL error relative to the first's (dual-svid is timed once, on
# the first row).
#
# Times are medians over RUNS; flops are counted from the shapes of every
# BLAS/LAPACK call (the same every run).  THREADS empty: OpenBLAS's default.
# The ratio is taken against a dgemm rate measured next to each encode, so
# that a machine shared with other work is compared with itself.  The whole
# table is long (2048x2048 at 1 bpw is about 6 TFLOP): RUNS=1 for a look.
set -eu

NVG_TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
NVG_BIN=${NVG_BIN:-$NVG_TOP/bin}
NVG_PY=${NVG_PY:-$NVG_TOP/build/venv/bin/python3}
RUNS=${RUNS:-3}
SHAPES=${SHAPES:-"576x1536 1536x576 2048x2048"}
BPWS=${BPWS:-"0.55 1.0"}
THREADS=${THREADS:-}
ENCODERS=${ENCODERS:-default:}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

# shellcheck source=tests/bench/lib-bench.sh
. "$NVG_TOP/tests/bench/lib-bench.sh"
bench_setup bench-encode
rate_line=$(${THREADS:+env OPENBLAS_NUM_THREADS=$THREADS} "$work/dgemm-rate" 2048 5)
dgemm=$(echo "$rate_line" | sed -n 's/^dgemm [0-9]*: \([0-9.]*\) GFLOP.*/\1/p')
echo "# bench-encode: $rate_line"
echo "# OpenBLAS (OPENBLAS_VERBOSE=2): $(OPENBLAS_VERBOSE=2 "$work/dgemm-rate" 64 1 2>&1 | grep -i core | head -1)"
echo "# medians of $RUNS run(s); GFLOP/s = counted flop / median nvg wall; ratio = that / the"
echo "# dgemm rate (2048, median of 3) measured again right before each shape and budget"

# timed OUT_PREFIX cmd...: wall seconds and peak RSS (KiB) to OUT_PREFIX.{wall,rss}
timed() {
	p=$1
	shift
	/usr/bin/time -f "%e %M" -o "$p.time" "$@"
	cut -d' ' -f1 "$p.time" >>"$p.wall"
	cut -d' ' -f2 "$p.time" >>"$p.rss"
}

printf '%-10s %5s %-8s | %8s %9s %8s | %10s %8s %8s %6s | %7s | %7s | %-8s | %s\n' shape bpw enc \
	"hctx s" "nvg s" "dual s" "GFLOP" "GFLOP/s" "dgemm" ratio "RSS MiB" sel "nvg pick" \
	"against the first: flop, time, sel"

# one encoder's runs and row: d e label options first(0/1); the first's
# flops, time and SEL error are kept in $e.first for the rows after it
encoder_row() {
	local d=$1 e=$2 label=$3 opts=${4//,/ } first=$5 tn flop sel td=-
	rm -f "$e.nvg.wall" "$e.nvg.rss" "$e.dual.wall" "$e.dual.rss"
	for r in $(seq "$RUNS"); do
		# shellcheck disable=SC2086
		timed "$e.nvg" "$NVG_BIN/nvg-encode" -w "$d/w.raw" --shape "$shape" \
			--hctx "$d/fit.hctx" --fit "$d/fit.gram" --sel "$d/sel.gram" \
			--bpw "$b" $thr $opts --profile -o "$e.blr" >"$e.line" 2>"$e.prof"
		[ "$first" = 1 ] || continue
		# shellcheck disable=SC2086
		timed "$e.dual" "$NVG_BIN/nvg-encode" --method dual-svid -w "$d/w.raw" \
			--shape "$shape" --bpw "$b" $thr -o "$e.dual.blr" >/dev/null
	done
	tn=$(median <"$e.nvg.wall")
	[ "$first" = 1 ] && td=$(median <"$e.dual.wall")
	flop=$(sed -n 's/^total: [0-9.]*s \([0-9.e+]*\) flop.*/\1/p' "$e.prof")
	sel=$(sed -n 's/.* stored fit [0-9.]* sel \([0-9.]*\).*/\1/p' "$e.line")
	[ "$first" = 1 ] && echo "$flop $tn $sel" >"$e.first"
	awk -v s="$shape" -v b="$b" -v en="$label" -v th="$(median <"$d/hctx.wall")" -v tn="$tn" \
		-v td="$td" -v f="$flop" -v dg="$dgemm" -v sel="$sel" -v first="$first" \
		-v ref="$(cat "$e.first")" -v rss="$(sort -g "$e.nvg.rss" | tail -1)" \
		-v pick="$(cut -d'|' -f1 "$e.line")" 'BEGIN {
		g = f / tn * 1e-9
		split(ref, r, " ")
		cmp = first ? "" : sprintf("%.2fx %.2fx %+.2f%%", f / r[1], tn / r[2], (sel / r[3] - 1) * 100)
		printf "%-10s %5s %-8s | %8.2f %9.2f %8s | %10.1f %8.2f %8.2f %5.0f%% | %7.1f | %7s | %-8s | %s\n",
			s, b, en, th, tn, td, f * 1e-9, g, dg, 100 * g / dg, rss / 1024, sel, pick, cmp }'
	sed -n 's/^profile: /    profile: /p' "$e.prof"
}

for shape in $SHAPES; do
	m=${shape%x*} n=${shape#*x}
	d="$work/$shape"
	mkdir -p "$d"
	"$NVG_PY" "$NVG_TOP/tests/ref/synth-layer.py" layer "$m" "$n" 1 "$d" $((2 * n))
	for r in $(seq "$RUNS"); do
		# shellcheck disable=SC2086
		timed "$d/hctx" "$NVG_BIN/hctx-build" $thr "$d/fit.gram" -o "$d/fit.hctx"
	done
	for b in $BPWS; do
		dgemm=$(${THREADS:+env OPENBLAS_NUM_THREADS=$THREADS} "$work/dgemm-rate" 2048 3 |
			sed -n 's/^dgemm [0-9]*: \([0-9.]*\) GFLOP.*/\1/p')
		first=1
		for enc in $ENCODERS; do
			encoder_row "$d" "$d/$b" "${enc%%:*}" "${enc#*:}" "$first"
			first=0
		done
	done
done
