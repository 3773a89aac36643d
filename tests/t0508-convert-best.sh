#!/bin/bash
# convert.mk best: the conversion against a plan's at the same budget, scored
# on the SEL tokens, the better one kept and the plan only when it is better;
# the judge on models whose order is known; resuming; bad command lines
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

LIB=$NVG_TOP/pipelines/convert-lib.sh

test_expect_success 'setup: stories260K (two layers), calibration tokens, the SEL tokens cut by Python' '
	convert_setup &&
	"$NVG_PY" -c "import sys; d = open(sys.argv[1], \"rb\").read(); open(sys.argv[2], \"wb\").write(d[4 * 1024:4 * 1536])" \
		cal.u32 sel.u32 &&
	test "$(stat -c %s sel.u32)" -eq 2048
'

test_expect_success 'best: the sweep, a plan at BPW from its curves, the plan'"'"'s conversion beside this one' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=b BPW=2.5 SWEEP_BPW="1.6 4" best -j2 2>err &&
	plan-alloc --bpw 2.5 -q -o plan.expect b/curves.txt &&
	test_cmp plan.expect b/plan.txt &&
	test_grep "plan=$(cksum <b/plan.txt | tr " " :)" b/plan/params &&
	sed "s/ plan=[^ ]*//" b/params >a && sed "s/ plan=[^ ]*//" b/plan/params >p && test_cmp a p &&
	awk "/^tensor / { print \$2, \$3 }" b/plan.txt | sort >expect &&
	report_lines b/plan/model.cmf.blr.txt | awk "{ print \$1, \$4 }" | sort >actual &&
	test_cmp expect actual &&
	test_no_tmp_files b
'

test_expect_success 'both models scored by cmf-eval'"'"'s KL on the SEL tokens, with their stored bits' '
	test "$(wc -l <b/best.txt)" -eq 3 &&
	for who in uniform plan; do
		m=b/model.cmf && { [ $who = uniform ] || m=b/plan/model.cmf; } &&
		cmf-eval -q -m $m --base s2.cmf --tokens sel.u32 --window 128 >ev &&
		bits=$(sed -n "s/^# total blr body \([^ ]*\) bpw.*/\1/p" $m.blr.txt) &&
		echo "$who kl $(sed -n "s/^kl //p" ev) nll $(sed -n "s/^nll //p" ev) body_bpw $bits model $m" ||
		return 1
	done >expect &&
	head -n 2 b/best.txt >actual &&
	test_cmp expect actual &&
	test_grep "^convert: kept " err
'

test_expect_success 'the model kept is the one with the lower KL (the plan only when lower); best.cmf is its bytes' '
	awk "NR <= 2 { kl[\$1] = \$3 } END { print \"kept\", (kl[\"plan\"] < kl[\"uniform\"]) ? \"plan\" : \"uniform\" }" \
		b/best.txt >expect &&
	tail -n 1 b/best.txt >actual &&
	test_cmp expect actual &&
	m=b/model.cmf && { grep -qx "kept uniform" b/best.txt || m=b/plan/model.cmf; } &&
	cmp $m b/best.cmf && cmp $m.blr.txt b/best.cmf.blr.txt
'

test_expect_success 'run again: nothing converted, scored or written' '
	touch marker && sleep 1 &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=b BPW=2.5 SWEEP_BPW="1.6 4" best -j2 2>err &&
	find b -newer marker -type f ! -name .lock >new &&
	{ test ! -s err && test ! -s new || { cat err new; false; }; }
'

test_expect_success 'a plan changed by hand: the plan'"'"'s conversion starts afresh from it, and is scored again' '
	printf "layer 0 4\nlayer 1 1.6\n" >b/plan.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=b BPW=2.5 SWEEP_BPW="1.6 4" best -j2 2>err &&
	test_grep "plan=$(cksum <b/plan.txt | tr " " :)" b/plan/params &&
	report_lines b/plan/model.cmf.blr.txt | awk "{ print \$2, \$4 }" | sort -u >actual &&
	printf "0 4\n1 1.6\n" >expect && test_cmp expect actual &&
	cmf-eval -q -m b/plan/model.cmf --base s2.cmf --tokens sel.u32 --window 128 >ev &&
	test_grep "^plan kl $(sed -n "s/^kl //p" ev) " b/best.txt
'

# blr-tune --final-norm scores its SEL windows by KL too, by its own code:
# the judge's numbers equal its report's (6 digits printed by both)
test_expect_success 'CALIBRATE=1: both scores equal the calibration'"'"'s own KL on the SEL windows' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2.5 SWEEP_BPW="1.6 4" CALIBRATE=1 best -j2 2>err &&
	for who in uniform plan; do
		d=c && { [ $who = uniform ] || d=c/plan; } &&
		k=$(sed -n "s/^final-norm: kl sel [0-9.]* -> \([0-9.]*\) .*/\1/p" $d/calibrate.txt) &&
		j=$(awk -v w=$who "\$1 == w { print \$3 }" c/best.txt) &&
		awk -v a="$k" -v b="$j" "BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) <= 1e-5 * a) }" ||
		{ echo "$who: calibration $k, judge $j"; return 1; }
	done
'

# the judge alone, on models whose order is known: the source itself has KL 0
judge_dir() {
	mkdir -p "$1/plan" &&
	cp "$2" "$1/model.cmf" && cp "$3" "$1/plan/model.cmf" &&
	echo "# total blr body 1.5 bpw over 1 weights" >"$1/model.cmf.blr.txt" &&
	echo "# total blr body 2.5 bpw over 1 weights" >"$1/plan/model.cmf.blr.txt"
}

test_expect_success 'the judge keeps the plan when it is nearer the source, the uniform model when not, and on a tie' '
	judge_dir j1 b/model.cmf s2.cmf &&
	bash "$LIB" best j1 s2.cmf tokens cal.u32 1024 512 128 &&
	test_grep "^plan kl 0 .* body_bpw 2.5 model j1/plan/model.cmf$" j1/best.txt &&
	test_grep "^kept plan$" j1/best.txt && cmp s2.cmf j1/best.cmf &&
	# judged again, the same model kept: best.cmf is already a link to it
	bash "$LIB" best j1 s2.cmf tokens cal.u32 1024 512 128 &&
	test_grep "^kept plan$" j1/best.txt && cmp s2.cmf j1/best.cmf && test_no_tmp_files j1 &&
	judge_dir j2 s2.cmf b/model.cmf &&
	bash "$LIB" best j2 s2.cmf tokens cal.u32 1024 512 128 &&
	test_grep "^kept uniform$" j2/best.txt && cmp s2.cmf j2/best.cmf &&
	judge_dir j3 b/model.cmf b/model.cmf &&
	bash "$LIB" best j3 s2.cmf tokens cal.u32 1024 512 128 &&
	test_grep "^kept uniform$" j3/best.txt &&
	test_no_tmp_files j1 && test_no_tmp_files j2 && test_no_tmp_files j3
'

test_expect_success 'TEXT calibration: the judge scores the SEL tokens of the tokenized text' '
	judge_dir jt b/model.cmf b/plan/model.cmf &&
	bash "$LIB" best jt s2.cmf text "$NVG_DATA/tinystories-train-sample.txt" 1024 512 128 &&
	head -n 2 jt/best.txt | sed "s/ model .*//" >actual &&
	head -n 2 b/best.txt | sed "s/ model .*//" >expect &&
	sed -i "s/body_bpw [^ ]*/body_bpw/" actual expect &&
	test_cmp expect actual &&
	test_no_tmp_files jt
'

test_expect_success 'too few calibration tokens for the judge: an error, no best.txt' '
	judge_dir jf b/model.cmf s2.cmf &&
	head -c 4200 cal.u32 >few.u32 &&
	test_must_fail bash "$LIB" best jf s2.cmf tokens few.u32 1024 512 128 2>err &&
	test_grep "fewer than FIT 1024 \\+ SEL 512 calibration tokens" err &&
	test_path_is_missing jf/best.txt jf/best.cmf &&
	test_no_tmp_files jf
'

# stories260K's tensors store more than 1 bpw at the rank floor of 8: a
# budget below it has a uniform conversion (at the floor) and no plan; the
# floor plan-alloc names is at most what that conversion stores (its own
# budget is one of the sweep's points)
test_expect_success 'a budget below the curves'"'"' floor: plan-alloc'"'"'s error, the conversion left as it was, no plan and no judge' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=f BPW=0.8 2>err &&
	cp f/model.cmf uniform.cmf &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=f BPW=0.8 SWEEP_BPW="0.5 1" best -j2 2>err &&
	fl=$(sed -n "s/.*target 0.8 bpw is below the floor of the curves: at least \([0-9.]*\) bpw$/\1/p" err) &&
	bb=$(sed -n "s/^# total blr body \([^ ]*\) bpw.*/\1/p" f/model.cmf.blr.txt) &&
	awk -v f="$fl" -v b="$bb" "BEGIN { exit !(f > 0.8 && f <= b + 1e-5) }" ||
	{ echo "floor $fl, the uniform conversion stores $bb bpw"; cat err; false; } &&
	cmp uniform.cmf f/model.cmf &&
	test -s f/curves.txt &&
	test_path_is_missing f/plan.txt f/plan f/best.txt f/best.cmf &&
	test_no_tmp_files f
'

test_expect_success 'bad command lines: PLAN with best, best without calibration tokens' '
	echo "layer 0 2" >p.plan &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bp BPW=2.5 PLAN=p.plan best 2>err &&
	test_grep "best makes its own plan in OUT/plan.txt: leave PLAN out" err &&
	test_must_fail conv MODEL=s2.cmf METHOD=dual-svid OUT=bp BPW=2.5 best 2>err &&
	test_grep "best scores both models on the calibration.s SEL tokens: give TOKENS or TEXT" err &&
	test_path_is_missing bp
'

test_done
