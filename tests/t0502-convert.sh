#!/bin/bash
# convert.mk on stories260K: nvg and dual-svid end to end, reports that add
# up, the provenance, nvg's held-out perplexity below dual-svid's, the floor;
# dual-svid's SEL errors on Grams captured from its own encoded states
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

test_expect_success 'setup: stories260K imported, calibration tokens' '
	convert_setup
'

test_expect_success 'nvg at 2.5 bpw converts all five layers' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=nvg BPW=2.5 -j2 2>err &&
	test_grep "^convert: total blr body" err &&
	cmf-patch verify nvg/model.cmf &&
	cmf-patch list nvg/model.cmf >list &&
	test "$(awk -F "\t" "\$5 == \"blr\"" list | wc -l)" -eq 35 &&
	test "$(report_lines nvg/model.cmf.blr.txt | wc -l)" -eq 35 &&
	test_no_tmp_files nvg
'

# the encodes' recipes are marked recursive (+) so that make hands them its
# jobserver (nvg-encode --threads-max), but make runs such recipes even
# under -n: convert.mk marks them only when make is to run its recipes
test_expect_success 'make -n prints the encodes, --threads-max with them, and runs none' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=dry BPW=2.5 -j2 -n >out 2>err &&
	test_grep "nvg-encode .* --threads 1 --threads-max .* --bpw 2.5" out &&
	test "$(grep -c "nvg-encode " out)" -eq 35 &&
	test_path_is_missing dry/L0 dry/model.cmf
'

test_expect_success 'the conversion passes on the note of cmf-patch --version, once' '
	cmf-patch --version | sed -n "s/^note: /convert: note: /p" >expect &&
	grep "^convert: note: " err >actual || true &&
	test_cmp expect actual
'

# make -j starts a layer's encodes in ENC_L's order: the costliest first
# (bpw·m·n·(m+n) + n³, from tensors.txt), so that none runs alone at the end
test_expect_success 'a layer lists its tensors longest encode first' '
	awk "\$2 == 0 { print \$6, \$3 * \$4 * \$5 * (\$4 + \$5) + \$5 * \$5 * \$5 }" nvg/tensors.txt |
		sort -s -k2,2gr | awk "{ printf \" %s\", \$1 }" >want &&
	echo "ENC_0 :=$(cat want)" >expect &&
	grep "^ENC_0 :=" nvg/layers.mk >actual &&
	test_cmp expect actual &&
	test_grep "^ENC_0 := down " nvg/layers.mk
'

test_expect_success 'dual-svid at 2.5 bpw converts all five layers' '
	conv MODEL=s.cmf TOKENS=cal.u32 OUT=svid BPW=2.5 METHOD=dual-svid -j2 2>err &&
	cmf-patch verify svid/model.cmf &&
	test "$(report_lines svid/model.cmf.blr.txt | wc -l)" -eq 35 &&
	test_no_tmp_files svid
'

test_expect_success 'dual-svid with tokens: the SEL column is each encoder line'"'"'s sel' '
	report_lines svid/model.cmf.blr.txt >lines &&
	grep -c "^model.layers.[0-4]\.[a-z_]*\.[a-z_]*_proj.weight [0-4] [0-9]*x[0-9]* 2.5 [0-9.]* [0-9]* [12] - \(0\.[0-9]*\) | P[12] r[0-9]* frob [0-9.]* sel \1$" lines >n &&
	test "$(cat n)" -eq 35 &&
	test -f svid/logs/L0.capture.log && test -f svid/logs/L3.advance.log &&
	test_path_is_missing svid/L0/q.hctx &&
	test "$(prov_value svid/model.cmf calibration)" = null
'

# the SEL Gram of layer L comes from the state with layers < L dual-svid
# encoded: layer 0 sees the float model (the same Grams as nvg), layer 1 the
# state after layer 0's dual-svid payloads, rebuilt here by hand (at two
# OpenBLAS threads where the conversion ran at one: the bytes do not depend
# on the count, t0507)
test_expect_success 'dual-svid: SEL Grams from its own encoded states' '
	cmp nvg/L0/g.q.sel.gram svid/L0/g.q.sel.gram &&
	test_must_fail cmp -s nvg/L1/g.q.sel.gram svid/L1/g.q.sel.gram &&
	OPENBLAS_NUM_THREADS=2 gram-capture -m s.cmf --tokens cal.u32 -l 0 --fit-tokens 1024 --sel-tokens 512 \
		--window 128 $(for s in q k v o gate up down; do
			n=$(awk -v s=$s "\$2 == 0 && \$6 == s { print \$1 }" svid/tensors.txt) &&
			printf " --patch %s=svid/L0/%s.blr" "$n" "$s"; done) \
		--next-state S1.state 2>/dev/null &&
	OPENBLAS_NUM_THREADS=2 gram-capture -m s.cmf --tokens cal.u32 -l 1 --state S1.state --fit-tokens 1024 \
		--sel-tokens 512 --window 128 -o hand 2>/dev/null &&
	cmp hand.q.sel.gram svid/L1/g.q.sel.gram &&
	OPENBLAS_NUM_THREADS=2 gram-capture -m s.cmf --tokens cal.u32 -l 1 --fit-tokens 1024 --sel-tokens 512 \
		--window 128 -o float 2>/dev/null &&
	test_must_fail cmp -s float.q.sel.gram svid/L1/g.q.sel.gram
'

test_expect_success 'dual-svid: a reported SEL error is its payload decoded on that Gram' '
	report_lines svid/model.cmf.blr.txt >lines &&
	for t in "1 q_proj self_attn q q" "3 down_proj mlp down down"; do
		set -- $t &&
		name=model.layers.$1.$3.$2.weight &&
		cmf-patch extract -o w.raw s.cmf $name &&
		shape=$(awk -v n=$name "\$1 == n { print \$3 }" lines) &&
		"$NVG_PY" "$NVG_TOP/tests/ref/blr.py" check svid/L$1/$4.blr w.raw ${shape%x*} ${shape#*x} \
			svid/L$1/g.$5.sel.gram >dec &&
		e=$(sed -En "s/(^|.* )herr ([^ ]*).*/\2/p" dec) &&
		got=$(awk -v n=$name "\$1 == n { print \$9 }" lines) &&
		# 4 printed decimals; the decoder sums in f64 from the same f16 scales
		awk -v a="$e" -v b="$got" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 6e-5) }" ||
		{ echo "$name: decoded $e, reported $got"; return 1; }
	done
'

# bits from the rank rule of DESIGN.md, p·(r(m+n) + 16(m+n+r)), recomputed
# here from each line's shape, rank and paths; the totals must agree with
# the report's own line, the provenance and cmf-patch report
for m in nvg svid; do
	test_expect_success "$m: the report adds up" '
		report_lines '$m'/model.cmf.blr.txt >lines &&
		awk "{ split(\$3, d, \"x\"); r = \$6; p = \$7; b = p * (r * (d[1] + d[2]) + 16 * (d[1] + d[2] + r));
		       w = d[1] * d[2]; if (sprintf(\"%.6f\", b / w) != \$5) { print \"delivered \" \$5 \" != \" b / w; exit 1 }
		       B += b; W += w; R += \$4 * w }
		     END { printf \"%.6f %d %.6f\n\", B / W, W, R / W }" lines >expect &&
		sed -n "s/^# total blr body \([0-9.]*\) bpw over \([0-9]*\) weights (requested \([0-9.]*\) bpw).*/\1 \2 \3/p" \
			'$m'/model.cmf.blr.txt >actual &&
		test_cmp expect actual &&
		printf "%.6f %d %.6f\n" $(prov_value '$m'/model.cmf blr_body_bpw) \
			$(prov_value '$m'/model.cmf blr_body_weights) \
			$(prov_value '$m'/model.cmf requested_bpw) >prov &&
		test_cmp expect prov &&
		cmf-patch report '$m'/model.cmf >rep &&
		test_grep "^blr body: $(awk "{ printf \"%.4f\", \$1 }" expect) bpw over 226560 weights" rep &&
		test "$(prov_value '$m'/model.cmf layer_projection_weights)" = 226560
	'
done

test_expect_success 'the report names the encoder, budget and rank of each tensor' '
	report_lines nvg/model.cmf.blr.txt >lines &&
	grep -Ec "^model.layers.[0-4]\.[a-z_]*\.[a-z_]*_proj.weight [0-4] [0-9]*x[0-9]* 2.5 [0-9.]* [0-9]* [12] (-|cap|floor) 0\.[0-9]* \| pick P[12] r[0-9]* \| sel: .* stored fit [0-9.]* sel [0-9.]*$" lines >n &&
	test "$(cat n)" -eq 35 &&
	# which tensors are clipped depends on the picks (a P1 pick of a wide
	# tensor at 2.5 bpw meets the shape cap): the count, the clip column
	# and the comment list must agree, whatever the count is
	awk "\$8 != \"-\" { print \$1 \" \" \$8 }" lines >clip-col &&
	sed -n "s/^#   \([^ ]*\) (2.5 bpw → [0-9.]* bpw, \([a-z]*\))$/\1 \2/p" nvg/model.cmf.blr.txt >clip-list &&
	test_cmp clip-col clip-list &&
	awk "\$8 == \"cap\" { split(\$3, d, \"x\"); c = d[1] < d[2] ? d[1] : d[2]; if (\$6 != c - c % 8) exit 1 }" lines &&
	test "$(prov_value nvg/model.cmf method)" = nvg &&
	test "$(prov_value svid/model.cmf method)" = dual-svid &&
	test "$(prov_value nvg/model.cmf refine_sweeps)" = 2 &&
	test "$(prov_value svid/model.cmf refine_sweeps)" = null &&
	test "$(prov_value nvg/model.cmf g_solve)" = pcg &&
	test "$(prov_value svid/model.cmf g_solve)" = null &&
	test_grep "^# nvgkit BLR conversion: method nvg, target 2.5 bpw, paths auto .down, gate, k, o, q, up, v: two paths where the layers before chose them, k, v: one path too where they chose one, both candidates every 8 layers., refinement sweeps 2, ALS sweeps a try 2, ITQ stop 0.001, ALS stop 0.001, g steps by PCG, kv factor 1$" \
		nvg/model.cmf.blr.txt &&
	test "$(prov_value nvg/model.cmf clipped_tensors)" = "$(wc -l <clip-col)"
'

test_expect_success 'every rank and clip is the one the rule gives for its request and paths' '
	report_lines nvg/model.cmf.blr.txt >lines &&
	while read -r name layer shape req got rank paths clip rest; do
		blr-pack rank --shape $shape --bpw $req --paths $paths >r &&
		test_grep "rank $rank .* clip $clip$" r || return 1
	done <lines
'

test_expect_success 'nvg: held-out perplexity below dual-svid at the same bits' '
	for m in nvg svid; do
		cmf-eval -m $m/model.cmf --text "$NVG_DATA/tinystories-sample.txt" --limit 4096 \
			--window 256 >$m.eval || return 1
	done &&
	n=$(awk "\$1 == \"ppl\" { print \$2 }" nvg.eval) &&
	d=$(awk "\$1 == \"ppl\" { print \$2 }" svid.eval) &&
	echo "nvg ppl $n, dual-svid ppl $d" &&
	awk -v n=$n -v d=$d "BEGIN { exit !(n > 0 && n < d) }"
'

test_expect_success 'each step logged in OUT/logs' '
	test -f nvg/logs/L0.capture.log &&
	test -f nvg/logs/L4.down.log && test -f nvg/logs/L3.advance.log &&
	test -f nvg/logs/apply.log && test -f nvg/logs/report.log
'

test_expect_success 'a budget below the floor: every tensor says floor' '
	conv MODEL=s2.cmf OUT=floor BPW=0.3 METHOD=dual-svid 2>err &&
	report_lines floor/model.cmf.blr.txt >lines &&
	test "$(wc -l <lines)" -eq 14 &&
	test "$(awk "\$8 == \"floor\"" lines | wc -l)" -eq 14 &&
	test "$(awk "\$9 == \"-\"" lines | wc -l)" -eq 14 &&
	test_grep "^model.layers.0.self_attn.q_proj.weight .*| P[12] r[0-9]* frob [0-9.]*$" lines &&
	test_grep "^# clipped: 14 tensor\(s\) could not spend the requested budget" floor/model.cmf.blr.txt &&
	test "$(grep -c "^#   model.layers.*bpw, floor)$" floor/model.cmf.blr.txt)" -eq 8 &&
	test_grep "^#   \.\.\. and 6 more$" floor/model.cmf.blr.txt &&
	test_grep "^convert: clipped: 14 tensor" err &&
	test "$(prov_value floor/model.cmf clipped_tensors)" = 14
'

test_expect_success 'a tensor the encoder refuses stays in its source dtype and is listed' '
	mkdir wrap &&
	for t in "$NVG_BIN"/*; do ln -s "$t" wrap/; done &&
	rm wrap/nvg-encode &&
	cat >wrap/nvg-encode <<-EOF &&
	#!/bin/bash
	case " \$* " in *" -t model.layers.1.mlp.up_proj.weight "*) echo "nvg-encode: blr refused" >&2; exit 3;; esac
	exec "$NVG_BIN/nvg-encode" "\$@"
	EOF
	chmod +x wrap/nvg-encode &&
	conv MODEL=s2.cmf OUT=refuse BPW=2.5 METHOD=dual-svid BIN="$PWD/wrap" 2>err &&
	test_grep "^convert: model.layers.1.mlp.up_proj.weight: blr refused, kept in its source dtype" err &&
	test_grep "^model.layers.1.mlp.up_proj.weight 1 172x64 2.5 - - - refused - \| blr refused" refuse/model.cmf.blr.txt &&
	cmf-patch list refuse/model.cmf >list &&
	test_grep "^model.layers.1.mlp.up_proj.weight	F32	172x64	44032	-	" list &&
	test "$(awk -F "\t" "\$5 == \"blr\"" list | wc -l)" -eq 13 &&
	cmf-patch extract -o a.raw s2.cmf model.layers.1.mlp.up_proj.weight &&
	cmf-patch extract -o b.raw refuse/model.cmf model.layers.1.mlp.up_proj.weight &&
	cmp a.raw b.raw &&
	cmf-patch report refuse/model.cmf >rep &&
	all=$(sed -n "s/^# total.*all layer projections \([0-9.]*\) bpw over 90624 weights; 0 kept, 1 refused$/\1/p" refuse/model.cmf.blr.txt) &&
	test_grep "^all layer projections: $(printf %.4f $all) bpw over 90624 weights" rep &&
	test "$(prov_value refuse/model.cmf refused_tensors)" = "[\"model.layers.1.mlp.up_proj.weight\"]"
'

test_expect_success 'G_SOLVE=direct: its own stamp, recorded, the layer-0 SEL errors of the default (pcg) within 0.5% of it; pcg on the CPU only' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=gd BPW=2.5 G_SOLVE=direct -j2 2>err &&
	test_grep " g_solve=direct itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" gd/params &&
	test "$(prov_value gd/model.cmf g_solve)" = direct &&
	test_no_grep "g steps by PCG" gd/model.cmf.blr.txt &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=gd BPW=2.5 2>err &&
	test_grep "holds another conversion" err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=gp BPW=2.5 -j2 2>err &&
	test_no_grep "g_solve" gp/params &&
	test "$(prov_value gp/model.cmf g_solve)" = pcg &&
	test_grep "^# nvgkit BLR conversion: method nvg, .*, g steps by PCG, kv factor" gp/model.cmf.blr.txt &&
	awk "\$2 == 0 { print \$1, \$9 }" gd/model.cmf.blr.txt >sel.direct &&
	awk "\$2 == 0 { print \$1, \$9 }" gp/model.cmf.blr.txt >sel.pcg &&
	test "$(wc -l <sel.direct)" = 7 &&
	join sel.direct sel.pcg | awk "{ if (\$3 > \$2 * 1.005) bad++ } END { exit bad > 0 }" &&
	conv_refused gbad "G_SOLVE=lu:is not direct or pcg" "G_SOLVE=pcg METHOD=dual-svid:G_SOLVE is nvg.s" \
		"G_SOLVE=pcg DEVICE=opencl:the CPU encoder.s"
'

test_expect_success 'REFINE=3: more refinement, its own stamp, recorded; nvg only' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw3 BPW=2.5 REFINE=3 -j2 2>err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw2 BPW=2.5 -j2 2>err &&
	test_grep " refine=3 itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" sw3/params &&
	test_no_grep "refine" sw2/params &&
	test "$(prov_value sw3/model.cmf refine_sweeps)" = 3 &&
	test_must_fail cmp -s sw3/L1/down.blr sw2/L1/down.blr &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw3 BPW=2.5 2>err &&
	test_grep "holds another conversion" err &&
	test_grep "the stamp has .refine=3., this command ...; give the stamp.s settings to resume it" err &&
	cp -r sw3 sw3c &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=sw3c BPW=2.5 REFINE=2 PATHS=1 2>err &&
	test_grep "the stamp has .paths=auto refine=3 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v., this command .paths=1." err &&
	test_must_fail conv MODEL=s2.cmf OUT=swd BPW=2.5 METHOD=dual-svid REFINE=3 2>err &&
	test_grep "REFINE is nvg.s" err &&
	test_path_is_missing swd
'

test_expect_success 'TRY_SWEEPS, G_EVERY, ITQ_TOL, ITQ_PREC, ALS_TOL, ALS_PREC: the encoder gets them, stamped, recorded; nvg only, a tolerance, G_EVERY above 1 and f32 on the CPU only (HB_PREC=f64 too)' '
	mkdir argwrap &&
	for t in "$NVG_BIN"/*; do ln -s "$t" argwrap/; done &&
	rm argwrap/nvg-encode &&
	cat >argwrap/nvg-encode <<-EOF &&
	#!/bin/bash
	echo "\$*" >>"$PWD/encode.args"
	exec "$NVG_BIN/nvg-encode" "\$@"
	EOF
	chmod +x argwrap/nvg-encode &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=lean BPW=2.5 TRY_SWEEPS=1 ITQ_TOL=0.0025 ALS_TOL=0.002 \
		ITQ_PREC=f32 ALS_PREC=f32 G_EVERY=2 BIN="$PWD/argwrap" -j2 2>err &&
	test "$(grep -c -- "--method nvg .*--try-sweeps 1 --g-every 2 --itq-tol 0.0025 --itq-prec f32 --hb-prec f32 --als-tol 0.002 --als-prec f32 " encode.args)" = 14 &&
	test_grep "^method=nvg try_sweeps=1 bpw=" lean/params &&
	test_grep " g_every=2 itq_tol=0.0025 itq_prec=f32 hb_prec=f32 als_tol=0.002 als_prec=f32 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" lean/params &&
	test_no_grep "g_every" sw2/params &&
	test "$(prov_value lean/model.cmf g_every)" = 2 &&
	test "$(prov_value sw2/model.cmf g_every)" = 1 &&
	test "$(prov_value svid/model.cmf g_every)" = null &&
	test_grep "^method=nvg try_sweeps=2 bpw=" sw2/params &&
	test_grep " plan= itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" sw2/params &&
	test_no_grep "try_sweeps" svid/params && test_no_grep "itq_tol" svid/params &&
	test_no_grep "als_tol" svid/params && test_no_grep "itq_prec" sw2/params &&
	test "$(prov_value lean/model.cmf try_sweeps)" = 1 &&
	test "$(prov_value lean/model.cmf itq_tol)" = 0.0025 &&
	test "$(prov_value lean/model.cmf als_tol)" = 0.002 &&
	test "$(prov_value lean/model.cmf itq_prec)" = f32 &&
	test "$(prov_value sw2/model.cmf itq_prec)" = f64 &&
	test "$(prov_value lean/model.cmf als_prec)" = f32 &&
	test "$(prov_value sw2/model.cmf als_prec)" = f64 &&
	test "$(prov_value svid/model.cmf als_prec)" = null &&
	test_no_grep "als_prec" sw2/params &&
	test_no_grep "ALS products" sw2/model.cmf.blr.txt &&
	test "$(prov_value svid/model.cmf itq_prec)" = null &&
	test "$(prov_value sw2/model.cmf try_sweeps)" = 2 &&
	cp -rp sw2 old3 && sed -i "s/ try_sweeps=2 / /" old3/params &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=old3 BPW=2.5 2>err &&
	test_grep "the stamp has .., this command .try_sweeps=2..; give the stamp.s settings to resume it .transport=1 is TRANSPORT=1; a stamp without try_sweeps was made with TRY_SWEEPS=3., or" err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=old3 BPW=2.5 TRY_SWEEPS=3 2>err &&
	for f in sw2/L*/*.blr; do cmp $f old3/${f#sw2/} || return 1; done &&
	test "$(prov_value old3/model.cmf try_sweeps)" = 3 &&
	test "$(prov_value sw2/model.cmf itq_tol)" = 0.001 &&
	test "$(prov_value sw2/model.cmf als_tol)" = 0.001 &&
	cp -rp sw2 old0 && sed -i "s/ itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$/ hb_prec=f32/" old0/params &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=old0 BPW=2.5 2>err &&
	test_grep "this command .itq_tol=0.001 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v..; give the stamp.s settings to resume it .transport=1 is TRANSPORT=1; a stamp without itq_tol was made with ITQ_TOL=0; a stamp without als_tol was made with ALS_TOL=0; a stamp without paths_follow was made with PATHS_FOLLOW=0., or" err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=old0 BPW=2.5 ITQ_TOL=0 ALS_TOL=0 PATHS_FOLLOW=0 2>err &&
	for f in sw2/L*/*.blr; do cmp $f old0/${f#sw2/} || return 1; done &&
	test "$(prov_value old0/model.cmf itq_tol)" = 0 &&
	test "$(prov_value old0/model.cmf als_tol)" = 0 &&
	test "$(prov_value svid/model.cmf try_sweeps)" = null &&
	test "$(prov_value svid/model.cmf als_tol)" = null &&
	test_grep "refinement sweeps 2, ALS sweeps a try 1, ITQ stop 0.0025, ITQ products in f32, ALS stop 0.002, ALS products in f32, g steps by PCG, a g step every 2 ALS sweeps, kv factor" \
		lean/model.cmf.blr.txt &&
	test_grep "ITQ stop 0.001, ALS stop 0.001, g steps by PCG, kv factor" sw2/model.cmf.blr.txt &&
	test_must_fail cmp -s lean/L1/down.blr sw2/L1/down.blr &&
	conv_refused lbad "TRY_SWEEPS=0:TRY_SWEEPS .0. is not" "TRY_SWEEPS=9:TRY_SWEEPS .9. is not" \
		"ITQ_TOL=0.6:ITQ_TOL .0.6. is not" "ITQ_TOL=x:ITQ_TOL .x. is not a number" \
		"ALS_TOL=0.6:ALS_TOL .0.6. is not" "ALS_TOL=y:ALS_TOL .y. is not a number" \
		"TRY_SWEEPS=1 METHOD=dual-svid:TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg.s" \
		"ALS_TOL=0.01 METHOD=dual-svid:TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg.s" \
		"ITQ_PREC=f32 METHOD=dual-svid:TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg.s" \
		"ITQ_PREC=f16:ITQ_PREC .f16. is not f64 or f32" \
		"ITQ_PREC=f32 DEVICE=opencl:ITQ_PREC=f32 is the CPU encoder.s" \
		"ITQ_TOL=0.01 DEVICE=opencl:ITQ_TOL above 0 is the CPU encoder.s" \
		"ALS_TOL=0.01 DEVICE=opencl:ALS_TOL above 0 is the CPU encoder.s" \
		"G_EVERY=0:G_EVERY .0. is not" "G_EVERY=9:G_EVERY .9. is not" \
		"G_EVERY=2 METHOD=dual-svid:G_EVERY is nvg.s: dual-svid has no g step" \
		"G_EVERY=2 DEVICE=opencl:G_EVERY above 1 is the CPU encoder.s .a device runs every g step.: DEVICE=cpu" \
		"HB_PREC=f16:HB_PREC .f16. is not f64 or f32" \
		"HB_PREC=f64 METHOD=dual-svid:TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg.s" \
		"HB_PREC=f64 DEVICE=opencl:HB_PREC=f64 is the CPU encoder.s .a device.s products are f32.: DEVICE=cpu" \
		"ALS_PREC=f16:ALS_PREC .f16. is not f64 or f32" \
		"ALS_PREC=f32 METHOD=dual-svid:TRY_SWEEPS, ITQ_TOL, ITQ_PREC, HB_PREC, ALS_TOL and ALS_PREC are nvg.s" \
		"ALS_PREC=f32 DEVICE=opencl:ALS_PREC=f32 is the CPU encoder.s .a device.s products are f32 already.: DEVICE=cpu"
'

# (this model's tensors come out the same bytes either way at 2.5 bpw: f16
# hides the products' rounding; t0202 sees them differ on a larger one)
test_expect_success 'HB_PREC: f32 the default, given to the CPU encoder, stamped as hb_prec=f32 and recorded; f64 its own stamp, refused on resuming without it' '
	test "$(grep -c -- "--method nvg .* --hb-prec f32 " encode.args)" -ge 14 &&
	test "$(prov_value sw2/model.cmf hb_prec)" = f32 &&
	test "$(prov_value svid/model.cmf hb_prec)" = null &&
	test_no_grep "Gram products" sw2/model.cmf.blr.txt &&
	: >encode.args &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=hb64 BPW=2.5 HB_PREC=f64 BIN="$PWD/argwrap" -j2 2>err &&
	test "$(grep -c -- "--method nvg .* --hb-prec f64 " encode.args)" = 14 &&
	test_no_grep "g-every" encode.args &&
	test_no_grep "hb_prec" hb64/params &&
	test "$(prov_value hb64/model.cmf hb_prec)" = f64 &&
	test_grep "Gram products in f64, ALS stop 0.001" hb64/model.cmf.blr.txt &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=hb64 BPW=2.5 2>err &&
	test_grep "this command .hb_prec=f32..; give the stamp.s settings to resume it .transport=1 is TRANSPORT=1; a stamp without hb_prec was made with HB_PREC=f64., or" err
'

test_expect_success 'every value is checked before OUT is touched; an empty stamp is no stamp' '
	for a in BPW=0 BPW=16 BPW=1e9 WINDOW=1 THREADS=65 RHO=1e9 KV_FACTOR=0 DEVICE=gpu \
		SEL_TOKENS=1 REFINE=0 REFINE=17; do
		test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=range BPW=2 $a 2>err &&
		test_grep "convert.mk: ${a%%=*} .${a#*=}. is not" err &&
		test_path_is_missing range || return 1
	done &&
	mkdir -p full/logs && : >full/params &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=full BPW=2.5 METHOD=dual-svid 2>err &&
	cmf-patch verify full/model.cmf
'

test_expect_success 'by default nvg follows the source (tuning, calibration, end to end; transport only when asked); dual-svid calibrates only' '
	make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf \
		TOKENS=cal.u32 OUT=dflt BPW=2.5 E2E_FIT_TOKENS=1024 layers &&
	test_grep " tune=1 itq_tol=0.001 hb_prec=f32 als_tol=0.001 paths_follow=8:down,gate,k,o,q,up,v paths_follow_one=k,v$" dflt/params && ! grep -q transport dflt/params &&
	! ls dflt/L1/g.*.cross 2>/dev/null &&
	test "$(cat dflt/calibrate.set)" = 1 && test "$(cat dflt/e2e.set)" = "1 fit=1024 steps=120 tokens=cal.u32" &&
	make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 MODEL=s2.cmf \
		METHOD=dual-svid TOKENS=cal.u32 OUT=dsv BPW=2.5 layers &&
	! grep -q -e transport -e tune -e paths_follow dsv/params &&
	test "$(cat dsv/calibrate.set)" = 1 && test "$(cat dsv/e2e.set)" = 0 &&
	make -s -f "$CONVERT_MK" MODEL=s2.cmf METHOD=dual-svid OUT=dfree BPW=2.5 layers &&
	test "$(cat dfree/calibrate.set)" = 0
'

test_expect_success 'E2E=1 needs E2E_FIT_TOKENS (4 × FIT_TOKENS by default) + SEL_TOKENS tokens' '
	test_must_fail make -s -f "$CONVERT_MK" FIT_TOKENS=1024 SEL_TOKENS=512 WINDOW=128 \
		MODEL=s2.cmf TOKENS=cal.u32 OUT=e2eshort BPW=2.5 layers 2>err &&
	test_grep "too few tokens for E2E=1: .cal.u32. has 1536, E2E_FIT_TOKENS \+ SEL_TOKENS need 4608" err &&
	head -c 4000 cal.u32 >short.u32 &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=e2eshort BPW=2.5 E2E=1 \
		E2E_TOKENS=short.u32 2>err &&
	test_grep "too few tokens for E2E=1: .short.u32. has 1000" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=e2eshort BPW=2.5 E2E=1 \
		E2E_TOKENS=nowhere.u32 2>err &&
	test_grep "E2E_TOKENS .nowhere.u32. does not exist" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=e2eshort BPW=2.5 E2E=1 E2E_FIT_TOKENS=x 2>err &&
	test_grep "E2E_FIT_TOKENS .x. is not a positive integer" err &&
	test_path_is_missing e2eshort
'

test_done
