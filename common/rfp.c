/* rfp.c - the g step's system in rectangular full packed form (see rfp.h) */
#include "rfp.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "err.h"
#include "mem.h"

size_t nv_rfp_idx(size_t nn, size_t i, size_t j)
{
	size_t k = nn / 2;

	return j < k ? (i + 1) + j * (nn + 1) : (j - k) + (i - k) * (nn + 1);
}

void nv_rfp_free(nv_rfp *c)
{
	free(c->a);
	memset(c, 0, sizeof(*c));
}

/* an order LAPACK's int sizes hold, and its array's entry count */
static int rfp_size(size_t n, size_t *nn, size_t *count)
{
	*nn = n + (n & 1);
	if (*nn >= INT_MAX) {
		nv_seterr("a system of order %zu is beyond LAPACK's int sizes", n);
		return -1;
	}
	*count = (*nn / 2) * (*nn + 1);
	return 0;
}

/* dsfrk's three blocks (B = [B1; B2], k rows each), in tiles: in row-major
 * terms of the array (ld nn + 1) the leading triangle C11 = B1·B1ᵀ is the
 * upper one at a + 1, the trailing C22 = B2·B2ᵀ the lower one at a, and
 * C21ᵀ = B1·B2ᵀ the block at a + 1 + k; b has nn rows (an odd order's last
 * one 0) */
static void rfp_blocks64(const double *b, size_t nn, size_t r, double *a)
{
	size_t k = nn / 2, ld = nn + 1;

	nv_dsyrk(1, 0, k, r, 1.0, b, r, 0.0, a + 1, ld);
	nv_dsyrk(0, 0, k, r, 1.0, b + k * r, r, 0.0, a, ld);
	nv_dgemm(0, 1, k, k, r, 1.0, b, r, b + k * r, r, 0.0, a + 1 + k, ld);
}

/* the same blocks from B rounded to f32, in f32 arithmetic, widened */
static int rfp_blocks32(const double *b, size_t n, size_t nn, size_t r, double *a)
{
	size_t k = nn / 2, ld = nn + 1, count = k * ld;
	float *bf = nv_calloc(nn * r, sizeof(float)), *af = nv_calloc(count, sizeof(float));

	if (!bf || !af) {
		free(bf);
		free(af);
		return -1;
	}
	nv_f32_round(b, n * r, bf);
	nv_ssyrk(1, 0, k, r, 1.0f, bf, r, 0.0f, af + 1, ld);
	nv_ssyrk(0, 0, k, r, 1.0f, bf + k * r, r, 0.0f, af, ld);
	nv_sgemm(0, 1, k, k, r, 1.0f, bf, r, bf + k * r, r, 0.0f, af + 1 + k, ld);
	nv_f64_widen(af, count, a);
	free(bf);
	free(af);
	return 0;
}

static int rfp_syrk(const nv_mat *b, nv_rfp *c, int f32)
{
	size_t n = b->r, r = b->c, nn, count;
	double *pad = NULL;
	const double *bd = b->d;

	memset(c, 0, sizeof(*c));
	if (r > INT_MAX)
		return nv_seterr("rank %zu is beyond BLAS's int sizes", r), -1;
	/* finite first: BLAS would carry a NaN into the system unremarked */
	if (rfp_size(n, &nn, &count) < 0 || nv_check_finite(b->d, n, r, 0, "factor entry") < 0 ||
	    !(c->a = nv_calloc(count ? count : 1, sizeof(double))))
		return -1;
	c->n = n;
	c->nn = nn;
	if (nn == 0)
		return 0;
	if (nn != n && r > 0 && !f32) { /* the odd order's last row: 0 */
		if (!(pad = nv_calloc(nn * r, sizeof(double)))) {
			nv_rfp_free(c);
			return -1;
		}
		memcpy(pad, b->d, n * r * sizeof(double));
		bd = pad;
	}
	if (r > 0) {
		nv_flops_add((uint64_t)n * n * r);
		if (!f32)
			rfp_blocks64(bd, nn, r, c->a);
		else if (rfp_blocks32(bd, n, nn, r, c->a) < 0) {
			nv_rfp_free(c);
			return -1;
		}
	}
	free(pad);
	if (nn != n)
		c->a[nv_rfp_idx(nn, n, n)] = 1.0;
	return 0;
}

int nv_rfp_syrk(const nv_mat *b, nv_rfp *c)
{
	return rfp_syrk(b, c, 0);
}

int nv_rfp_syrk32(const nv_mat *b, nv_rfp *c)
{
	return rfp_syrk(b, c, 1);
}

int nv_rfp_chol(nv_rfp *a, double shift)
{
	size_t nn = a->nn, count = (nn / 2) * (nn + 1);
	int info;

	for (size_t i = 0; i < count; i++)
		if (!isfinite(a->a[i]))
			return nv_seterr("system entry %zu (RFP order) = %g is not finite", i, a->a[i]), -1;
	if (!isfinite(shift))
		return nv_seterr("the diagonal shift %g is not finite", shift), -1;
	for (size_t i = 0; i < nn; i++)
		a->a[nv_rfp_idx(nn, i, i)] += shift;
	if (nn == 0)
		return 0;
	nv_flops_add((uint64_t)a->n * a->n * a->n / 3);
	nv_serial();
	info = nv_lapack_info(LAPACKE_dpftrf(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)nn, a->a));
	nv_unserial();
	if (info > 0)
		nv_seterr("system not positive definite (leading minor %d of %zu)", info, a->n);
	return info;
}

int nv_rfp_chol_solve(const nv_rfp *l, double *x)
{
	size_t n = l->n, nn = l->nn;
	double *y = x;
	int rc;

	if (nn == 0)
		return 0;
	if (nv_check_finite(x, 1, n, 0, "right-hand side entry") < 0)
		return -1;
	if (nn != n) {
		if (!(y = nv_calloc(nn, sizeof(double))))
			return -1;
		memcpy(y, x, n * sizeof(double));
	}
	nv_flops_add(2ull * n * n);
	nv_serial();
	rc = nv_lapack_info(LAPACKE_dpftrs(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)nn, 1, l->a, y,
					   (lapack_int)nn));
	nv_unserial();
	if (y != x) {
		memcpy(x, y, n * sizeof(double));
		free(y);
	}
	return rc < 0 ? -1 : 0;
}

void nv_rfp_hadamard32(nv_rfp *c, const nv_mat32 *h)
{
	size_t n = c->n, nn = c->nn, k = nn / 2;

	/* the leading columns j < k, A[i][j] for i ≥ j down column j of the
	 * layout, each times H[j][i] = H[i][j] along row j of H: both runs
	 * contiguous (2.5× faster than H's columns at order 1536) */
	for (size_t j = 0; j < k; j++) {
		double *col = c->a + 1 + j * (nn + 1); /* A[i][j] at col[i] */
		const float *hr = h->d + j * n;

		col[j] *= nv_mat32_at(h, j, j);
		for (size_t i = j + 1; i < n; i++)
			col[i] *= (double)hr[i];
	}
	/* the trailing triangle: A[k+p][k+q], q ≤ p, at row q of column p */
	for (size_t p = 0; p + k < n; p++) {
		const float *hr = h->d + (k + p) * n + k;
		double *col = c->a + p * (nn + 1);
		for (size_t q = 0; q < p; q++)
			col[q] *= (double)hr[q];
		col[p] *= nv_mat32_at(h, k + p, k + p);
	}
}

void nv_pchol_free(nv_pchol *f)
{
	free(f->p);
	f->p = NULL;
	f->n = 0;
}

/* row i of L (j ≤ i) into f32 at out; 1 when an entry is beyond f32 or
 * the diagonal one rounds to 0 */
static int keep_row(const nv_rfp *l, size_t i, float *out)
{
	for (size_t j = 0; j <= i; j++) {
		double v = l->a[nv_rfp_idx(l->nn, i, j)];
		if (!(fabs(v) <= FLT_MAX) || (j == i && !((float)v > 0.0f)))
			return 1;
		out[j] = (float)v;
	}
	return 0;
}

int nv_pchol_keep(const nv_rfp *l, nv_pchol *f)
{
	size_t n = l->n;

	nv_pchol_free(f);
	if (n > SIZE_MAX / (n + 1) || !(f->p = nv_malloc(n * (n + 1) / 2 + 1, sizeof(float))))
		return -1;
	f->n = n;
	for (size_t i = 0, k = 0; i < n; k += ++i)
		if (keep_row(l, i, f->p + k)) {
			nv_pchol_free(f);
			return 1;
		}
	return 0;
}

/* Σ_j row[j]·x[j] over j < len, in four fixed interleaved sums (the same bits always) */
static double dot_fd(const float *row, const double *x, size_t len)
{
	double s[4] = {0.0, 0.0, 0.0, 0.0};
	size_t j = 0;

	for (; j + 4 <= len; j += 4)
		for (int q = 0; q < 4; q++)
			s[q] += (double)row[j + q] * x[j + q];
	for (; j < len; j++)
		s[0] += (double)row[j] * x[j];
	return (s[0] + s[1]) + (s[2] + s[3]);
}

static void apply_portable(const nv_pchol *f, double *x)
{
	size_t n = f->n;
	const float *row = f->p;

	/* L̃·y = x, row by row */
	for (size_t i = 0; i < n; row += ++i)
		x[i] = (x[i] - dot_fd(row, x, i)) / (double)row[i];
	/* L̃ᵀ·z = y from the last row up: row i of L̃ is column i of L̃ᵀ */
	for (size_t i = n; i-- > 0;) {
		double xi;
		row -= i + 1;
		xi = x[i] / (double)row[i];
		x[i] = xi;
		for (size_t j = 0; j < i; j++)
			x[j] -= (double)row[j] * xi;
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PCHOL_AVX2 1

/* dot_fd with its four sums the four lanes of one register: the same
 * products added in the same order (no fused multiply-add), so the same bits */
__attribute__((target("avx2"))) static double dot_fd_avx2(const float *row, const double *x,
							    size_t len)
{
	__m256d s = _mm256_setzero_pd();
	double t[4];
	size_t j = 0;

	for (; j + 4 <= len; j += 4)
		s = _mm256_add_pd(s, _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + j)),
						   _mm256_loadu_pd(x + j)));
	_mm256_storeu_pd(t, s);
	for (; j < len; j++)
		t[0] += (double)row[j] * x[j];
	return (t[0] + t[1]) + (t[2] + t[3]);
}

/* apply_portable four entries a step: each entry's operations those of the
 * portable loops, in their order */
__attribute__((target("avx2"))) static void apply_avx2(const nv_pchol *f, double *x)
{
	size_t n = f->n;
	const float *row = f->p;

	for (size_t i = 0; i < n; row += ++i)
		x[i] = (x[i] - dot_fd_avx2(row, x, i)) / (double)row[i];
	for (size_t i = n; i-- > 0;) {
		double xi;
		size_t j = 0;
		row -= i + 1;
		xi = x[i] / (double)row[i];
		x[i] = xi;
		__m256d v = _mm256_set1_pd(xi);
		for (; j + 4 <= i; j += 4) {
			__m256d lj = _mm256_cvtps_pd(_mm_loadu_ps(row + j));
			_mm256_storeu_pd(x + j, _mm256_sub_pd(_mm256_loadu_pd(x + j),
							      _mm256_mul_pd(lj, v)));
		}
		for (; j < i; j++)
			x[j] -= (double)row[j] * xi;
	}
}
#else
#define PCHOL_AVX2 0
#endif

/* -1: not yet asked; 0 the portable loops; 1 AVX2 (threads that ask at
 * once all store the same answer) */
static atomic_int pchol_kernel = -1;

int nv_pchol_simd(int on)
{
	int now = 0;

#if PCHOL_AVX2
	if (on) {
		__builtin_cpu_init();
		now = __builtin_cpu_supports("avx2") ? 1 : 0;
	}
#endif
	return atomic_exchange_explicit(&pchol_kernel, now, memory_order_relaxed) == 1;
}

void nv_pchol_apply(const nv_pchol *f, double *x)
{
	size_t n = f->n;
	int k = atomic_load_explicit(&pchol_kernel, memory_order_relaxed);

	if (k < 0) {
		nv_pchol_simd(1);
		k = atomic_load_explicit(&pchol_kernel, memory_order_relaxed);
	}
#if PCHOL_AVX2
	if (k == 1)
		apply_avx2(f, x);
	else
#endif
		apply_portable(f, x);
	nv_flops_add(2ull * n * n);
}

/*
 * q = (A + shift·I)·p (order nn, p's padding 0) from the four blocks of the
 * layout: the leading triangle A11 and the trailing one A22 (stored as its
 * transpose's upper triangle) by dsymv, the block A21 between by dgemv
 */
static void rfp_times(const nv_rfp *a, double shift, const double *p, double *q)
{
	blasint k = (blasint)(a->nn / 2), ld = (blasint)(a->nn + 1);
	const double *a11 = a->a + 1, *a21 = a->a + 1 + k, *a22 = a->a;

	cblas_dsymv(CblasColMajor, CblasLower, k, 1.0, a11, ld, p, 1, 0.0, q, 1);
	cblas_dgemv(CblasColMajor, CblasTrans, k, k, 1.0, a21, ld, p + k, 1, 1.0, q, 1);
	cblas_dsymv(CblasColMajor, CblasUpper, k, 1.0, a22, ld, p + k, 1, 0.0, q + k, 1);
	cblas_dgemv(CblasColMajor, CblasNoTrans, k, k, 1.0, a21, ld, p, 1, 1.0, q + k, 1);
	cblas_daxpy((blasint)a->n, shift, p, 1, q, 1);
	nv_flops_add(2ull * a->n * a->n);
}

int nv_rfp_quad(const nv_rfp *a, const double *x, double *q)
{
	size_t n = a->n, nn = a->nn;
	double *v = nv_calloc(2 * nn + 1, sizeof(double));

	if (!v)
		return -1;
	memcpy(v, x, n * sizeof(double));
	if (nn)
		rfp_times(a, 0.0, v, v + nn);
	*q = 0.0;
	for (size_t i = 0; i < n; i++)
		*q += x[i] * v[nn + i];
	free(v);
	return 0;
}

/* PCG's steps from r = b − A·x, z = M⁻¹r (v: five vectors of nn, the
 * padding 0); 0 converged, 1 not */
static int pcg_steps(const nv_rfp *a, double shift, const nv_pchol *f, double bmb, double *x,
		     double *v, double tol, int maxit, int *its)
{
	size_t n = a->n, nn = a->nn;
	blasint bn = (blasint)n;
	double *r = v, *z = r + nn, *p = z + nn, *q = p + nn, rz;

	memcpy(p, z, n * sizeof(double));
	rz = cblas_ddot(bn, r, 1, z, 1);
	for (int k = 0;; k++) {
		double pq, alpha, rz1;

		if (rz <= tol * tol * bmb)
			return 0;
		if (k == maxit || !(rz > 0.0))
			return 1;
		rfp_times(a, shift, p, q);
		pq = cblas_ddot(bn, p, 1, q, 1);
		if (!(pq > 0.0))
			return 1;
		alpha = rz / pq;
		cblas_daxpy(bn, alpha, p, 1, x, 1);
		cblas_daxpy(bn, -alpha, q, 1, r, 1);
		memcpy(z, r, n * sizeof(double));
		nv_pchol_apply(f, z);
		rz1 = cblas_ddot(bn, r, 1, z, 1);
		for (size_t i = 0; i < n; i++)
			p[i] = z[i] + rz1 / rz * p[i];
		rz = rz1;
		*its = k + 1;
	}
}

int nv_pcg_rfp(const nv_rfp *a, double shift, const nv_pchol *f, const double *b, double *x,
	       double tol, int maxit, int *its)
{
	size_t n = a->n, nn = a->nn;
	double *v = nv_calloc(5 * nn + 1, sizeof(double)), *r, *z, *q, *t, bmb;
	int rc;

	*its = 0;
	if (!v)
		return -1;
	r = v;
	z = r + nn;
	q = z + 2 * nn;
	t = q + nn;
	nv_serial(); /* level-1 BLAS splits long sums over threads too */
	memcpy(z, b, n * sizeof(double));
	nv_pchol_apply(f, z);
	bmb = cblas_ddot((blasint)n, b, 1, z, 1);
	memcpy(t, x, n * sizeof(double));
	rfp_times(a, shift, t, q);
	for (size_t i = 0; i < n; i++)
		r[i] = b[i] - q[i];
	memcpy(z, r, n * sizeof(double));
	nv_pchol_apply(f, z);
	rc = pcg_steps(a, shift, f, bmb, x, v, tol, maxit, its);
	nv_unserial();
	free(v);
	return rc;
}
