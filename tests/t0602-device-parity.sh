#!/bin/bash
# nvg-encode --device opencl|both on PoCL: parity with the f64 CPU encoder on
# synthetic layers, payloads checked by an independent numpy decoder, the
# [cmp] line, and several tensors in flight against one at a time
. "$(dirname "$0")/test-lib.sh"

# the OpenCL stack's own process-lifetime allocations are not ours (make SAN=1)
export LSAN_OPTIONS="suppressions=$NVG_TOP/tests/lsan-opencl.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

REF="$NVG_TOP/tests/ref"
check() { "$NVG_PY" "$REF/blr.py" check "$@"; }
field() { sed -En "s/(^|.* )$1 ([^ ]*).*/\2/p" "$2"; }
sel_of() { sed -n "s/.* sel \([0-9.]*\)$/\1/p" "$1"; }
pick_of() { sed -n "s/^pick \(P[12] r[0-9]*\) .*/\1/p" "$1"; }
# |a - b| <= tol·|b|
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * (b < 0 ? -b : b)) }'; }

test_expect_success 'setup: synthetic layers 96x64 and 192x128 with contexts' '
	mkdir s1 s2 &&
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 s1 &&
	"$NVG_PY" "$REF/synth-layer.py" layer 192 128 3 s2 2048 &&
	hctx-build s1/fit.gram -o s1/fit.hctx &&
	hctx-build s2/fit.gram -o s2/fit.hctx
'

# parity: the SEL errors of the device payloads within 1% (relative) of the
# CPU payloads' on average over the cases, each within 2%, at the same rank
# and path count.  f32 against f64 arithmetic moves a few discrete decisions
# of the refinement (a try kept or not), so one case can part further: over
# 32 pairs (192x128 from eight seeds, 0.3 and 1 bpw, --try-sweeps 2 and 3)
# the device was −0.7% to +1.4% off, 0.26% on average, and most pairs the same.
# The device takes every ITQ step and ALS sweep, so the CPU encoder is set to
# (--itq-tol 0 --als-tol 0, not its default early stops): the same algorithm
cpu_all='--itq-tol 0 --als-tol 0'
for case in "s1 96x64 3" "s1 96x64 0.55" "s2 192x128 1" "s2 192x128 0.3"; do
	set -- $case
	test_expect_success "parity on $1 ($2) at $3 bpw" "
		nvg-encode -w $1/w.raw --shape $2 --hctx $1/fit.hctx --fit $1/fit.gram \
			--sel $1/sel.gram --bpw $3 $cpu_all -o cpu.blr >cpu.line &&
		nvg-encode -w $1/w.raw --shape $2 --hctx $1/fit.hctx --fit $1/fit.gram \
			--sel $1/sel.gram --bpw $3 --device opencl -o gpu.blr >gpu.line &&
		test \"\$(pick_of cpu.line)\" = \"\$(pick_of gpu.line)\" &&
		within \$(sel_of gpu.line) \$(sel_of cpu.line) 0.02 &&
		echo \$(sel_of gpu.line) \$(sel_of cpu.line) >>parity.sel &&
		check gpu.blr $1/w.raw ${2%x*} ${2#*x} $1/sel.gram >dec &&
		within \$(field herr dec) \$(sel_of gpu.line) 0.002 ||
		{ cat cpu.line gpu.line dec; false; }
	"
done

test_expect_success 'parity on average: within 1% over the four cases' '
	test "$(wc -l <parity.sel)" = 4 &&
	awk "{ d = (\$1 - \$2) / \$2; s += d < 0 ? -d : d } END { exit !(s / NR <= 0.01) }" parity.sel ||
	{ cat parity.sel; false; }
'

test_expect_success 'parity with --try-sweeps 1: both encoders take it' '
	nvg-encode -w s2/w.raw --shape 192x128 --hctx s2/fit.hctx --fit s2/fit.gram \
		--sel s2/sel.gram --bpw 1 --try-sweeps 1 $cpu_all -o cpu.blr >cpu.line &&
	nvg-encode -w s2/w.raw --shape 192x128 --hctx s2/fit.hctx --fit s2/fit.gram \
		--sel s2/sel.gram --bpw 1 --try-sweeps 1 --device opencl --profile -o gpu.blr >gpu.line 2>err &&
	test "$(pick_of cpu.line)" = "$(pick_of gpu.line)" &&
	within $(sel_of gpu.line) $(sel_of cpu.line) 0.01 &&
	nvg-encode -w s2/w.raw --shape 192x128 --hctx s2/fit.hctx --fit s2/fit.gram \
		--sel s2/sel.gram --bpw 1 --device opencl --profile -o gpu3.blr >gpu3.line 2>err3 &&
	test "$(sed -n "s/.*| als.l [0-9.]*s\/\([0-9]*\) .*/\1/p" err)" -lt \
		"$(sed -n "s/.*| als.l [0-9.]*s\/\([0-9]*\) .*/\1/p" err3)" ||
	{ cat cpu.line gpu.line err err3; false; }
'

test_expect_success 'the device payload is the same on every run' '
	nvg-encode -w s2/w.raw --shape 192x128 --hctx s2/fit.hctx --fit s2/fit.gram \
		--sel s2/sel.gram --bpw 1 --device opencl -o g1.blr >/dev/null &&
	nvg-encode -w s2/w.raw --shape 192x128 --hctx s2/fit.hctx --fit s2/fit.gram \
		--sel s2/sel.gram --bpw 1 --device opencl -o g2.blr >/dev/null &&
	cmp g1.blr g2.blr
'

test_expect_success 'both: the CPU payload and a [cmp] line' '
	nvg-encode -w s1/w.raw --shape 96x64 --hctx s1/fit.hctx --fit s1/fit.gram \
		--sel s1/sel.gram --bpw 3 -o c.blr >c.line &&
	nvg-encode -w s1/w.raw --shape 96x64 --hctx s1/fit.hctx --fit s1/fit.gram \
		--sel s1/sel.gram --bpw 3 --device both -o b.blr >b.line &&
	cmp c.blr b.blr &&
	test "$(wc -l <b.line)" = 2 &&
	head -n 1 b.line >first && test_cmp c.line first &&
	test_grep "^\[cmp\] s1/w.raw sel cpu [0-9.]+ gpu [0-9.]+ rel [-+][0-9.]+%$" b.line &&
	c=$(sed -n "s/^\[cmp\].* sel cpu \([0-9.]*\) .*/\1/p" b.line) &&
	test "$c" = "$(sel_of c.line)"
'

test_expect_success '--profile on the device: its stages on stderr' '
	nvg-encode -w s1/w.raw --shape 96x64 --hctx s1/fit.hctx --fit s1/fit.gram \
		--sel s1/sel.gram --bpw 3 --device opencl --profile -o p.blr >/dev/null 2>err &&
	for s in wh lat.gemm lat.eig itq.gemm itq.polar svid als.l als.h als.g flip_u flip_u.flips gptq_v gptq_v.flips err select; do
		test_grep "^device profile: (.* \| )?$s [0-9.]+s" err || return 1
	done
'

test_expect_success 'setup: three tensors that read the same input' '
	"$NVG_PY" -c "
import numpy as np
w = np.fromfile(\"s2/w.raw\", dtype=\"<f4\").reshape(192, 128)
w[:64].tofile(\"k.raw\")
(w[64:] * 0.5).tofile(\"v.raw\")
w[::-1].copy().tofile(\"q.raw\")"
'

test_expect_success 'several tensors in flight: the payloads of one at a time' '
	C="--hctx s2/fit.hctx --fit s2/fit.gram --sel s2/sel.gram --bpw 1 --device opencl" &&
	nvg-encode -w q.raw --shape 192x128 $C -o q1.blr >q1.line &&
	nvg-encode -w k.raw --shape 64x128 $C -o k1.blr >k1.line &&
	nvg-encode -w v.raw --shape 128x128 $C -o v1.blr >v1.line &&
	nvg-encode $C --jobs 2 -w q.raw --shape 192x128 -o q2.blr -w k.raw --shape 64x128 -o k2.blr \
		-w v.raw --shape 128x128 -o v2.blr >all.line &&
	cmp q1.blr q2.blr && cmp k1.blr k2.blr && cmp v1.blr v2.blr &&
	cat q1.line k1.line v1.line >expect && test_cmp expect all.line
'

# PoCL 3.1 aborts ("pocl_release_dlhandle_cache: Assertion ref_count > 0")
# when two queues run one kernel at two grid sizes at once: eight heights in
# flight hit it in about half the runs (measured: 5 of 10) before the jobs on
# a CPU device shared one queue, so eight runs miss it with odds under 1%
test_expect_success 'eight heights in flight, eight times: no abort, the payloads of one at a time' '
	mkdir s3 &&
	"$NVG_PY" "$REF/synth-layer.py" layer 136 64 5 s3 2048 &&
	hctx-build s3/fit.gram -o s3/fit.hctx &&
	"$NVG_PY" -c "
import numpy as np
w = np.fromfile(\"s3/w.raw\", dtype=\"<f4\").reshape(136, 64)
for m in range(24, 137, 16):
    w[:m].tofile(f\"s3/v{m}.raw\")
" &&
	C="--hctx s3/fit.hctx --fit s3/fit.gram --sel s3/sel.gram --bpw 1 --device opencl" &&
	A= && B= &&
	for m in 24 40 56 72 88 104 120 136; do
		A="$A -w s3/v$m.raw --shape ${m}x64 -o s3/one$m.blr" &&
		B="$B -w s3/v$m.raw --shape ${m}x64 -o s3/fl$m.blr" || return 1
	done &&
	nvg-encode $C --jobs 1 $A >one.line &&
	for i in 1 2 3 4 5 6 7 8; do
		nvg-encode $C --jobs 8 $B >fl.line &&
		test_cmp one.line fl.line &&
		for m in 24 40 56 72 88 104 120 136; do
			cmp s3/one$m.blr s3/fl$m.blr || return 1
		done || return 1
	done
'

test_expect_success 'several tensors on the CPU: the same as one at a time' '
	C="--hctx s2/fit.hctx --fit s2/fit.gram --sel s2/sel.gram --bpw 1" &&
	nvg-encode -w k.raw --shape 64x128 $C -o kc1.blr >/dev/null &&
	nvg-encode $C -w q.raw --shape 192x128 -o qc2.blr -w k.raw --shape 64x128 -o kc2.blr >/dev/null &&
	cmp kc1.blr kc2.blr
'

test_expect_success 'a shape whose width is not the input width is refused' '
	C="--hctx s2/fit.hctx --fit s2/fit.gram --sel s2/sel.gram --bpw 1" &&
	test_expect_code 1 nvg-encode $C -w q.raw --shape 192x128 -o a9.blr -w k.raw --shape 128x64 -o b9.blr 2>err &&
	test_one_line_error err && test_grep "cannot encode with the others .k.raw.: 64 columns, but the shared input is 128 wide" err &&
	test_path_is_missing a9.blr b9.blr
'

test_done
