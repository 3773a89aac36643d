#!/bin/bash
# the encoders on real layers: stories260K layer 1, weights read straight
# from the llama2.c checkpoint, Grams of the layer's real inputs from a numpy
# forward (tests/ref/layer-grams.py) over TinyStories text
. "$(dirname "$0")/test-lib.sh"

REF="$NVG_TOP/tests/ref"
test_require_data stories260K.bin tok512.bin tinystories-train-sample.txt
M="$NVG_DATA/stories260K.bin"
field() { sed -En "s/(^|.* )$1 ([^ ]*).*/\\2/p" "$2"; }
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

test_expect_success 'the numpy forward is faithful: run.c -t 0 -n 64 output' '
	cat >expect <<-\EOT &&
	Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.
	Lily
	EOT
	"$NVG_PY" "$REF/layer-grams.py" generate "$M" "$NVG_DATA/tok512.bin" 64 "Once upon a time" >actual &&
	test_cmp expect actual
'

test_expect_success 'setup: layer 1 Grams (FIT 4096, SEL 2048 tokens) and weights' '
	"$NVG_PY" "$REF/layer-grams.py" grams "$M" "$NVG_DATA/tok512.bin" \
		"$NVG_DATA/tinystories-train-sample.txt" 1 4096 2048 256 L1 &&
	for w in wq wk wo w1 w2; do
		"$NVG_PY" "$REF/layer-grams.py" weight "$M" $w 1 $w.raw || return 1
	done &&
	test "$(stat -c %s w2.raw)" = $((64 * 172 * 4)) &&
	test "$(stat -c %s L1.down.fit.gram)" = $((16 + 4 * 172 * 172))
'

# nvg and dual-svid on one tensor; nvg must win on the SEL Gram
duel() {
	w=$1 lead=$2 shape=$3 bpw=$4
	shift 4
	m=${shape%x*} n=${shape#*x}
	hctx-build L1.$lead.fit.gram -o $lead.hctx &&
	nvg-encode -w $w.raw --shape $shape --hctx $lead.hctx --fit L1.$lead.fit.gram \
		--sel L1.$lead.sel.gram --bpw $bpw "$@" -o $w.nvg.blr >$w.line &&
	nvg-encode --method dual-svid -w $w.raw --shape $shape --bpw $bpw "$@" -o $w.dual.blr >$w.dline &&
	"$NVG_PY" "$REF/blr.py" check $w.nvg.blr $w.raw $m $n L1.$lead.sel.gram >$w.n &&
	"$NVG_PY" "$REF/blr.py" check $w.dual.blr $w.raw $m $n L1.$lead.sel.gram >$w.d &&
	echo "$w: nvg $(field herr $w.n) dual-svid $(field herr $w.d) ($(cat $w.line))" &&
	less "$(field herr $w.n)" "$(field herr $w.d)"
}

test_expect_success 'q_proj (64x64) at 1 bpw: nvg beats dual-svid on SEL' '
	duel wq q 64x64 1.0
'
test_expect_success 'k_proj (32x64, GQA, kv factor 2) at 0.55 bpw' '
	duel wk q 32x64 0.55 --kv --kv-factor 2
'
test_expect_success 'o_proj (64x64) at 2 bpw' '
	duel wo o 64x64 2.0
'
test_expect_success 'gate_proj (172x64) at 1 bpw' '
	duel w1 gate 172x64 1.0
'
test_expect_success 'down_proj (64x172) at 2 bpw' '
	duel w2 down 64x172 2.0
'

test_expect_success 'dual-svid agrees with an independent numpy dual-svid (numpy SVD)' '
	for w in wq:64:64 w1:172:64 w2:64:172; do
		IFS=: read -r name m n <<-EOT
		$w
		EOT
		"$NVG_PY" "$REF/blr.py" check $name.dual.blr $name.raw $m $n >c &&
		"$NVG_PY" "$REF/blr.py" dual-svid $name.raw $m $n "$(field r c)" 2 >ref &&
		echo "$name: C $(field frob c) numpy $(field frob ref)" &&
		awk -v a="$(field frob c)" -v b="$(field frob ref)" \
			"BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2e-6) }" || return 1
	done
'

test_done
