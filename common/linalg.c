/* linalg.c - row-major f64 matrices over OpenBLAS/LAPACKE (see linalg.h) */
#include "linalg.h"

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cblas.h>
#include <lapacke.h>

#include "err.h"
#include "mem.h"

static _Atomic uint64_t flop_count;

uint64_t nv_flops(void)
{
	return atomic_load(&flop_count);
}

void nv_flops_reset(void)
{
	atomic_store(&flop_count, 0);
}

void nv_flops_add(uint64_t n)
{
	atomic_fetch_add(&flop_count, n);
}

static size_t ld(size_t c)
{
	return c ? c : 1;
}

int nv_check_finite(const double *a, size_t r, size_t c, char tri, const char *what)
{
	for (size_t i = 0; i < r; i++) {
		size_t j0 = tri == 'U' ? i : 0, j1 = tri == 'L' ? (i < c ? i + 1 : c) : c;
		for (size_t j = j0; j < j1; j++)
			if (!isfinite(a[i * c + j])) {
				if (r == 1)
					nv_seterr("%s %zu = %g is not finite", what, j, a[j]);
				else
					nv_seterr("%s (%zu,%zu) = %g is not finite", what, i, j,
						  a[i * c + j]);
				return -1;
			}
	}
	return 0;
}

int nv_mat_check_finite(const nv_mat *a, const char *what)
{
	return nv_check_finite(a->d, a->r, a->c, 0, what);
}

int nv_lapack_info(int info)
{
	if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR) {
		nv_seterr("out of memory for LAPACK's workspace");
		return -1;
	}
	assert(info >= 0);
	return (int)info;
}

/* LAPACK takes int sizes: a larger matrix is refused, not truncated */
static int lapack_dims(size_t r, size_t c)
{
	if (r > INT_MAX || c > INT_MAX) {
		nv_seterr("a %zu × %zu matrix is beyond LAPACK's int sizes", r, c);
		return -1;
	}
	return 0;
}

int nv_mat_zeros(nv_mat *a, size_t r, size_t c)
{
	size_t n;

	a->r = r;
	a->c = c;
	a->d = NULL;
	if (nv_mul(r, c, &n) < 0)
		return -1;
	a->d = nv_calloc(n ? n : 1, sizeof(double));
	return a->d ? 0 : -1;
}

int nv_mat_copy(nv_mat *dst, const nv_mat *src)
{
	if (nv_mat_zeros(dst, src->r, src->c) < 0)
		return -1;
	memcpy(dst->d, src->d, src->r * src->c * sizeof(double));
	return 0;
}

int nv_mat_eye(nv_mat *a, size_t n)
{
	if (nv_mat_zeros(a, n, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		a->d[i * n + i] = 1.0;
	return 0;
}

void nv_mat_free(nv_mat *a)
{
	free(a->d);
	a->d = NULL;
	a->r = a->c = 0;
}

void nv_gemm(double alpha, const nv_mat *a, int ta, const nv_mat *b, int tb, double beta,
	     nv_mat *c)
{
	size_t m = ta ? a->c : a->r, k = ta ? a->r : a->c;
	size_t kb = tb ? b->c : b->r, n = tb ? b->r : b->c;

	assert(k == kb && c->r == m && c->c == n);
	(void)kb;
	if (m == 0 || n == 0)
		return;
	if (k == 0) {
		for (size_t i = 0; i < m * n; i++)
			c->d[i] = beta == 0.0 ? 0.0 : beta * c->d[i];
		return;
	}
	nv_flops_add(2ull * m * n * k);
	nv_dgemm(ta, tb, m, n, k, alpha, a->d, ld(a->c), b->d, ld(b->c), beta, c->d, ld(c->c));
}

int nv_gemm_new(const nv_mat *a, int ta, const nv_mat *b, int tb, nv_mat *c)
{
	if (nv_mat_zeros(c, ta ? a->c : a->r, tb ? b->r : b->c) < 0)
		return -1;
	nv_gemm(1.0, a, ta, b, tb, 0.0, c);
	return 0;
}

#define F32_BLOCK 256

void nv_mat32_free(nv_mat32 *a)
{
	free(a->d);
	free(a->diag);
	memset(a, 0, sizeof(*a));
}

double nv_mat32_at(const nv_mat32 *a, size_t i, size_t j)
{
	return i == j && a->diag ? a->diag[i] : (double)a->d[i * a->c + j];
}

/* rows [i0, i0 + nb) widened into blk (nb × c) */
static void widen_rows(const nv_mat32 *a, size_t i0, size_t nb, double *blk)
{
	size_t c = a->c;

	for (size_t x = 0; x < nb * c; x++)
		blk[x] = a->d[i0 * c + x];
	for (size_t i = i0; a->diag && i < i0 + nb && i < c; i++)
		blk[(i - i0) * c + i] = a->diag[i];
}

int nv_mat32_widen(const nv_mat32 *a, nv_mat *out)
{
	if (nv_mat_zeros(out, a->r, a->c) < 0)
		return -1;
	widen_rows(a, 0, a->r, out->d);
	return 0;
}

int nv_gemm32a_new(const nv_mat32 *a, const nv_mat *b, nv_mat *c)
{
	size_t k = a->c;
	nv_mat blk = {0};

	assert(b->r == k);
	if (nv_mat_zeros(c, a->r, b->c) < 0 || nv_mat_zeros(&blk, F32_BLOCK, k) < 0) {
		nv_mat_free(c);
		return -1;
	}
	for (size_t i0 = 0; i0 < a->r; i0 += F32_BLOCK) {
		size_t nb = a->r - i0 < F32_BLOCK ? a->r - i0 : F32_BLOCK;
		nv_mat rows = { nb, k, blk.d }, out = { nb, b->c, c->d + i0 * b->c };
		widen_rows(a, i0, nb, blk.d);
		nv_gemm(1.0, &rows, 0, b, 0, 0.0, &out);
	}
	nv_mat_free(&blk);
	return 0;
}

void nv_f32_round(const double *x, size_t n, float *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = (float)x[i];
}

void nv_f64_widen(const float *x, size_t n, double *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = x[i];
}

int nv_gemm32s_new(const nv_mat32 *a, const nv_mat *b, nv_mat *c)
{
	size_t k = a->c, m = a->r, nc = b->c;
	float *bf = nv_malloc(k * nc + 1, sizeof(float)), *cf = nv_malloc(F32_BLOCK * nc + 1, sizeof(float));
	float *ab = a->diag ? nv_malloc(F32_BLOCK * k + 1, sizeof(float)) : NULL;

	assert(b->r == k);
	if (!bf || !cf || (a->diag && !ab) || nv_mat_zeros(c, m, nc) < 0) {
		free(bf), free(cf), free(ab);
		return -1;
	}
	nv_f32_round(b->d, k * nc, bf);
	nv_flops_add(2ull * m * nc * k);
	for (size_t i0 = 0; i0 < m; i0 += F32_BLOCK) {
		size_t nb = m - i0 < F32_BLOCK ? m - i0 : F32_BLOCK;
		const float *rows = a->d + i0 * k;
		if (ab) { /* d's own diagonal is no entry: 0 in the sums */
			memcpy(ab, rows, nb * k * sizeof(float));
			for (size_t i = i0; i < i0 + nb && i < k; i++)
				ab[(i - i0) * k + i] = 0.0f;
			rows = ab;
		}
		nv_sgemm(0, 0, nb, nc, k, 1.0f, rows, k, bf, nc, 0.0f, cf, nc);
		nv_f64_widen(cf, nb * nc, c->d + i0 * nc);
	}
	for (size_t i = 0; a->diag && i < m && i < k; i++) /* the diagonal's terms in f64 */
		for (size_t j = 0; j < nc; j++)
			c->d[i * nc + j] += a->diag[i] * b->d[i * nc + j];
	free(bf), free(cf), free(ab);
	return 0;
}

int nv_gemm_f32_new(const nv_mat *a, int ta, const nv_mat *b, nv_mat *c)
{
	size_t m = ta ? a->c : a->r, k = ta ? a->r : a->c, n = b->c;
	float *af = nv_malloc(a->r * a->c + 1, sizeof(float)), *bf = nv_malloc(k * n + 1, sizeof(float));
	float *cf = nv_malloc(m * n + 1, sizeof(float));
	int rc = -1;

	assert(b->r == k);
	if (!af || !bf || !cf || nv_mat_zeros(c, m, n) < 0)
		goto out;
	nv_f32_round(a->d, a->r * a->c, af);
	nv_f32_round(b->d, k * n, bf);
	if (m && n && k) {
		nv_flops_add(2ull * m * n * k);
		nv_sgemm(ta, 0, m, n, k, 1.0f, af, ld(a->c), bf, ld(n), 0.0f, cf, ld(n));
	}
	nv_f64_widen(cf, m * n, c->d);
	rc = 0;
out:
	free(af), free(bf), free(cf);
	return rc;
}

int nv_gemm32b(const nv_mat *a, const nv_mat32 *b, nv_mat *c)
{
	size_t k = b->r, m = a->r, n = b->c;
	double *blk = nv_malloc(k * F32_BLOCK, sizeof(double));

	assert(a->c == k && c->r == m && c->c == n);
	if (!blk)
		return -1;
	for (size_t j0 = 0; j0 < n; j0 += F32_BLOCK) {
		size_t nb = n - j0 < F32_BLOCK ? n - j0 : F32_BLOCK;
		for (size_t i = 0; i < k; i++)
			for (size_t j = 0; j < nb; j++)
				blk[i * nb + j] = b->d[i * n + j0 + j];
		for (size_t j = j0; b->diag && j < j0 + nb && j < k; j++)
			blk[j * nb + (j - j0)] = b->diag[j];
		if (m && nb && k) {
			nv_flops_add(2ull * m * nb * k);
			nv_dgemm(0, 0, m, nb, k, 1.0, a->d, ld(a->c), blk, nb, 0.0, c->d + j0, n);
		}
	}
	free(blk);
	return 0;
}

int nv_gemm32b_new(const nv_mat *a, const nv_mat32 *b, nv_mat *c)
{
	if (nv_mat_zeros(c, a->r, b->c) < 0)
		return -1;
	if (nv_gemm32b(a, b, c) < 0) {
		nv_mat_free(c);
		return -1;
	}
	return 0;
}

int nv_syrk_new(double alpha, const nv_mat *a, int ta, nv_mat *c)
{
	size_t n = ta ? a->c : a->r, k = ta ? a->r : a->c;

	if (nv_mat_zeros(c, n, n) < 0)
		return -1;
	if (n == 0 || k == 0)
		return 0;
	nv_flops_add((uint64_t)n * n * k);
	nv_dsyrk(0, ta, n, k, alpha, a->d, ld(a->c), 0.0, c->d, n);
	nv_sym_mirror(c);
	return 0;
}

void nv_syrk_t_lower(const nv_mat *a, double beta, nv_mat *c)
{
	size_t n = a->c, k = a->r;

	assert(c->r == n && c->c == n);
	if (n == 0)
		return;
	nv_flops_add((uint64_t)n * n * k);
	nv_dsyrk(0, 1, n, k, 1.0, a->d, ld(a->c), beta, c->d, n);
}

void nv_sym_mirror(nv_mat *c)
{
	size_t n = c->r;

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			c->d[i * n + j] = c->d[j * n + i];
}

int nv_qr_r_cm(double *q, size_t m, size_t k, nv_mat *r)
{
	double *tau = NULL;
	int info = -1;

	assert(m >= k);
	r->d = NULL;
	if (lapack_dims(m, k) < 0)
		goto out;
	for (size_t j = 0; j < k; j++)
		for (size_t i = 0; i < m; i++)
			if (!isfinite(q[i + j * m])) {
				nv_seterr("matrix entry (%zu,%zu) = %g is not finite", i, j, q[i + j * m]);
				goto out;
			}
	if (nv_mat_zeros(r, k, k) < 0 || !(tau = nv_malloc(k ? k : 1, sizeof(double))))
		goto out;
	nv_flops_add((uint64_t)(2 * m * k * k - 2 * k * k * k / 3));
	info = 0;
	if (k) {
		nv_serial();
		info = nv_lapack_info(LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)k,
						     q, (lapack_int)m, tau));
		nv_unserial();
	}
	for (size_t i = 0; info == 0 && i < k; i++)
		for (size_t j = i; j < k; j++)
			r->d[i * k + j] = q[i + j * m];
out:
	free(tau);
	if (info != 0 || nv_check_finite(r->d, k, k, 0, "R entry") < 0) {
		nv_mat_free(r);
		return -1;
	}
	return 0;
}

int nv_qr_r(const nv_mat *a, nv_mat *r)
{
	size_t m = a->r, k = a->c, mk = m * k;
	double *q = nv_malloc(mk ? mk : 1, sizeof(double));
	int rc;

	r->d = NULL;
	if (!q)
		return -1;
	/* a in column-major order, which dgeqrf takes: the one copy (LAPACKE's
	 * row-major call would transpose a copy of it, and back) */
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < k; j++)
			q[i + j * m] = a->d[i * k + j];
	rc = nv_qr_r_cm(q, m, k, r);
	free(q);
	return rc;
}

/*
 * a's lower triangle into its upper (up 0) or the upper into the lower,
 * the other triangle then zeroed (up 1), by blocks so that both triangles
 * are read and written a cache's width at a time.  A row-major lower
 * triangle mirrored into the upper is the same matrix's lower triangle in
 * column-major order: what LAPACKE's row-major calls make in a transposed
 * copy, here in place (the same values to the same routine, so the same
 * bits, without a second n × n array)
 */
#define MIRROR_BLOCK 64
static void mirror(nv_mat *a, int up)
{
	size_t n = a->r;
	double *d = a->d;

	for (size_t i0 = 0; i0 < n; i0 += MIRROR_BLOCK)
		for (size_t j0 = 0; j0 <= i0; j0 += MIRROR_BLOCK)
			for (size_t i = i0; i < n && i < i0 + MIRROR_BLOCK; i++)
				for (size_t j = j0; j < i && j < j0 + MIRROR_BLOCK; j++) {
					if (up) {
						d[j * n + i] = d[i * n + j];
					} else {
						d[i * n + j] = d[j * n + i];
						d[j * n + i] = 0.0;
					}
				}
}

int nv_potrf_lower(nv_mat *a)
{
	size_t n = a->r;
	int info;

	assert(a->c == n);
	if (n == 0)
		return 0;
	if (lapack_dims(n, n) < 0 || nv_check_finite(a->d, n, n, 'L', "matrix entry") < 0)
		return -1;
	nv_flops_add((uint64_t)n * n * n / 3);
	mirror(a, 1);
	nv_serial();
	info = nv_lapack_info(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, a->d,
					  (lapack_int)n));
	nv_unserial();
	if (info < 0)
		return -1;
	if (info > 0) {
		nv_seterr("not positive definite (leading minor %d of %zu)", info, n);
		return 1;
	}
	mirror(a, 0);
	return nv_check_finite(a->d, n, n, 'L', "Cholesky factor entry");
}

int nv_trtri_lower(nv_mat *a)
{
	size_t n = a->r;
	int info;

	assert(a->c == n);
	if (n == 0)
		return 0;
	if (lapack_dims(n, n) < 0 || nv_check_finite(a->d, n, n, 'L', "triangular factor entry") < 0)
		return -1;
	nv_flops_add((uint64_t)n * n * n / 3);
	mirror(a, 1);
	nv_serial();
	info = nv_lapack_info(LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (lapack_int)n, a->d,
					  (lapack_int)n));
	nv_unserial();
	if (info < 0)
		return -1;
	if (info > 0) {
		nv_seterr("singular triangular factor (diagonal %d of %zu)", info, n);
		return -1;
	}
	mirror(a, 0);
	return nv_check_finite(a->d, n, n, 'L', "inverse factor entry");
}

/* lam (k) descending and vec (n × k, row-major) from dstemr's ascending
 * pairs, the eigenvectors in the columns of the column-major z; each
 * eigenvector's sign fixed so that its entry of largest modulus (the first
 * such) is positive, a result of the matrix alone and not of the solver */
static void eig_descending(const double *asc, const double *z, size_t n, size_t k, double *lam,
			   double *vec)
{
	for (size_t c = 0; c < k; c++) {
		const double *zc = z + (k - 1 - c) * n;
		size_t big = 0;
		for (size_t i = 1; i < n; i++)
			if (fabs(zc[i]) > fabs(zc[big]))
				big = i;
		double s = zc[big] < 0 ? -1.0 : 1.0;
		lam[c] = asc[k - 1 - c];
		for (size_t i = 0; i < n; i++)
			vec[i * k + c] = s * zc[i];
	}
}

/* a's lower triangle mirrored into its upper, so that the row-major buffer
 * is the column-major matrix as well; the power of two that brings its
 * largest entry near 1 when that entry is far out of range (LAPACK's
 * drivers scale the same way), else 1 */
static double eig_prepare(nv_mat *a)
{
	size_t n = a->r;
	double big = 0, s = 1;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++) {
			a->d[j * n + i] = a->d[i * n + j];
			big = fmax(big, fabs(a->d[i * n + j]));
		}
	if (big > 0 && (big > 0x1p500 || big < 0x1p-500))
		s = ldexp(1.0, -ilogb(big));
	if (s != 1)
		for (size_t i = 0; i < n * n; i++)
			a->d[i] *= s;
	return s;
}

/* the top k eigenpairs of the column-major symmetric a (spent): dsytrd's
 * tridiagonal form, its pairs (all of them by dstedc's divide and conquer,
 * 0.55x dstemr's time at n = 384 here; k < n by dstemr), dormtr's
 * back-transform; asc (n: the first k the pairs' values, ascending), z
 * (n × k, column-major) */
static int eig_top_cm(double *a, size_t n, size_t k, double *asc, double *z)
{
	double *d = nv_malloc(n, sizeof(double)), *off = nv_malloc(n, sizeof(double)),
	       *tau = nv_malloc(n, sizeof(double));
	lapack_int *supp = nv_malloc(2 * k, sizeof(lapack_int)), found = 0;
	lapack_logical tryrac = 1;
	lapack_int nn = (lapack_int)n, kk = (lapack_int)k;
	int info = -1;

	if (d && off && tau && supp) {
		info = nv_lapack_info(LAPACKE_dsytrd(LAPACK_COL_MAJOR, 'L', nn, a, nn, d, off, tau));
		if (info == 0 && kk == nn) {
			info = nv_lapack_info(
				LAPACKE_dstedc(LAPACK_COL_MAJOR, 'I', nn, d, off, z, nn));
			memcpy(asc, d, n * sizeof(double));
			found = nn;
		} else if (info == 0) { /* 'I': bisection for the pairs wanted */
			info = nv_lapack_info(LAPACKE_dstemr(LAPACK_COL_MAJOR, 'V', 'I', nn, d, off,
							     0, 0, nn - kk + 1, nn, &found, asc,
							     z, nn, kk, supp, &tryrac));
		}
		if (info > 0)
			nv_seterr("symmetric eigensolver did not converge (%d)", info);
		if (info == 0 && found != kk) {
			nv_seterr("symmetric eigensolver found %d of %zu eigenpairs", (int)found, k);
			info = -1;
		}
		if (info == 0)
			info = nv_lapack_info(LAPACKE_dormtr(LAPACK_COL_MAJOR, 'L', 'L', 'N', nn, kk, a,
							     nn, tau, z, nn));
	}
	free(d);
	free(off);
	free(tau);
	free(supp);
	return info == 0 ? 0 : -1;
}

/*
 * the top k pairs of the row-major a (n × n, lower triangle read, spent);
 * spend, when given, is freed once LAPACK is done with it (a's owner: so
 * that E is not allocated beside it), and the eigenvectors go to E
 * allocated then (e) or to the caller's vec (e NULL)
 */
static int eig_top(double *a, size_t n, size_t k, nv_mat *spend, double *lam, nv_mat *e,
		   double *vec)
{
	double *asc = NULL, *z = NULL, s;
	int rc = -1;

	if (lapack_dims(n, n) < 0 || nv_check_finite(a, n, n, 'L', "matrix entry") < 0)
		return -1;
	/* dstemr writes its work into all n entries of its eigenvalue array */
	if (k && (!(asc = nv_malloc(n, sizeof(double))) || !(z = nv_malloc(n * k, sizeof(double))))) {
		rc = -1;
	} else if (k) {
		nv_mat tmp = { n, n, a };
		s = eig_prepare(&tmp);
		nv_flops_add(4ull * n * n * n / 3 + 2ull * n * n * k);
		nv_serial();
		rc = eig_top_cm(a, n, k, asc, z);
		nv_unserial();
		for (size_t i = 0; rc == 0 && i < k; i++)
			asc[i] /= s;
		if (rc == 0 && (nv_check_finite(asc, 1, k, 0, "eigenvalue") < 0 ||
				nv_check_finite(z, n, k, 0, "eigenvector entry") < 0))
			rc = -1;
	} else {
		rc = 0;
	}
	if (spend)
		nv_mat_free(spend);
	if (rc == 0 && e && nv_mat_zeros(e, n, k) < 0)
		rc = -1;
	if (rc == 0 && k)
		eig_descending(asc, z, n, k, lam, e ? e->d : vec);
	free(asc);
	free(z);
	return rc;
}

int nv_sym_eig_top(nv_mat *a, size_t k, double *lam, nv_mat *e)
{
	size_t n = a->r;
	int rc;

	assert(a->c == n && k <= n);
	*e = (nv_mat){ 0 };
	rc = eig_top(a->d, n, k, a, lam, e, NULL);
	a->r = a->c = n; /* the dims stay: a caller may still read them */
	if (rc != 0)
		nv_mat_free(e);
	return rc;
}

int nv_sym_eig_top_in(double *a, size_t n, size_t k, double *lam, double *vec)
{
	assert(k <= n);
	return eig_top(a, n, k, NULL, lam, NULL, vec);
}

int nv_sym_eig(nv_mat *a, double *lam, nv_mat *e)
{
	return nv_sym_eig_top(a, a->r, lam, e);
}

/* an n × n matrix transposed in place */
static void transpose_sq(double *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			double t = x[i * n + j];
			x[i * n + j] = x[j * n + i];
			x[j * n + i] = t;
		}
}

/*
 * dgesdd on column-major buffers of our own, the call LAPACKE's row-major
 * dgesdd makes after transposing (the same workspace size, so the same
 * bits), without its three transposed copies: A column-major in ac (n × n,
 * destroyed), U, Vᵀ and the workspace, then U and Vᵀ transposed in place to
 * row-major
 */
static int svd_sq(double *ac, size_t n, nv_mat *u, nv_mat *vt, double *s)
{
	double wq = 0.0, *work = NULL;
	lapack_int *iwork = nv_malloc(8 * ld(n), sizeof(lapack_int)), lw, info;
	int rc = -1;

	if (!iwork || nv_mat_zeros(u, n, n) < 0 || nv_mat_zeros(vt, n, n) < 0)
		goto out;
	info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'A', (lapack_int)n, (lapack_int)n, ac,
				   (lapack_int)ld(n), s, u->d, (lapack_int)ld(n), vt->d,
				   (lapack_int)ld(n), &wq, -1, iwork);
	lw = (lapack_int)wq;
	if (info != 0) {
		nv_seterr("the singular value decomposition's workspace query failed (%d)", (int)info);
		goto out;
	}
	if (!(work = nv_malloc(lw > 0 ? (size_t)lw : 1, sizeof(double))))
		goto out;
	info = nv_lapack_info(LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'A', (lapack_int)n, (lapack_int)n,
						  ac, (lapack_int)ld(n), s, u->d, (lapack_int)ld(n),
						  vt->d, (lapack_int)ld(n), work, lw, iwork));
	if (info > 0)
		nv_seterr("singular value decomposition did not converge (%d)", (int)info);
	if (info == 0) {
		transpose_sq(u->d, n);
		transpose_sq(vt->d, n);
		rc = 0;
	}
out:
	free(iwork);
	free(work);
	if (rc < 0) {
		nv_mat_free(u);
		nv_mat_free(vt);
	}
	return rc;
}

/* Q = U·Vᵀ from A column-major in ac (n × n, destroyed) */
static int polar_cm(double *ac, size_t n, nv_mat *q)
{
	nv_mat u = {0}, vt = {0};
	double *s = nv_malloc(n ? n : 1, sizeof(double));
	int rc = -1;

	if (!s)
		return -1;
	nv_flops_add(21ull * n * n * n);
	nv_serial();
	rc = svd_sq(ac, n, &u, &vt, s);
	nv_unserial();
	if (rc < 0 || nv_gemm_new(&u, 0, &vt, 0, q) < 0) {
		rc = -1;
		goto out;
	}
	rc = nv_mat_check_finite(q, "polar factor entry");
	if (rc < 0)
		nv_mat_free(q);
out:
	free(s);
	nv_mat_free(&u);
	nv_mat_free(&vt);
	return rc;
}

/*
 * Q = A·(AᵀA)^{-1/2} from the eigenpairs of S = AᵀA (a row-major n × n,
 * not changed): S by dsyrk, its pairs by eig_top_cm (dsytrd, MRRR, dormtr),
 * Y = V·Λ^{-1/2}·Vᵀ by dsyrk of V·Λ^{-1/4}, Q = A·Y; S's buffer holds Y.
 * 3n² doubles at most with a's own, where dgesdd held about 6n².  Squaring
 * A squares its condition: the error in Q is about n·ε·κ², so a matrix with
 * λ_min(S) < NV_POLAR_EIG_MIN·λ_max(S) (κ above 1e4), or an S not finite,
 * returns 1 (the caller's SVD then); 0 with q; -1 with reason
 */
static int polar_eig(const nv_mat *a, nv_mat *q)
{
	size_t n = a->r;
	nv_mat s = {0}, zt;
	double *asc = NULL, *z = NULL;
	int rc = -1;

	if (nv_mat_zeros(&s, n, n) < 0 || !(asc = nv_malloc(n, sizeof(double))) ||
	    !(z = nv_malloc(n * n, sizeof(double))))
		goto out;
	nv_syrk_t_lower(a, 0.0, &s);
	nv_sym_mirror(&s);
	rc = 1;
	if (nv_check_finite(s.d, n, n, 0, "AᵀA entry") < 0)
		goto out; /* A's scale beyond the squares': the SVD scales */
	nv_flops_add(4ull * n * n * n / 3 + 2ull * n * n * n);
	rc = eig_top_cm(s.d, n, n, asc, z) < 0 ? -1 : 0;
	if (rc == 0 && !(asc[n - 1] > 0 && asc[0] >= NV_POLAR_EIG_MIN * asc[n - 1] &&
			 isfinite(asc[n - 1])))
		rc = 1;
	if (rc != 0)
		goto out;
	for (size_t k = 0; k < n; k++) /* z's column k scaled by λ_k^{-1/4} */
		cblas_dscal((int)n, 1.0 / sqrt(sqrt(asc[k])), z + k * n, 1);
	zt = (nv_mat){ n, n, z }; /* row-major, z's buffer is Vᵀ: (Vᵀ)ᵀ·Vᵀ = V·Vᵀ */
	nv_syrk_t_lower(&zt, 0.0, &s);
	nv_sym_mirror(&s);
	free(z);
	z = NULL;
	rc = nv_gemm_new(a, 0, &s, 0, q);
	if (rc == 0 && nv_mat_check_finite(q, "polar factor entry") < 0) {
		nv_mat_free(q);
		rc = -1;
	}
out:
	nv_mat_free(&s);
	free(asc);
	free(z);
	return rc;
}

int nv_polar(const nv_mat *a, nv_mat *q)
{
	nv_mat c = {0};

	*q = (nv_mat){ 0 };
	if (nv_mat_copy(&c, a) < 0)
		return -1;
	return nv_polar_take(&c, q, NULL); /* which checks the entries */
}

int nv_polar_svd(const nv_mat *a, nv_mat *q)
{
	size_t n = a->r;
	nv_mat ac = {0};
	int rc;

	assert(a->c == n);
	*q = (nv_mat){ 0 };
	if (lapack_dims(n, n) < 0 || nv_check_finite(a->d, n, n, 0, "matrix entry") < 0 ||
	    nv_mat_zeros(&ac, n, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			ac.d[j * n + i] = a->d[i * n + j];
	rc = polar_cm(ac.d, n, q);
	nv_mat_free(&ac);
	return rc;
}

int nv_polar_take(nv_mat *a, nv_mat *q, int *by_svd)
{
	size_t n = a->r;
	int rc = -1;

	assert(a->c == n);
	*q = (nv_mat){ 0 };
	if (by_svd)
		*by_svd = 0;
	/* on one thread: OpenBLAS's threaded dgemm gave other bits at 2 threads
	 * than at 1 on square products of order 200 and 300 (0.3.21, every
	 * kernel tried), and another job's nv_serial changes the count under a
	 * product; the products are a third of the route's work */
	if (lapack_dims(n, n) == 0 && nv_check_finite(a->d, n, n, 0, "matrix entry") == 0) {
		nv_serial();
		rc = polar_eig(a, q);
		nv_unserial();
	}
	if (rc == 1) {
		if (by_svd)
			*by_svd = 1;
		transpose_sq(a->d, n); /* a's buffer is now A column-major */
		rc = polar_cm(a->d, n, q);
	}
	nv_mat_free(a);
	return rc;
}

/* the checks of nv_posv_rm's inputs */
static int posv_check(const double *a, size_t n, char uplo, double shift, const double *x)
{
	if (lapack_dims(n, n) < 0 || nv_check_finite(a, n, n, uplo, "matrix entry") < 0 ||
	    nv_check_finite(x, 1, n, 0, "right-hand side entry") < 0)
		return -1;
	if (!isfinite(shift)) {
		nv_seterr("the diagonal shift %g is not finite", shift);
		return -1;
	}
	return 0;
}

/* x = (W + shift·I)⁻¹·x by dposv on column-major w (n × n, spent) */
static int posv_cm(double *w, size_t n, char uplo, double shift, double *x)
{
	int info;

	for (size_t i = 0; i < n; i++)
		w[i * n + i] += shift;
	nv_serial();
	info = nv_lapack_info(LAPACKE_dposv(LAPACK_COL_MAJOR, uplo, (lapack_int)n, 1, w,
					 (lapack_int)n, x, (lapack_int)n));
	nv_unserial();
	if (info == 0 && nv_check_finite(x, 1, n, 0, "solution entry") < 0)
		return -1;
	return info;
}

/*
 * LAPACKE's row-major dposv would copy the triangle into column-major order
 * element by element (LAPACKE_dtr_trans, 10% of a 576x1536 encode) and copy
 * the factor back.  OpenBLAS's blocked transpose gives LAPACK the same
 * column-major triangle (row-major 'L' is column-major 'L' of the transpose),
 * so the factor and the solution are the same bits (nv_solve_spd_take
 * transposes in place: the same values again).
 */
int nv_posv_rm(const double *a, size_t n, char uplo, double shift, double *w, double *x)
{
	if (posv_check(a, n, uplo, shift, x) < 0)
		return -1;
	cblas_domatcopy(CblasRowMajor, CblasTrans, (blasint)n, (blasint)n, 1.0, a, (blasint)n, w,
			(blasint)n);
	return posv_cm(w, n, uplo, shift, x);
}

int nv_posv_many(const nv_mat *a, double shift, nv_mat *x)
{
	size_t n = a->r;
	nv_mat w;
	int info;

	assert(a->c == n && x->r == n);
	if (lapack_dims(n, x->c) < 0 || nv_check_finite(a->d, n, n, 'U', "matrix entry") < 0 ||
	    nv_mat_check_finite(x, "right-hand side entry") < 0)
		return -1;
	if (!isfinite(shift)) {
		nv_seterr("the diagonal shift %g is not finite", shift);
		return -1;
	}
	if (nv_mat_copy(&w, a) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		w.d[i * n + i] += shift;
	/* the upper triangle of row-major A is the lower one of the same matrix column-major */
	nv_serial();
	info = nv_lapack_info(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)n, (lapack_int)x->c,
					 w.d, (lapack_int)n, x->d, (lapack_int)x->c));
	nv_unserial();
	nv_mat_free(&w);
	nv_flops_add((uint64_t)n * n * n / 3 + 2ull * n * n * x->c);
	if (info > 0)
		nv_seterr("system not positive definite (leading minor %d of %zu)", info, n);
	if (info != 0)
		return -1;
	return nv_mat_check_finite(x, "solution entry");
}

int nv_solve_spd_take(nv_mat *a, const double *b, double *x, double ridge)
{
	size_t n = a->r;
	double tr = 0.0, shift;
	int info;

	assert(a->c == n);
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		tr += a->d[i * n + i];
	shift = ridge * (tr / (double)n);
	memcpy(x, b, n * sizeof(double));
	nv_flops_add((uint64_t)n * n * n / 3 + 4ull * n * n);
	if (posv_check(a->d, n, 'L', shift, x) < 0)
		return -1;
	transpose_sq(a->d, n); /* the transpose nv_posv_rm copies, made in place */
	info = posv_cm(a->d, n, 'L', shift, x);
	if (info > 0) {
		nv_seterr("system not positive definite (leading minor %d of %zu)", info, n);
		return 1;
	}
	return info;
}

int nv_solve_spd(const nv_mat *a, const double *b, double *x, double ridge)
{
	nv_mat w;
	int rc;

	if (a->r == 0)
		return 0;
	if (nv_mat_copy(&w, a) < 0)
		return -1;
	rc = nv_solve_spd_take(&w, b, x, ridge);
	nv_mat_free(&w);
	return rc;
}

/* our thread count (0: not yet read from OpenBLAS) and the serial
 * sections open, under one lock */
static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static int threads_n, serial_depth;

/* OpenBLAS's stop for its own pool of threads (exported by its threaded
 * builds, absent from the serial one, hence weak) */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/*
 * the first call takes OpenBLAS's count for ours and holds OpenBLAS to one;
 * its pool, idle from then on, is let go: each of its threads spins on
 * sched_yield some 0.1 s after its last job (here: after it starts) before
 * it sleeps, a core's worth taken from our threads in every tool run
 */
static void threads_init(void)
{
	if (threads_n == 0) {
		int n = openblas_get_num_threads();

		threads_n = n < 1 ? 1 : n;
		openblas_set_num_threads(1);
		if (blas_thread_shutdown_)
			blas_thread_shutdown_();
	}
}

void nv_set_threads(int n)
{
	pthread_mutex_lock(&threads_mu);
	threads_init();
	threads_n = n < 1 ? 1 : n;
	pthread_mutex_unlock(&threads_mu);
}

int nv_get_threads(void)
{
	int n;

	pthread_mutex_lock(&threads_mu);
	threads_init();
	n = serial_depth ? 1 : threads_n;
	pthread_mutex_unlock(&threads_mu);
	return n;
}

/* cores of OpenBLAS 0.3 whose kernels use neither AVX2 nor FMA, and those
 * whose kernels use AVX2 and FMA but not AVX-512 */
static const char *const generic_cores[] = { "Prescott", "Core2", "Penryn", "Dunnington",
					     "Nehalem", "Atom", "Sandybridge", "Katmai",
					     "Coppermine", "Northwood", "Banias", NULL };
static const char *const avx2_cores[] = { "Haswell", "Zen", "Excavator", NULL };

static int core_in(const char *core, const char *const *names)
{
	for (; *names; names++)
		if (!strcasecmp(core, *names))
			return 1;
	return 0;
}

const char *nv_blas_core(char *hint, size_t cap)
{
	const char *core = openblas_get_corename(), *set = getenv("OPENBLAS_CORETYPE");
	const char *better = NULL;
	int generic;

	core = core ? core : "unknown";
	if (cap)
		hint[0] = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
		better = "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		better = "Haswell";
#endif
	if (!better || !cap)
		return core;
	/* generic kernels on a CPU OpenBLAS does not know, AVX2 ones on one
	 * newer than the library (an AMD Zen 4 taken for a Zen), or either
	 * chosen by an OPENBLAS_CORETYPE that the environment sets */
	generic = core_in(core, generic_cores);
	if (generic || (core_in(core, avx2_cores) && !strcmp(better, "SkylakeX")))
		snprintf(hint, cap,
			 "OpenBLAS runs its %s %s kernels%s on a CPU with %s: "
			 "OPENBLAS_CORETYPE=%s runs its products %s",
			 generic ? "generic" : "AVX2", core,
			 set && *set ? " (OPENBLAS_CORETYPE chose them)" : "",
			 strcmp(better, "SkylakeX") ? "AVX2" : "AVX-512", better,
			 generic ? "several times faster" : "up to twice as fast");
	return core;
}

void nv_serial(void)
{
	pthread_mutex_lock(&threads_mu);
	threads_init();
	serial_depth++;
	pthread_mutex_unlock(&threads_mu);
}

void nv_unserial(void)
{
	pthread_mutex_lock(&threads_mu);
	serial_depth--;
	pthread_mutex_unlock(&threads_mu);
}

double nv_dot_acc(double s, const double *a, const double *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

double nv_dot_all(const nv_mat *a, const nv_mat *b)
{
	assert(a->r == b->r && a->c == b->c);
	return nv_dot_acc(0.0, a->d, b->d, a->r * a->c);
}
