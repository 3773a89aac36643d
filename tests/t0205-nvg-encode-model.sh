#!/bin/bash
# nvg-encode -m MODEL.cmf -t NAME: the tensor read from a CMF model, the kv
# factor applied on its own to GQA k/v, --target-from, and budgets from --plan
. "$(dirname "$0")/test-lib.sh"

REF="$NVG_TOP/tests/ref"
test_require_data stories260K.bin tok512.bin tinystories-train-sample.txt
M="$NVG_DATA/stories260K.bin"
L=model.layers.1
DOWN="--fit L1.down.fit.gram --sel L1.down.sel.gram"
Q="--fit L1.q.fit.gram --sel L1.q.sel.gram"

test_expect_success 'setup: stories260K as CMF, layer 1 Grams, w2 as raw' '
	cmf-patch import "$M" -o s.cmf &&
	"$NVG_PY" "$REF/layer-grams.py" grams "$M" "$NVG_DATA/tok512.bin" \
		"$NVG_DATA/tinystories-train-sample.txt" 1 2048 1024 256 L1 &&
	"$NVG_PY" "$REF/layer-grams.py" weight "$M" w2 1 w2.raw &&
	"$NVG_PY" "$REF/layer-grams.py" weight "$M" wk 1 wk.raw &&
	"$NVG_PY" -c "
import numpy as np
w=np.fromfile(\"w2.raw\",dtype=\"<f4\"); (w*0.5).astype(\"<f4\").tofile(\"half.raw\")"
'

test_expect_success '-m -t reads the tensor: the same bytes as -w on its raw copy' '
	nvg-encode -m s.cmf -t $L.mlp.down_proj.weight $DOWN --bpw 2 -o m.blr >lm &&
	nvg-encode -w w2.raw --shape 64x172 $DOWN --bpw 2 -o w.blr >lw &&
	cmp m.blr w.blr && test_cmp lw lm
'

test_expect_success 'a GQA k projection gets --kv-factor without --kv; q does not' '
	nvg-encode -m s.cmf -t $L.self_attn.k_proj.weight $Q --bpw 2 --kv-factor 2 --paths 2 -o k.blr >lk &&
	test_grep "^pick P2 r16 " lk &&
	nvg-encode -w wk.raw --shape 32x64 $Q --bpw 2 --kv-factor 2 --paths 2 -o k2.blr >lk2 &&
	test_grep "^pick P2 r8 " lk2 &&
	nvg-encode -m s.cmf -t $L.self_attn.q_proj.weight $Q --bpw 2 --kv-factor 2 --paths 2 -o q.blr >lq &&
	test_grep "^pick P2 r8 " lq
'

test_expect_success '--shape with -m must agree with the tensor' '
	test_expect_code 1 nvg-encode -m s.cmf -t $L.mlp.down_proj.weight --shape 172x64 $DOWN --bpw 2 -o x.blr 2>err &&
	test_one_line_error err && test_grep "is 64x172" err && test_path_is_missing x.blr
'

test_expect_success 'an unknown tensor or model is an error' '
	test_expect_code 1 nvg-encode -m s.cmf -t nope.weight $DOWN --bpw 2 -o x.blr 2>err &&
	test_one_line_error err && test_grep "no tensor .nope.weight." err &&
	test_expect_code 1 nvg-encode -m missing.cmf -t nope.weight $DOWN --bpw 2 -o x.blr 2>err &&
	test_one_line_error err && test_path_is_missing x.blr &&
	test_expect_code 2 nvg-encode -m s.cmf $DOWN --bpw 2 -o x.blr 2>err
'

test_expect_success '--target-raw with -m: the model gives the shape, the file the target' '
	nvg-encode -m s.cmf -t $L.mlp.down_proj.weight --target-raw half.raw $DOWN --bpw 2 -o h.blr >lh &&
	nvg-encode -w half.raw --shape 64x172 $DOWN --bpw 2 -o h2.blr >lh2 &&
	cmp h.blr h2.blr
'

test_expect_success '--target-from: the target from another model of the same names' '
	cp s.cmf t.cmf &&
	nvg-encode -m s.cmf -t $L.mlp.down_proj.weight --target-from t.cmf $DOWN --bpw 2 -o tf.blr >ltf &&
	cmp tf.blr m.blr &&
	test_expect_code 1 nvg-encode -m s.cmf -t $L.mlp.down_proj.weight --target-from missing.cmf $DOWN --bpw 2 -o x.blr 2>err &&
	test_one_line_error err && test_path_is_missing x.blr
'

test_expect_success '--plan: tensor rule, then layer rule, then --bpw; keep refuses' '
	cat >p.plan <<-\EOT &&
	tensor model.layers.1.mlp.down_proj.weight 2.0
	layer 1 0.55
	keep tensor model.layers.1.mlp.up_proj.weight
	EOT
	nvg-encode -m s.cmf -t $L.mlp.down_proj.weight $DOWN --plan p.plan --bpw 8 -o p1.blr >/dev/null &&
	cmp p1.blr m.blr &&
	nvg-encode -m s.cmf -t $L.self_attn.q_proj.weight $Q --plan p.plan --paths 2 -o p2.blr >lp2 &&
	nvg-encode -m s.cmf -t $L.self_attn.q_proj.weight $Q --bpw 0.55 --paths 2 -o p3.blr >lp3 &&
	cmp p2.blr p3.blr &&
	nvg-encode -m s.cmf -t model.layers.2.self_attn.q_proj.weight $Q --plan p.plan --bpw 2 --paths 1 -o p4.blr >lp4 &&
	test_grep "^pick P1 r40 " lp4 &&
	test_expect_code 1 nvg-encode -m s.cmf -t $L.mlp.up_proj.weight --fit L1.gate.fit.gram --sel L1.gate.sel.gram --plan p.plan -o x.blr 2>err &&
	test_one_line_error err && test_grep "plan keeps it" err &&
	test_expect_code 1 nvg-encode -m s.cmf -t model.layers.2.mlp.down_proj.weight $DOWN --plan p.plan -o x.blr 2>err &&
	test_one_line_error err && test_grep "no --bpw" err &&
	test_path_is_missing x.blr
'

test_expect_success 'a bad plan names its line' '
	printf "layer 1 0.55\nlayer 2 abc\n" >bad.plan &&
	test_expect_code 1 nvg-encode -m s.cmf -t $L.mlp.down_proj.weight $DOWN --plan bad.plan -o x.blr 2>err &&
	test_one_line_error err && test_grep "line 2" err && test_path_is_missing x.blr
'

test_done
