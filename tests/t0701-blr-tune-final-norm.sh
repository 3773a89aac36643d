#!/bin/bash
# blr-tune --final-norm: the converted model's final RMSNorm weight fitted to
# the source's logits on stories260K.  The SEL KL never rises, the held-out
# KL falls, nothing but model.norm.weight changes, the bytes repeat (with the
# source's logits kept or not); bad input is one line, exit 1, no output.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

NORM=model.norm.weight

cat >craft.py <<'PY'
import json, sys, zlib
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
src, out, what = sys.argv[1:4]
with safe_open(src, "np") as f:
    meta = f.metadata()
t = load_file(src)
a = json.loads(meta["cmf.arch"])
if what == "vocab":
    # the vocabulary cut by 12 tokens (a tied head follows the embeddings)
    e = "model.embed_tokens.weight"
    t[e] = t[e][:-12].copy()
    a["vocab_size"] -= 12
    crc = json.loads(meta["cmf.crc32"])
    crc[e] = zlib.crc32(t[e].tobytes())
    meta["cmf.crc32"] = json.dumps(crc)
meta["cmf.arch"] = json.dumps(a)
save_file(t, out, metadata=meta)
PY

# tensors A B [skip]: the names of the tensors whose bytes differ
cat >diff.py <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert sorted(a) == sorted(b), "tensor names differ"
for k in sorted(a):
    if a[k].dtype != b[k].dtype or a[k].tobytes() != b[k].tobytes():
        print(k)
PY

# near.py A B: the same tensors, byte for byte but for the final norm
# (model.norm.weight), which agrees to 1e-5 of each weight, and the same
# calibration figures to 1e-6 (blr-tune.1: a kernel that sums a row of a
# product in an order that follows its place gives logits kept and made
# again that differ in their last bit, and weights that agree to ~1e-7)
cat >near.py <<'PY'
import json, sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert sorted(a) == sorted(b), "tensor names differ"
for k in sorted(a):
    assert a[k].dtype == b[k].dtype, k
    if k == "model.norm.weight":
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        assert np.all(np.abs(x - y) <= 1e-5 * np.maximum(np.abs(x), np.abs(y))), k
    else:
        assert a[k].tobytes() == b[k].tobytes(), k
def fig(path):
    with safe_open(path, "np") as f:
        return json.loads(f.metadata()["cmf.provenance"])["final_norm_calibration"]
p, q = fig(sys.argv[1]), fig(sys.argv[2])
assert sorted(p) == sorted(q)
for k in p:
    if isinstance(p[k], float):
        assert abs(p[k] - q[k]) <= 1e-6 * max(abs(p[k]), abs(q[k])), k
    else:
        assert p[k] == q[k], k
PY

# the "final_norm_calibration" object of a model's cmf.provenance, "key value" lines
cat >prov.py <<'PY'
import json, sys
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    p = json.loads(f.metadata()["cmf.provenance"])["final_norm_calibration"]
for k, v in sorted(p.items()):
    print(k, v)
PY

# val KEY FILE: the value of a "key value" line
val() {
	sed -n "s/^$1 //p" "$2"
}

TUNE="--final-norm --base s2.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"

test_expect_success 'setup: a two-layer conversion at 2 bpw' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 -j2 2>err
'

test_expect_success 'the fit: SEL KL never rises, the report says so' '
	blr-tune $TUNE --steps 60 -m c/model.cmf -o cal.cmf >rep 2>err &&
	test_grep "^final-norm: kl sel [0-9.]* -> [0-9.]* fit [0-9.]* -> [0-9.]* \| step [0-9]* of 60 \|" rep &&
	"$NVG_PY" prov.py cal.cmf >prov &&
	awk "\$1 == \"kl_sel_after\" { a = \$2 } \$1 == \"kl_sel_before\" { b = \$2 }
		END { exit !(a < b) }" prov &&
	test "$(val steps prov)" = 60 && test "$(val window prov)" = 128 &&
	cmf-patch verify cal.cmf
'

test_expect_success 'only the final norm changes, in its own dtype' '
	"$NVG_PY" diff.py c/model.cmf cal.cmf >changed &&
	echo "$NORM" >expect &&
	test_cmp expect changed
'

test_expect_success 'the held-out KL against the source falls' '
	head -c 40000 "$NVG_DATA/tinystories-sample.txt" >held.txt &&
	cmf-eval -q -m c/model.cmf --base s2.cmf --text held.txt --window 128 >before &&
	cmf-eval -q -m cal.cmf --base s2.cmf --text held.txt --window 128 >after &&
	echo "kl $(val kl before) -> $(val kl after)" &&
	awk -v a="$(val kl after)" -v b="$(val kl before)" "BEGIN { exit !(a < b) }"
'

test_expect_success 'same inputs, same bytes' '
	blr-tune $TUNE --steps 60 -q -m c/model.cmf -o cal2.cmf >rep2 &&
	cmp cal.cmf cal2.cmf &&
	cut -d"|" -f1,2 rep >r1 && cut -d"|" -f1,2 rep2 >r2 &&
	test_cmp r1 r2
'

# stream M L: the states of model M entering layer L+1 (from those entering
# L, or from the embeddings at 0), as a conversion's streams make them
CAP="--tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"
stream() {
	gram-capture -q -m "$1" $CAP -l "$2" $([ "$2" = 0 ] || echo --state "$3$2.state") \
		--next-state "$3$(($2 + 1)).state" -o "g$3$2"
}

test_expect_success 'from the streams (--state, --src-state): the same bytes' '
	stream c/model.cmf 0 m && stream c/model.cmf 1 m &&
	stream s2.cmf 0 s && stream s2.cmf 1 s &&
	blr-tune $TUNE --steps 60 -q -m c/model.cmf --state m1.state --src-state s1.state \
		-o st1.cmf >rep.st1 &&
	cmp cal.cmf st1.cmf &&
	cut -d"|" -f1,2 rep.st1 >r3 && test_cmp r1 r3 &&
	blr-tune $TUNE --steps 60 -q -m c/model.cmf --state m2.state -o st2.cmf >/dev/null &&
	cmp cal.cmf st2.cmf &&
	blr-tune $TUNE --steps 60 -q -m c/model.cmf --src-state s2.state -o st3.cmf >/dev/null &&
	cmp cal.cmf st3.cmf
'

test_expect_success 'streams of other windows, tokens, layers, or cut short: one line, exit 1, no output' '
	gram-capture -q -m c/model.cmf --tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 \
		--window 64 -l 0 --next-state w64.state -o gw &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state w64.state -o x.cmf 2>err &&
	test_grep "^blr-tune: cannot run the final layers of .c/model.cmf.: state file .w64.state.: state is for window size 64, this run has 128$" err &&
	test_one_line_error err &&
	tail -c +5 train.u32 | head -c 6144 >other.u32 &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --src-state s1.state --tokens other.u32 \
		-o x.cmf 2>err &&
	test_grep "^blr-tune: cannot run the final layers of .s2.cmf.: state file .s1.state.: state is for tokens with CRC-32 [0-9a-f]*, these tokens have [0-9a-f]*$" err &&
	"$NVG_PY" -c "import sys; b = bytearray(open(\"m2.state\", \"rb\").read()); b[8:12] = (3).to_bytes(4, \"little\"); open(\"l3.state\", \"wb\").write(b)" &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state l3.state -o x.cmf 2>err &&
	test_grep "state file .l3.state.: layer 3 is beyond the model.s 2 layers$" err &&
	head -c 5000 m1.state >short.state &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state short.state -o x.cmf 2>err &&
	test_grep "state file .short.state.: size 5000 bytes" err &&
	test_one_line_error err &&
	{ cat m1.state && printf "1234"; } >long.state &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state long.state -o x.cmf 2>err &&
	test_grep "state file .long.state.: size [0-9]* bytes, want 56" err &&
	"$NVG_PY" -c "import struct; b = bytearray(open(\"m1.state\", \"rb\").read()); b[56 + 4 * 70:60 + 4 * 70] = struct.pack(\"<f\", float(\"nan\")); open(\"nan.state\", \"wb\").write(b)" &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state nan.state -o x.cmf 2>err &&
	test_grep "state file .nan.state.: row 1, column 6 is not finite$" err &&
	test_one_line_error err &&
	cp m1.state keep.state &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --state m1.state -o m1.state 2>err &&
	test_grep "refusing to overwrite the input" err &&
	cmp keep.state m1.state &&
	test_expect_code 2 blr-tune --end-to-end --base s2.cmf $CAP -m c/model.cmf \
		--patch x=y --state m1.state -o x.cmf 2>err &&
	test_grep "end-to-end takes no --state or --src-state" err &&
	test_path_is_missing x.cmf && test_no_tmp_files .
'

test_expect_success 'the source logits kept, all, some or none: the same weights and step' '
	test_grep "source logits kept for 1524 of 1524 rows\$" rep &&
	blr-tune $TUNE --steps 60 -q --cache-mib 0 -m c/model.cmf -o cal0.cmf >rep0 &&
	test_grep "source logits kept for 0 of 1524 rows\$" rep0 &&
	"$NVG_PY" near.py cal.cmf cal0.cmf &&
	blr-tune $TUNE --steps 60 -q --cache-mib 2 -m c/model.cmf -o calk.cmf >repk &&
	test_grep "source logits kept for 1019 of 1524 rows\$" repk &&
	"$NVG_PY" near.py cal.cmf calk.cmf &&
	cut -d"|" -f2 rep0 >r0 && cut -d"|" -f2 repk >rk && cut -d"|" -f2 rep >r &&
	test_cmp r r0 && test_cmp r rk
'

test_expect_success 'no steps: the model back, its norm untouched' '
	blr-tune $TUNE --steps 0 -m c/model.cmf -o zero.cmf >rep0 &&
	test_grep "step 0 of 0" rep0 &&
	"$NVG_PY" diff.py c/model.cmf zero.cmf >changed0 &&
	test ! -s changed0
'

test_expect_success '-h prints the man page SYNOPSIS' '
	blr-tune -h >out &&
	test_man_synopsis man1/blr-tune.1 >syn &&
	sed -e "s/^ *//" out >got &&
	test_cmp syn got
'

test_expect_success 'usage errors: exit 2' '
	test_expect_code 2 blr-tune -m c/model.cmf --base s2.cmf --tokens cal.u32 -o x.cmf 2>err &&
	test_grep "say what to do" err &&
	test_expect_code 2 blr-tune $TUNE -m c/model.cmf 2>err &&
	test_expect_code 2 blr-tune $TUNE -m c/model.cmf --lr 0 -o x.cmf 2>err &&
	test_expect_code 2 blr-tune $TUNE -m c/model.cmf --text held.txt -o x.cmf 2>err &&
	test_path_is_missing x.cmf
'

test_expect_success 'a source of other layers, of another vocabulary: one line, exit 1, no output' '
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --base s.cmf -o x.cmf 2>err &&
	test_grep "^blr-tune: cannot calibrate .c/model.cmf. against .s.cmf.: its layers is 2, the source.s 5$" err &&
	test_one_line_error err &&
	"$NVG_PY" craft.py s2.cmf v.cmf vocab &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --base v.cmf -o x.cmf 2>err &&
	test_grep "its vocabulary is 512, the source.s 500" err &&
	test_one_line_error err &&
	test_path_is_missing x.cmf && test_no_tmp_files .
'

test_expect_success 'too few tokens, a truncated model, the output onto the input: exit 1' '
	head -c 4000 cal.u32 >few.u32 &&
	test_expect_code 1 blr-tune $TUNE -m c/model.cmf --tokens few.u32 -o x.cmf 2>err &&
	test_grep "too few calibration tokens in .few.u32.: 1000, --fit-tokens \\+ --sel-tokens need 1536" err &&
	head -c 100000 c/model.cmf >trunc.cmf &&
	test_expect_code 1 blr-tune $TUNE -m trunc.cmf -o x.cmf 2>err &&
	test_grep "cannot open model .trunc.cmf." err &&
	cp c/model.cmf m.cmf &&
	test_expect_code 1 blr-tune $TUNE -m m.cmf -o m.cmf 2>err &&
	test_grep "refusing to overwrite the input" err &&
	cmp m.cmf c/model.cmf &&
	test_path_is_missing x.cmf && test_no_tmp_files .
'

test_expect_success 'convert.mk CALIBRATE=1: the last step, the same bytes as by hand' '
	blr-tune $TUNE -q -m c/model.cmf -o byhand.cmf >rep.hand &&
	cp -a c cc &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=cc BPW=2 CALIBRATE=1 -j2 2>err &&
	test_grep "calibrate the final norm" err && test_no_grep "encode|capture|advance" err &&
	cmp byhand.cmf cc/model.cmf &&
	cut -d"|" -f1,2 rep.hand >r1 && cut -d"|" -f1,2 cc/calibrate.txt >r2 && test_cmp r1 r2 &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=cc BPW=2 CALIBRATE=1 -j2 2>err &&
	test_no_grep "calibrate|apply|encode" err &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=cc BPW=2 -j2 2>err &&
	test_no_grep "calibrate" err &&
	cmp c/model.cmf cc/model.cmf &&
	test_no_tmp_files cc
'

test_expect_success 'convert.mk: the calibration starts from both streams, the bytes of the embeddings' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=ct BPW=2 TUNE=1 -j2 2>err &&
	conv -n MODEL=s2.cmf TOKENS=cal.u32 OUT=ct BPW=2 TUNE=1 CALIBRATE=1 >plan &&
	test_grep "blr-tune --final-norm .* --state ct/S1.state --src-state ct/src/S1.state " plan &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=ct BPW=2 TUNE=1 CALIBRATE=1 -j2 2>err &&
	test_grep "calibrate the final norm" err &&
	blr-tune $TUNE -q -m ct/applied.cmf -o bytune.cmf >/dev/null &&
	cmp bytune.cmf ct/model.cmf
'

test_expect_success 'convert.mk refuses CALIBRATE=2, and CALIBRATE=1 without tokens' '
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bad BPW=2 CALIBRATE=2 2>err &&
	test_grep "CALIBRATE .2. is not 0 or 1" err &&
	test_must_fail conv MODEL=s2.cmf METHOD=dual-svid OUT=bad BPW=2 CALIBRATE=1 2>err &&
	test_grep "CALIBRATE=1 needs calibration tokens" err &&
	test_path_is_missing bad
'

test_done
