#!/bin/bash
# bench-pipe7b.sh - the steps of a default conversion that run the model's
# forward, at Llama-2-7B's shapes, and what they add to bench-layer7b's
# projection of a whole 7B conversion.  Not a test: `make bench`.
#
#   SCALE=1 THREADS= BPW=1.0 FIT=8192 SEL=2048 WINDOW=512 TUNE_STEPS=50
#   TUNE_EVAL=10 E2E_STEPS=120 E2E_EVAL=10 LAYERS=32
#
# Two random models of Llama-2-7B's shapes (tests/ref/hfmodel.py: hidden
# 4096, FFN 11008, 32 heads of 128, vocabulary 32000, untied head), of one
# layer and of two, imported in f16 as a 7B model usually is; every
# projection a payload of BPW's rank (tests/blr-writer.py: random signs and
# scales, two paths; the times do not depend on the values); random token
# ids.  Timed, at THREADS threads (OPENBLAS_NUM_THREADS; all cores when
# empty), as convert.mk runs each step with TUNE, CALIBRATE and E2E on:
#
#   capture   gram-capture -l 0: the layer's four inputs' FIT and SEL Grams
#   source    gram-capture -l 0 --next-state: the source stream's next states
#   tune      blr-tune --layer 0: the block reconstruction, TUNE_STEPS steps,
#             the SEL windows measured every TUNE_EVAL steps (the default)
#   calibrate blr-tune --final-norm, its default steps, on the model with its
#             payloads applied (cmf-patch apply), as convert.mk runs it
#   e2e       blr-tune --end-to-end, E2E_STEPS steps on 4 × FIT tokens, the
#             SEL windows measured every E2E_EVAL steps (blr-tune's default, as
#             convert.mk runs it)
#
# A step's cost is split into what does not grow with the step count and
# what does (two runs, of S1 and S2 steps: a step is their difference over
# S2 − S1), and the whole-model steps into what the head costs and what a
# layer costs (the one-layer model against the two-layer one), so that
# LAYERS layers are a linear projection: per layer capture + source + tune,
# and calibrate and e2e at LAYERS layers.  The tune and e2e runs measure SEL
# at the start and after their last step only; a run of six steps measured
# after each gives an SEL measurement's cost (a dequantization of the
# payloads and a forward), added for those every TUNE_EVAL or E2E_EVAL
# steps in between.  SCALE
# divides the widths, the heads and the vocabulary (SCALE=8 runs end to end
# in a few minutes).
set -eu

NVG_TOP=${NVG_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
NVG_BIN=${NVG_BIN:-$NVG_TOP/bin}
NVG_PY=${NVG_PY:-$NVG_TOP/build/venv/bin/python3}
SCALE=${SCALE:-1} THREADS=${THREADS:-} BPW=${BPW:-1.0}
FIT=${FIT:-8192} SEL=${SEL:-2048} WINDOW=${WINDOW:-512}
TUNE_STEPS=${TUNE_STEPS:-50} TUNE_EVAL=${TUNE_EVAL:-10} E2E_STEPS=${E2E_STEPS:-120} E2E_EVAL=${E2E_EVAL:-10}
LAYERS=${LAYERS:-32}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

# shellcheck source=tests/bench/lib-bench.sh
. "$NVG_TOP/tests/bench/lib-bench.sh"
bench_7b bench-pipe7b "a Llama-2-7B layer's forward steps"

# model L: DIR/L.cmf with L layers, and DIR/L.patch (--patch for each projection)
model() {
	local nl=$1
	mkdir -p "hf$nl"
	"$NVG_PY" "$NVG_TOP/tests/ref/hfmodel.py" make "hf$nl" "$(bench_7b_config "$nl")" "$nl"
	"$NVG_BIN/cmf-patch" import --dtype f16 -o "$nl.cmf" "hf$nl"
	rm -rf "hf$nl"
	: >"$nl.patch"
	for ((l = 0; l < nl; l++)); do
		for p in "self_attn.q_proj $d $d" "self_attn.k_proj $d $d" "self_attn.v_proj $d $d" \
			"self_attn.o_proj $d $d" "mlp.gate_proj $f $d" "mlp.up_proj $f $d" "mlp.down_proj $d $f"; do
			# shellcheck disable=SC2086 # name, rows, columns
			set -- $p
			pl=L$l.${1#*.}.blr
			bench_payload "$2" "$3" "$BPW" "$((l + 1))" "$pl"
			echo "--patch model.layers.$l.$1.weight=$pl" >>"$nl.patch"
		done
	done
	# the model with its payloads in it, as convert.mk calibrates it
	# shellcheck disable=SC2046 # NAME=PAYLOAD words
	"$NVG_BIN/cmf-patch" apply -o "$nl.applied.cmf" "$nl.cmf" $(sed 's/^--patch //' "$nl.patch")
}
model 1
model 2
"$NVG_PY" -c "
import numpy as np, sys
np.random.default_rng(7).integers(0, $v, size=4 * $FIT + $SEL + 4 * $WINDOW, dtype=np.uint32).tofile(sys.argv[1])
" ids.u32
CAP="--tokens ids.u32 --fit-tokens $FIT --sel-tokens $SEL --window $WINDOW"

# secs CMD...: the wall seconds of one run (its output in t.out, t.err)
secs() {
	/usr/bin/time -f "%e %M" -o t.time "$@" >t.out 2>t.err || { cat t.err >&2; return 1; }
	read -r s rss <t.time
	echo "$rss" >>peak.kib
	echo "$s"
}

# fixed_step S1 S2 CMD...: "fixed per-step" seconds from runs of S1 and S2 steps
fixed_step() {
	local s1=$1 s2=$2 a b
	shift 2
	a=$(secs "$@" --steps "$s1") && b=$(secs "$@" --steps "$s2") || return 1
	awk -v a="$a" -v b="$b" -v s1="$s1" -v s2="$s2" \
		'BEGIN { p = (b - a) / (s2 - s1); printf "%.3f %.4f\n", a - s1 * p, p }'
}

mkdir -p tuned
# shellcheck disable=SC2086 # CAP, E2E and the patches are word lists
cap=$(secs "$NVG_BIN/gram-capture" -q -m 1.cmf $CAP -l 0 -o g)
# shellcheck disable=SC2086
src=$(secs "$NVG_BIN/gram-capture" -q -m 1.cmf $CAP -l 0 --next-state src.state)
# shellcheck disable=SC2086,SC2046
tune=$(fixed_step 2 6 "$NVG_BIN/blr-tune" --layer 0 -q -m 1.cmf $CAP --eval-every 1000 \
	--src-next src.state $(cat 1.patch) --next-state next.state -o tuned)
# an SEL measurement of the layer's tuning (its payloads dequantized and the
# layer's forward on the SEL windows): six steps measured after each, five
# more than the six-step run above makes
# shellcheck disable=SC2086,SC2046
tv=$(secs "$NVG_BIN/blr-tune" --layer 0 -q -m 1.cmf $CAP --eval-every 1 --steps 6 \
	--src-next src.state $(cat 1.patch) --next-state next.state -o tuned)
# shellcheck disable=SC2086
cal1=$(secs "$NVG_BIN/blr-tune" --final-norm -q -m 1.applied.cmf --base 1.cmf $CAP -o c1.cmf)
# shellcheck disable=SC2086
cal2=$(secs "$NVG_BIN/blr-tune" --final-norm -q -m 2.applied.cmf --base 2.cmf $CAP -o c2.cmf)
E2E="--tokens ids.u32 --fit-tokens $((4 * FIT)) --sel-tokens $SEL --window $WINDOW"
# shellcheck disable=SC2086,SC2046
e1=$(fixed_step 2 6 "$NVG_BIN/blr-tune" --end-to-end -q -m 1.cmf --base 1.cmf $E2E \
	--eval-every 1000 $(cat 1.patch) -o e1.cmf)
# shellcheck disable=SC2086,SC2046
e2=$(fixed_step 2 6 "$NVG_BIN/blr-tune" --end-to-end -q -m 2.cmf --base 2.cmf $E2E \
	--eval-every 1000 $(cat 2.patch) -o e2.cmf)
read -r tune_f tune_p <<<"$tune"
read -r e1_f e1_p <<<"$e1"
read -r e2_f e2_p <<<"$e2"
# an SEL measurement's seconds: six steps measured after each, five
# measurements more than the six-step runs above make (at the start and
# after the last step)
# shellcheck disable=SC2086,SC2046
v1=$(secs "$NVG_BIN/blr-tune" --end-to-end -q -m 1.cmf --base 1.cmf $E2E --eval-every 1 \
	--steps 6 $(cat 1.patch) -o e1.cmf)
# shellcheck disable=SC2086,SC2046
v2=$(secs "$NVG_BIN/blr-tune" --end-to-end -q -m 2.cmf --base 2.cmf $E2E --eval-every 1 \
	--steps 6 $(cat 2.patch) -o e2.cmf)
peak=$(sort -g peak.kib | tail -1)
awk -v cap="$cap" -v src="$src" -v tf="$tune_f" -v tp="$tune_p" -v ts="$TUNE_STEPS" -v tv="$tv" -v te="$TUNE_EVAL" \
	-v c1="$cal1" -v c2="$cal2" -v e1f="$e1_f" -v e1p="$e1_p" -v e2f="$e2_f" -v e2p="$e2_p" \
	-v es="$E2E_STEPS" -v ee="$E2E_EVAL" -v v1="$v1" -v v2="$v2" -v L="$LAYERS" -v peak="$peak" \
	-v sc="$SCALE" 'BEGIN {
	tm = (tv - (tf + 6 * tp)) / 5; tn = int((ts - 1) / te)
	tune = tf + ts * tp + tn * tm
	printf "%-34s %9.1f s\n", "capture (one layer)", cap
	printf "%-34s %9.1f s\n", "source stream (one layer)", src
	printf "%-34s %9.1f s  (%.1f + %d steps of %.2f s + %d measurements of %.1f s)\n", "tune (one layer)",
		tune, tf, ts, tp, tn, tm
	cal = c1 + (L - 1) * (c2 - c1)
	printf "%-34s %9.1f s  (one layer %.1f s, two %.1f s)\n", "calibrate (" L " layers)", cal, c1, c2
	ef = e1f + (L - 1) * (e2f - e1f); ep = e1p + (L - 1) * (e2p - e1p)
	# the SEL measurements between the first and the last (every ee steps)
	m1 = (v1 - (e1f + 6 * e1p)) / 5; m2 = (v2 - (e2f + 6 * e2p)) / 5; mv = m1 + (L - 1) * (m2 - m1)
	nm = int((es - 1) / ee)
	e2e = ef + es * ep + nm * mv
	printf "%-34s %9.1f s  (%.1f + %d steps of %.2f s + %d measurements of %.1f s; a layer %.2f s a step, %.1f s a measurement)\n",
		"e2e (" L " layers)", e2e, ef, es, ep, nm, mv, e2p - e1p, m2 - m1
	per = cap + src + tune
	printf "# the forward steps of %d layers: %.2f h (%.1f s a layer), calibrate and e2e %.2f h", L,
		(L * per + cal + e2e) / 3600, per, (cal + e2e) / 3600
	if (sc != 1) printf " (dimensions / %d: not a 7B projection)", sc
	printf "\n# peak RSS of any step: %d MiB\n", peak / 1024
}'
