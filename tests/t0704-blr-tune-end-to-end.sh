#!/bin/bash
# blr-tune --end-to-end: every payload of a two-layer stories260K conversion
# tuned together against the source's next-token distributions.  SEL never
# worse, the held-out KL lower, signs and sizes kept, the same bytes twice,
# no steps the model's payloads back; bad input refused with nothing
# written; convert.mk E2E=1, resumed and switched like CALIBRATE.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

C="--tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"

# patches DIR: --patch NAME=PAYLOAD for every projection of both layers of conversion DIR
patches() {
	bash "$NVG_TOP/pipelines/convert-lib.sh" patch-args "$1" '' ${2:-}
}

# blr_of MODEL NAME OUT: the BLR bytes of tensor NAME, read by Python from the
# safetensors layout (an independent reader)
blr_of() {
	"$NVG_PY" -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    a, b = h[sys.argv[2]]["data_offsets"]
    f.seek(8 + n + a)
    open(sys.argv[3], "wb").write(f.read(b - a))' "$@"
}

# kl MODEL: the held-out KL against s2.cmf
kl() {
	cmf-eval -q -m "$1" --base s2.cmf --text held.txt --window 128 | sed -n 's/^kl //p'
}

test_expect_success 'setup: a two-layer conversion at 2 bpw, calibrated' '
	convert_setup &&
	head -c 40000 "$NVG_DATA/tinystories-sample.txt" >held.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 -j2 2>err &&
	test -f c/applied.cmf
'

test_expect_success 'SEL never worse, the held-out KL lower, signs and sizes kept' '
	blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		-o e.cmf >rep 2>err &&
	test_grep "^model: kl sel [0-9.]* -> [0-9.]* fit [0-9.]* -> [0-9.]* \| step [0-9]* of 30 \| 14 payloads \|" rep &&
	sed -n "s/.* sel \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p" rep >sel &&
	awk "{ exit !(\$2 < \$1) }" sel &&
	b=$(kl c/model.cmf) a=$(kl e.cmf) && echo "held-out kl $b -> $a" &&
	awk -v a="$a" -v b="$b" "BEGIN { exit !(a < b) }" &&
	for t in 0.self_attn.q_proj 1.mlp.down_proj 1.self_attn.v_proj; do
		blr_of e.cmf model.layers.$t.weight new.blr &&
		blr_of c/model.cmf model.layers.$t.weight old.blr &&
		blr-pack info new.blr >/dev/null && "$NVG_PY" "$TEST_DIR/ref/samesigns.py" old.blr new.blr || return 1
	done &&
	test_must_fail cmp -s old.blr new.blr
'

test_expect_success 'the rest of the model is the input model, the run in its provenance' '
	cmf-patch list c/model.cmf | grep -v "proj" >old.list &&
	cmf-patch list e.cmf | grep -v "proj" >new.list &&
	test_cmp old.list new.list &&
	cmf-patch extract -o a.raw c/model.cmf model.norm.weight &&
	cmf-patch extract -o b.raw e.cmf model.norm.weight && cmp a.raw b.raw &&
	"$NVG_PY" -c "
import json, struct, sys
with open(\"e.cmf\", \"rb\") as f:
    n = struct.unpack(\"<Q\", f.read(8))[0]
    p = json.loads(json.loads(f.read(n))[\"__metadata__\"][\"cmf.provenance\"])
e = p[\"end_to_end_tuning\"]
assert e[\"steps\"] == 30 and e[\"payloads\"] == 14 and e[\"kl_sel_after\"] <= e[\"kl_sel_before\"], e
assert \"final_norm_calibration\" in p and \"blr\" in p, sorted(p)
"
'

test_expect_success 'same inputs, same bytes, layers kept or run again; no steps, the payloads back' '
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		-o e2.cmf >rep2 &&
	cmp e.cmf e2.cmf &&
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		--cache-mib 0 -o e3.cmf >rep3 &&
	cmp e.cmf e3.cmf &&
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 0 \
		-o e0.cmf >rep0 &&
	test_grep "step 0 of 0" rep0 &&
	for t in 0.self_attn.q_proj 1.mlp.down_proj; do
		blr_of c/model.cmf model.layers.$t.weight x.blr &&
		blr_of e0.cmf model.layers.$t.weight y.blr && cmp x.blr y.blr || return 1
	done
'

test_expect_success '--lr-decay cosine: SEL never worse, bytes of its own twice, in the provenance' '
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		--lr-decay cosine -o ec.cmf >repc &&
	sed -n "s/.* sel \([0-9.]*\) -> \([0-9.]*\) .*/\1 \2/p" repc >sel &&
	awk "{ exit !(\$2 <= \$1) }" sel &&
	test_must_fail cmp -s e.cmf ec.cmf &&
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		--lr-decay cosine -o ec2.cmf >repc2 &&
	cmp ec.cmf ec2.cmf &&
	blr-tune --end-to-end -q -m c/model.cmf --base s2.cmf $C $(patches c) --steps 30 \
		--lr-decay none -o en.cmf >repn &&
	cmp e.cmf en.cmf &&
	for f in e ec; do
		"$NVG_PY" -c "
import json, struct, sys
with open(sys.argv[1], \"rb\") as f:
    n = struct.unpack(\"<Q\", f.read(8))[0]
    p = json.loads(json.loads(f.read(n))[\"__metadata__\"][\"cmf.provenance\"])
print(p[\"end_to_end_tuning\"][\"lr_decay\"])" $f.cmf >>decay || return 1
	done &&
	printf "none\ncosine\n" >want && test_cmp want decay
'

test_expect_success 'bad input: one line, exit 1, nothing written' '
	cmf-patch import --from llama2c --vocab "$NVG_DATA/tok512.bin" -o s.cmf \
		"$NVG_DATA/stories260K.bin" &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s.cmf $C $(patches c) \
		-o bad.cmf 2>err &&
	test_grep "layers" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C \
		--patch model.layers.0.self_attn.q_proj.weight=c/L0/down.blr -o bad.cmf 2>err &&
	test_grep "is 64x172, the model.s tensor 64x64" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C \
		--patch model.layers.2.self_attn.q_proj.weight=c/L0/q.blr -o bad.cmf 2>err &&
	test_grep "not a projection of the model" err && test_one_line_error err &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C \
		--patch model.layers.0.self_attn.q_proj.weight=c/L0/q.blr \
		--patch model.layers.0.self_attn.q_proj.weight=c/L0/q.blr -o bad.cmf 2>err &&
	test_grep "given twice" err && test_one_line_error err &&
	head -c 100 c/L0/q.blr >trunc.blr &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C \
		--patch model.layers.0.self_attn.q_proj.weight=trunc.blr -o bad.cmf 2>err &&
	test_grep "the payload of .model.layers.0.self_attn.q_proj.weight." err &&
	test_one_line_error err &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C \
		--patch model.layers.0.self_attn.q_proj.weight=missing.blr -o bad.cmf 2>err &&
	test_grep "cannot read patch .missing.blr." err && test_one_line_error err &&
	test_expect_code 1 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C $(patches c) \
		-o c/model.cmf 2>err &&
	test_grep "refusing to overwrite the input" err &&
	test_expect_code 2 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C -o bad.cmf 2>err &&
	test_grep "needs --patch" err &&
	test_expect_code 2 blr-tune --end-to-end --state c/S1.state -m c/model.cmf --base s2.cmf \
		$C $(patches c) -o bad.cmf 2>err &&
	test_expect_code 2 blr-tune --end-to-end --final-norm -m c/model.cmf --base s2.cmf $C \
		$(patches c) -o bad.cmf 2>err &&
	test_grep "one of --final-norm, --layer L, --end-to-end and --perturb L" err &&
	test_expect_code 2 blr-tune --layer 0 -m s2.cmf $C $(patches c) --cache-mib 1 \
		-o bad 2>err &&
	test_grep "cache-mib is for --end-to-end and --final-norm" err &&
	test_expect_code 2 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C $(patches c) \
		--cache-mib -1 -o bad.cmf 2>err &&
	test_grep "bad --cache-mib" err &&
	test_expect_code 2 blr-tune --end-to-end -m c/model.cmf --base s2.cmf $C $(patches c) \
		--lr-decay linear -o bad.cmf 2>err &&
	test_grep "bad --lr-decay .linear.: none or cosine" err &&
	test_path_is_missing bad.cmf && test_no_tmp_files .
'

test_expect_success 'convert.mk E2E=1: the last step, -j1 and -j2 the same bytes' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=1 -j2 2>err &&
	test_grep "tune every payload against s2.cmf end to end" err &&
	test_grep "^model: kl sel" c/e2e.txt &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c1 BPW=2 CALIBRATE=1 E2E=1 -j1 2>err &&
	cmp c/model.cmf c1/model.cmf && cmp c/calibrated.cmf c1/calibrated.cmf &&
	b=$(kl c/calibrated.cmf) a=$(kl c/model.cmf) && echo "held-out kl $b -> $a" &&
	awk -v a="$a" -v b="$b" "BEGIN { exit !(a < b) }" &&
	test_no_tmp_files c
'

test_expect_success 'E2E: a lost model is made again to the same bytes; off again, the calibrated model' '
	cp c/model.cmf keep.cmf && rm c/model.cmf &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=1 -j2 2>err &&
	test_grep "end to end" err && test_no_grep "calibrate the final norm" err &&
	cmp keep.cmf c/model.cmf &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=0 -j2 2>err &&
	test_no_grep "end to end" err && cmp c/model.cmf c/calibrated.cmf &&
	cmf-patch extract -o x.raw c/model.cmf model.layers.1.mlp.down_proj.weight &&
	cmf-patch extract -o y.raw keep.cmf model.layers.1.mlp.down_proj.weight &&
	test_must_fail cmp -s x.raw y.raw
'

test_expect_success 'E2E_TOKENS, E2E_STEPS: the step on tokens of its own, its steps; changed, only the step again' '
	cmf-eval -m s2.cmf --text "$NVG_DATA/tinystories-train-sample.txt" --tokenize all.u32 &&
	tail -c $((4 * 2048)) all.u32 >own.u32 &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=1 E2E_TOKENS=own.u32 -j2 2>err &&
	test_grep "end to end" err && test_no_grep "calibrate the final norm" err &&
	test "$(cat c/e2e.set)" = "1 fit=1024 steps=120 tokens=own.u32" &&
	test_must_fail cmp -s keep.cmf c/model.cmf &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=1 -j2 2>err &&
	test_grep "end to end" err && cmp keep.cmf c/model.cmf &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=1 E2E=1 E2E_STEPS=7 -j2 2>err &&
	test_grep "end to end" err && test_no_grep "encode" err &&
	test "$(cat c/e2e.set)" = "1 fit=1024 steps=7 tokens=cal.u32" &&
	test_grep "\| step [0-7] of 7 \|" c/e2e.txt &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 E2E_STEPS=0 2>err &&
	test_grep "E2E_STEPS .0. is not a positive integer" err
'

test_expect_success 'E2E=1 without the calibration tunes the applied model' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 CALIBRATE=0 E2E=1 -j2 2>err &&
	test_grep "end to end" err && test_no_grep "calibrate the final norm" err &&
	test_grep "^model: kl sel" c/e2e.txt
'

test_expect_success 'convert.mk refuses E2E=2, and E2E=1 with dual-svid' '
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 E2E=2 2>err &&
	test_grep "E2E .2. is not 0 or 1" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=badc BPW=2 E2E=1 METHOD=dual-svid 2>err &&
	test_grep "E2E=1 is nvg" err &&
	test_path_is_missing badc
'

test_done
