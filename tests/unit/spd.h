/*
 * spd.h - test matrices for the solvers: a random orthogonal Q (the
 * Householder QR of a Gaussian matrix) and a graded SPD matrix Q·diag(λ)·Qᵀ
 * whose eigenvalues λ run from 1 down to 1/cond, log-spaced: a Gram as
 * ill-conditioned as the encoders see.
 */
#ifndef NV_TEST_SPD_H
#define NV_TEST_SPD_H

#include <math.h>
#include <stdlib.h>

#include <lapacke.h>

#include "linalg.h"
#include "tap.h"

static void spd_orthogonal(tap_rng *g, nv_mat *q, size_t n) __attribute__((unused));
static void spd_orthogonal(tap_rng *g, nv_mat *q, size_t n)
{
	double *tau = malloc(n * sizeof(double));

	nv_mat_zeros(q, n, n);
	for (size_t i = 0; i < n * n; i++)
		q->d[i] = rng_normal(g);
	LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)n, q->d, (lapack_int)n, tau);
	LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)n, (lapack_int)n, q->d,
		       (lapack_int)n, tau);
	free(tau);
}

static void spd_graded(tap_rng *g, nv_mat *a, size_t n, double cond) __attribute__((unused));
static void spd_graded(tap_rng *g, nv_mat *a, size_t n, double cond)
{
	nv_mat q, qd;

	spd_orthogonal(g, &q, n);
	nv_mat_copy(&qd, &q);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			qd.d[i * n + j] *= pow(cond, -(double)j / (double)(n - 1));
	nv_gemm_new(&qd, 0, &q, 1, a);
	nv_mat_free(&q);
	nv_mat_free(&qd);
}

#endif
