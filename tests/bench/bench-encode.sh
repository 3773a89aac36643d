#!/bin/bash
# bench-encode.sh - wall time, per-stage profile, flops, GFLOP/s against the
# machine's measured dgemm rate, and peak RSS of hctx-build, nvg-encode (nvg,
# P auto) and dual-svid on synthetic layers.  Not a test: `make bench`.
#
#   RUNS=3 SHAPES="576x1536 1536x576 2048x2048" BPWS="0.55 1.0" THREADS=
#   ENCODERS="default:" REAL="3:down 3:gate"
#
# REAL lists real tensors of SmolLM2-135M-Instruct (L:short, short one of q
# k v o gate up down), encoded after the synthetic shapes on the Grams that
# gram-capture takes from the source model's own forward at layer L (FIT
# 8192 and SEL 2048 tokens of the TinyStories calibration sample, window
# 512, the context at convert.mk's rho 0.03), as convert.mk's source stream
# captures them; empty: none.  The model is fetched once into the user's
# cache (tests/lib-smollm2.sh).
#
# ENCODERS lists nvg encoders to set side by side, each LABEL:OPTIONS with
# the options' spaces written as commas ("direct:--g-solve,direct pcg:"
# compares the direct g solve with the default), or LABEL@DIR:OPTIONS for
# the nvg-encode of another build's DIR ("before@/tmp/old/bin: now:"
# compares an older commit's encoder with this one); each gets a row per
# shape and budget with its SEL error, and every row after the first its
# flops, time and SEL error relative to the first's (dual-svid is timed
# once, with the first).  The runs alternate between the encoders, so that
# a load that comes and goes falls on all of them alike.
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
SHAPES=${SHAPES-"576x1536 1536x576 2048x2048"}
BPWS=${BPWS:-"0.55 1.0"}
THREADS=${THREADS:-}
ENCODERS=${ENCODERS:-default:}
REAL=${REAL-"3:down 3:gate"}
NVG_DATA=${NVG_DATA:-$NVG_TOP/../shared/data}
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

# real_setup: SmolLM2-135M imported into $work/real, the calibration
# tokens, and the source model's states up to the deepest layer of REAL
real_setup() {
	local r=$work/real l deepest=0 st nx
	# shellcheck source=tests/lib-smollm2.sh
	. "$NVG_TOP/tests/lib-smollm2.sh"
	smollm2_gguf || { echo "bench-encode: SmolLM2-135M could not be fetched" >&2; exit 1; }
	mkdir -p "$r"
	"$NVG_BIN/cmf-patch" import -o "$r/sm.cmf" "$GGUF"
	"$NVG_BIN/cmf-eval" -m "$r/sm.cmf" --text "$NVG_DATA/tinystories-train-sample.txt" \
		--tokenize "$r/tok.u32"
	for t in $REAL; do [ "${t%%:*}" -gt "$deepest" ] && deepest=${t%%:*}; done
	for l in $(seq 0 "$deepest"); do
		st=() nx=()
		[ "$l" = 0 ] || st=(--state "$r/S$l")
		[ "$l" = "$deepest" ] || nx=(--next-state "$r/S$((l + 1))")
		"$NVG_BIN/gram-capture" -q -m "$r/sm.cmf" --tokens "$r/tok.u32" -l "$l" "${st[@]}" \
			--fit-tokens 8192 --sel-tokens 2048 --window 512 -o "$r/L$l" "${nx[@]}"
	done
}

# real_tensor L SHORT DIR: the tensor's W, FIT and SEL Grams in DIR; its
# shape on stdout
real_tensor() {
	local r=$work/real lead=$2 name
	case $2 in
	q | k | v) lead=q name=self_attn.$2_proj ;;
	o) name=self_attn.o_proj ;;
	gate | up) lead=gate name=mlp.$2_proj ;;
	down) name=mlp.down_proj ;;
	*) echo "bench-encode: REAL: unknown tensor '$2' (q k v o gate up down)" >&2; exit 1 ;;
	esac
	name=model.layers.$1.$name.weight
	"$NVG_BIN/cmf-patch" extract -o "$3/w.raw" "$r/sm.cmf" "$name"
	cp "$r/L$1.$lead.fit.gram" "$3/fit.gram"
	cp "$r/L$1.$lead.sel.gram" "$3/sel.gram"
	"$NVG_BIN/cmf-patch" list "$r/sm.cmf" | awk -v n="$name" '$1 == n { print $3 }'
}

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

# one run of an encoder: d e label[@dir] options first(0/1), its wall time
# and RSS appended to $e.nvg.{wall,rss}, its line and profile in $e.line
# and $e.prof; with the first, dual-svid's too
encoder_run() {
	local d=$1 e=$2 label=$3 opts=${4//,/ } first=$5 bin=$NVG_BIN
	case $label in *@*) bin=${label#*@} ;; esac
	# shellcheck disable=SC2086
	timed "$e.nvg" "$bin/nvg-encode" -w "$d/w.raw" --shape "$shape" \
		--hctx "$d/fit.hctx" --fit "$d/fit.gram" --sel "$d/sel.gram" \
		--bpw "$b" $thr $opts --profile -o "$e.blr" >"$e.line" 2>"$e.prof"
	[ "$first" = 1 ] || return 0
	# shellcheck disable=SC2086
	timed "$e.dual" "$NVG_BIN/nvg-encode" --method dual-svid -w "$d/w.raw" \
		--shape "$shape" --bpw "$b" $thr -o "$e.dual.blr" >/dev/null
}

# one encoder's row from its runs: d e label first(0/1) ref; the first's
# flops, time and SEL error are kept in ref for the rows after it
encoder_row() {
	local d=$1 e=$2 label=${3%%@*} first=$4 ref=$5 tn flop sel td=-
	tn=$(median <"$e.nvg.wall")
	[ "$first" = 1 ] && td=$(median <"$e.dual.wall")
	flop=$(sed -n 's/^total: [0-9.]*s \([0-9.e+]*\) flop.*/\1/p' "$e.prof")
	sel=$(sed -n 's/.* stored fit [0-9.]* sel \([0-9.]*\).*/\1/p' "$e.line")
	[ "$first" = 1 ] && echo "$flop $tn $sel" >"$ref"
	awk -v s="$item" -v b="$b" -v en="$label" -v th="$(median <"$d/hctx.wall")" -v tn="$tn" \
		-v td="$td" -v f="$flop" -v dg="$dgemm" -v sel="$sel" -v first="$first" \
		-v ref="$(cat "$ref")" -v rss="$(sort -g "$e.nvg.rss" | tail -1)" \
		-v pick="$(cut -d'|' -f1 "$e.line")" 'BEGIN {
		g = f / tn * 1e-9
		split(ref, r, " ")
		cmp = first ? "" : sprintf("%.2fx %.2fx %+.2f%%", f / r[1], tn / r[2], (sel / r[3] - 1) * 100)
		printf "%-10s %5s %-8s | %8.2f %9.2f %8s | %10.1f %8.2f %8.2f %5.0f%% | %7.1f | %7s | %-8s | %s\n",
			s, b, en, th, tn, td, f * 1e-9, g, dg, 100 * g / dg, rss / 1024, sel, pick, cmp }'
	sed -n 's/^profile: /    profile: /p' "$e.prof"
}

# the items: synthetic shapes, then the real tensors (label L<l>.<short>)
items=$SHAPES
if [ -n "$REAL" ]; then
	real_setup
	for t in $REAL; do items="$items L${t%%:*}.${t#*:}"; done
fi
for item in $items; do
	d="$work/$item"
	mkdir -p "$d"
	case $item in
	L*.*)
		t=${item#L}
		shape=$(real_tensor "${t%%.*}" "${t#*.}" "$d")
		echo "# $item: SmolLM2-135M layer ${t%%.*}'s ${t#*.} ($shape), its source forward's Grams"
		hopt="--rho 0.03"
		;;
	*)
		shape=$item
		m=${shape%x*} n=${shape#*x}
		"$NVG_PY" "$NVG_TOP/tests/ref/synth-layer.py" layer "$m" "$n" 1 "$d" $((2 * n))
		hopt=
		;;
	esac
	rm -f "$d/hctx.wall" "$d/hctx.rss"
	for r in $(seq "$RUNS"); do
		# shellcheck disable=SC2086
		timed "$d/hctx" "$NVG_BIN/hctx-build" $thr $hopt "$d/fit.gram" -o "$d/fit.hctx"
	done
	for b in $BPWS; do
		dgemm=$(${THREADS:+env OPENBLAS_NUM_THREADS=$THREADS} "$work/dgemm-rate" 2048 3 |
			sed -n 's/^dgemm [0-9]*: \([0-9.]*\) GFLOP.*/\1/p')
		rm -f "$d/$b".*.nvg.* "$d/$b".*.dual.*
		for r in $(seq "$RUNS"); do
			i=0
			for enc in $ENCODERS; do
				encoder_run "$d" "$d/$b.$i" "${enc%%:*}" "${enc#*:}" $((i == 0))
				i=$((i + 1))
			done
		done
		i=0
		for enc in $ENCODERS; do
			encoder_row "$d" "$d/$b.$i" "${enc%%:*}" $((i == 0)) "$d/$b.first"
			i=$((i + 1))
		done
	done
done
