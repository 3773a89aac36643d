#!/bin/bash
# convert.mk with a plan: tensor, layer and keep rules honoured exactly;
# the sweep's curves through plan-alloc into a conversion; bad input
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

test_expect_success 'setup: stories260K (three layers), calibration tokens' '
	convert_setup &&
	cmf-patch truncate --layers 3 -o s3.cmf s.cmf
'

test_expect_success 'a plan with tensor, layer and keep rules is honoured exactly' '
	cat >p.plan <<-\EOF &&
	# layer 0 richer, one of its tensors poorer
	layer 0 3
	tensor model.layers.0.mlp.down_proj.weight 2
	tensor model.layers.1.self_attn.q_proj.weight 4   # above the default
	keep tensor model.layers.1.mlp.up_proj.weight
	keep layer 2
	EOF
	conv MODEL=s3.cmf TOKENS=cal.u32 OUT=pl BPW=2.5 PLAN=p.plan -j2 2>err &&
	cat >expect <<-\EOF &&
	model.layers.0.self_attn.q_proj.weight 3
	model.layers.0.self_attn.k_proj.weight 3
	model.layers.0.self_attn.v_proj.weight 3
	model.layers.0.self_attn.o_proj.weight 3
	model.layers.0.mlp.gate_proj.weight 3
	model.layers.0.mlp.up_proj.weight 3
	model.layers.0.mlp.down_proj.weight 2
	model.layers.1.self_attn.q_proj.weight 4
	model.layers.1.self_attn.k_proj.weight 2.5
	model.layers.1.self_attn.v_proj.weight 2.5
	model.layers.1.self_attn.o_proj.weight 2.5
	model.layers.1.mlp.gate_proj.weight 2.5
	model.layers.1.mlp.up_proj.weight keep
	model.layers.1.mlp.down_proj.weight 2.5
	model.layers.2.self_attn.q_proj.weight keep
	model.layers.2.self_attn.k_proj.weight keep
	model.layers.2.self_attn.v_proj.weight keep
	model.layers.2.self_attn.o_proj.weight keep
	model.layers.2.mlp.gate_proj.weight keep
	model.layers.2.mlp.up_proj.weight keep
	model.layers.2.mlp.down_proj.weight keep
	EOF
	report_lines pl/model.cmf.blr.txt | awk "{ print \$1, \$4 }" >actual &&
	test_cmp expect actual
'

test_expect_success 'each encoded tensor has the rank its own request gives' '
	report_lines pl/model.cmf.blr.txt | grep -v " keep " >lines &&
	test "$(wc -l <lines)" -eq 13 &&
	while read -r name layer shape req got rank paths rest; do
		blr-pack rank --shape $shape --bpw $req --paths $paths >r &&
		test_grep "rank $rank " r || return 1
	done <lines
'

test_expect_success 'kept tensors are never encoded and keep their bytes' '
	cmf-patch list pl/model.cmf >list &&
	test "$(awk -F "\t" "\$5 == \"blr\"" list | wc -l)" -eq 13 &&
	for t in model.layers.1.mlp.up_proj.weight model.layers.2.self_attn.q_proj.weight \
		 model.layers.2.mlp.down_proj.weight; do
		test_grep "^$t	F32	" list &&
		cmf-patch extract -o a.raw s3.cmf $t && cmf-patch extract -o b.raw pl/model.cmf $t &&
		cmp a.raw b.raw || return 1
	done &&
	test_path_is_missing pl/L1/up.rep pl/L2 pl/S2.state pl/logs/L1.up.log &&
	test "$(prov_value pl/model.cmf kept_tensors)" = 8 &&
	test_grep "8 kept, 0 refused" pl/model.cmf.blr.txt
'

test_expect_success 'the sweep writes error curves for plan-alloc' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw BPW=2.5 SWEEP_BPW="1.6 4" sweep -j2 2>err &&
	head -n 1 sw/curves.txt >h && echo "tensor layer weights bpw error spent" >expect && test_cmp expect h &&
	test "$(wc -l <sw/curves.txt)" -eq 29 &&
	awk "NR > 1 && !(\$4 == 1.6 || \$4 == 4) { exit 1 } NR > 1 && !(\$5 > 0 && \$5 < 1) { exit 1 }
		NR > 1 && !(\$6 > 0 && \$6 < 16) { exit 1 }" sw/curves.txt &&
	test_grep "^model.layers.1.mlp.down_proj.weight 1 11008 4 0\.[0-9]* [0-9.]*$" sw/curves.txt
'

# (layer 1's MLP was encoded with two paths only, PATHS_FOLLOW's default:
# its report names no P1 candidate, where the sweep's own encode of 2.50
# compares both; the pick and the stored errors are the same)
test_expect_success 'a sweep budget equal to the conversion'"'"'s own reuses its encodings, byte for byte' '
	cp -a sw own &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=own BPW=2.5 SWEEP_BPW="2.5 2.50" sweep -j2 2>err &&
	test_grep " P1 " own/sweep/L1.down.2.50.rep && test_no_grep " P1 " own/L1/down.rep &&
	for s in q k v o gate up down; do
		for l in 0 1; do
			cmp own/L$l/$s.rep own/sweep/L$l.$s.2.5.rep &&
			test "$(cut -d"|" -f1,3 own/L$l/$s.rep)" = "$(cut -d"|" -f1,3 own/sweep/L$l.$s.2.50.rep)" &&
			test_path_is_missing own/logs/sweep.L$l.$s.2.5.log &&
			test -f own/logs/sweep.L$l.$s.2.50.log || return 1
		done
	done
'

test_expect_success 'the sweep brackets the budget: 1, 3 and 4 added around 2.5' '
	for b in 1 3 4; do
		test -s own/sweep/L0.q.$b.rep || return 1
	done &&
	awk "NR > 1 { s[\$4] = 1 } END { exit !((1 in s) && (3 in s) && (4 in s) && (2.5 in s)) }" own/curves.txt
'

# spent: the payload's own budget bits (blr-pack info, through the report),
# not the request
test_expect_success 'the curves'"'"' spent bits are the payloads'"'"' at the conversion'"'"'s budget' '
	while read -r name l b m n s lead; do
		blr-pack info own/L$l/$s.blr >info &&
		awk -v t="$name" -v w=$((m * n)) "\$1 == \"bits\" { printf \"%s %.6f\\n\", t, \$2 / w }" info ||
		return 1
	done <own/tensors.txt | sort >expect &&
	awk "NR > 1 && \$4 == \"2.5\" { printf \"%s %.6f\\n\", \$1, \$6 }" own/curves.txt | sort >actual &&
	test "$(wc -l <actual)" -eq 14 &&
	test_cmp expect actual &&
	awk "NR > 1 && \$6 != \$4 { n++ } END { exit !(n > 0) }" own/curves.txt
'

# SWEEP_ERROR=block: each sweep payload measured in its block alone, as
# blr-tune --layer --steps 0 measures it by hand; the curves rebuilt when the
# measure changes; refused without the source stream
test_expect_success 'SWEEP_ERROR=block: the curves'"'"' errors are the block'"'"'s, as blr-tune gives them' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bl BPW=2.5 TUNE=1 SWEEP_BPW="1.6 4" sweep -j2 2>err &&
	cp bl/curves.txt sel.curves &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bl BPW=2.5 TUNE=1 SWEEP_BPW="1.6 4" SWEEP_ERROR=block sweep -j2 2>err &&
	test "$(wc -l <bl/curves.txt)" -eq "$(wc -l <sel.curves)" &&
	test_must_fail cmp -s sel.curves bl/curves.txt &&
	awk "{ print \$1, \$2, \$3, \$4, \$6 }" sel.curves >a && awk "{ print \$1, \$2, \$3, \$4, \$6 }" bl/curves.txt >b &&
	test_cmp a b &&
	mkdir hb &&
	blr-tune --layer 1 -q --steps 0 -m s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128 --state bl/S1.state --src-state bl/src/S1.state \
		--patch model.layers.1.self_attn.k_proj.weight=bl/sweep/L1.k.4.blr -o hb >rep.hb &&
	e=$(sed -n "s/.* sel \([0-9.]*\) -> [0-9.]* | step .*/\1/p" rep.hb) &&
	curve_error_is bl/curves.txt model.layers.1.self_attn.k_proj.weight 4 "$e" &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bl BPW=2.5 TUNE=1 SWEEP_BPW="1.6 4" sweep -j2 2>err &&
	test_cmp sel.curves bl/curves.txt &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw BPW=2.5 SWEEP_BPW="1.6 4" SWEEP_ERROR=block sweep 2>err &&
	test_grep "SWEEP_ERROR=block measures nvg payloads against the source stream" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bl BPW=2.5 TUNE=1 SWEEP_ERROR=frob sweep 2>err &&
	test_grep "SWEEP_ERROR .frob. is not sel, block or kl" err
'

# SWEEP_ERROR=kl: the model's SEL KL with each sweep payload alone in the
# source, as blr-tune --perturb gives it by hand, one run a layer
test_expect_success 'SWEEP_ERROR=kl: the curves'"'"' errors are the model'"'"'s KL with each payload alone' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bl BPW=2.5 TUNE=1 SWEEP_BPW="1.6 4" SWEEP_ERROR=kl sweep -j2 2>err &&
	test "$(wc -l <bl/curves.txt)" -eq "$(wc -l <sel.curves)" &&
	awk "{ print \$1, \$2, \$3, \$4, \$6 }" bl/curves.txt >k && test_cmp a k &&
	test "$(wc -l <bl/sweep/L1.kl)" -eq 14 &&
	blr-tune --perturb 1 -q -m s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128 \
		--src-state bl/src/S1.state --patch model.layers.1.self_attn.k_proj.weight=bl/sweep/L1.k.4.blr >rep.kl &&
	e=$(awk "{ print \$4 }" rep.kl) &&
	curve_error_is bl/curves.txt model.layers.1.self_attn.k_proj.weight 4 "$e" &&
	blr-tune --perturb 0 -q -m s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128 \
		--patch model.layers.0.mlp.up_proj.weight=bl/sweep/L0.up.1.6.blr >rep.kl0 &&
	e=$(awk "{ print \$4 }" rep.kl0) &&
	curve_error_is bl/curves.txt model.layers.0.mlp.up_proj.weight 1.6 "$e" &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw BPW=2.5 SWEEP_BPW="1.6 4" SWEEP_ERROR=kl sweep 2>err &&
	test_grep "SWEEP_ERROR=kl measures nvg payloads against the source stream" err
'

test_expect_success 'the bracket below 2 bpw: 1.5 (not 2) and 0.5 added around 1; b/1.5 and 1.5 b add nothing' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw1 BPW=1 SWEEP_BPW="0.7 1 1.25" sweep -j2 2>err &&
	awk "NR > 1 { s[\$4] = 1 } END { n = 0; for (b in s) n++; exit !(n == 5 && (0.5 in s) && (0.7 in s) && (1 in s) && (1.25 in s) && (1.5 in s)) }" sw1/curves.txt &&
	rm -r sw1/sweep sw1/curves.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw1 BPW=1 SWEEP_BPW="0.666667 1 1.5" sweep -j2 2>err &&
	awk "NR > 1 { s[\$4] = 1 } END { n = 0; for (b in s) n++; exit !(n == 3) }" sw1/curves.txt
'

# the bits a conversion stores are the plan's where each layer's encoder
# picks the path count the sweep's did; on other inputs it may pick the
# other, whose rank rounds differently (1% allowed; here they agree)
test_expect_success 'a plan from plan-alloc is converted as allocated, spending what it says' '
	plan-alloc -q --bpw 2.5 -o sw.plan sw/curves.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw2 BPW=2.5 PLAN=sw.plan -j2 2>err &&
	grep "^tensor " sw.plan | awk "{ print \$2, \$3 }" | sort >expect &&
	report_lines sw2/model.cmf.blr.txt | awk "{ print \$1, \$4 }" | sort >actual &&
	test_cmp expect actual &&
	report_lines sw2/model.cmf.blr.txt | awk "{ split(\$3, d, \"x\"); w = d[1] * d[2]; R += \$5 * w; W += w }
		END { printf \"%.9g\\n\", R / W; exit !(R / W <= 2.5 * (1 + 1e-9)) }" >spent &&
	p=$(sed -n "s/^# plan-alloc: .*; plan \([0-9.]*\) bpw.*/\1/p" sw.plan) &&
	awk -v a="$(cat spent)" -v p="$p" "BEGIN { exit !(a - p < 0.01 * p && p - a < 0.01 * p) }"
'

test_expect_success 'cmf-patch apply --provenance merges the block, refuses a non-object' '
	echo "{\"blr\": {\"method\": \"x\"}, \"weight_quant\": \"blr\"}" >prov.json &&
	cmf-patch apply --provenance prov.json -o merged.cmf s3.cmf \
		model.layers.0.self_attn.q_proj.weight=pl/L0/q.blr &&
	test "$(prov_value merged.cmf method)" = x &&
	"$NVG_PY" -c "
import json, struct
f = open(\"merged.cmf\", \"rb\"); n = struct.unpack(\"<Q\", f.read(8))[0]
p = json.loads(json.loads(f.read(n))[\"__metadata__\"][\"cmf.provenance\"])
assert p[\"import\"][\"from\"] == \"llama2c\" and p[\"weight_quant\"] == \"blr\", p" &&
	echo "[1, 2]" >bad.json &&
	test_expect_code 1 cmf-patch apply --provenance bad.json -o no.cmf s3.cmf \
		model.layers.0.self_attn.q_proj.weight=pl/L0/q.blr 2>err &&
	test_one_line_error err && test_grep "not a JSON object" err &&
	test_path_is_missing no.cmf
'

test_expect_success 'missing variables are named' '
	test_expect_code 2 conv OUT=x 2>err &&
	test_grep "missing variables: MODEL BPW TOKENS-or-TEXT" err &&
	test_expect_code 2 conv MODEL=s2.cmf BPW=1 TOKENS=cal.u32 2>err &&
	test_grep "missing variables: OUT" err &&
	test_path_is_missing x
'

test_expect_success 'too few calibration tokens' '
	head -c 400 cal.u32 >few.u32 &&
	test_expect_code 2 conv MODEL=s2.cmf TOKENS=few.u32 OUT=few BPW=2.5 2>err &&
	test_grep "too few calibration tokens: .few.u32. has 100, FIT_TOKENS \+ SEL_TOKENS need 1536" err &&
	test_path_is_missing few &&
	echo "Once upon a time there was a cat." >short.txt &&
	test_must_fail conv MODEL=s2.cmf TEXT=short.txt OUT=fewt BPW=2.5 2>err &&
	test_grep "FIT 1024 \+ SEL 512 need 1536" err &&
	test_path_is_missing fewt/model.cmf
'

test_expect_success 'a plan naming a layer or tensor the model lacks' '
	printf "layer 0 2\nlayer 5 1\n" >bad.plan &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bp BPW=2.5 PLAN=bad.plan 2>err &&
	test_grep "plan: line 2: layer 5 has no tensor to encode" err &&
	printf "tensor model.layers.1.mlp.up_proj.weigth 2\n" >bad2.plan &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bp2 BPW=2.5 PLAN=bad2.plan 2>err &&
	test_grep "tensor .model.layers.1.mlp.up_proj.weigth. is not one to encode" err &&
	printf "keep tensor model.embed_tokens.weight\n" >bad3.plan &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bp3 BPW=2.5 PLAN=bad3.plan 2>err &&
	test_grep "is not one to encode" err &&
	printf "layer 0 x\n" >bad4.plan &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bp4 BPW=2.5 PLAN=bad4.plan 2>err &&
	test_grep "line 1: .x. is not a number" err &&
	test_path_is_missing bp/model.cmf bp2/model.cmf bp3/model.cmf bp4/model.cmf bp/L0
'

test_expect_success 'OUT holding another conversion is refused, never mixed' '
	conv MODEL=s2.cmf OUT=o BPW=2.5 METHOD=dual-svid 2>err &&
	cp o/model.cmf before.cmf &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=o BPW=3 METHOD=dual-svid 2>err &&
	test_grep "OUT .o. holds another conversion.s files" err &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=o BPW=2.5 METHOD=nvg TOKENS=cal.u32 2>err &&
	test_grep "holds another conversion" err &&
	cmp before.cmf o/model.cmf &&
	mkdir busy && echo x >busy/file &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=busy BPW=2.5 METHOD=dual-svid 2>err &&
	test_grep "OUT .busy. is not empty and holds no conversion stamp" err
'

test_expect_success 'a model without body linears' '
	"$NVG_PY" -c "
import numpy as np
from safetensors.numpy import save_file
save_file({\"model.embed_tokens.weight\": np.zeros((4, 8), np.float32)}, \"nobody.cmf\", metadata={\"format\": \"cmf\"})" &&
	test_must_fail conv MODEL=nobody.cmf OUT=nb BPW=2.5 METHOD=dual-svid 2>err &&
	test_grep "nobody.cmf. has no body linears to encode" err &&
	test_path_is_missing nb/model.cmf
'

test_expect_success 'bad values' '
	test_expect_code 2 conv MODEL=s2.cmf OUT=bv BPW=2.5 METHOD=svd 2>err &&
	test_grep "METHOD .svd. is not nvg or dual-svid" err &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=bv BPW=x METHOD=dual-svid 2>err &&
	test_grep "BPW .x. is not a number" err &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=bv BPW=1 PATHS=3 METHOD=dual-svid 2>err &&
	test_expect_code 2 conv MODEL=nosuch.cmf OUT=bv BPW=1 METHOD=dual-svid 2>err &&
	test_grep "MODEL .nosuch.cmf. does not exist" err &&
	test_expect_code 2 conv MODEL=s2.cmf OUT=bv BPW=1 TOKENS=cal.u32 TEXT=short.txt 2>err &&
	test_path_is_missing bv
'

test_done
