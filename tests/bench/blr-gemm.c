/* blr-gemm.c - dgemm and sgemm GFLOP/s on this machine, for bench-blr.sh to print
 * beside its timings: blr-pack unpack is sgemms of (m × r)·(r × n) a path, in
 * exact integer sums (blrdeq.c), so its rate is the sgemm's, halved by p
 *   usage: blr-gemm M N K   (prints "dgemm MxNxK GF/s" and "sgemm ...", median of 5)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int main(int argc, char **argv)
{
	size_t m, n, k;
	double t[5], *a, *b, *c;
	float *fa, *fb, *fc;

	if (argc != 4)
		return 2;
	m = strtoul(argv[1], NULL, 10);
	n = strtoul(argv[2], NULL, 10);
	k = strtoul(argv[3], NULL, 10);
	a = calloc(m * k, 8), b = calloc(k * n, 8), c = calloc(m * n, 8);
	fa = calloc(m * k, 4), fb = calloc(k * n, 4), fc = calloc(m * n, 4);
	if (!a || !b || !c || !fa || !fb || !fc)
		return 1;
	for (size_t i = 0; i < m * k; i++)
		a[i] = fa[i] = (float)(i % 7) - 3;
	for (size_t i = 0; i < k * n; i++)
		b[i] = fb[i] = (float)(i % 5) - 2;
	for (int r = 0; r < 5; r++) {
		double t0 = bench_now();

		/* C (m × n) = A (m × k) · Bᵀ (k × n), as blr_dequantize calls it */
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, a, k, b, k, 0, c, n);
		t[r] = bench_now() - t0;
	}
	qsort(t, 5, sizeof(double), bench_cmp);
	printf("dgemm %zux%zux%zu %.1f GF/s\n", m, n, k, 2.0 * m * n * k / t[2] * 1e-9);
	for (int r = 0; r < 5; r++) {
		double t0 = bench_now();

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, fa, k, fb, k, 0, fc, n);
		t[r] = bench_now() - t0;
	}
	qsort(t, 5, sizeof(double), bench_cmp);
	printf("sgemm %zux%zux%zu %.1f GF/s\n", m, n, k, 2.0 * m * n * k / t[2] * 1e-9);
	return 0;
}
