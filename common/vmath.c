/* vmath.c - vectorized exponentials over rows (see vmath.h); built with -ffast-math */
#include "vmath.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VM_CLONES
#endif

VM_CLONES float nv_max_f(const float *x, size_t n)
{
	float mx = x[0];

#pragma omp simd reduction(max : mx)
	for (size_t i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	return mx;
}

VM_CLONES void nv_softmax_f(float *r, size_t n)
{
	float mx = nv_max_f(r, n);
	double sum = 0;

#pragma omp simd reduction(+ : sum)
	for (size_t i = 0; i < n; i++) {
		r[i] = expf(r[i] - mx);
		sum += r[i];
	}
	float inv = (float)(1.0 / sum);

#pragma omp simd
	for (size_t i = 0; i < n; i++)
		r[i] *= inv;
}

VM_CLONES double nv_sum_exp(const float *x, size_t n, double shift)
{
	double sum = 0;

#pragma omp simd reduction(+ : sum)
	for (size_t i = 0; i < n; i++)
		sum += exp((double)x[i] - shift);
	return sum;
}

double nv_lse(const float *x, size_t n)
{
	float mx = nv_max_f(x, n);

	return mx + log(nv_sum_exp(x, n, mx));
}

VM_CLONES double nv_kl_row(const float *p, double lse_p, const float *q, double lse_q, size_t n)
{
	double kl = 0, shift = lse_q - lse_p;

#pragma omp simd reduction(+ : kl)
	for (size_t i = 0; i < n; i++) /* log p − log q as p − q + shift: 0 where p = q */
		kl += exp(p[i] - lse_p) * (((double)p[i] - q[i]) + shift);
	return kl;
}

VM_CLONES double nv_kl_row_diff(const float *p, double lse_p, float *q, double lse_q, size_t n)
{
	double kl = 0, shift = lse_q - lse_p;

#pragma omp simd reduction(+ : kl)
	for (size_t i = 0; i < n; i++) {
		double e = exp(p[i] - lse_p);

		kl += e * (((double)p[i] - q[i]) + shift);
		q[i] = (float)(exp(q[i] - lse_q) - e);
	}
	return kl;
}

VM_CLONES void nv_silu_mul(const float *g, const float *u, float *y, size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++)
		y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

VM_CLONES void nv_silu_back(const float *g, const float *u, const float *dm, float *dg, float *du,
			    size_t n)
{
#pragma omp simd
	for (size_t i = 0; i < n; i++) {
		float s = 1.0f / (1.0f + expf(-g[i]));

		dg[i] = dm[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
		du[i] = dm[i] * (g[i] / (1.0f + expf(-g[i])));
	}
}
