#!/bin/bash
# nvg-encode --device: the choice of encoder, and every way the device path
# can fail (no platform, bad index, broken kernels, too small a device, a
# method it does not run), each with one message and no output left behind
. "$(dirname "$0")/test-lib.sh"

REF="$NVG_TOP/tests/ref"
ENC="-w w.raw --shape 96x64 --hctx fit.hctx --fit fit.gram --sel sel.gram --bpw 3"

test_expect_success 'setup: a synthetic 96x64 layer, its context, the CPU payload' '
	"$NVG_PY" "$REF/synth-layer.py" layer 96 64 1 . &&
	hctx-build fit.gram -o fit.hctx &&
	nvg-encode $ENC -o cpu.blr >cpu.line &&
	mkdir noicd
'

test_expect_success 'auto with no OpenCL platform: the CPU, with a note' '
	OCL_ICD_VENDORS="$PWD/noicd" nvg-encode $ENC --device auto -o auto.blr >line 2>err &&
	cmp cpu.blr auto.blr &&
	test_cmp cpu.line line &&
	test "$(wc -l <err)" = 1 &&
	test_grep "^nvg-encode: note: no OpenCL platform .*: encoding on the CPU$" err
'

test_expect_success 'auto with OpenCL but no GPU (PoCL): the CPU, silently' '
	nvg-encode $ENC --device auto -o auto2.blr >line 2>err &&
	cmp cpu.blr auto2.blr &&
	test_must_fail test -s err
'

test_expect_success 'opencl with no OpenCL platform: one clear error, no output' '
	test_expect_code 1 env OCL_ICD_VENDORS="$PWD/noicd" \
		nvg-encode $ENC --device opencl -o x.blr >out 2>err &&
	test_one_line_error err &&
	test_grep "^nvg-encode: cannot use the device .opencl.: no OpenCL platform" err &&
	test_path_is_missing x.blr && test_no_tmp_files
'

test_expect_success 'both with no OpenCL platform fails the same way' '
	test_expect_code 1 env OCL_ICD_VENDORS="$PWD/noicd" \
		nvg-encode $ENC --device both -o x.blr 2>err &&
	test_one_line_error err && test_grep "no OpenCL platform" err &&
	test_path_is_missing x.blr
'

test_expect_success 'a device or platform index out of range is named' '
	test_expect_code 1 nvg-encode $ENC --device opencl --cl-device 4 -o x.blr 2>err &&
	test_one_line_error err &&
	test_grep "cl-device 4: platform 0 has 1 device\(s\), 0 to 0" err &&
	test_expect_code 1 nvg-encode $ENC --device opencl --cl-platform 2 -o x.blr 2>err &&
	test_grep "cl-platform 2: there are 1 platform\(s\), 0 to 0" err &&
	test_expect_code 1 env NVG_CL_DEVICE=9 nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_grep "cl-device 9" err &&
	test_path_is_missing x.blr
'

test_expect_success 'the options win over NVG_CL_PLATFORM/NVG_CL_DEVICE' '
	NVG_CL_DEVICE=9 nvg-encode $ENC --device opencl --cl-device 0 -o dev0.blr >/dev/null
'

test_expect_success 'bad option values are refused' '
	test_expect_code 1 nvg-encode $ENC --device gpu -o x.blr 2>err &&
	test_one_line_error err && test_grep "invalid --device .gpu.: expected cpu, opencl" err &&
	test_expect_code 1 nvg-encode $ENC --jobs 0 -o x.blr 2>err && test_one_line_error err &&
	test_expect_code 1 nvg-encode $ENC --cl-device -1 -o x.blr 2>err && test_one_line_error err &&
	test_expect_code 1 env NVG_CL_DEVICE=x nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_grep "NVG_CL_DEVICE .x." err &&
	test_path_is_missing x.blr
'

test_expect_success 'kernels that do not build: the error, then the compiler log' '
	mkdir badcl &&
	echo "__kernel void k(__global float *x) { x[0] = not_declared_here; }" >badcl/nvg.cl &&
	test_expect_code 1 env NVG_CL_DIR="$PWD/badcl" nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_grep "^nvg-encode: cannot use the device .opencl.: building kernels .*badcl/nvg.cl.*CL_BUILD_PROGRAM_FAILURE$" err &&
	test_grep "not_declared_here" err &&
	test_path_is_missing x.blr && test_no_tmp_files
'

test_expect_success 'NVG_CL_DIR without kernels is named' '
	mkdir empty &&
	test_expect_code 1 env NVG_CL_DIR="$PWD/empty" nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_one_line_error err && test_grep "NVG_CL_DIR .*empty. holds no readable nvg.cl" err
'

test_expect_success 'a device too small: the tensor and the size asked for, no output' '
	test_expect_code 1 env NVG_CL_MEM_LIMIT=200000 nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_one_line_error err &&
	test_grep "^nvg-encode: cannot encode .w.raw.: device out of memory: 96x64 at rank [0-9]+ needs [0-9.]+ MiB, .* has 200000 bytes$" err &&
	test_path_is_missing x.blr && test_no_tmp_files
'

test_expect_success 'a device too small for the context itself' '
	test_expect_code 1 env NVG_CL_MEM_LIMIT=10000 nvg-encode $ENC --device opencl -o x.blr 2>err &&
	test_one_line_error err &&
	test_grep "cannot encode .w.raw.: uploading the input context \(n = 64\): device out of memory: 16384 bytes for the damped Gram" err &&
	test_path_is_missing x.blr
'

test_expect_success 'dual-svid and the device: opencl refuses, auto takes the CPU' '
	test_expect_code 1 nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 \
		--device opencl -o x.blr 2>err &&
	test_one_line_error err && test_grep "the device path encodes nvg only" err &&
	nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 -o d1.blr >/dev/null &&
	nvg-encode --method dual-svid -w w.raw --shape 96x64 --bpw 3 --device auto -o d2.blr >/dev/null &&
	cmp d1.blr d2.blr && test_path_is_missing x.blr
'

test_expect_success 'several tensors: one -o each' '
	test_expect_code 2 nvg-encode $ENC -w w.raw -o a.blr 2>err &&
	test_grep "several tensors need one -o each" err &&
	test_path_is_missing a.blr
'

test_done
