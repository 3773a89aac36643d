#!/bin/bash
# Same bytes at any thread count: a conversion with every step (transport,
# block reconstruction, the final-norm calibration) at THREADS=1 -j1 and at
# THREADS=3 -j2 writes the same files, one started at one count resumes at the
# other, and the tools that take a thread count (hctx-build, nvg-encode,
# gram-capture and cmf-eval through OPENBLAS_NUM_THREADS) give the same bits.
#
# OpenBLAS's Haswell kernels are the ones measured to round by thread count
# (issue 13, item 11; the generic Prescott kernel, which OpenBLAS picks on
# CPUs it does not know, does not): where the CPU has AVX2 and FMA they are
# forced here, so that the test fails on code that lets OpenBLAS's threads
# split a product or a factorization.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIR/lib-convert.sh"

if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
	export OPENBLAS_CORETYPE=Haswell
fi
STEPS="TRANSPORT=1 TUNE=1 CALIBRATE=1 E2E=1"

# same_files A B: every file of conversion A is in B with the same bytes,
# but for the run's lock, its logs and the reports that carry times
same_files() {
	(cd "$1" && find . -type f ! -name .lock ! -path './logs/*' ! -name tune.txt \
		! -name calibrate.txt ! -name e2e.txt | sort) >files &&
	test "$(wc -l <files)" -gt 40 &&
	while read -r f; do
		cmp "$1/$f" "$2/$f" || return 1
	done <files
}

test_expect_success 'setup: stories260K (two layers), calibration tokens' '
	convert_setup
'

# t3: THREADS=3 at -j2, so the steps that run alone have 6 threads
test_expect_success 'THREADS=1 -j1 and THREADS=3 -j2 give the same files, every step on' '
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=t1 BPW=2 $STEPS THREADS=1 -j1 2>err1 &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=t3 BPW=2 $STEPS THREADS=3 -j2 2>err3 &&
	same_files t1 t3
'

test_expect_success 'a conversion begun at THREADS=1 resumes at THREADS=2 to the same bytes' '
	cp -a t1 r &&
	rm -rf r/L1 r/model.cmf r/applied.cmf r/S1.state r/src/S1.state &&
	conv MODEL=s2.cmf TOKENS=cal.u32 OUT=r BPW=2 $STEPS THREADS=2 -j1 2>err &&
	same_files t1 r
'

test_expect_success 'hctx-build and nvg-encode --threads 1 and 4: the same bytes' '
	hctx-build --threads 1 -o h1.hctx t1/L1/g.gate.fit.gram &&
	hctx-build --threads 4 -o h4.hctx t1/L1/g.gate.fit.gram &&
	cmp h1.hctx h4.hctx &&
	for t in 1 4; do
		nvg-encode -m s2.cmf -t model.layers.1.mlp.down_proj.weight --hctx t1/L1/down.hctx \
			--fit t1/L1/g.down.fit.gram --sel t1/L1/g.down.sel.gram --bpw 2 --threads $t \
			-o d$t.blr >/dev/null || return 1
	done &&
	cmp d1.blr d4.blr
'

test_expect_success 'gram-capture and cmf-eval at 1 and 4 OpenBLAS threads: the same bits' '
	for t in 1 4; do
		OPENBLAS_NUM_THREADS=$t gram-capture -m t1/model.cmf --tokens cal.u32 -l 1 \
			--fit-tokens 1024 --sel-tokens 512 --window 128 -o g$t --next-state S$t.state \
			2>/dev/null &&
		OPENBLAS_NUM_THREADS=$t cmf-eval -q -m t1/model.cmf --base s2.cmf --tokens cal.u32 \
			--window 128 >e$t.all &&
		grep -v "^seconds\|^tokens_per_s\|^gflops" e$t.all >e$t || return 1
	done &&
	for f in q o gate down; do
		cmp g1.$f.fit.gram g4.$f.fit.gram && cmp g1.$f.sel.gram g4.$f.sel.gram || return 1
	done &&
	cmp S1.state S4.state &&
	test_cmp e1 e4 &&
	test_grep "^kl " e1
'

test_done
