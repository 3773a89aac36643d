#!/bin/bash
# blr-tune --layer: block reconstruction of one layer's payloads on
# stories260K.  SEL never worse, signs and sizes kept, the same bytes twice
# (and with the source stream's next states read, --src-next), the tuned layer
# closer to the source model; bad input refused; convert.mk TUNE=1.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

C="--tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"
# applied L0DIR L1DIR: NAME=PAYLOAD arguments of cmf-patch apply for both layers
applied() {
	for s in $SHORTS; do
		printf ' model.layers.0.%s.weight=%s/%s.blr' "${s#*:}" "$1" "${s%%:*}"
		printf ' model.layers.1.%s.weight=%s/%s.blr' "${s#*:}" "$2" "${s%%:*}"
	done
}

test_expect_success 'setup: a two-layer conversion at 2 bpw, the source stream' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 -j2 2>err &&
	gram-capture -q -m s2.cmf $C -l 0 --next-state S1src.state
'

test_expect_success 'layer 1: SEL never worse, every payload written, signs and sizes kept' '
	mkdir t1 &&
	blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 60 -o t1 >rep 2>err &&
	test_grep "^layer 1: loss fit [0-9.]* -> [0-9.]* sel [0-9.]* -> [0-9.]* \| step [0-9]* of 60 \|" rep &&
	test_grep "\| norm sel [0-9]\.[0-9]* -> [0-9]\.[0-9]*$" rep &&
	sed -n "s/.* sel \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p" rep >sel &&
	awk "{ exit !(\$2 <= \$1) }" sel &&
	for s in q k v o gate up down; do
		blr-pack info t1/$s.blr >/dev/null && "$NVG_PY" "$TEST_DIR/ref/samesigns.py" c/L1/$s.blr t1/$s.blr || return 1
	done &&
	test_must_fail cmp -s c/L1/down.blr t1/down.blr
'

test_expect_success 'same inputs, same bytes; no steps, the inputs back' '
	mkdir t1b t0s &&
	blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 60 -o t1b >rep2 &&
	for s in q k v o gate up down; do cmp t1/$s.blr t1b/$s.blr || return 1; done &&
	blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 0 -o t0s >rep0 &&
	test_grep "step 0 of 0" rep0 &&
	for s in q k v o gate up down; do cmp c/L1/$s.blr t0s/$s.blr || return 1; done
'

test_expect_success '--loss: mse the default; normed never worse on SEL, signs kept, its own bytes, the same twice' '
	mkdir tm tn tn2 &&
	blr-tune --layer 1 -q -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 60 --loss mse -o tm >rep.m &&
	for s in q k v o gate up down; do cmp t1/$s.blr tm/$s.blr || return 1; done &&
	blr-tune --layer 1 -q -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 60 --loss normed -o tn >rep.n &&
	blr-tune --layer 1 -q -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --steps 60 --loss normed -o tn2 >rep.n2 &&
	test "$(cut -d"|" -f1,2,4 rep.n)" = "$(cut -d"|" -f1,2,4 rep.n2)" &&
	sed -n "s/.* sel \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p" rep.n >sel.n &&
	awk "{ exit !(\$2 <= \$1) }" sel.n &&
	for s in q k v o gate up down; do
		cmp tn/$s.blr tn2/$s.blr && "$NVG_PY" "$TEST_DIR/ref/samesigns.py" c/L1/$s.blr tn/$s.blr || return 1
	done &&
	test_must_fail cmp -s tn/down.blr tm/down.blr &&
	test_expect_code 2 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --loss l1 -o bad 2>err &&
	test_grep "bad --loss .l1.: mse or normed" err &&
	test_expect_code 2 blr-tune --final-norm -m c/model.cmf --base s2.cmf $C --loss normed -o bad.cmf 2>err &&
	test_grep "loss is for --layer" err &&
	test_path_is_missing bad.cmf
'

test_expect_success 'the tuned layer brings the model closer to its source (held-out KL)' '
	head -c 40000 "$NVG_DATA/tinystories-sample.txt" >held.txt &&
	cmf-patch apply -o tuned.cmf s2.cmf $(applied c/L0 t1) &&
	cmf-eval -q -m c/model.cmf --base s2.cmf --text held.txt --window 128 >before &&
	cmf-eval -q -m tuned.cmf --base s2.cmf --text held.txt --window 128 >after &&
	b=$(sed -n "s/^kl //p" before) a=$(sed -n "s/^kl //p" after) &&
	echo "kl $b -> $a" &&
	awk -v a="$a" -v b="$b" "BEGIN { exit !(a < b) }" &&
	cmf-patch apply -o tuned-n.cmf s2.cmf $(applied c/L0 tn) &&
	cmf-eval -q -m tuned-n.cmf --base s2.cmf --text held.txt --window 128 >after-n &&
	n=$(sed -n "s/^kl //p" after-n) &&
	echo "kl $b -> $n (normed)" &&
	awk -v a="$n" -v b="$b" "BEGIN { exit !(a < b) }"
'

# the loss after the source's next block, computed independently: layer 0's
# payloads applied (cmf-patch), the source's layer 1 run on that stream and on
# the source stream (gram-capture), the SEL rows compared (state(5) by numpy)
test_expect_success '--lookahead 1: the loss is the next source block'"'"'s output error' '
	mkdir la0 la &&
	cmf-patch apply -o p0.cmf s2.cmf $(applied c/L0 c/L1 | tr " " "\n" | grep "layers\.0\.") &&
	gram-capture -q -m p0.cmf $C -l 0 --next-state S1p.state &&
	gram-capture -q -m s2.cmf $C -l 1 --state S1p.state --next-state S2p.state &&
	gram-capture -q -m s2.cmf $C -l 1 --state S1src.state --next-state S2src.state &&
	blr-tune --layer 0 -m s2.cmf $C $(layer_patches 0 c/L0) --lookahead 1 --steps 0 -o la0 >rep.la0 &&
	sel=$(sed -n "s/.* sel \([0-9.]*\) -> [0-9.]* | step .*/\1/p" rep.la0) &&
	"$NVG_PY" -c "
import sys, numpy as np
def rows(p):
    b = open(p, \"rb\").read()
    return np.frombuffer(b[56:], \"<f4\").reshape(-1, 64).astype(np.float64)
z, zs, ys = rows(\"S2p.state\"), rows(\"S2src.state\"), rows(\"S1src.state\")
sel = slice(8 * 127, None)  # FIT: 1024 tokens in 8 windows of 128, 127 rows each
e = ((z[sel] - zs[sel]) ** 2).sum(1).mean() / ((zs[sel] - ys[sel]) ** 2).sum(1).mean()
print(e, sys.argv[1])
sys.exit(int(abs(e - float(sys.argv[1])) > 1e-5 * e + 1e-6))
" "$sel" &&
	blr-tune --layer 0 -m s2.cmf $C $(layer_patches 0 c/L0) --lookahead 1 --steps 40 -o la >rep.la &&
	sed -n "s/.* sel \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p" rep.la >sel.la &&
	awk "{ exit !(\$2 < \$1) }" sel.la &&
	for s in q k v o gate up down; do
		"$NVG_PY" "$TEST_DIR/ref/samesigns.py" c/L0/$s.blr la/$s.blr || return 1
	done &&
	mkdir la2 &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) --lookahead 1 --steps 40 -o la2 >/dev/null &&
	for s in q k v o gate up down; do cmp la/$s.blr la2/$s.blr || return 1; done &&
	mkdir l0 &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) --steps 40 -o l0 >/dev/null &&
	test_must_fail cmp -s la/down.blr l0/down.blr ||
	{ cat rep.la0 rep.la; false; }
'

test_expect_success '--lookahead: the last layer, a bad value and other modes are refused' '
	mkdir bada &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) --lookahead 1 -o bada 2>err &&
	test_grep "layer 1 is the last" err && test_one_line_error err &&
	test_expect_code 2 blr-tune --layer 0 -m s2.cmf $C $(layer_patches 0 c/L0) --lookahead 2 -o bada 2>err &&
	test_grep "bad --lookahead .2.: 0 or 1" err &&
	test_expect_code 2 blr-tune --final-norm -m c/model.cmf --base s2.cmf $C --lookahead 1 \
		-o bad.cmf 2>err &&
	test_grep "lookahead is for --layer" err &&
	test -z "$(ls bada)" && test_path_is_missing bad.cmf
'

test_expect_success 'layer 0 starts from the embeddings' '
	mkdir t0 &&
	blr-tune --layer 0 -m s2.cmf $C $(layer_patches 0 c/L0) --steps 20 -o t0 >rep.0 &&
	test_grep "^layer 0: " rep.0 && test -f t0/down.blr
'

test_expect_success 'bad input: one line, exit 1, nothing written' '
	mkdir bad &&
	gram-capture -q -m s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 \
		--window 64 -l 0 --next-state S1w64.state &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state S1w64.state \
		--src-state S1src.state $(layer_patches 1 c/L1) -o bad 2>err &&
	test_grep "window" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --layer 0 -m s2.cmf $C --state c/S1.state \
		--src-state S1src.state $(layer_patches 0 c/L0) -o bad 2>err &&
	test_grep "layer" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--patch model.layers.1.self_attn.q_proj.weight=c/L1/down.blr -o bad 2>err &&
	test_grep "shape" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--patch model.layers.0.self_attn.q_proj.weight=c/L0/q.blr -o bad 2>err &&
	test_grep "not a projection of layer 1" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) -o rep 2>err &&
	test_grep "is not a directory" err &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		$(layer_patches 1 c/L1) -o c/L1 2>err &&
	test_grep "refusing to overwrite the input" err &&
	test_expect_code 2 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state $(layer_patches 1 c/L1) \
		-o bad 2>err &&
	test_expect_code 2 blr-tune --layer 1 -m s2.cmf $C --base s.cmf --state c/S1.state \
		--src-state S1src.state $(layer_patches 1 c/L1) -o bad 2>err &&
	test -z "$(ls bad)" && test_no_tmp_files . &&
	for s in q k v o gate up down; do blr-pack info c/L1/$s.blr >/dev/null || return 1; done
'

test_expect_success '--src-next: the source stream after the layer read, the same bytes as the block run' '
	mkdir sn0 sn1 sna &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) --steps 20 --src-next S1src.state \
		-o sn0 >rep.sn0 &&
	for s in q k v o gate up down; do cmp t0/$s.blr sn0/$s.blr || return 1; done &&
	test "$(cut -d"|" -f1,2 rep.0)" = "$(cut -d"|" -f1,2 rep.sn0)" &&
	blr-tune --layer 1 -q -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--src-next S2src.state $(layer_patches 1 c/L1) --steps 60 -o sn1 >rep.sn1 &&
	for s in q k v o gate up down; do cmp t1/$s.blr sn1/$s.blr || return 1; done &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) --lookahead 1 --steps 40 \
		--src-next S1src.state -o sna >/dev/null &&
	for s in q k v o gate up down; do cmp la/$s.blr sna/$s.blr || return 1; done
'

test_expect_success '--src-next: a state that does not leave the layer, or another mode, refused' '
	mkdir badn &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--src-next S1src.state $(layer_patches 1 c/L1) -o badn 2>err &&
	test_grep "cannot read the source stream after layer.*S1src.state.*layer" err &&
	test_one_line_error err &&
	gram-capture -q -m s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 \
		--window 64 -l 1 --state S1w64.state --next-state S2w64.state &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--src-next S2w64.state $(layer_patches 1 c/L1) -o badn 2>err &&
	test_grep "window" err && test_one_line_error err &&
	test_expect_code 2 blr-tune --final-norm -m c/model.cmf --base s2.cmf $C \
		--src-next S2src.state -o bad.cmf 2>err &&
	test_grep "src-next is for --layer" err &&
	test -z "$(ls badn)" && test_path_is_missing bad.cmf
'

test_expect_success '--next-state: an input, an unwritable path or another mode refused, nothing written' '
	mkdir badx && cp c/S1.state S1keep.state &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--next-state c/S1.state $(layer_patches 1 c/L1) -o badx 2>err &&
	test_grep "refusing to overwrite the input .c/S1.state." err && test_one_line_error err &&
	cmp S1keep.state c/S1.state &&
	test_expect_code 1 blr-tune --layer 1 -m s2.cmf $C --state c/S1.state --src-state S1src.state \
		--next-state nodir/S2.state $(layer_patches 1 c/L1) --steps 2 -o badx 2>err &&
	test_grep "cannot write .nodir/S2.state." err && test_one_line_error err &&
	test_expect_code 2 blr-tune --final-norm -m c/model.cmf --base s2.cmf $C \
		--next-state S9.state -o bad.cmf 2>err &&
	test_grep "next-state is for --layer" err &&
	test -z "$(ls badx)" && test_path_is_missing bad.cmf && test_path_is_missing S9.state &&
	test_no_tmp_files .
'

test_expect_success 'convert.mk TUNE=1: every layer tuned, -j1 and -j2 the same bytes' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu BPW=2 TUNE=1 -j2 2>err &&
	test_grep "layer 1: loss fit" tu/L1/tune.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu1 BPW=2 TUNE=1 -j1 2>err &&
	cmp tu/model.cmf tu1/model.cmf &&
	cmf-patch extract -o a.raw tu/model.cmf model.layers.1.mlp.down_proj.weight &&
	blr-pack unpack -o b.raw tu/L1/tuned/down.blr && cmp a.raw b.raw &&
	test_no_tmp_files tu
'

test_expect_success 'TUNE=1: the states after a tuned layer are its tuning'"'"'s, gram-capture'"'"'s bytes' '
	test -f tu/L0/next.state && test_path_is_missing tu/L1/next.state &&
	test "$(stat -c %i tu/L0/next.state)" = "$(stat -c %i tu/S1.state)" &&
	gram-capture -q -m s2.cmf $C -l 0 $(layer_patches 0 tu/L0/tuned) --next-state adv1.state &&
	cmp adv1.state tu/S1.state &&
	test_path_is_missing tu/logs/L0.advance.log &&
	mkdir ns &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) --steps 20 --next-state ns.state \
		-o ns >/dev/null &&
	gram-capture -q -m s2.cmf $C -l 0 $(layer_patches 0 ns) --next-state adv0.state &&
	cmp adv0.state ns.state &&
	for s in q k v o gate up down; do cmp t0/$s.blr ns/$s.blr || return 1; done
'

test_expect_success 'TUNE=1: a lost state after a tuned layer is made again, to the same bytes' '
	rm tu/S1.state tu/L0/next.state &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu BPW=2 TUNE=1 -j2 2>err &&
	cmp adv1.state tu/S1.state && cmp tu/model.cmf tu1/model.cmf
'

test_expect_success 'TUNE=1: a finished conversion run again does nothing' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu1 BPW=2 TUNE=1 -j2 2>err &&
	test_must_fail grep -E "advance|tune the block|capture|encode" err &&
	cmp tu/model.cmf tu1/model.cmf
'

test_expect_success 'TUNE=1: a lost tuning is made again, to the same bytes' '
	rm tu/L1/tune.txt tu/L1/tuned/gate.blr &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu BPW=2 TUNE=1 -j2 2>err &&
	test_grep "layer 1/2: tune the block" err &&
	cmp tu/model.cmf tu1/model.cmf
'

test_expect_success 'TUNE_STEPS, TUNE_LR: blr-tune runs with them, stamped when not the defaults (blr-tune'"'"'s own)' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=ts BPW=2 TUNE=1 TUNE_STEPS=7 TUNE_LR=0.03 -j2 2>err &&
	test_grep "step [0-7] of 7 " ts/L1/tune.txt &&
	test_grep " tune=1 tune_steps=7 tune_lr=0.03 itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" ts/params &&
	test_no_grep "tune_" tu/params &&
	mkdir hand &&
	blr-tune --layer 1 -q -m s2.cmf $C --state ts/S1.state --src-state ts/src/S1.state \
		$(layer_patches 1 ts/L1) --steps 7 --lr 0.03 -o hand >rep.hand &&
	for s in q k v o gate up down; do cmp hand/$s.blr ts/L1/tuned/$s.blr || return 1; done &&
	mkdir dflt &&
	blr-tune --layer 1 -q -m s2.cmf $C --state tu/S1.state --src-state tu/src/S1.state \
		$(layer_patches 1 tu/L1) -o dflt >rep.dflt &&
	test_grep "step [0-9]* of 50 " rep.dflt &&
	for s in q k v o gate up down; do cmp dflt/$s.blr tu/L1/tuned/$s.blr || return 1; done &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tu BPW=2 TUNE=1 TUNE_STEPS=7 2>err &&
	test_grep "holds another conversion" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE_STEPS=7 2>err &&
	test_grep "TUNE_STEPS, TUNE_LR, TUNE_LOSS and TUNE_AHEAD are TUNE=1.s" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE_LOSS=normed 2>err &&
	test_grep "TUNE_AHEAD are TUNE=1.s" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE_AHEAD=1 2>err &&
	test_grep "TUNE_AHEAD are TUNE=1.s" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=1 TUNE_AHEAD=2 2>err &&
	test_grep "TUNE_AHEAD .2. is not 0 or 1" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=1 TUNE_LOSS=l1 2>err &&
	test_grep "TUNE_LOSS .l1. is not mse or normed" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=1 TUNE_STEPS=0 2>err &&
	test_grep "TUNE_STEPS .0. is not" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=1 TUNE_LR=2 2>err &&
	test_grep "TUNE_LR .2. is not" err &&
	test_path_is_missing badc
'

test_expect_success 'TUNE_LOSS=normed: blr-tune --loss normed, stamped' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=tl BPW=2 TUNE=1 TUNE_LOSS=normed -j2 2>err &&
	test_grep " tune=1 tune_loss=normed itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" tl/params &&
	mkdir handn &&
	blr-tune --layer 1 -q -m s2.cmf $C --state tl/S1.state --src-state tl/src/S1.state \
		$(layer_patches 1 tl/L1) --loss normed -o handn >rep.handn &&
	for s in q k v o gate up down; do cmp handn/$s.blr tl/L1/tuned/$s.blr || return 1; done &&
	test_must_fail cmp -s tl/model.cmf tu/model.cmf
'

test_expect_success 'TUNE_AHEAD=1: --lookahead 1 on every layer but the last, stamped' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=ta BPW=2 TUNE=1 TUNE_AHEAD=1 -j2 2>err &&
	test_grep " tune=1 tune_ahead=1 itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" ta/params &&
	mkdir hand0 hand1 &&
	blr-tune --layer 0 -q -m s2.cmf $C $(layer_patches 0 ta/L0) --lookahead 1 -o hand0 >/dev/null &&
	for s in q k v o gate up down; do cmp hand0/$s.blr ta/L0/tuned/$s.blr || return 1; done &&
	blr-tune --layer 1 -q -m s2.cmf $C --state ta/S1.state --src-state ta/src/S1.state \
		$(layer_patches 1 ta/L1) -o hand1 >/dev/null &&
	for s in q k v o gate up down; do cmp hand1/$s.blr ta/L1/tuned/$s.blr || return 1; done &&
	test_must_fail cmp -s ta/model.cmf tu/model.cmf
'

test_expect_success 'convert.mk refuses TUNE=2, and TUNE=1 with dual-svid' '
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=2 2>err &&
	test_grep "TUNE .2. is not 0 or 1" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 TUNE=1 METHOD=dual-svid 2>err &&
	test_grep "TUNE=1 is nvg" err &&
	test_path_is_missing badc
'

test_done
