#!/bin/bash
# bench-layer7b.sh - one Llama-2-7B layer's tensors through hctx-build and
# nvg-encode on synthetic data (tests/ref/synth-layer.py: a decaying column
# spectrum, three heavy input channels), and what that projects to for a
# whole 7B conversion.  Not a test: `make bench`.
#
#   BPW=1.0 SCALE=1 THREADS= TOKENS_PER_N=2 SHAPES="qkvo gate down" FOLLOW=8
#
# The layer: q, k, v, o (4096x4096), gate, up (11008x4096), down
# (4096x11008); tensors of one shape are encoded once and counted as many
# times as the layer has them, and each input's context is built once per
# lead (q: q k v; o; gate: gate up; down), as convert.mk does.  SCALE divides
# every dimension (SCALE=8 runs the script end to end in minutes); SHAPES
# names the shapes to run (qkvo: 4096x4096, gate: 11008x4096, down:
# 4096x11008), so that one shape can run at full size alone.  Printed
# per shape: contexts and encode wall seconds, counted flops, GFLOP/s and its
# ratio to the dgemm rate measured just before, the peak RSS of hctx-build
# (ctx), that of the encode against the f64 size of the encoder's inputs (W
# and the Gram), and the profile.  FOLLOW (convert.mk's PATHS_FOLLOW, 8 by
# default) > 1 encodes each shape again at the path count auto chose (a
# "followed" row; its payload must be auto's byte for byte), since a
# conversion encodes both candidates only on one layer in FOLLOW and that
# count alone on the rest; 0 or 1: both candidates everywhere.  Then the
# projection: the layer's encode and context time times 32 layers (auto's on
# ceil(32/FOLLOW) of them, the followed one's on the rest), on this machine
# and on Slurm nodes of 16, 32 and 64 such cores, at the per-core rate
# measured here (a linear bound: no node's memory bandwidth or OpenBLAS's
# scaling is modelled), printed only when every shape ran; the steps that run
# the forward (capture, tuning, calibration, end-to-end) are bench-pipe7b's.
# The whole run at SCALE=1 is long (hours on two cores): the contexts and
# Grams of 11008 inputs are 1 GB each in f64.
set -eu

NVG_TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
NVG_BIN=${NVG_BIN:-$NVG_TOP/bin}
NVG_PY=${NVG_PY:-$NVG_TOP/build/venv/bin/python3}
BPW=${BPW:-1.0}
SCALE=${SCALE:-1}
THREADS=${THREADS:-}
TOKENS_PER_N=${TOKENS_PER_N:-2}
SHAPES=${SHAPES:-qkvo gate down}
FOLLOW=${FOLLOW:-8}
case $FOLLOW in
'' | *[!0-9]*) echo "bench-layer7b: FOLLOW: '$FOLLOW' is not a count" >&2; exit 2 ;;
esac
for name in $SHAPES; do
	case $name in
	qkvo | gate | down) ;;
	*) echo "bench-layer7b: SHAPES: unknown '$name' (qkvo gate down)" >&2; exit 2 ;;
	esac
done
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

# shellcheck source=tests/bench/lib-bench.sh
. "$NVG_TOP/tests/bench/lib-bench.sh"
bench_setup bench-layer7b
rate() { ${THREADS:+env OPENBLAS_NUM_THREADS=$THREADS} "$work/dgemm-rate" 2048 3 |
	sed -n 's/^dgemm [0-9]*: \([0-9.]*\) GFLOP.*/\1/p'; }
threads=${THREADS:-$("$work/dgemm-rate" 64 1 | sed -n 's/.*, \([0-9]*\) threads$/\1/p')}
threads=${threads:-$(nproc)}
echo "# bench-layer7b: one Llama-2-7B layer at $BPW bpw, dimensions / $SCALE, $threads thread(s)"
echo "# OpenBLAS (OPENBLAS_VERBOSE=2): $(OPENBLAS_VERBOSE=2 "$work/dgemm-rate" 64 1 2>&1 | grep -i core | head -1)"

d4=$((4096 / SCALE)) d11=$((11008 / SCALE))
# shape, how many of the layer's tensors have it, whether its context is built here
# (q's serves q, k, v; gate's serves gate and up)
layer="" all=1
for name in qkvo gate down; do
	case " $SHAPES " in
	*" $name "*) ;;
	*) all=0; continue ;;
	esac
	case $name in
	qkvo) layer="$layer ${d4}x${d4}:4:2" ;;
	gate) layer="$layer ${d11}x${d4}:2:1" ;;
	down) layer="$layer ${d4}x${d11}:1:1" ;;
	esac
done

# encode_row LABEL PATHS DIR NAME: one encode of DIR's tensor with --paths
# PATHS into DIR/NAME.blr, its row printed, "seconds flops" of the shape's
# tensors (contexts counted once per lead) in DIR/NAME.sum
encode_row() {
	# shellcheck disable=SC2086
	/usr/bin/time -f "%e %M" -o "$3/$4.time" "$NVG_BIN/nvg-encode" -w "$3/w.raw" \
		--shape "$shape" --hctx "$3/fit.hctx" --fit "$3/fit.gram" --sel "$3/sel.gram" \
		--bpw "$BPW" --paths "$2" $thr --profile -o "$3/$4.blr" >"$3/$4.line" 2>"$3/$4.prof"
	flop=$(sed -n 's/^total: [0-9.]*s \([0-9.e+]*\) flop.*/\1/p' "$3/$4.prof")
	read -r th hrss <"$3/hctx.time"
	read -r tn rss <"$3/$4.time"
	awk -v s="$1" -v c="$count" -v th="$th" -v tn="$tn" -v f="$flop" -v dg="$dg" \
		-v rss="$rss" -v hrss="$hrss" -v m="$m" -v n="$n" -v pick="$(cut -d'|' -f1 "$3/$4.line")" \
		-v leads="$leads" -v sum="$3/$4.sum" 'BEGIN {
			g = f / tn * 1e-9; inb = 8 * (m * n + n * n) / 1048576
			printf "%-12s %3d | %9.2f %9.2f | %10.1f %8.2f %8.2f %5.0f%% | %8.1f %8.1f %8.1f %5.2f | %s\n",
				s, c, th, tn, f * 1e-9, g, dg, 100 * g / dg, hrss / 1024, rss / 1024, inb,
				rss / 1024 / inb, pick
			printf "%.3f %.6g\n", leads * th + c * tn, c * f > sum }'
	sed -n 's/^profile: /    profile: /p' "$3/$4.prof"
}

printf '%-12s %3s | %9s %9s | %10s %8s %8s %6s | %8s %8s %8s %5s | %s\n' shape "×" "hctx s" \
	"nvg s" GFLOP GFLOP/s dgemm ratio "ctx MiB" "RSS MiB" "in MiB" "RSS/in" pick
layer_s=0 layer_f=0 fol_s=0 fol_f=0
for entry in $layer; do
	shape=${entry%%:*} rest=${entry#*:}
	count=${rest%%:*} leads=${rest#*:}
	m=${shape%x*} n=${shape#*x}
	dir="$work/$shape"
	mkdir -p "$dir"
	"$NVG_PY" "$NVG_TOP/tests/ref/synth-layer.py" layer "$m" "$n" 1 "$dir" $((TOKENS_PER_N * n))
	# shellcheck disable=SC2086
	/usr/bin/time -f "%e %M" -o "$dir/hctx.time" \
		"$NVG_BIN/hctx-build" $thr "$dir/fit.gram" -o "$dir/fit.hctx"
	dg=$(rate)
	encode_row "$shape" auto "$dir" out
	read -r s f <"$dir/out.sum"
	layer_s=$(awk -v a="$layer_s" -v b="$s" 'BEGIN { print a + b }')
	layer_f=$(awk -v a="$layer_f" -v b="$f" 'BEGIN { print a + b }')
	[ "$FOLLOW" -gt 1 ] || continue
	p=$(sed -n 's/^pick P\([12]\) .*/\1/p' "$dir/out.line")
	encode_row "  followed P$p" "$p" "$dir" fol
	cmp -s "$dir/out.blr" "$dir/fol.blr" ||
		{ echo "bench-layer7b: $shape: --paths $p's payload is not auto's" >&2; exit 1; }
	read -r s f <"$dir/fol.sum"
	fol_s=$(awk -v a="$fol_s" -v b="$s" 'BEGIN { print a + b }')
	fol_f=$(awk -v a="$fol_f" -v b="$f" 'BEGIN { print a + b }')
done
if [ "$all" = 0 ]; then
	echo "# SHAPES=\"$SHAPES\": not the whole layer, so no projection"
	exit 0
fi
awk -v s="$layer_s" -v f="$layer_f" -v fs="$fol_s" -v ff="$fol_f" -v F="$FOLLOW" \
	-v t="$threads" -v sc="$SCALE" 'BEGIN {
	printf "# one layer (7 tensors, 4 contexts), both candidates (--paths auto): %.0f s, %.1f TFLOP\n",
		s, f * 1e-12
	if (F > 1) {
		a = int((32 + F - 1) / F)
		printf "# the same at the path counts auto chose: %.0f s, %.1f TFLOP\n", fs, ff * 1e-12
		printf "# 32 layers as convert.mk with PATHS_FOLLOW=%d runs them (%d with both candidates, %d followed)\n",
			F, a, 32 - a
		s = (a * s + (32 - a) * fs) / 32
	} else
		printf "# 32 layers with both candidates everywhere (PATHS_FOLLOW=0)\n"
	printf "# 32 layers on this machine (%d thread(s)): %.1f h", t, 32 * s / 3600
	if (sc != 1) printf " (dimensions / %d: not a 7B projection)", sc
	printf "\n"
	for (k = 16; k <= 64; k *= 2)
		printf "# on one Slurm node of %d such cores: %.1f h (linear in cores)\n", k, 32 * s * t / k / 3600
}'
