#!/bin/bash
# blr-pack: -h is the man page's SYNOPSIS, --version, usage errors exit 2
. "$(dirname "$0")/test-lib.sh"

test_expect_success '-h prints exactly the SYNOPSIS of blr-pack(1)' '
	test_man_synopsis man1/blr-pack.1 >expect &&
	test -s expect &&
	blr-pack -h >actual 2>err &&
	test_cmp expect actual &&
	test ! -s err
'

test_expect_success '--help and a subcommand -h print the same' '
	blr-pack -h >expect &&
	blr-pack --help >actual && test_cmp expect actual &&
	blr-pack rank -h >actual && test_cmp expect actual
'

test_expect_success '--version names the tool and the version' '
	blr-pack --version >out &&
	test_grep "^blr-pack \(nvgkit\) [0-9]+\.[0-9]+\.[0-9]+$" out
'

# the kernels the CPU can run best: SkylakeX's with AVX-512, Haswell's with
# AVX2 and FMA, none named otherwise
best_core() {
	if grep -qw avx512f /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
		grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
		echo SkylakeX
	elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
		echo Haswell
	fi
}

test_expect_success '--version names the OpenBLAS core; no note under the CPU'"'"'s best kernels' '
	blr-pack --version >out &&
	core=$(sed -n "s/^OpenBLAS core: //p" out) &&
	test -n "$core" &&
	OPENBLAS_CORETYPE=${best:=$(best_core)} blr-pack --version >out2 &&
	test_no_grep "^note:" out2
'

test_expect_success '--version notes generic kernels that OPENBLAS_CORETYPE chose on a faster CPU' '
	OPENBLAS_CORETYPE=Prescott blr-pack --version >out &&
	test_grep "^OpenBLAS core: Prescott$" out &&
	if [ -n "$(best_core)" ]; then
		test_grep "^note: OpenBLAS runs its generic Prescott kernels [(]OPENBLAS_CORETYPE chose them[)] on a CPU with AVX.*: OPENBLAS_CORETYPE=$(best_core) runs" out
	else
		test_no_grep "^note:" out
	fi
'

test_expect_success '--version notes AVX2 kernels on a CPU with AVX-512' '
	OPENBLAS_CORETYPE=Haswell blr-pack --version >out &&
	if [ "$(best_core)" = SkylakeX ]; then
		test_grep "^note: OpenBLAS runs its AVX2 Haswell kernels [(]OPENBLAS_CORETYPE chose them[)] on a CPU with AVX-512: OPENBLAS_CORETYPE=SkylakeX runs its products up to twice as fast$" out
	else
		test_no_grep "^note:" out
	fi
'

usage_error() {
	test_expect_code 2 blr-pack "$@" >out 2>err &&
	test ! -s out &&
	test_grep "^blr-pack: " err &&
	test_grep "^Try .blr-pack -h. for usage\.$" err
}

test_expect_success 'no subcommand is a usage error' 'usage_error'
test_expect_success 'an unknown subcommand is a usage error' 'usage_error frobnicate x'
test_expect_success 'an unknown option is a usage error' 'usage_error info --frob x'
test_expect_success 'an option without its value is a usage error' 'usage_error rank --shape'
test_expect_success 'verify without --shape is a usage error' 'usage_error verify x.blr'
test_expect_success 'rank without --bpw is a usage error' 'usage_error rank --shape 64x64'
test_expect_success 'a malformed --shape is a usage error' 'usage_error rank --shape 64by64 --bpw 1'
test_expect_success 'a zero --shape dimension is a usage error' 'usage_error rank --shape 0x64 --bpw 1'
test_expect_success '--bpw 0 is a usage error' 'usage_error rank --shape 64x64 --bpw 0'
test_expect_success '--bpw nan is a usage error' 'usage_error rank --shape 64x64 --bpw nan'
test_expect_success '--bpw above 16 is a usage error' 'usage_error rank --shape 64x64 --bpw 17'
test_expect_success '--paths 3 is a usage error' 'usage_error rank --shape 64x64 --bpw 1 --paths 3'
test_expect_success '--paths 0 is a usage error' 'usage_error rank --shape 64x64 --bpw 1 --paths 0'
test_expect_success '--kv-factor 0 is a usage error' 'usage_error rank --shape 64x64 --bpw 1 --kv-factor 0'
test_expect_success 'an option of another subcommand is a usage error' 'usage_error info --bpw 1 x.blr'
test_expect_success 'two input files are a usage error but for info' '
	usage_error verify --shape 8x8 a.blr b.blr &&
	usage_error unpack a.blr b.blr &&
	usage_error gauge --undo f a.blr b.blr
'
test_expect_success 'gauge without --undo is a usage error' 'usage_error gauge x.blr'

test_done
