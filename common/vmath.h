/*
 * vmath.h - the forward's and the KL's exponentials over rows, vectorized.
 *
 * The attention's softmax, the SwiGLU activation and the scoring's
 * log-sum-exp and KL spend most of the forward's time outside the matrix
 * products in expf and exp, one element at a time.  These loops are
 * compiled apart (vmath.c: -ffast-math, OpenMP SIMD), so that GCC calls
 * glibc's vector exponentials (libmvec) 4, 8 or 16 lanes at a time, in a
 * clone for each of AVX-512, AVX2 and baseline x86-64 chosen at load time.
 *
 * What that changes: the sums are taken in a vector's lanes and then
 * across them, and libmvec's exponentials are within 4 ulp (glibc's scalar
 * ones within 1).  Results are the same bits for the same inputs on the same
 * machine (one clone, each row summed by one thread in a fixed order), not
 * across machines whose clones differ, as OpenBLAS's kernels already are
 * not.  The inputs must be finite: callers check what they score.
 */
#ifndef NV_VMATH_H
#define NV_VMATH_H

#include <stddef.h>

/* the largest of x[0..n), n ≥ 1 */
float nv_max_f(const float *x, size_t n);

/* r[0..n) ← softmax(r): exp(r − max) / Σ, the sum in f64; n ≥ 1 */
void nv_softmax_f(float *r, size_t n);

/* Σ exp(x[i] − shift) over n, in f64 */
double nv_sum_exp(const float *x, size_t n, double shift);

/* log Σ exp(x) over n ≥ 1: its max plus the log of nv_sum_exp from it */
double nv_lse(const float *x, size_t n);

/* Σ p_i (log p_i − log q_i), log p_i = p[i] − lse_p and log q_i = q[i] − lse_q */
double nv_kl_row(const float *p, double lse_p, const float *q, double lse_q, size_t n);

/* the same, and q[i] ← q_i − p_i (the KL's gradient in the logits q) */
double nv_kl_row_diff(const float *p, double lse_p, float *q, double lse_q, size_t n);

/* y = silu(g) ⊙ u, silu(g) = g / (1 + exp(−g)); y may be g or u */
void nv_silu_mul(const float *g, const float *u, float *y, size_t n);

/* dg = dm ⊙ u ⊙ silu'(g), du = dm ⊙ silu(g) */
void nv_silu_back(const float *g, const float *u, const float *dm, float *dg, float *du,
		  size_t n);

#endif
