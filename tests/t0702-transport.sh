#!/bin/bash
# Transport targets on stories260K: the source stream's states, the
# cross-moments of the two streams (NVGC) against numpy, nvg-encode --cross
# (C = G gives W's encoding; the transport objective it reports is numpy's
# and lower than the plain encoding's), convert.mk TRANSPORT=1, bad input.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

C="--tokens cal.u32 --fit-tokens 1024 --sel-tokens 512 --window 128"
L1=model.layers.1

# moments.py S_q S_src MODEL LEAD PART: numpy's mean x_q x_srcᵀ of lead q
# (the attention-norm output) over the FIT or SEL rows of two state files
cat >moments.py <<'PY'
import sys, numpy as np
from safetensors.numpy import load_file
def rows(path):
    b = open(path, "rb").read()
    h = np.frombuffer(b[:56], dtype="<u4")
    d = int(h[3])
    return np.frombuffer(b[56:], dtype="<f4").reshape(-1, d).astype(np.float64)
def lead(x, w):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w
sq, ss, model, part = sys.argv[1:5]
w = load_file(model)["model.layers.1.input_layernorm.weight"].astype(np.float64)
xq, xs = lead(rows(sq), w), lead(rows(ss), w)
fit = 8 * 127  # FIT 1024 tokens in windows of 128: 8 windows of 127 positions
xq, xs = (xq[:fit], xs[:fit]) if part == "fit" else (xq[fit:], xs[fit:])
np.save(sys.argv[5], xq.T @ xs / len(xq))
np.save(sys.argv[6], np.stack([xq, xs]))
PY

# check.py C.npy FILE KIND: the NVGC file holds C (within f32 storage)
cat >check.py <<'PY'
import sys, numpy as np
want = np.load(sys.argv[1])
b = open(sys.argv[2], "rb").read()
magic, n = np.frombuffer(b[:8], dtype="<u4")
assert magic == int(sys.argv[3], 16), hex(magic)
got = np.frombuffer(b[16:], dtype="<f4").reshape(n, n)
err = np.abs(got - want).max() / np.abs(want).max()
print("max relative error", err)
sys.exit(0 if err < 1e-6 else 1)
PY

# objective.py X.npy W.raw WHAT.raw M N: E‖Ŵx_q − W x_src‖² / E‖W x_src‖²
cat >objective.py <<'PY'
import sys, numpy as np
xq, xs = np.load(sys.argv[1])
m, n = int(sys.argv[4]), int(sys.argv[5])
W = np.fromfile(sys.argv[2], dtype="<f4").reshape(m, n).astype(np.float64)
Wh = np.fromfile(sys.argv[3], dtype="<f4").reshape(m, n).astype(np.float64)
print("%.6f" % (((xq @ Wh.T - xs @ W.T) ** 2).sum() / ((xs @ W.T) ** 2).sum()))
PY

# the "transport sel" of a report line
tsel() {
	sed -n "s/.*| transport sel \([0-9.]*\).*/\1/p" "$1"
}

test_expect_success 'setup: a two-layer conversion at 2 bpw, the source stream' '
	convert_setup &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=c BPW=2 -j2 2>err &&
	gram-capture -q -m s2.cmf $C -l 0 --next-state S1src.state &&
	gram-capture -q -m s2.cmf $C -l 1 --state S1src.state -o src
'

test_expect_success 'gram-capture --cross-state: the Grams as before, and the cross-moments' '
	gram-capture -q -m s2.cmf $C -l 1 --state c/S1.state --cross-state S1src.state -o x &&
	for d in q o gate down; do
		for p in fit sel; do
			cmp x.$d.$p.gram c/L1/g.$d.$p.gram && test -f x.$d.$p.cross || return 1
		done
	done
'

test_expect_success 'the cross-moment is numpy'"'"'s mean of x_q x_srcᵀ (FIT and SEL)' '
	for p in fit sel; do
		"$NVG_PY" moments.py c/S1.state S1src.state s2.cmf $p c.$p.npy x.$p.npy &&
		"$NVG_PY" check.py c.$p.npy x.q.$p.cross 4E564743 || return 1
	done
'

test_expect_success 'NVGC merges by count, never with an NVGG' '
	gram-capture --merge -o m.cross x.q.fit.cross x.q.fit.cross &&
	"$NVG_PY" check.py c.fit.npy m.cross 4E564743 &&
	test_expect_code 1 gram-capture --merge -o bad.gram x.q.fit.cross x.q.fit.gram 2>err &&
	test_grep "shard 1 is NVGG, shard 0 is NVGC" err &&
	test_path_is_missing bad.gram
'

# (with the f64 products: the transport target is W only to f64's rounding,
# and the default's f32 products would carry that rounding into other bytes)
test_expect_success 'nvg-encode --cross with C = G encodes W itself' '
	"$NVG_PY" -c "
import sys
b = bytearray(open(\"x.q.fit.gram\", \"rb\").read())
b[0:4] = (0x4E564743).to_bytes(4, \"little\")
open(\"same.cross\", \"wb\").write(b)" &&
	E="-m s2.cmf -t $L1.self_attn.q_proj.weight --fit x.q.fit.gram --sel x.q.sel.gram --bpw 2 --hb-prec f64" &&
	nvg-encode $E -o plain.blr >rep.plain &&
	nvg-encode $E --cross same.cross -o same.blr >rep.same &&
	sed "s/.*stored/stored/" rep.plain >a && sed "s/.*stored/stored/" rep.same >b &&
	test -s a && test_cmp a b
'

test_expect_success 'the transport objective reported is numpy'"'"'s, and lower than the plain encoding'"'"'s' '
	for t in self_attn.q_proj:q mlp.gate_proj:gate self_attn.o_proj:o mlp.down_proj:down; do
		n=$L1.${t%:*}.weight d=${t#*:} &&
		E="-m s2.cmf -t $n --fit x.$d.fit.gram --sel x.$d.sel.gram --bpw 2" &&
		S="--cross-sel x.$d.sel.cross --src-sel src.$d.sel.gram" &&
		nvg-encode $E $S -o p.$d.blr >rep.p.$d &&
		nvg-encode $E $S --cross x.$d.fit.cross -o t.$d.blr >rep.t.$d &&
		echo "$d: plain $(tsel rep.p.$d) transport $(tsel rep.t.$d)" &&
		awk -v a="$(tsel rep.t.$d)" -v b="$(tsel rep.p.$d)" "BEGIN { exit !(a < b) }" || return 1
	done &&
	cmf-patch extract -o w.raw s2.cmf $L1.self_attn.q_proj.weight &&
	blr-pack unpack -o what.raw t.q.blr &&
	"$NVG_PY" objective.py x.sel.npy w.raw what.raw 64 64 >want &&
	awk -v a="$(tsel rep.t.q)" -v b="$(cat want)" \
		"BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 + 1e-3 * b) }"
'

test_expect_success 'bad cross inputs: one line, exit 1, no output' '
	E="-m s2.cmf -t $L1.self_attn.q_proj.weight --fit x.q.fit.gram --sel x.q.sel.gram --bpw 2" &&
	test_expect_code 1 nvg-encode $E --cross x.down.fit.cross -o o.blr 2>err &&
	test_grep "cross Gram does not fit W .x.down.fit.cross.: 172 wide, but W has 64 columns" err &&
	test_one_line_error err &&
	test_expect_code 1 nvg-encode $E --cross x.q.sel.cross -o o.blr 2>err &&
	test_grep "moment does not fit .x.q.sel.cross.: it counts 508 positions, the FIT Gram 1016" err &&
	test_expect_code 1 nvg-encode $E --cross x.q.fit.gram -o o.blr 2>err &&
	test_grep "is not NVGC" err &&
	test_expect_code 1 nvg-encode $E --cross-sel x.q.fit.cross --src-sel src.q.sel.gram -o o.blr 2>err &&
	test_grep "moment does not fit .x.q.fit.cross.: it counts 1016 positions, the SEL Gram 508" err &&
	test_expect_code 2 nvg-encode $E --cross x.q.fit.cross --method dual-svid -o o.blr 2>err &&
	test_expect_code 2 nvg-encode $E --cross-sel x.q.sel.cross -o o.blr 2>err &&
	test_expect_code 2 gram-capture -m s2.cmf $C -l 1 --cross-state S1src.state -o y 2>err &&
	test_grep "cross-state needs --state" err &&
	test_expect_code 1 gram-capture -q -m s2.cmf --tokens cal.u32 --fit-tokens 1024 \
		--sel-tokens 512 --window 64 -l 1 --state c/S1.state --cross-state S1src.state -o y 2>err &&
	test_grep "window" err &&
	test_path_is_missing o.blr y.q.fit.gram y.q.fit.cross && test_no_tmp_files .
'

test_expect_success 'convert.mk TRANSPORT=1: layer 0 as before, layer 1 on transport targets' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=t BPW=2 TRANSPORT=1 -j2 2>err &&
	for s in q k v o gate up down; do
		cmp c/L0/$s.blr t/L0/$s.blr || return 1
	done &&
	test_grep "transport sel" t/L1/down.rep &&
	test_no_grep "transport sel" t/L0/down.rep &&
	cmp x.down.fit.cross t/L1/g.down.fit.cross &&
	cmp src.down.sel.gram t/L1/src.down.sel.gram &&
	cmp S1src.state t/src/S1.state &&
	cmf-patch verify t/model.cmf && test_no_tmp_files t
'

test_expect_success 'convert.mk refuses TRANSPORT=2 and TRANSPORT=1 with dual-svid' '
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bad BPW=2 TRANSPORT=2 2>err &&
	test_grep "TRANSPORT .2. is not 0 or 1" err &&
	test_must_fail conv MODEL=s2.cmf TOKENS=cal.u32 OUT=bad BPW=2 TRANSPORT=1 METHOD=dual-svid 2>err &&
	test_grep "TRANSPORT=1 is nvg" err &&
	test_path_is_missing bad
'

test_done
