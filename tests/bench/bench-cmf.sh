#!/bin/bash
# bench-cmf.sh - cmf-patch on SmolLM2-135M (Q4_1 GGUF, 272 tensors): import to
# f32 and f16, verify, extract and export; medians of 5 runs, peak RSS, and
# for context the OpenBLAS core and the sgemm rate of this machine.
# Not a test: run by `make bench`.

set -eu
NVG_BIN=${NVG_BIN:-$(pwd)/bin}
NVG_BUILD=${NVG_BUILD:-$(pwd)/build}
NVG_PY=${NVG_PY:-$(pwd)/build/venv/bin/python3}
P=$NVG_BIN/cmf-patch
W=$NVG_BUILD/bench-cmf
RUNS=5

# shellcheck source=../lib-smollm2.sh
. "$(dirname "$0")/../lib-smollm2.sh"
smollm2_gguf || { echo "bench-cmf: SmolLM2-135M could not be fetched" >&2; exit 1; }
mkdir -p "$W"
trap 'rm -rf "$W"' EXIT

# median wall seconds of RUNS runs of a command, and the peak RSS (KiB) of the last
median() {
	local t
	for i in $(seq $RUNS); do
		/usr/bin/time -f "%e %M" -o "$W/time" "$@" >/dev/null
		cat "$W/time"
	done | sort -n | awk -v n=$RUNS 'NR == int((n + 1) / 2) { m = $1 } { r = $2 } END { printf "%s s  (peak RSS %d MiB)", m, r / 1024 }'
}

# sgemm 1024^3 through OpenBLAS, best of 5
cat >"$W/sgemm.c" <<'EOF'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(void)
{
	size_t n = 1024;
	float *a = malloc(n * n * 4), *b = malloc(n * n * 4), *c = malloc(n * n * 4);
	double best = 1e9;
	for (size_t i = 0; i < n * n; i++)
		a[i] = (float)(i % 7) - 3, b[i] = (float)(i % 5) - 2;
	for (int k = 0; k < 5; k++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
		if (s < best)
			best = s;
	}
	printf("%.1f GFLOP/s (sgemm 1024^3, best of 5)\n", 2.0 * n * n * n / best / 1e9);
	return 0;
}
EOF
${CC:-cc} -O2 -o "$W/sgemm" "$W/sgemm.c" $(pkg-config --cflags --libs openblas)

echo "bench-cmf: $(nproc) cores, OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset}"
echo "openblas core: $(OPENBLAS_VERBOSE=2 "$W/sgemm" 2>&1 | grep -i core | head -n 1)"
echo "sgemm: $("$W/sgemm")"
echo "source: $(basename "$GGUF"), $(stat -c %s "$GGUF") bytes"
echo "import f32:        $(median "$P" import -o "$W/f32.cmf" "$GGUF")"
echo "import --dtype f16: $(median "$P" import --dtype f16 -o "$W/f16.cmf" "$GGUF")"
"$P" import -o "$W/f32.cmf" "$GGUF"
bytes=$(stat -c %s "$W/f32.cmf")
echo "verify ($bytes bytes): $(median "$P" verify "$W/f32.cmf")"
echo "extract embeddings (113 MB): $(median "$P" extract -o "$W/e.f32" "$W/f32.cmf" model.embed_tokens.weight)"
echo "list: $(median "$P" list "$W/f32.cmf")"
mkdir -p "$W/hf"
echo "export --dtype f16: $(median "$P" export --dtype f16 -o "$W/hf/model.safetensors" "$W/f32.cmf")"
