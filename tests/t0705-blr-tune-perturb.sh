#!/bin/bash
# blr-tune --perturb: each payload alone in the source, its KL at the model's
# output on the SEL windows, against cmf-patch apply + cmf-eval --base on the
# SEL tokens (an independent route: a whole model written and run from the
# embeddings); the same numbers at any thread count and in any company; bad
# input refused.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

C="--tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"
# by_hand L DIR: "NAME DIR/s.blr kl X" for each projection of layer L, each
# payload applied alone to the source and scored by cmf-eval on the SEL tokens
by_hand() {
	for s in $SHORTS; do
		n=model.layers.$1.${s#*:}.weight &&
		cmf-patch apply -o one.cmf s2.cmf "$n=$2/${s%%:*}.blr" &&
		cmf-eval -q -m one.cmf --base s2.cmf --tokens sel.u32 --window 128 >ev &&
		echo "$n $2/${s%%:*}.blr kl $(sed -n "s/^kl //p" ev)" || return 1
	done
}

# close FILE1 FILE2: the same lines, the KLs (field 4) within 2e-5 relative
# (the tool prints 9 digits, cmf-eval 6; both sum the same f32 logits in f64)
close() {
	paste -d " " "$1" "$2" | awk "NF != 8 || \$1 != \$5 || \$2 != \$6 { bad = 1 }
		{ d = \$4 - \$8; if (d < 0) d = -d; if (!(\$4 > 0) || d > 2e-5 * \$4) bad = 1 }
		END { exit bad || NR != 7 }" || { paste "$1" "$2"; return 1; }
}

test_expect_success 'setup: a two-layer conversion at 2 bpw with its source stream, the SEL tokens cut by Python' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 TUNE=1 -j2 2>err &&
	"$NVG_PY" -c "import sys; d = open(sys.argv[1], \"rb\").read(); open(sys.argv[2], \"wb\").write(d[4 * 1024:4 * 1536])" \
		cal.u32 sel.u32
'

test_expect_success 'layer 1: each payload'"'"'s KL equals its model'"'"'s, written whole and scored by cmf-eval' '
	blr-tune --perturb 1 -q -m s2.cmf $C --src-state c/src/S1.state $(layer_patches 1 c/L1) >kl1 &&
	by_hand 1 c/L1 >expect1 &&
	close kl1 expect1
'

test_expect_success 'layer 0 starts from the embeddings' '
	blr-tune --perturb 0 -q -m s2.cmf $C $(layer_patches 0 c/L0) >kl0 &&
	by_hand 0 c/L0 >expect0 &&
	close kl0 expect0
'

test_expect_success 'each payload alone: the same name twice, any order, any company, one thread or two' '
	n=model.layers.1.mlp.down_proj.weight &&
	OPENBLAS_NUM_THREADS=1 blr-tune --perturb 1 -q -m s2.cmf $C --src-state c/src/S1.state \
		--patch $n=c/L1/tuned/down.blr --patch $n=c/L1/down.blr >two &&
	test "$(sed -n 2p two)" = "$(grep "^$n " kl1)" &&
	grep -q "^$n c/L1/tuned/down.blr kl " two &&
	test "$(sed -n 1p two)" != "$(sed -n 2p two)"
'

test_expect_success 'bad input: another layer'"'"'s payload, a payload of another shape, a state of another layer, missing or extra options' '
	test_expect_code 1 blr-tune --perturb 1 -q -m s2.cmf $C --src-state c/src/S1.state \
		--patch model.layers.0.mlp.up_proj.weight=c/L0/up.blr >out 2>err &&
	test_one_line_error err && test_grep "is not a projection of layer 1" err && test ! -s out &&
	test_expect_code 1 blr-tune --perturb 1 -q -m s2.cmf $C --src-state c/src/S1.state \
		--patch model.layers.1.mlp.up_proj.weight=c/L1/down.blr >out 2>err &&
	test_one_line_error err && test_grep "shape 64x172 is not the expected 172x64" err &&
	test_expect_code 1 blr-tune --perturb 0 -q -m s2.cmf $C --src-state c/src/S1.state \
		--patch model.layers.0.mlp.up_proj.weight=c/L0/up.blr 2>err &&
	test_one_line_error err && test_grep "state is for layer 1, this run has 0" err &&
	test_expect_code 2 blr-tune --perturb 1 -m s2.cmf $C \
		--patch model.layers.1.mlp.up_proj.weight=c/L1/up.blr 2>err &&
	test_grep "needs --src-state" err &&
	test_expect_code 2 blr-tune --perturb 1 -m s2.cmf $C --src-state c/src/S1.state --steps 3 \
		--patch model.layers.1.mlp.up_proj.weight=c/L1/up.blr 2>err &&
	test_grep "tunes nothing" err &&
	test_expect_code 2 blr-tune --perturb 1 -m s2.cmf $C --src-state c/src/S1.state -o x \
		--patch model.layers.1.mlp.up_proj.weight=c/L1/up.blr 2>err &&
	test_grep "takes no -o" err && test_path_is_missing x &&
	test_expect_code 2 blr-tune --perturb 1 --layer 1 -m s2.cmf $C --src-state c/src/S1.state \
		--patch model.layers.1.mlp.up_proj.weight=c/L1/up.blr 2>err &&
	test_grep "one of --final-norm, --layer L, --end-to-end and --perturb L" err &&
	head -c 100 c/L1/up.blr >cut.blr &&
	test_expect_code 1 blr-tune --perturb 1 -q -m s2.cmf $C --src-state c/src/S1.state \
		--patch model.layers.1.mlp.up_proj.weight=cut.blr >out 2>err &&
	test_one_line_error err && test ! -s out
'

test_done
