#!/bin/bash
# bench-blr.sh - blr-pack on a 4096x4096 rank-544 two-path payload (0.548 bpw):
# unpack (dequantize: a path's exact sum in sgemms), verify (parse and
# validate), gauge (undo);
# medians of 5 runs, peak RSS, the OpenBLAS core, and this machine's dgemm
# and sgemm GFLOP/s at the dequantization's own shape, measured in the same run
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${NVG_BIN:-$top/bin}
py=${NVG_PY:-$top/build/venv/bin/python3}
build=${NVG_BUILD:-$top/build}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-blr.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$build/bench"
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -O2 -o "$build/bench/blr-gemm" "$top/tests/bench/blr-gemm.c" \
	$(pkg-config --cflags --libs openblas)
echo "bench-blr: OpenBLAS $(OPENBLAS_VERBOSE=2 "$bin/blr-pack" rank --shape 8x8 --bpw 1 --paths 1 2>&1 >/dev/null | tr '\n' ' ')threads ${OPENBLAS_NUM_THREADS:-all} ($(nproc) cores)"
"$build/bench/blr-gemm" 4096 4096 544

"$py" "$top/tests/blr-writer.py" write "$work/w.blr" 4096 4096 544 2 1 --no-numpy
"$py" -c "import numpy as np; np.full(4096, 1.5, '<f4').tofile('$work/d.f32')"

# median SECONDS of 5 runs of a command; the last run's peak RSS in KiB
bench() {
	name=$1
	shift
	for i in 1 2 3 4 5; do
		/usr/bin/time -f "%e %M" -o "$work/t.$i" "$@"
	done
	med=$(cut -d' ' -f1 "$work"/t.[1-5] | sort -n | sed -n 3p)
	rss=$(cut -d' ' -f2 "$work"/t.[1-5] | sort -n | tail -1)
	printf 'bench-blr: %-8s median %6.3f s   peak RSS %7d KiB\n' "$name" "$med" "$rss"
}

bench unpack "$bin/blr-pack" unpack -o "$work/w.f32" "$work/w.blr"
# its products: a 4096 x 4096 x 544 sgemm for each of the two paths
awk -v t="$med" 'BEGIN { printf "bench-blr: unpack   %.1f GFLOP/s of products (2 x 2mnr), writing the f32 file included\n", 4 * 4096 * 4096 * 544 / t * 1e-9 }'
bench verify "$bin/blr-pack" verify --shape 4096x4096 "$work/w.blr"
bench gauge "$bin/blr-pack" gauge --undo "$work/d.f32" -o "$work/g.blr" "$work/w.blr"
# shellcheck disable=SC2016 # expanded by the inner sh
bench info sh -c '"$0" info "$1" >/dev/null' "$bin/blr-pack" "$work/w.blr"
