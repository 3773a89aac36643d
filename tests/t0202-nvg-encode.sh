#!/bin/bash
# nvg-encode: payloads, report lines, determinism, the knobs
. "$(dirname "$0")/test-lib.sh"

. "$TEST_DIR/lib-encode.sh"

test_expect_success '-h prints exactly the SYNOPSIS of nvg-encode(1)' '
	test_man_synopsis man1/nvg-encode.1 >expect &&
	test -s expect &&
	nvg-encode -h >actual 2>err &&
	test_cmp expect actual &&
	test ! -s err &&
	nvg-encode --version >v &&
	test_grep "^nvg-encode \(nvgkit\) [0-9]+\.[0-9]+\.[0-9]+$" v
'

test_expect_success 'setup: a synthetic 96x64 layer and its context' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	hctx-build fit.gram -o fit.hctx
'

test_expect_success 'nvg: payload, report line on stdout, nothing on stderr' '
	nvg-encode -w w.raw --shape 96x64 --hctx fit.hctx --fit fit.gram --sel sel.gram \
		--bpw 3 -o a.blr >line 2>err &&
	test_must_fail test -s err &&
	test "$(wc -l <line)" = 1 &&
	test_grep "^pick P[12] r[0-9]+ \| sel: init [0-9.]+ P2 [0-9.]+ P1 [0-9.]+ \| stored fit [0-9.]+ sel [0-9.]+$" line &&
	test_no_tmp_files
'

test_expect_success 'the payload decodes to the reported SEL error and the rule rank' '
	check a.blr w.raw 96 64 sel.gram >dec &&
	r=$(sed -n "s/^pick P[12] r\([0-9]*\).*/\1/p" line) &&
	p=$(sed -n "s/^pick P\([12]\).*/\1/p" line) &&
	test "$(field r dec)" = "$r" && test "$(field p dec)" = "$p" &&
	blr_r=$(( (3 * 96 * 64 / p - 16 * 160) / 176 / 8 * 8 )) &&
	if test "$blr_r" -gt 64; then blr_r=64; fi &&
	test "$r" = "$blr_r" &&
	close "$(field herr dec)" "$(sel_of line)" ||
	{ cat line dec; false; }
'

test_expect_success 'the context built in-process gives the same bytes; twice the same' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 -o b.blr >line2 &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 -o c.blr >line3 &&
	cmp a.blr b.blr && cmp b.blr c.blr && test_cmp line line2
'

test_expect_success 'threads: the same bytes with 1 and 2 workers at one BLAS thread' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --threads 2 -o t2.blr >/dev/null &&
	OPENBLAS_NUM_THREADS=2 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --threads 2 -o t2b.blr >/dev/null &&
	cmp t2.blr t2b.blr
'

# --threads-max: make's jobserver (here a named pipe holding one token, as
# make 4.4 gives it) lends idle slots as threads; whether the token is taken
# depends on the encode outlasting a poll, so what is checked is what holds
# either way: the bytes of one thread, and the token back in the pipe after
test_expect_success '--threads-max: the bytes of --threads, every jobserver token given back' '
	mkfifo js &&
	exec 9<>js &&
	printf + >&9 &&
	MAKEFLAGS="-j2 --jobserver-auth=fifo:$PWD/js" nvg-encode -w w.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 3 --threads 1 --threads-max 2 -o lend.blr \
		>/dev/null 2>err &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --threads 1 \
		-o one.blr >/dev/null &&
	cmp one.blr lend.blr &&
	test_no_grep "note" err &&
	timeout 5 dd bs=1 count=1 <&9 2>/dev/null >tok &&
	exec 9<&- &&
	printf + >expect &&
	test_cmp expect tok
'

test_expect_success '--threads-max: a jobserver that cannot be read is a note, the encode runs' '
	MAKEFLAGS="-j2 --jobserver-auth=fifo:$PWD/nonexistent" nvg-encode -w w.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 3 --threads 1 --threads-max 2 -o note.blr \
		>/dev/null 2>err &&
	cmp one.blr note.blr &&
	test_grep "^nvg-encode: note: no job slots lent: jobserver fifo .*nonexistent" err &&
	MAKEFLAGS="-j2 --jobserver-auth=fifo:$PWD/nonexistent" nvg-encode -w w.raw --shape 96x64 \
		--fit fit.gram --sel sel.gram --bpw 3 --threads 1 -o quiet.blr >/dev/null 2>err &&
	test ! -s err
'

test_expect_success 'payload to stdout: the report goes to stderr' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 -o - >s.blr 2>err &&
	cmp a.blr s.blr &&
	test_cmp line err
'

test_expect_success '--paths 1 and 2 force the path count' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --paths 1 -o p1.blr >l1 &&
	test_grep "^pick P1 r[0-9]+ \| sel: P1 only \| stored fit [0-9.]+ sel [0-9.]+$" l1 &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --paths 2 -o p2.blr >l2 &&
	test_grep "^pick P2 r[0-9]+ \| sel: P2 only \| stored fit [0-9.]+ sel [0-9.]+$" l2 &&
	check p1.blr w.raw 96 64 >d1 && test "$(field p d1)" = 1 &&
	check p2.blr w.raw 96 64 >d2 && test "$(field p d2)" = 2 &&
	p=$(sed -n "s/^pick P\([12]\) .*/\1/p" line) &&
	cmp a.blr p$p.blr &&
	test "$(sed "s/.*| stored/stored/" l$p)" = "$(sed "s/.*| stored/stored/" line)"
'

test_expect_success '--kv applies --kv-factor to the budget' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1.5 --paths 2 \
		--kv --kv-factor 2 -o kv.blr >lkv &&
	test_grep "^pick P2 r32 " lkv &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 1.5 --paths 2 \
		--kv-factor 2 -o nokv.blr >lnokv &&
	test_grep "^pick P2 r8 " lnokv
'

test_expect_success 'dual-svid: no Gram needed, line "P2 r.. frob .."' '
	nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 -o d.blr >ld &&
	test_grep "^P2 r32 frob [0-9.]+$" ld &&
	check d.blr w.raw 96 64 >dd &&
	close "$(field frob dd)" "$(sed -n "s/.* frob //p" ld)" ||
	{ cat ld dd; false; }
'

test_expect_success 'nvg beats dual-svid on the SEL Gram at the same budget' '
	check a.blr w.raw 96 64 sel.gram >en &&
	check d.blr w.raw 96 64 sel.gram >ed &&
	awk -v a="$(field herr en)" -v b="$(field herr ed)" "BEGIN { exit !(a < b) }"
'

test_expect_success '--profile: the per-stage line and the flop total on stderr' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --profile -o pr.blr >lp 2>err &&
	cmp a.blr pr.blr &&
	test_grep "^profile: hctx [0-9.]+s \| wh " err &&
	for s in lat.gemm lat.eig itq.gemm itq.polar svid als.l als.h als.g flip_u flip_u.flips gptq_v gptq_v.flips err select; do
		test_grep "\| $s [0-9.]+s" err || return 1
	done &&
	test_grep "^total: [0-9.]+s [0-9.e+]+ flop [0-9.]+ GFLOP/s$" err
'

test_expect_success '--target-raw encodes another matrix in the same metric' '
	"$NVG_PY" -c "
import numpy as np
w=np.fromfile(\"w.raw\",dtype=\"<f4\").reshape(96,64)
(2*w).astype(\"<f4\").tofile(\"m.raw\")" &&
	nvg-encode --target-raw m.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 -o m.blr >lm &&
	check m.blr m.raw 96 64 sel.gram >dm &&
	close "$(field herr dm)" "$(sel_of lm)"
'

test_expect_success 'row gauge: encoded scaled, undone on the bytes' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 \
		--row-gauge invE --head-blocks 12x8 -o g.blr >lg 2>err &&
	test_grep "row gauge over 12 blocks: scale" err &&
	check g.blr w.raw 96 64 sel.gram >dg &&
	awk -v e="$(field herr dg)" "BEGIN { exit !(e < 0.5) }" &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 \
		--row-gauge invE --head-blocks 12x8 --gauge-shuffle 5 -o gs.blr >lgs 2>err &&
	test_grep "row gauge \(shuffled\) over 12 blocks" err
'

# the synthetic 192x384 layer of the next tests, at 1 bpw
enc() { nvg-encode -w big/w.raw --shape 192x384 --fit big/fit.gram --sel big/sel.gram --bpw 1 "$@"; }
# a budget where big's one-path candidate leads after the first sweep
LEAD_BPW=0.55

# PCG for the g step (the default): the answer of the direct solve to
# rounding (SEL within 0.5%, the bar of issue #12), its steps counted,
# deterministic
test_expect_success '--g-solve pcg, the default: the direct SEL error within 0.5%, the same bytes twice and at 2 threads' '
	mkdir big &&
	"$NVG_PY" "$REF/synth-layer.py" layer 192 384 2 big &&
	enc --g-solve direct --profile -o gd.blr >ld 2>errd &&
	test_no_grep "als.g.pcg" errd &&
	enc -o gp0.blr >/dev/null &&
	enc --g-solve pcg --profile -o gp.blr >lp 2>err &&
	cmp gp0.blr gp.blr &&
	test_grep "\| als.g.pcg [0-9.]+s/[1-9][0-9]* " err &&
	test_grep "\| als.g.chol [0-9.]+s/[1-9][0-9]* " err &&
	awk -v a="$(sel_of ld)" -v b="$(sel_of lp)" "BEGIN { exit !(b <= a * 1.005) }" &&
	enc --g-solve pcg -o gp2.blr >/dev/null &&
	OPENBLAS_NUM_THREADS=2 enc --g-solve pcg -o gp3.blr >/dev/null &&
	cmp gp.blr gp2.blr && cmp gp.blr gp3.blr ||
	{ cat ld lp err; false; }
'

test_expect_success '--g-solve: an unknown solver, dual-svid and the device are refused' '
	test_expect_code 1 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 \
		--g-solve lu -o x.blr 2>err &&
	test_grep "invalid --g-solve .lu.: expected direct or pcg" err &&
	for g in pcg direct; do
		test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
			--g-solve $g -o x.blr 2>err &&
		test_grep "dual-svid has no g step" err || return 1
	done &&
	test_expect_code 2 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 \
		--g-solve pcg --device opencl -o x.blr 2>err &&
	test_grep "the CPU encoder.s: give --device cpu" err &&
	test_path_is_missing x.blr
'

# the ITQ stop: the default is 0.001 (beside --als-tol 0.001); 0 is every
# step's answer, so it takes more steps than the default, and a larger
# tolerance no more, counted in the profile; deterministic
test_expect_success '--itq-tol: 0.001 the default bytes; 0 more steps, 0.01 no more, the same bytes twice' '
	enc --itq-tol 0.001 --als-tol 0.001 --profile -o id.blr >ld 2>errd &&
	cmp id.blr gp.blr &&
	enc --itq-tol 0 --profile -o i0.blr >l0 2>err0 &&
	enc --itq-tol 0.01 --profile -o i1.blr >l1 2>err1 &&
	nd=$(prof_count itq.steps errd) &&
	n0=$(prof_count itq.steps err0) && n1=$(prof_count itq.steps err1) &&
	test "$nd" -lt "$n0" && test "$n1" -le "$nd" && test "$n0" -le $((50 * 3)) &&
	OPENBLAS_NUM_THREADS=2 enc --itq-tol 0.01 -o i2.blr >/dev/null &&
	cmp i1.blr i2.blr ||
	{ cat errd err0 err1; false; }
'

# the refusals of the precision option OPT (prec_refused OPT DUAL VAL DEV): an
# unknown value; with dual-svid (DUAL, the message's words); VAL with a
# device (DEV); and no payload
prec_refused() {
	test_expect_code 1 enc --$1 f16 -o x.blr 2>err &&
	test_grep "invalid --$1 .f16.: expected f64 or f32" err &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--$1 f32 -o x.blr 2>err &&
	test_grep "$2" err &&
	test_expect_code 2 enc --$1 $3 --device opencl -o x.blr 2>err &&
	test_grep "$4" err &&
	test_path_is_missing x.blr
}

# the ITQ's products in f32: f64 is the default's bytes; f32 a payload whose
# SEL error is the f64 one's within 1% (the same rotation to f32's rounding
# where no sign is that near zero; test-svid bounds the latents), the same
# bytes at 1 and 2 threads; the refusals
test_expect_success '--itq-prec: f64 the default bytes, f32 near them and deterministic' '
	enc --itq-prec f64 -o q64.blr >l64 &&
	cmp q64.blr gp.blr &&
	enc --itq-prec f32 -o q32.blr >l32 &&
	s64=$(sed -n "s/.* sel \([0-9.]*\).*/\1/p" l64) &&
	s32=$(sed -n "s/.* sel \([0-9.]*\).*/\1/p" l32) &&
	awk "BEGIN { d = $s32 / $s64 - 1; exit !(d < 0.01 && d > -0.01) }" &&
	OPENBLAS_NUM_THREADS=2 enc --itq-prec f32 -o q32b.blr >/dev/null &&
	cmp q32.blr q32b.blr &&
	prec_refused itq-prec "dual-svid has no ITQ" f32 \
		"the CPU encoder.s .a device.s ITQ is f32 already.: give --device cpu" ||
	{ cat l64 l32; false; }
'

# the FIT Gram's products with the paths (H·B) in f32, the default: f32 is
# the default's bytes; f64 a payload whose SEL error is the f32 one's within
# 1% (the products differ by f32's rounding, which test-linalg bounds, and
# f16's rounding of the scales may hide it); both the same bytes at 1 and 2
# threads (nv_sgemm's fixed tiles); the refusals (f32 with a device is what
# a device does, and not refused)
test_expect_success '--hb-prec: f32 the default bytes, f64 near them, both deterministic' '
	enc --hb-prec f32 -o h32.blr >l32 &&
	cmp h32.blr gp.blr &&
	enc --hb-prec f64 -o h64.blr >l64 &&
	awk -v a="$(sel_of l64)" -v b="$(sel_of l32)" "BEGIN { d = b / a - 1; exit !(d < 0.01 && d > -0.01) }" &&
	OPENBLAS_NUM_THREADS=2 enc -o h32b.blr >/dev/null &&
	cmp h32.blr h32b.blr &&
	OPENBLAS_NUM_THREADS=2 enc --hb-prec f64 -o h64b.blr >/dev/null &&
	cmp h64.blr h64b.blr &&
	prec_refused hb-prec "dual-svid has no FIT Gram" f64 \
		"the CPU encoder.s .a device.s products are f32.: give --device cpu" ||
	{ cat l32 l64; false; }
'

# the least squares' large products in f32: f64 is the default's bytes;
# f32 other bytes whose SEL error is f64's within 1% (the products differ by
# f32's rounding, which test-linalg and test-rfp bound, test-nvg follows
# the fit error through the sweeps), the same bytes at 1 and 2 threads
# (fixed tiles); for the 192x384 W, wider than tall, W·hf is what is kept
# and rounded, for the 96x64 one W itself (whose payload f16's rounding of
# the scales keeps the same bytes here: test-nvg sees that branch move the
# fit error); the refusals
test_expect_success '--als-prec: f64 the default bytes, f32 near them and deterministic' '
	enc --als-prec f64 -o a64.blr >l64 &&
	cmp a64.blr gp.blr &&
	enc --als-prec f32 --profile -o a32.blr >l32 2>prof &&
	! cmp -s a32.blr gp.blr &&
	awk -v a="$(sel_of l64)" -v b="$(sel_of l32)" "BEGIN { d = b / a - 1; exit !(d < 0.01 && d > -0.01) }" &&
	OPENBLAS_NUM_THREADS=2 enc --als-prec f32 -o a32b.blr >/dev/null &&
	cmp a32.blr a32b.blr &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 -o t64.blr >lt64 &&
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 3 --als-prec f32 \
		-o t32.blr >lt32 &&
	OPENBLAS_NUM_THREADS=2 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram \
		--bpw 3 --als-prec f32 -o t32b.blr >/dev/null &&
	cmp t32.blr t32b.blr &&
	awk -v a="$(sel_of lt64)" -v b="$(sel_of lt32)" "BEGIN { d = b / a - 1; exit !(d < 0.01 && d > -0.01) }" &&
	prec_refused als-prec "dual-svid has no ALS" f32 \
		"the CPU encoder.s .a device.s products are f32 already.: give --device cpu" ||
	{ cat l64 l32 lt64 lt32; false; }
'

# bad_values OPT V…: enc refuses each value of OPT as invalid (exit 1)
bad_values() {
	local o=$1 v
	shift
	for v in "$@"; do
		test_expect_code 1 enc "$o" "$v" -o x.blr 2>err &&
		test_grep "invalid $o" err || return 1
	done
}

# the ALS sweeps of each refinement try
# (the sweeps counted with --als-tol 0, which runs every one)
test_expect_success '--try-sweeps: 2 the default bytes; 3 more sweeps, 1 fewer, deterministic' '
	enc --try-sweeps 2 -o t2d.blr >/dev/null &&
	cmp t2d.blr gp.blr &&
	enc --try-sweeps 2 --als-tol 0 --profile -o t2.blr >l2 2>err2 &&
	enc --try-sweeps 3 --als-tol 0 --profile -o t3.blr >l3 2>err3 &&
	! cmp -s t3.blr t2.blr &&
	enc --try-sweeps 1 --als-tol 0 --profile -o t1.blr >l1 2>err1 &&
	a3=$(prof_count als.l err3) && a2=$(prof_count als.l err2) &&
	a1=$(prof_count als.l err1) &&
	test "$a1" -lt "$a2" && test "$a2" -lt "$a3" &&
	OPENBLAS_NUM_THREADS=2 enc --try-sweeps 1 --als-tol 0 -o t1b.blr >/dev/null &&
	cmp t1.blr t1b.blr &&
	bad_values --try-sweeps 0 9 x &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--try-sweeps 1 -o x.blr 2>err &&
	test_grep "dual-svid refines nothing" err &&
	test_path_is_missing x.blr ||
	{ cat err3 err1; false; }
'

# the g step on every Nth ALS sweep only (the sweeps counted with
# --als-tol 0, which runs every one)
test_expect_success '--g-every: 1 the default bytes; 2 fewer g steps, as many ℓ steps, deterministic' '
	enc --g-every 1 -o ge1.blr >/dev/null &&
	cmp ge1.blr gp.blr &&
	enc --als-tol 0 --profile -o g1.blr >l1 2>err1 &&
	enc --g-every 2 --als-tol 0 --profile -o g2.blr >l2 2>err2 &&
	! cmp -s g1.blr g2.blr &&
	test "$(prof_count als.l err2)" = "$(prof_count als.l err1)" &&
	test "$(prof_count als.g err2)" -lt "$(prof_count als.g err1)" &&
	enc --g-every 2 --als-tol 0 -o g2b.blr >/dev/null &&
	OPENBLAS_NUM_THREADS=2 enc --g-every 2 --als-tol 0 -o g2c.blr >/dev/null &&
	cmp g2.blr g2b.blr && cmp g2.blr g2c.blr &&
	bad_values --g-every 0 9 x &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--g-every 2 -o x.blr 2>err &&
	test_grep "dual-svid has no g step" err &&
	test_expect_code 2 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram \
		--bpw 3 --g-every 2 --device opencl -o x.blr 2>err &&
	test_grep "g-every above 1 is the CPU encoder.s .a device runs every g step.: give --device cpu" err &&
	test_path_is_missing x.blr ||
	{ cat err1 err2; false; }
'

test_expect_success '--itq-tol, --als-tol: out of range, dual-svid and a device above 0 are refused' '
	for o in itq:ITQ als:ALS; do
		for t in -0.1 0.6 x; do
			test_expect_code 1 nvg-encode -w w.raw --shape 96x64 --fit fit.gram \
				--sel sel.gram --bpw 3 --${o%:*}-tol $t -o x.blr 2>err &&
			test_grep "invalid --${o%:*}-tol" err || return 1
		done &&
		test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
			--${o%:*}-tol 0 -o x.blr 2>err &&
		test_grep "dual-svid has no ${o#*:}" err &&
		test_expect_code 2 nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram \
			--bpw 3 --${o%:*}-tol 0.01 --device opencl -o x.blr 2>err &&
		test_grep "the CPU encoder.s: give --device cpu" err &&
		test_path_is_missing x.blr || return 1
	done
'

# ALS's early stop: the default is 0.001; 0 runs every sweep (no stop in
# the profile), and a tolerance fewer sweeps, never more, deterministically
test_expect_success '--als-tol: 0.001 the default bytes; 0 every sweep, 0.01 fewer, the same bytes twice' '
	enc --als-tol 0.001 -o ad.blr >/dev/null &&
	cmp ad.blr gp.blr &&
	enc --als-tol 0 --profile -o a0.blr >l0 2>err0 &&
	enc --als-tol 0.01 --profile -o a1.blr >l1 2>err1 &&
	g0=$(prof_count als.g err0) && g1=$(prof_count als.g err1) &&
	s1=$(prof_count als.stop err1) &&
	test "$g1" -lt "$g0" && test "$s1" -gt 0 && ! grep -q als.stop err0 &&
	OPENBLAS_NUM_THREADS=2 enc --als-tol 0.01 -o a2.blr >/dev/null &&
	cmp a1.blr a2.blr ||
	{ cat err0 err1; false; }
'

# the choice of paths after the first sweep of both candidates: the chosen
# one completes its sweeps, with the bytes of that path count forced
test_expect_success '--pick-after 1: both candidates noted after a sweep, the lower one kept' '
	enc --pick-after 1 -o k1.blr >lk &&
	test_grep "^pick P[12] r[0-9]+ \| sel: init [0-9.]+ P2@1 [0-9.]+ P1@1 [0-9.]+ P[12] [0-9.]+ \| stored" lk &&
	p=$(sed -n "s/^pick P\([12]\).*/\1/p" lk) &&
	e2=$(sed -n "s/.* P2@1 \([0-9.]*\) .*/\1/p" lk) &&
	e1=$(sed -n "s/.* P1@1 \([0-9.]*\) .*/\1/p" lk) &&
	if awk "BEGIN { exit !($e1 < $e2) }"; then test "$p" = 1; else test "$p" = 2; fi &&
	enc --paths $p -o kp.blr >/dev/null &&
	cmp k1.blr kp.blr &&
	OPENBLAS_NUM_THREADS=2 enc --pick-after 1 -o k1b.blr >/dev/null &&
	cmp k1.blr k1b.blr ||
	{ cat lk; false; }
'

test_expect_success '--pick-after: out of range, forced paths, dual-svid and a device are refused' '
	for t in 0 16 x; do
		test_expect_code 1 enc --pick-after $t -o x.blr 2>err &&
		test_grep "invalid --pick-after" err || return 1
	done &&
	test_expect_code 2 enc --pick-after 2 -o x.blr 2>err &&
	test_grep "below --refine.s sweeps" err &&
	enc --pick-after 2 --refine 3 -o x3.blr >/dev/null &&
	test_expect_code 2 enc --pick-after 1 --paths 1 -o x.blr 2>err &&
	test_grep "paths auto" err &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--pick-after 1 -o x.blr 2>err &&
	test_grep "paths auto" err &&
	test_expect_code 2 enc --pick-after 1 --device opencl -o x.blr 2>err &&
	test_grep "the CPU encoder.s: give --device cpu" err &&
	test_path_is_missing x.blr
'

# the early choice of one path (--pick-lead): at a budget where the one-path
# candidate leads after a sweep by d (--pick-after 1's line), a lead asked
# below d keeps it then (both noted after one sweep: --pick-after 1's bytes
# and line); off, and a lead above d, refine both through (off's bytes and
# line, nothing noted after one sweep)
test_expect_success '--pick-lead: the one-path candidate kept after a sweep when it leads by F' '
	enc --bpw $LEAD_BPW --pick-after 1 -o a1.blr >l1 &&
	e2=$(sed -n "s/.* P2@1 \([0-9.]*\) .*/\1/p" l1) &&
	e1=$(sed -n "s/.* P1@1 \([0-9.]*\) .*/\1/p" l1) &&
	awk "BEGIN { exit !($e1 < $e2) }" &&
	below=$(awk "BEGIN { printf \"%.6f\", (1 - $e1 / $e2) / 2 }") &&
	above=$(awk "BEGIN { printf \"%.6f\", (1 - $e1 / $e2) * 2 }") &&
	enc --bpw $LEAD_BPW --pick-lead $below -o lb.blr >llb &&
	cmp a1.blr lb.blr &&
	test_cmp l1 llb &&
	enc --bpw $LEAD_BPW --pick-lead off -o off.blr >loff &&
	enc --bpw $LEAD_BPW --pick-lead $above -o la.blr >lla &&
	cmp off.blr la.blr &&
	test_cmp loff lla &&
	test_no_grep "@1" lla ||
	{ cat l1 llb loff lla; false; }
'

test_expect_success '--pick-lead: out of range, forced paths, dual-svid, --pick-after and a device are refused' '
	for t in -0.1 0.6 x; do
		test_expect_code 1 enc --pick-lead $t -o x.blr 2>err &&
		test_grep "invalid --pick-lead" err || return 1
	done &&
	test_expect_code 2 enc --pick-lead 0.01 --paths 1 -o x.blr 2>err &&
	test_grep "paths auto" err &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--pick-lead 0.01 -o x.blr 2>err &&
	test_grep "paths auto" err &&
	test_expect_code 2 enc --pick-lead 0.01 --pick-after 1 -o x.blr 2>err &&
	test_grep "two early choices" err &&
	test_expect_code 2 enc --pick-lead 0.01 --device opencl -o x.blr 2>err &&
	test_grep "the CPU encoder.s: give --device cpu" err &&
	test_path_is_missing x.blr &&
	enc --pick-lead off --paths 2 -o p2.blr >/dev/null &&
	enc --paths 2 -o p2d.blr >/dev/null &&
	cmp p2.blr p2d.blr
'

# a try's sweeps ended once it cannot be kept (--try-abort, on by default):
# on a tall layer (synth-layer.py's 384x144) at 2 bpw the column searches of
# the later refinement sweeps leave their tries above the model's error;
# those tries end after their first sweep (als.abort), in fewer ℓ steps, and
# the payload and line are those of every sweep run (off)
tall() { nvg-encode -w tall/w.raw --shape 384x144 --hctx tall/fit.hctx --fit tall/fit.gram \
	--sel tall/sel.gram --bpw 2 --paths 2 --refine 3 --profile "$@"; }
test_expect_success '--try-abort: a try that cannot be kept ends early, the bytes of every sweep run' '
	mkdir tall &&
	"$NVG_PY" "$REF/synth-layer.py" layer 384 144 1 tall &&
	hctx-build tall/fit.gram -o tall/fit.hctx &&
	tall --try-abort off -o off.blr >loff 2>perr_off &&
	tall -o on.blr >lon 2>perr_on &&
	tall --try-abort on -o on2.blr >lon2 2>/dev/null &&
	cmp off.blr on.blr && cmp on.blr on2.blr &&
	test_cmp loff lon &&
	test_no_grep "als.abort" perr_off &&
	test_grep "\| als.abort [0-9.]+s/[1-9][0-9]*( |$)" perr_on &&
	l_off=$(sed -n "s/.*| als.l [0-9.]*s\/\([0-9]*\) .*/\1/p" perr_off) &&
	l_on=$(sed -n "s/.*| als.l [0-9.]*s\/\([0-9]*\) .*/\1/p" perr_on) &&
	test "$l_on" -lt "$l_off" ||
	{ cat loff lon perr_off perr_on; false; }
'

test_expect_success '--try-abort: a word other than on or off, dual-svid and a device are refused' '
	for t in yes 1 ""; do
		test_expect_code 1 enc --try-abort "$t" -o x.blr 2>err &&
		test_grep "invalid --try-abort" err || return 1
	done &&
	test_expect_code 2 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--try-abort off -o x.blr 2>err &&
	test_grep "dual-svid refines nothing" err &&
	test_expect_code 2 enc --try-abort on --device opencl -o x.blr 2>err &&
	test_grep "the CPU encoder.s" err &&
	test_path_is_missing x.blr
'

test_expect_success 'a small budget clips to the floor rank 8' '
	nvg-encode -w w.raw --shape 96x64 --fit fit.gram --sel sel.gram --bpw 0.01 --paths 2 -o f.blr >lf &&
	test_grep "^pick P2 r8 " lf
'

test_done
