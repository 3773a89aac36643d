#!/bin/bash
# bench-mem7b.sh - the memory of a 7B conversion's whole-model steps, at
# Llama-2-7B's shapes and all its layers.  Not a test: `make bench`.
#
#   SCALE=1 THREADS= BPW=1.0 LAYERS=32 FIT=2048 SEL=512 CAL_FIT=1024 EVAL=1024 WINDOW=512
#
# bench-pipe7b projects the steps that run the whole model (the end-to-end
# tuning, the calibration) to 32 layers from one and two; this runs them at
# LAYERS.  A random model of Llama-2-7B's shapes (tests/ref/hfmodel.py
# shards: f16, a shard a layer, so that its maker holds one layer), imported
# as f16 and cut to one layer too (cmf-patch truncate); every layer's
# projections the same seven payloads of BPW's rank (bench_payload); random
# token ids.  At THREADS threads (OPENBLAS_NUM_THREADS; all cores when
# empty), each step once:
#
#   import     cmf-patch import --dtype f16 of the LAYERS-layer model
#   e2e        blr-tune --end-to-end, one step on FIT tokens and SEL
#   calibrate  blr-tune --final-norm on the model with its payloads applied
#              (cmf-patch apply), as convert.mk runs it, on CAL_FIT and SEL
#   eval       cmf-eval of EVAL tokens, of the applied model and of the source
#
# For each: wall seconds, the peak RSS (/usr/bin/time's, which counts the
# model file's pages that the step touched: the kernel can drop those and
# read them again), and the peaks of the step's own (anonymous) memory and
# of those file pages, sampled four times a second (bench_mem).  The token
# counts are cut from the pipeline's (4 × 8192 FIT tokens and 2048 SEL for
# the end-to-end step) so that the 32-layer runs take minutes, not hours;
# what grows with them is what a step holds a position (the source's states
# and logits), which one-layer runs at both counts measure.  SCALE divides
# the widths, the heads and the vocabulary (SCALE=8 runs in a minute); at
# SCALE=1 the model takes 13.5 GB of disk, and as much again while its
# shards are imported.
set -eu

NVG_TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
NVG_BIN=${NVG_BIN:-$NVG_TOP/bin}
NVG_PY=${NVG_PY:-$NVG_TOP/build/venv/bin/python3}
SCALE=${SCALE:-1} THREADS=${THREADS:-} BPW=${BPW:-1.0} L=${LAYERS:-32}
FIT=${FIT:-2048} SEL=${SEL:-512} CAL_FIT=${CAL_FIT:-1024} EVAL=${EVAL:-1024} WINDOW=${WINDOW:-512}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

# shellcheck source=tests/bench/lib-bench.sh
. "$NVG_TOP/tests/bench/lib-bench.sh"
bench_7b bench-mem7b "a Llama-2-7B model's whole-model steps at $L layers"

# row STEP LAYERS TOKENS CMD...: one run, a line of the table
row() {
	local step=$1 nl=$2 tok=$3 m
	shift 3
	m=$(bench_mem run "$@") || exit 1
	# shellcheck disable=SC2086 # seconds, peak RSS, anonymous, file (KiB)
	set -- $m
	printf "%-24s %6s %-18s %9.1f %9.0f %9.0f %9.0f\n" "$step" "$nl" "$tok" "$1" \
		"$(($2 / 1024))" "$(($3 / 1024))" "$(($4 / 1024))"
}

mkdir hf
"$NVG_PY" "$NVG_TOP/tests/ref/hfmodel.py" shards hf "$(bench_7b_config "$L")" 1
printf "%-24s %6s %-18s %9s %9s %9s %9s\n" step layers tokens seconds "RSS MiB" "own MiB" "file MiB"
row "import --dtype f16" "$L" "" "$NVG_BIN/cmf-patch" import --dtype f16 -o "$L.cmf" hf
rm -rf hf
[ "$L" = 1 ] || "$NVG_BIN/cmf-patch" truncate --layers 1 -o 1.cmf "$L.cmf"
# a layer's projections: name, rows, columns
projs=("self_attn.q_proj $d $d" "self_attn.k_proj $d $d" "self_attn.v_proj $d $d"
	"self_attn.o_proj $d $d" "mlp.gate_proj $f $d" "mlp.up_proj $f $d" "mlp.down_proj $d $f")
for p in "${projs[@]}"; do
	# shellcheck disable=SC2086
	set -- $p
	bench_payload "$2" "$3" "$BPW" 1 "$1.blr"
done
for nl in 1 "$L"; do
	: >"$nl.patch"
	for ((l = 0; l < nl; l++)); do
		for p in "${projs[@]%% *}"; do
			echo "model.layers.$l.$p.weight=$p.blr" >>"$nl.patch"
		done
	done
	# shellcheck disable=SC2046 # NAME=PAYLOAD words
	"$NVG_BIN/cmf-patch" apply -o "$nl.applied.cmf" "$nl.cmf" $(cat "$nl.patch")
done
"$NVG_PY" -c "
import numpy as np, sys
np.random.default_rng(7).integers(0, $v, size=$FIT + $SEL + $EVAL + 4 * $WINDOW, dtype=np.uint32).tofile(sys.argv[1])
" ids.u32
for nl in 1 "$L"; do
	# shellcheck disable=SC2046 # --patch NAME=PAYLOAD words
	row "e2e (1 step)" "$nl" "FIT $FIT, SEL $SEL" "$NVG_BIN/blr-tune" --end-to-end -q \
		-m "$nl.cmf" --base "$nl.cmf" --tokens ids.u32 --fit-tokens "$FIT" \
		--sel-tokens "$SEL" --window "$WINDOW" --eval-every 1000 --steps 1 \
		$(sed 's/^/--patch /' "$nl.patch") -o e2e.cmf
	row "calibrate" "$nl" "FIT $CAL_FIT, SEL $SEL" "$NVG_BIN/blr-tune" --final-norm -q \
		-m "$nl.applied.cmf" --base "$nl.cmf" --tokens ids.u32 --fit-tokens "$CAL_FIT" \
		--sel-tokens "$SEL" --window "$WINDOW" -o cal.cmf
	[ "$nl" = 1 ] && [ "$L" != 1 ] && continue
	row "eval, payloads applied" "$nl" "$EVAL" "$NVG_BIN/cmf-eval" -m "$nl.applied.cmf" \
		--tokens ids.u32 --limit "$EVAL" --window "$WINDOW"
	sed -n 's/^tokens_per_s /#   tokens\/s: /p; s/^gflops /#   GFLOP\/s: /p' run.out
	row "eval, the f16 source" "$nl" "$EVAL" "$NVG_BIN/cmf-eval" -m "$nl.cmf" \
		--tokens ids.u32 --limit "$EVAL" --window "$WINDOW"
	sed -n 's/^tokens_per_s /#   tokens\/s: /p; s/^gflops /#   GFLOP\/s: /p' run.out
done
if [ "$SCALE" != 1 ]; then echo "# dimensions / $SCALE: not a 7B model"; fi
