#!/bin/bash
# plan-alloc: budgets met, granularity, keep, plot, and bad input
. "$(dirname "$0")/test-lib.sh"

# 4 layers x 3 tensors, 5 budgets each; errors a*exp(-k*b), convex, from
# fixed coefficients so that the file is the same on every run
make_curves() {
	awk 'BEGIN {
		split("q o down", t, " "); split("576 300 900", w, " ")
		split("0.25 0.5 1 1.5 2", b, " ")
		for (l = 0; l < 4; l++) for (i = 1; i <= 3; i++) for (j = 1; j <= 5; j++) {
			a = 1 + l + i / 3; k = 0.5 + (l * 3 + i) % 4 / 4
			printf "model.layers.%d.%s.weight %d %d %s %.9f\n", l, t[i], l, w[i] * (l + 1), b[j], a * exp(-k * b[j])
		}
	}'
}

# the average budget of a tensor plan over the curves (kept layers at 16)
plan_avg() {
	awk 'FNR == NR { if ($1 == "tensor") bpw[$2] = $3; if ($1 == "keep") keep[$3] = 1; next }
	     { w[$1] = $3; layer[$1] = $2 }
	     END { for (t in w) { b = (layer[t] in keep) ? 16 : bpw[t]; if (b == "") { print "missing " t; exit 1 }
	           bits += w[t] * b; tw += w[t] } printf "%.12f\n", bits / tw }' "$1" "$2"
}

test_expect_success 'setup' '
	make_curves >curves.txt &&
	test "$(wc -l <curves.txt)" -eq 60
'

test_expect_success '-h prints the SYNOPSIS of the man page' '
	plan-alloc -h >h.out &&
	mandoc -Tascii "$NVG_TOP/man/man1/plan-alloc.1" | col -b >man.txt &&
	awk "/^SYNOPSIS/{f=1;next} /^[A-Z]/{f=0} f" man.txt | tr -s " \t\n" " " | sed "s/^ //; s/ $//" >expect &&
	tr -s " \t\n" " " <h.out | sed "s/^ //; s/ $//" >actual &&
	test_cmp expect actual
'

for B in 0.4 0.8 1.0 1.7; do
	test_expect_success "a tensor plan at $B bpw meets its budget" '
		plan-alloc --bpw '$B' -o p.plan curves.txt 2>err &&
		test_grep "optimal" err &&
		test "$(grep -c "^tensor " p.plan)" -eq 12 &&
		avg=$(plan_avg p.plan curves.txt) &&
		awk -v a=$avg -v t='$B' "BEGIN { exit !(a <= t * (1 + 1e-9)) }"
	'
done

test_expect_success 'the plan is the brute-force optimum (4 tensors, 5^4 plans)' '
	grep "^model.layers.[01].[qo]" curves.txt >small.txt &&
	plan-alloc -q --bpw 0.9 -o small.plan small.txt &&
	awk "{ n[\$1]++; b[\$1, n[\$1]] = \$4; e[\$1, n[\$1]] = \$5; w[\$1] = \$3 }
	     END { k = 0; for (t in w) name[++k] = t; best = 1e300
	           for (i1 = 1; i1 <= 5; i1++) for (i2 = 1; i2 <= 5; i2++) for (i3 = 1; i3 <= 5; i3++) for (i4 = 1; i4 <= 5; i4++) {
	             bits = w[name[1]] * b[name[1], i1] + w[name[2]] * b[name[2], i2] + w[name[3]] * b[name[3], i3] + w[name[4]] * b[name[4], i4]
	             err = e[name[1], i1] + e[name[2], i2] + e[name[3], i3] + e[name[4], i4]
	             if (bits <= 0.9 * (w[name[1]] + w[name[2]] + w[name[3]] + w[name[4]]) * (1 + 1e-12) && err < best) best = err }
	           printf \"%.6f\n\", best }" small.txt >expect &&
	awk "FNR == NR { if (\$1 == \"tensor\") bpw[\$2] = \$3; next } bpw[\$1] == \$4 { s += \$5 } END { printf \"%.6f\n\", s }" small.plan small.txt >actual &&
	test_cmp expect actual
'

test_expect_success 'layer granularity: one bpw per layer, the header row, budget met' '
	plan-alloc -q --bpw 0.8 --granularity layer -o l.plan curves.txt &&
	grep -v "^#" l.plan >rows &&
	test "$(head -n 1 rows)" = "layer bpw" &&
	test "$(wc -l <rows)" -eq 5 &&
	awk "FNR == NR { if (NF == 2 && \$1 != \"layer\") bpw[\$1] = \$2; next }
	     !(\$1 in seen) { seen[\$1] = 1; W += \$3; B += \$3 * bpw[\$2] }
	     END { exit !(B / W <= 0.8 * (1 + 1e-9)) }" l.plan curves.txt
'

test_expect_success '--keep 1 keeps the worst layer at 16 bpw within the budget' '
	plan-alloc --bpw 8 --keep 1 -o k.plan curves.txt 2>err &&
	test "$(grep -c "^keep layer " k.plan)" -eq 1 &&
	test_grep "kept exact at 16 bpw: layer [0-9]" err &&
	test "$(grep -c "^tensor " k.plan)" -eq 9 &&
	avg=$(plan_avg k.plan curves.txt) &&
	awk -v a=$avg "BEGIN { exit !(a <= 8 * (1 + 1e-9)) }"
'

test_expect_success '--keep with layer granularity: a keep rule and three layer rows' '
	plan-alloc -q --bpw 8 --keep 1 --granularity layer -o kl.plan curves.txt &&
	test "$(grep -c "^keep layer [0-3]$" kl.plan)" -eq 1 &&
	test "$(grep -c "^[0-3] [0-9.]*$" kl.plan)" -eq 3 &&
	kept=$(sed -n "s/^keep layer //p" kl.plan) &&
	test_no_grep "^$kept " kl.plan
'

test_expect_success '--min and --max bound every chosen budget' '
	plan-alloc -q --bpw 1.0 --min 0.5 --max 1.5 -o m.plan curves.txt &&
	awk "\$1 == \"tensor\" && (\$3 < 0.5 || \$3 > 1.5) { exit 1 }" m.plan
'

test_expect_success 'curves from standard input, --plot writes an SVG' '
	plan-alloc -q --bpw 1.0 --plot a.svg <curves.txt >s.plan &&
	plan-alloc -q --bpw 1.0 -o f.plan curves.txt &&
	test_cmp f.plan s.plan &&
	test_grep "^<svg " a.svg &&
	test_grep "layer 3: " a.svg &&
	test_grep "</svg>" a.svg
'

test_expect_success 'the plan is the same twice' '
	plan-alloc -q --bpw 0.8 -o again.plan curves.txt &&
	plan-alloc -q --bpw 0.8 -o p08.plan curves.txt &&
	test_cmp p08.plan again.plan
'

test_expect_success 'a budget below the floor fails and writes nothing' '
	test_expect_code 1 plan-alloc --bpw 0.1 --plot no.svg -o no.plan curves.txt 2>err &&
	test_one_line_error err &&
	test_grep "below the floor of the curves: at least 0.25 bpw" err &&
	test_path_is_missing no.plan no.svg
'

test_expect_success 'a bad curve line is named and nothing written' '
	sed "7s/ 0.5 / zero /" curves.txt >bad.txt &&
	test_expect_code 1 plan-alloc --bpw 1 -o no.plan bad.txt 2>err &&
	test_one_line_error err &&
	test_grep "line 7: bpw .zero. is not a budget" err &&
	test_path_is_missing no.plan
'

test_expect_success 'an inconsistent tensor is named' '
	{ cat curves.txt && echo "model.layers.0.q.weight 0 577 3 0.1"; } >bad2.txt &&
	test_expect_code 1 plan-alloc --bpw 1 -o no.plan bad2.txt 2>err &&
	test_one_line_error err &&
	test_grep "line 61: tensor .model.layers.0.q.weight. has 577 weights" err &&
	test_path_is_missing no.plan
'

test_expect_success 'keeping every layer is refused' '
	test_expect_code 1 plan-alloc --bpw 15 --keep 4 -o no.plan curves.txt 2>err &&
	test_one_line_error err && test_grep "cannot keep 4 layers" err &&
	test_path_is_missing no.plan
'

test_expect_success 'usage errors exit 2' '
	test_expect_code 2 plan-alloc curves.txt 2>err && test_grep "bpw is required" err &&
	test_expect_code 2 plan-alloc --bpw 16 curves.txt 2>err && test_grep "bad --bpw" err &&
	test_expect_code 2 plan-alloc --bpw x curves.txt 2>err &&
	test_expect_code 2 plan-alloc --bpw 1 --granularity head curves.txt 2>err &&
	test_expect_code 2 plan-alloc --bpw 1 --min 2 --max 1 curves.txt 2>err &&
	test_expect_code 2 plan-alloc --bpw 1 --keep -1 curves.txt 2>err &&
	test_expect_code 2 plan-alloc --bpw 1 curves.txt extra 2>err &&
	test_expect_code 2 plan-alloc --bpw 1 --bogus curves.txt 2>err
'

test_expect_success 'a missing curve file' '
	test_expect_code 1 plan-alloc --bpw 1 -o no.plan nosuch.txt 2>err &&
	test_one_line_error err && test_grep "nosuch.txt" err &&
	test_path_is_missing no.plan
'

test_expect_success '--resolve: tensor rule, layer rule, keep, default' '
	cat >list <<-\EOF &&
	model.layers.0.self_attn.q_proj.weight 0 64x64
	model.layers.0.mlp.down_proj.weight 0 64x172
	model.layers.1.self_attn.q_proj.weight 1 64x64
	model.layers.2.self_attn.q_proj.weight 2 64x64
	EOF
	printf "layer 0 2.5\ntensor model.layers.0.mlp.down_proj.weight 3\nkeep 2\n" >r.plan &&
	plan-alloc --resolve r.plan --bpw 2 -o resolved list &&
	cat >expect <<-\EOF &&
	model.layers.0.self_attn.q_proj.weight 0 2.5 64x64
	model.layers.0.mlp.down_proj.weight 0 3 64x172
	model.layers.1.self_attn.q_proj.weight 1 2 64x64
	model.layers.2.self_attn.q_proj.weight 2 keep 64x64
	EOF
	test_cmp expect resolved
'

test_expect_success '--resolve refuses a rule that names nothing' '
	printf "layer 0 2.5\nlayer 7 1\n" >bad.plan &&
	test_expect_code 1 plan-alloc --resolve bad.plan --bpw 2 -o no.out list 2>err &&
	test_one_line_error err &&
	test_grep "plan: line 2: layer 7 has no tensor to encode" err &&
	printf "tensor model.layers.0.mlp.dwn_proj.weight 1\n" >bad.plan &&
	test_expect_code 1 plan-alloc --resolve bad.plan --bpw 2 -o no.out list 2>err &&
	test_grep "tensor .model.layers.0.mlp.dwn_proj.weight. is not one to encode" err &&
	printf "layer 0 17\n" >bad.plan &&
	test_expect_code 1 plan-alloc --resolve bad.plan --bpw 2 -o no.out list 2>err &&
	test_grep "reading plan .bad.plan.: line 1: budget 17 out of range" err &&
	test_expect_code 1 plan-alloc --resolve r.plan -o no.out list 2>err &&
	test_grep "no budget for tensor" err &&
	test_expect_code 2 plan-alloc --resolve r.plan --keep 1 list 2>err &&
	test_path_is_missing no.out
'

test_expect_success 'the example plan resolves against a 30-layer model' '
	awk "BEGIN { split(\"self_attn.q self_attn.k self_attn.v self_attn.o mlp.gate mlp.up mlp.down\", t, \" \")
		for (l = 0; l < 30; l++) for (i = 1; i <= 7; i++) printf \"model.layers.%d.%s_proj.weight %d\n\", l, t[i], l }" >smol.list &&
	plan-alloc --resolve "$NVG_TOP/pipelines/example.plan" --bpw 0.8 -o smol.resolved smol.list &&
	test_grep "^model.layers.0.self_attn.k_proj.weight 0 keep$" smol.resolved &&
	test_grep "^model.layers.0.mlp.up_proj.weight 0 1.25$" smol.resolved &&
	test_grep "^model.layers.3.self_attn.v_proj.weight 3 1.5$" smol.resolved &&
	test_grep "^model.layers.15.mlp.up_proj.weight 15 0.6$" smol.resolved &&
	test_grep "^model.layers.20.mlp.up_proj.weight 20 0.8$" smol.resolved
'

test_expect_success 'no temporary files left' '
	test_no_tmp_files .
'

test_expect_success 'a target above the top of the curves is an error, not a smaller plan' '
	test_expect_code 1 plan-alloc --bpw 2.5 -o top.plan curves.txt 2>err &&
	test_grep "target 2.5 bpw is above the top of the curves: at most 2 bpw" err &&
	test_path_is_missing top.plan &&
	plan-alloc -q --bpw 2 -o top.plan curves.txt
'

test_done
