/*
 * sgemm-rate.c - the sgemm rate of this machine for the forward's shapes:
 * C (m × n) = A (m × k) · Bᵀ, B (n × k), as the forward multiplies a window
 * by a weight.  Prints "sgemm M N K GFLOP/s" for the median of several runs.
 *
 *   sgemm-rate M N K [reps]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int main(int argc, char **argv)
{
	int m, n, k, reps;
	float *A, *B, *C;
	double r[64];

	if (argc < 4)
		return fprintf(stderr, "usage: sgemm-rate M N K [reps]\n"), 2;
	m = atoi(argv[1]);
	n = atoi(argv[2]);
	k = atoi(argv[3]);
	reps = argc > 4 ? atoi(argv[4]) : 7;
	reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
	A = malloc(sizeof(float) * (size_t)m * (size_t)k);
	B = malloc(sizeof(float) * (size_t)n * (size_t)k);
	C = malloc(sizeof(float) * (size_t)m * (size_t)n);
	for (size_t i = 0; i < (size_t)m * (size_t)k; i++)
		A[i] = (float)(i % 7) * 0.1f;
	for (size_t i = 0; i < (size_t)n * (size_t)k; i++)
		B[i] = (float)(i % 5) * 0.1f;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, A, k, B, k, 0, C, n);
	for (int i = 0; i < reps; i++) {
		double t = bench_now();

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, A, k, B, k, 0, C, n);
		r[i] = 2.0 * m * n * k / (bench_now() - t) * 1e-9;
	}
	qsort(r, (size_t)reps, sizeof *r, bench_cmp);
	printf("sgemm %d %d %d %.2f\n", m, n, k, r[reps / 2]);
	free(A);
	free(B);
	free(C);
	return 0;
}
