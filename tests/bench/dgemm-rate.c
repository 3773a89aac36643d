/*
 * dgemm-rate.c - the machine's dgemm rate for the encoder benchmark: the
 * median GFLOP/s of RUNS square products of size N (argv: N RUNS), and the
 * OpenBLAS core and thread count.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "bench.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2048, runs = argc > 2 ? atoi(argv[2]) : 5;
	double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
	double *c = malloc(sizeof(double) * n * n), rate[64];

	if (!a || !b || !c || runs < 1 || runs > 64)
		return 1;
	for (long i = 0; i < (long)n * n; i++) {
		a[i] = (double)(i % 7) - 3.0;
		b[i] = (double)(i % 5) - 2.0;
	}
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
	for (int r = 0; r < runs; r++) {
		double t = bench_now();
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0,
			    c, n);
		rate[r] = 2.0 * n * (double)n * n / (bench_now() - t) * 1e-9;
	}
	qsort(rate, (size_t)runs, sizeof(double), bench_cmp);
	printf("dgemm %d: %.2f GFLOP/s (median of %d), core %s, %d threads\n", n, rate[runs / 2],
	       runs, openblas_get_corename(), openblas_get_num_threads());
	free(a);
	free(b);
	free(c);
	return 0;
}
