/* test-linalg.c - the f64 BLAS/LAPACK wrappers against plain loops (TAP) */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cblas.h>
#include <lapacke.h>

#include "err.h"
#include "linalg.h"
#include "par.h"
#include "spd.h"
#include "synth.h"
#include "tap.h"

static tap_rng rng = {42};

static void fill(nv_mat *a, size_t r, size_t c)
{
	nv_mat_zeros(a, r, c);
	for (size_t i = 0; i < r * c; i++)
		a->d[i] = rng_normal(&rng);
}

static double at(const nv_mat *a, int t, size_t i, size_t j)
{
	return t ? a->d[j * a->c + i] : a->d[i * a->c + j];
}

/* max |op(A)·op(B) − C| by the textbook triple loop */
static double gemm_gap(const nv_mat *a, int ta, const nv_mat *b, int tb, const nv_mat *c)
{
	size_t k = ta ? a->r : a->c;
	double gap = 0;

	for (size_t i = 0; i < c->r; i++)
		for (size_t j = 0; j < c->c; j++) {
			double s = 0;
			for (size_t x = 0; x < k; x++)
				s += at(a, ta, i, x) * at(b, tb, x, j);
			gap = fmax(gap, fabs(s - c->d[i * c->c + j]));
		}
	return gap;
}

static void test_gemm(void)
{
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			nv_mat a, b, c;
			fill(&a, ta ? 7 : 5, ta ? 5 : 7);
			fill(&b, tb ? 3 : 7, tb ? 7 : 3);
			nv_flops_reset();
			nv_gemm_new(&a, ta, &b, tb, &c);
			is_int((long long)c.r * 10 + (long long)c.c, 53, "gemm ta=%d tb=%d shape", ta, tb);
			/* sums of 7 products of O(1) normals: 1e-12 absolute */
			ok(gemm_gap(&a, ta, &b, tb, &c) < 1e-12, "gemm ta=%d tb=%d matches loops", ta, tb);
			is_int((long long)nv_flops(), 2 * 5 * 3 * 7, "gemm counts 2mnk flops");
			nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&c);
		}
}

/*
 * nv_syrk_t_lower over row blocks of A (3 of 4, 4 and 3 rows), beta 0 then
 * 1, mirrored by nv_sym_mirror: Aᵀ·A to 1e-12 (a sum of 11 products in a
 * different order), the upper triangle untouched before the mirror
 */
static void test_syrk_blocks(void)
{
	nv_mat a, c;
	int untouched = 1;

	fill(&a, 11, 5);
	nv_mat_zeros(&c, 5, 5);
	for (size_t i = 0; i < 25; i++)
		c.d[i] = 99.0;
	for (size_t i0 = 0, k = 0; i0 < 11; i0 += 4, k++) {
		nv_mat v = {i0 + 4 <= 11 ? 4 : 11 - i0, 5, a.d + i0 * 5};
		nv_syrk_t_lower(&v, k ? 1.0 : 0.0, &c);
	}
	for (size_t i = 0; i < 5; i++)
		for (size_t j = i + 1; j < 5; j++)
			untouched &= c.d[i * 5 + j] == 99.0;
	ok(untouched, "syrk by blocks: the upper triangle untouched");
	nv_sym_mirror(&c);
	ok(gemm_gap(&a, 1, &a, 0, &c) < 1e-12, "syrk by blocks, mirrored: Aᵀ·A");
	nv_mat_free(&a), nv_mat_free(&c);
}

static void test_syrk(void)
{
	nv_mat a, c, ref;

	fill(&a, 6, 9);
	nv_syrk_new(1.0, &a, 0, &c);
	nv_gemm_new(&a, 0, &a, 1, &ref);
	ok(gemm_gap(&a, 0, &a, 1, &c) < 1e-12, "syrk A·Aᵀ fills both triangles");
	nv_mat_free(&c), nv_mat_free(&ref);
	nv_syrk_new(1.0, &a, 1, &c);
	ok(c.r == 9 && gemm_gap(&a, 1, &a, 0, &c) < 1e-12, "syrk Aᵀ·A (9 × 9)");
	nv_mat_free(&a), nv_mat_free(&c);
	test_syrk_blocks();
}

/* a well-conditioned SPD matrix: X·Xᵀ/k + I */
static void spd(nv_mat *s, size_t n)
{
	nv_mat x;

	fill(&x, n, 2 * n);
	nv_syrk_new(1.0 / (double)(2 * n), &x, 0, s);
	for (size_t i = 0; i < n; i++)
		s->d[i * n + i] += 1.0;
	nv_mat_free(&x);
}

static void test_chol(void)
{
	nv_mat a, l, li, p;
	int upper0 = 1;

	spd(&a, 12);
	nv_mat_copy(&l, &a);
	is_int(nv_potrf_lower(&l), 0, "potrf of an SPD matrix");
	for (size_t i = 0; i < 12; i++)
		for (size_t j = i + 1; j < 12; j++)
			upper0 &= l.d[i * 12 + j] == 0.0;
	ok(upper0, "the factor is lower triangular");
	ok(gemm_gap(&l, 0, &l, 1, &a) < 1e-12, "L·Lᵀ = A");
	nv_mat_copy(&li, &l);
	is_int(nv_trtri_lower(&li), 0, "trtri");
	nv_gemm_new(&l, 0, &li, 0, &p);
	for (size_t i = 0; i < 12; i++)
		p.d[i * 12 + i] -= 1.0;
	{
		double g = 0;
		for (size_t i = 0; i < 144; i++)
			g = fmax(g, fabs(p.d[i]));
		ok(g < 1e-12, "L·L⁻¹ = I (max gap %.2g)", g);
	}
	a.d[5 * 12 + 5] = -1.0;
	nv_mat_free(&l);
	nv_mat_copy(&l, &a);
	is_int(nv_potrf_lower(&l), 1, "potrf refuses an indefinite matrix (1: not positive definite)");
	ok(strstr(nv_err(), "not positive definite") != NULL, "reason: %s", nv_err());
	nv_mat_free(&a), nv_mat_free(&l), nv_mat_free(&li), nv_mat_free(&p);
}

static void test_eig(void)
{
	nv_mat a, a2, e, ae;
	double lam[10], gap = 0, orth = 0;
	int desc = 1;

	spd(&a, 10);
	nv_mat_copy(&a2, &a);
	for (size_t i = 0; i < 10; i++) /* the upper triangle is not read */
		for (size_t j = i + 1; j < 10; j++)
			a2.d[i * 10 + j] = NAN;
	is_int(nv_sym_eig(&a2, lam, &e), 0, "dsyevd");
	nv_mat_free(&a2);
	for (int k = 1; k < 10; k++)
		desc &= lam[k] <= lam[k - 1];
	ok(desc, "eigenvalues descending (%.4g .. %.4g)", lam[0], lam[9]);
	nv_gemm_new(&a, 0, &e, 0, &ae);
	for (size_t i = 0; i < 10; i++)
		for (size_t k = 0; k < 10; k++) {
			double s = 0;
			gap = fmax(gap, fabs(ae.d[i * 10 + k] - lam[k] * e.d[i * 10 + k]));
			for (size_t j = 0; j < 10; j++)
				s += e.d[j * 10 + i] * e.d[j * 10 + k];
			orth = fmax(orth, fabs(s - (i == k)));
		}
	ok(gap < 1e-12, "A·e_k = λ_k·e_k (gap %.2g)", gap);
	ok(orth < 1e-12, "eigenvectors orthonormal (gap %.2g)", orth);
	nv_mat_free(&a), nv_mat_free(&e), nv_mat_free(&ae);
}

/* A = Q·diag(λ)·Qᵀ with λ_i = scale·(1 + i) (distinct, known): the top k
 * pairs of nv_sym_eig_top against λ and Q's columns (up to sign), to
 * 64·n·ε relative to λ_max (a backward-stable tridiagonal reduction and
 * MRRR's accuracy on gaps of 1/n of the spectrum); the sign convention
 * exact; a's buffer spent; the same pairs as the whole decomposition's */
static void eig_top_case(size_t n, size_t k, double scale)
{
	nv_mat q, qs, a, a2, e, all;
	double *lam = malloc(n * sizeof(double)), *lall = malloc(n * sizeof(double));
	double tol = 64.0 * (double)n * DBL_EPSILON, gl = 0, gv = 0, gall = 0;
	int sign = 1;

	spd_orthogonal(&rng, &q, n);
	nv_mat_copy(&qs, &q);
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < n; c++)
			qs.d[i * n + c] *= scale * (double)(1 + c);
	nv_gemm_new(&qs, 0, &q, 1, &a);
	nv_mat_copy(&a2, &a);
	is_int(nv_sym_eig_top(&a, k, lam, &e), 0, "top %zu of %zu, scale %g", k, n, scale);
	ok(a.d == NULL && e.r == n && e.c == k, "a spent, E %zu × %zu", e.r, e.c);
	for (size_t c = 0; c < k; c++) {
		size_t col = n - 1 - c, big = 0;
		double dot = 0;
		gl = fmax(gl, fabs(lam[c] - scale * (double)(n - c)) / (scale * (double)n));
		for (size_t i = 0; i < n; i++) {
			dot += e.d[i * k + c] * q.d[i * n + col];
			if (fabs(e.d[i * k + c]) > fabs(e.d[big * k + c]))
				big = i;
		}
		gv = fmax(gv, 1.0 - fabs(dot));
		sign &= e.d[big * k + c] > 0;
	}
	ok(gl < tol, "eigenvalues against λ (gap %.2g, tolerance %.2g)", gl, tol);
	ok(gv < tol, "eigenvectors against Q's columns up to sign (gap %.2g)", gv);
	ok(sign, "each column's entry of largest modulus positive");
	is_int(nv_sym_eig(&a2, lall, &all), 0, "the whole decomposition");
	for (size_t c = 0; c < k; c++) {
		gall = fmax(gall, fabs(lall[c] - lam[c]) / (scale * (double)n));
		for (size_t i = 0; i < n; i++)
			gall = fmax(gall, fabs(all.d[i * n + c] - e.d[i * k + c]));
	}
	ok(gall < tol, "the top %zu pairs are the whole decomposition's (gap %.2g)", k, gall);
	nv_mat_free(&q), nv_mat_free(&qs), nv_mat_free(&a), nv_mat_free(&a2);
	nv_mat_free(&e), nv_mat_free(&all);
	free(lam), free(lall);
}

static void test_eig_top(void)
{
	nv_mat a, e;
	double lam[1];

	eig_top_case(40, 7, 1.0);
	eig_top_case(40, 40, 1.0);
	eig_top_case(33, 1, 1.0);
	eig_top_case(40, 12, 0x1p600); /* scaled into range and back */
	eig_top_case(40, 12, 0x1p-600);
	spd(&a, 6);
	is_int(nv_sym_eig_top(&a, 0, lam, &e), 0, "no pairs asked");
	ok(e.r == 6 && e.c == 0 && a.d == NULL, "an E of 6 × 0, a spent");
	nv_mat_free(&e);
}

/* a random orthogonal n × n matrix: the Q of a Gaussian matrix's QR */
/* A = U·diag(σ)·Vᵀ with σ from 1 down to 1/cond: its polar factor is U·Vᵀ,
 * known here without a polar decomposition; nv_polar_take's Q against it
 * and its orthogonality, to 8·n·ε·κ² by the eigen route, 8·n·ε·κ by the SVD
 * (backward stable), and the route the one its floor names */
static void polar_case(size_t n, double cond, double scale, int want_svd)
{
	nv_mat u, v, us, a, q, uv, qtq;
	double gap = 0, orth = 0, eps = DBL_EPSILON;
	double tol;
	int by_svd = -1;

	spd_orthogonal(&rng, &u, n);
	spd_orthogonal(&rng, &v, n);
	nv_mat_copy(&us, &u);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < n; k++)
			us.d[i * n + k] *= scale * pow(cond, -(double)k / (double)(n > 1 ? n - 1 : 1));
	nv_gemm_new(&us, 0, &v, 1, &a);
	nv_gemm_new(&u, 0, &v, 1, &uv);
	is_int(nv_polar_take(&a, &q, &by_svd), 0, "polar of %zu × %zu, condition %.0e, scale %.0e",
	       n, n, cond, scale);
	ok(by_svd == want_svd && a.d == NULL, "by the %s, A freed", by_svd ? "SVD" : "eigen route");
	tol = 8.0 * (double)n * eps * (by_svd ? cond : cond * cond);
	nv_gemm_new(&q, 1, &q, 0, &qtq);
	for (size_t i = 0; i < n * n; i++) {
		gap = fmax(gap, fabs(q.d[i] - uv.d[i]));
		orth = fmax(orth, fabs(qtq.d[i] - (i / n == i % n)));
	}
	ok(gap <= tol && orth <= tol, "Q = U·Vᵀ to %.2g and orthogonal to %.2g (bound %.2g)", gap,
	   orth, tol);
	nv_mat_free(&u), nv_mat_free(&v), nv_mat_free(&us), nv_mat_free(&a), nv_mat_free(&q);
	nv_mat_free(&uv), nv_mat_free(&qtq);
}

/* nv_polar_svd, column-major on its own buffers, against the row-major
 * LAPACKE call it replaced (LAPACKE transposes and calls the same
 * routine with the same workspace): the same bits.  nv_polar (the eigen
 * route) against it to 8·n·ε·κ², κ from the same SVD's σ; two runs the
 * same bits; A taken and freed */
static void polar_as_lapacke(size_t n)
{
	nv_mat a, w, u, vt, ref, q, q2;
	double *s = malloc(n * sizeof(double)), gap = 0, cond, tol;
	int by_svd = -1;

	nv_mat_zeros(&a, n, n);
	for (size_t i = 0; i < n * n; i++)
		a.d[i] = rng_normal(&rng);
	nv_mat_copy(&w, &a);
	nv_mat_zeros(&u, n, n);
	nv_mat_zeros(&vt, n, n);
	nv_serial(); /* as nv_polar_svd runs it: LAPACK's bits depend on the thread count */
	LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'A', (lapack_int)n, (lapack_int)n, w.d, (lapack_int)n, s,
		       u.d, (lapack_int)n, vt.d, (lapack_int)n);
	nv_unserial();
	cond = s[0] / s[n - 1];
	tol = 8.0 * (double)n * DBL_EPSILON * cond * cond;
	nv_gemm_new(&u, 0, &vt, 0, &ref);
	is_int(nv_polar_svd(&a, &q), 0, "polar by SVD of a Gaussian %zu × %zu", n, n);
	ok(!memcmp(q.d, ref.d, n * n * sizeof(double)),
	   "the bits of LAPACKE's row-major dgesdd's U·Vᵀ (%zu × %zu)", n, n);
	nv_mat_free(&q);
	nv_mat_free(&w); /* the row-major call destroyed it */
	nv_mat_copy(&w, &a);
	is_int(nv_polar_take(&w, &q, &by_svd), 0, "by the eigen route, A taken");
	ok(w.d == NULL && by_svd == 0, "A freed, no SVD");
	for (size_t i = 0; i < n * n; i++)
		gap = fmax(gap, fabs(q.d[i] - ref.d[i]));
	ok(gap <= tol, "the SVD's factor to %.2g (bound %.2g, condition %.3g)", gap, tol, cond);
	is_int(nv_polar(&a, &q2), 0, "again, A copied");
	ok(!memcmp(q.d, q2.d, n * n * sizeof(double)), "the same bits");
	nv_mat_free(&q2);
	nv_set_threads(2);
	is_int(nv_polar(&a, &q2), 0, "again on two threads");
	nv_set_threads(1);
	ok(!memcmp(q.d, q2.d, n * n * sizeof(double)), "the same bits at one and two threads");
	free(s);
	nv_mat_free(&a), nv_mat_free(&w), nv_mat_free(&u), nv_mat_free(&vt);
	nv_mat_free(&ref), nv_mat_free(&q), nv_mat_free(&q2);
}

/* a singular A (rank n − 1): the eigen route cannot invert AᵀA, so the
 * factor comes from the SVD: Q orthogonal and QᵀA symmetric positive
 * semidefinite (its least eigenvalue above −tol), to 64·n·ε·max|A| */
static void polar_singular(size_t n)
{
	nv_mat a, q, qtq, s, e;
	double orth = 0, asym = 0, big = 0, *lam = malloc(n * sizeof(double)), tol;
	int by_svd = -1;

	nv_mat_zeros(&a, n, n);
	for (size_t i = 0; i < n * n; i++)
		a.d[i] = rng_normal(&rng);
	for (size_t i = 0; i < n; i++) /* the last column the first's double */
		a.d[i * n + n - 1] = 2.0 * a.d[i * n];
	for (size_t i = 0; i < n * n; i++)
		big = fmax(big, fabs(a.d[i]));
	tol = 64.0 * (double)n * DBL_EPSILON * big;
	{
		nv_mat c;
		nv_mat_copy(&c, &a);
		is_int(nv_polar_take(&c, &q, &by_svd), 0, "polar of a singular %zu × %zu", n, n);
	}
	ok(by_svd == 1, "by the SVD");
	nv_gemm_new(&q, 1, &q, 0, &qtq);
	nv_gemm_new(&q, 1, &a, 0, &s);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			orth = fmax(orth, fabs(qtq.d[i * n + j] - (i == j)));
			asym = fmax(asym, fabs(s.d[i * n + j] - s.d[j * n + i]));
		}
	nv_sym_eig(&s, lam, &e);
	ok(orth <= 64.0 * (double)n * DBL_EPSILON && asym <= tol && lam[n - 1] >= -tol,
	   "Q orthogonal (%.2g), QᵀA symmetric (%.2g), its least eigenvalue %.2g", orth, asym,
	   lam[n - 1]);
	free(lam);
	nv_mat_free(&a), nv_mat_free(&q), nv_mat_free(&qtq), nv_mat_free(&s), nv_mat_free(&e);
}

static void test_polar(void)
{
	polar_as_lapacke(7);
	polar_as_lapacke(300);
	polar_singular(40);
	polar_case(8, 10, 1, 0);
	polar_case(200, 1e3, 1, 0);
	polar_case(200, 1e4 * 0.99, 1, 0); /* the eigen route's last condition */
	polar_case(200, 1e4 * 1.01, 1, 1); /* the SVD's first */
	polar_case(200, 1e6, 1, 1);
	polar_case(50, 100, 1e300, 1); /* AᵀA overflows: the SVD */
	polar_case(50, 100, 1e-300, 1); /* AᵀA vanishes */
	polar_case(50, 100, 1e100, 0);
}

/* nv_potrf_lower and nv_trtri_lower factor in place (the lower triangle
 * mirrored, read in column-major order): the bits of LAPACKE's row-major
 * calls, which factor a transposed copy, at an order that takes the blocked
 * paths, whatever lies above the diagonal, and the upper triangle zero */
static void test_chol_bits(void)
{
	size_t n = 300;
	nv_mat a, l, ref;
	int upper0 = 1, ok_ref;

	spd(&a, n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			a.d[i * n + j] = 7.0 + (double)j; /* not read */
	nv_mat_copy(&l, &a);
	nv_mat_copy(&ref, &a);
	is_int(nv_potrf_lower(&l), 0, "potrf at order %zu", n);
	ok_ref = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, ref.d, (lapack_int)n) == 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			upper0 &= l.d[i * n + j] == 0.0;
			ref.d[i * n + j] = 0.0;
		}
	ok(ok_ref && upper0 && !memcmp(l.d, ref.d, n * n * sizeof(double)),
	   "potrf: LAPACKE's row-major bits, the upper triangle zero");
	is_int(nv_trtri_lower(&l), 0, "trtri at order %zu", n);
	ok_ref = LAPACKE_dtrtri(LAPACK_ROW_MAJOR, 'L', 'N', (lapack_int)n, ref.d, (lapack_int)n) == 0;
	ok(ok_ref && !memcmp(l.d, ref.d, n * n * sizeof(double)),
	   "trtri: LAPACKE's row-major bits, the upper triangle zero");
	nv_mat_free(&a);
	nv_mat_free(&l);
	nv_mat_free(&ref);
}

/* nv_solve_spd_take: nv_solve_spd's bits without the copy, on an order
 * that takes dpotrf's blocked path, with garbage above the diagonal; its
 * refusals as nv_solve_spd's */
static void test_solve_take(void)
{
	size_t n = 300;
	nv_mat a, t;
	double *b = calloc(n, sizeof(double)), *x = calloc(n, sizeof(double));
	double *y = calloc(n, sizeof(double));

	spd(&a, n);
	for (size_t i = 0; i < n; i++) {
		b[i] = rng_normal(&rng);
		for (size_t j = i + 1; j < n; j++)
			a.d[i * n + j] = 7.0 + (double)j; /* not read */
	}
	is_int(nv_solve_spd(&a, b, x, 1e-10), 0, "solve_spd at order %zu", n);
	nv_mat_copy(&t, &a);
	is_int(nv_solve_spd_take(&t, b, y, 1e-10), 0, "solve_spd_take at order %zu", n);
	ok(memcmp(x, y, n * sizeof(double)) == 0, "solve_spd_take: solve_spd's bits");
	nv_mat_free(&t);
	nv_mat_copy(&t, &a);
	t.d[0] = -1.0;
	is_int(nv_solve_spd_take(&t, b, y, 0.0), 1, "solve_spd_take: an indefinite system is 1");
	nv_mat_free(&t);
	nv_mat_copy(&t, &a);
	t.d[5 * n + 2] = NAN;
	is_int(nv_solve_spd_take(&t, b, y, 0.0), -1, "solve_spd_take: a NaN below the diagonal: %s",
	       nv_err());
	nv_mat_free(&t);
	nv_mat_free(&a);
	free(b);
	free(x);
	free(y);
}

static void test_solve(void)
{
	nv_mat a;
	double b[9], x[9], gap = 0, tr = 0;

	spd(&a, 9);
	for (int i = 0; i < 9; i++)
		b[i] = rng_normal(&rng);
	is_int(nv_solve_spd(&a, b, x, 0.0), 0, "solve_spd without ridge");
	for (size_t i = 0; i < 9; i++) {
		double s = 0;
		for (size_t j = 0; j < 9; j++)
			s += a.d[i * 9 + j] * x[j];
		gap = fmax(gap, fabs(s - b[i]));
	}
	ok(gap < 1e-12, "A·x = b (gap %.2g)", gap);
	for (size_t i = 0; i < 9; i++)
		tr += a.d[i * 9 + i];
	nv_solve_spd(&a, b, x, 0.5);
	gap = 0;
	for (size_t i = 0; i < 9; i++) {
		double s = 0.5 * tr / 9 * x[i];
		for (size_t j = 0; j < 9; j++)
			s += a.d[i * 9 + j] * x[j];
		gap = fmax(gap, fabs(s - b[i]));
	}
	ok(gap < 1e-12, "the ridge is ridge × mean diagonal: (A + 0.5·tr/n·I)·x = b");
	/* the solve reads the lower triangle alone: garbage above the diagonal
	 * (a NaN would be caught by LAPACKE's check in the triangle it reads)
	 * gives the same bits */
	{
		double y[9];
		nv_solve_spd(&a, b, x, 0.0);
		for (size_t i = 0; i < 9; i++)
			for (size_t j = i + 1; j < 9; j++)
				a.d[i * 9 + j] = NAN;
		is_int(nv_solve_spd(&a, b, y, 0.0), 0, "solve_spd with NaN above the diagonal");
		ok(memcmp(x, y, sizeof(x)) == 0, "reads the lower triangle only: the same solution");
	}
	nv_mat_free(&a);
}

/* every column of X solved at once: (A + shift·I)·X = B to rounding */
static void test_posv_many(void)
{
	nv_mat a, b, x, z;
	double gap = 0;

	spd(&a, 10);
	fill(&b, 10, 7);
	nv_mat_copy(&x, &b);
	is_int(nv_posv_many(&a, 0.25, &x), 0, "posv_many of 7 right-hand sides");
	for (size_t i = 0; i < 10; i++)
		for (size_t k = 0; k < 7; k++) {
			double s = 0.25 * x.d[i * 7 + k];

			for (size_t j = 0; j < 10; j++)
				s += a.d[i * 10 + j] * x.d[j * 7 + k];
			gap = fmax(gap, fabs(s - b.d[i * 7 + k]));
		}
	/* cond(A) ≤ ~6, entries ~1: residuals of a few ulps */
	ok(gap < 1e-12, "(A + 0.25·I)·X = B (gap %.2g)", gap);
	nv_mat_zeros(&z, 10, 10);
	nv_mat_free(&x);
	nv_mat_copy(&x, &b);
	int rc = nv_posv_many(&z, 0.0, &x);

	ok(rc < 0 && strstr(nv_err(), "not positive definite"),
	   "a singular matrix is an error, not an abort: %s", nv_err());
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&x), nv_mat_free(&z);
}


/* one poisoned entry per wrapper: an error that names it, never an abort
 * (LAPACKE's NaN check would answer a negative info, and a finite 1e308
 * overflows inside the factorization) */
static void test_nonfinite(void)
{
	const double bad[3] = { NAN, INFINITY, 1e308 };
	nv_mat a, l, e, q, x;
	double lam[6], b[6] = { 1, 2, 3, 4, 5, 6 }, y[6];

	for (int k = 0; k < 3; k++) {
		spd(&a, 6);
		a.d[4 * 6 + 2] = a.d[2 * 6 + 4] = bad[k];
		nv_mat_copy(&l, &a);
		/* a finite 1e308 makes the matrix indefinite (1); the others are refused (-1) */
		is_int(nv_potrf_lower(&l), k == 2 ? 1 : -1, "potrf of a matrix with %g", bad[k]);
		ok(strstr(nv_err(), k == 2 ? "not positive definite" : "not finite") != NULL, "reason: %s",
		   nv_err());
		/* LAPACK scales a finite 1e308 well: then the results are finite */
		nv_mat_free(&l);
		nv_mat_copy(&l, &a);
		if (nv_sym_eig(&l, lam, &e) == 0)
			ok(k == 2 && nv_mat_check_finite(&e, "e") == 0 &&
			   nv_check_finite(lam, 1, 6, 0, "lam") == 0, "eig with %g: finite", bad[k]);
		else
			ok(e.d == NULL, "eig with %g: %s", bad[k], nv_err());
		nv_mat_free(&e);
		if (nv_polar(&a, &q) == 0)
			ok(k == 2 && nv_mat_check_finite(&q, "q") == 0, "polar with %g: finite", bad[k]);
		else
			ok(1, "polar with %g: %s", bad[k], nv_err());
		nv_mat_free(&q);
		nv_mat_free(&l);
		nv_mat_copy(&l, &a);
		if (k < 2)
			ok(nv_polar_take(&l, &q, NULL) == -1 && q.d == NULL && l.d == NULL &&
			   strstr(nv_err(), "not finite"), "polar of a taken A with %g: refused, A freed",
			   bad[k]);
		ok(nv_solve_spd(&a, b, y, 1e-10) != 0, "solve_spd with %g: %s", bad[k], nv_err());
		nv_mat_zeros(&x, 6, 2);
		ok(nv_posv_many(&a, 0.0, &x) < 0, "posv_many with %g: %s", bad[k], nv_err());
		nv_mat_free(&a), nv_mat_free(&l), nv_mat_free(&x);
	}
	spd(&a, 6);
	is_int(nv_solve_spd(&a, (double[6]){ 1, 2, NAN, 4, 5, 6 }, y, 0.0), -1,
	       "solve_spd of a NaN right-hand side");
	ok(strstr(nv_err(), "right-hand side entry 2 = nan is not finite") != NULL, "reason: %s",
	   nv_err());
	nv_mat_copy(&l, &a);
	nv_potrf_lower(&l);
	l.d[2 * 6 + 2] = l.d[3 * 6 + 3] = 1e-300;
	l.d[3 * 6 + 2] = 1.0;
	ok(nv_trtri_lower(&l) < 0 && strstr(nv_err(), "not finite"),
	   "trtri whose inverse overflows: %s", nv_err());
	a.d[0] = -1.0;
	is_int(nv_solve_spd(&a, b, y, 0.0), 1, "an indefinite system: 1, the old values kept");
	nv_mat_free(&a), nv_mat_free(&l);
}

/* |C − op(A)·op(B)| / (Σ_k |a_ik b_kj|) at its largest over C, in long double */
static double dgemm_gap(int ta, int tb, size_t M, size_t N, size_t K, const double *A,
			const double *B, const double *C)
{
	size_t lda = ta ? M : K, ldb = tb ? K : N;
	double worst = 0;

	for (size_t i = 0; i < M; i++)
		for (size_t j = 0; j < N; j++) {
			long double s = 0, mag = 0;

			for (size_t k = 0; k < K; k++) {
				long double a = ta ? A[k * lda + i] : A[i * lda + k];
				long double b = tb ? B[j * ldb + k] : B[k * ldb + j];

				s += a * b;
				mag += fabsl(a * b);
			}
			worst = fmax(worst, (double)(fabsl(C[i * N + j] - s) / (mag > 0 ? mag : 1)));
		}
	return worst;
}

/* the gap of an f32 product, its entries widened */
static double sgemm_gap(int ta, int tb, size_t M, size_t N, size_t K, const float *A,
			const float *B, const float *C)
{
	double *a = malloc(M * K * sizeof(double)), *b = malloc(K * N * sizeof(double));
	double *c = malloc(M * N * sizeof(double)), gap;

	for (size_t i = 0; i < M * K; i++)
		a[i] = A[i];
	for (size_t i = 0; i < K * N; i++)
		b[i] = B[i];
	for (size_t i = 0; i < M * N; i++)
		c[i] = C[i];
	gap = dgemm_gap(ta, tb, M, N, K, a, b, c);
	free(a), free(b), free(c);
	return gap;
}

/* nv_sgemm: the product within f32 rounding (K·2⁻²⁴ of Σ|a·b| bounds any
 * order of summation), and the same bits at every thread count, over one
 * tile and over shapes cut into 2 × 2 and 3 × 3 tiles, some of them partial,
 * large enough (M·N·K ≥ 2²²) that the tiles are shared among threads.  The
 * bits differ between thread counts with one cblas_sgemm under OpenBLAS's
 * Haswell kernels (t0507 forces them) */
static void test_sgemm(void)
{
	static const size_t shapes[][3] = {{1, 7, 5}, {63, 40, 33}, {65, 300, 200},
					   {300, 600, 129}, {520, 1100, 64}};

	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (int t = 0; t < 4; t++) {
			size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
			int ta = t & 1, tb = t >> 1, same = 1;
			float *A = malloc(M * K * sizeof(float)), *B = malloc(K * N * sizeof(float));
			float *C1 = malloc(M * N * sizeof(float)), *C = malloc(M * N * sizeof(float));

			for (size_t i = 0; i < M * K; i++)
				A[i] = (float)rng_normal(&rng);
			for (size_t i = 0; i < K * N; i++)
				B[i] = (float)rng_normal(&rng);
			nv_set_threads(1);
			nv_sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C1, N);
			ok(sgemm_gap(ta, tb, M, N, K, A, B, C1) <= (double)K * 0x1p-24,
			   "nv_sgemm %zux%zux%zu ta %d tb %d: within K·2^-24 of the f64 product", M, N,
			   K, ta, tb);
			for (int nt = 2; nt <= 5; nt++) {
				nv_set_threads(nt);
				memset(C, 0xff, M * N * sizeof(float));
				nv_sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
				same &= memcmp(C, C1, M * N * sizeof(float)) == 0;
				same &= nv_get_threads() == nt;
			}
			ok(same, "nv_sgemm %zux%zux%zu ta %d tb %d: the same bits at 1 to 5 threads, "
			   "the thread count given back", M, N, K, ta, tb);
			free(A), free(B), free(C1), free(C);
		}
	nv_set_threads(1);
}

/* our count is what was set, one inside a serial section (nested too) and
 * back after it, and OpenBLAS's own stays one throughout */
static void test_threads(void)
{
	nv_set_threads(3);
	is_int(nv_get_threads(), 3, "nv_get_threads: the count set");
	is_int(openblas_get_num_threads(), 1, "OpenBLAS's own count held at one");
	nv_serial();
	nv_serial();
	is_int(nv_get_threads(), 1, "one inside nested serial sections");
	nv_unserial();
	is_int(nv_get_threads(), 1, "one while a section is still open");
	nv_unserial();
	is_int(nv_get_threads(), 3, "the count back after the last section");
	is_int(openblas_get_num_threads(), 1, "OpenBLAS's still one");
	nv_set_threads(1);
}

static double *normals(size_t n)
{
	double *x = malloc(n * sizeof(double));

	for (size_t i = 0; i < n; i++)
		x[i] = rng_normal(&rng);
	return x;
}

/* nv_dgemm as test_sgemm, within γ_K of Σ|a·b| (K·2⁻⁵³, any order of
 * summation; the reference in long double), on shapes where one
 * cblas_dgemm under OpenBLAS's threads gave different bits at 2 or 3
 * threads (100 × 576 × 1536, 577 × 1535 × 577, 256 × 1536 × 1536 measured
 * with 0.3.21's Haswell and SkylakeX kernels) and on small ones; one tile,
 * 2 × 2 (577 rows, 1535 columns), 2 × 2 of 128 rows (256 × 1100) and 4 × 1
 * of 288 rows, the last partial (1100 × 90) */
static void test_dgemm(void)
{
	static const size_t shapes[][3] = {{1, 7, 5}, {65, 300, 200}, {100, 576, 1536},
					   {577, 1535, 37}, {256, 1100, 300}, {1100, 90, 64}};

	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (int t = 0; t < 4; t++) {
			size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
			int ta = t & 1, tb = t >> 1, same = 1;
			double *A = normals(M * K), *B = normals(K * N), *C1 = normals(M * N);
			double *C = malloc(M * N * sizeof(double));

			nv_set_threads(1);
			nv_dgemm(ta, tb, M, N, K, 1.0, A, ta ? M : K, B, tb ? K : N, 0.0, C1, N);
			ok(dgemm_gap(ta, tb, M, N, K, A, B, C1) <= (double)K * 0x1p-53,
			   "nv_dgemm %zux%zux%zu ta %d tb %d: within K·2^-53 of the product", M, N, K,
			   ta, tb);
			for (int nt = 2; nt <= 5; nt++) {
				nv_set_threads(nt);
				memset(C, 0xff, M * N * sizeof(double));
				nv_dgemm(ta, tb, M, N, K, 1.0, A, ta ? M : K, B, tb ? K : N, 0.0, C, N);
				same &= memcmp(C, C1, M * N * sizeof(double)) == 0;
			}
			ok(same, "nv_dgemm %zux%zux%zu ta %d tb %d: the same bits at 1 to 5 threads", M,
			   N, K, ta, tb);
			free(A), free(B), free(C1), free(C);
		}
	nv_set_threads(1);
}

/* nv_dsyrk: the stored triangle within N·2⁻⁵³ of Σ|a·a| of op(A)·op(A)ᵀ
 * (beta 1 onto a C of ones: the sum C + A·Aᵀ checked), the other triangle
 * untouched, the same bits at 1 to 5 threads; N = 1100 makes 4 × 4 tiles,
 * the last partial */
static void test_dsyrk(void)
{
	const size_t N = 1100, K = 100;

	for (int t = 0; t < 4; t++) {
		int upper = t & 1, ta = t >> 1, same = 1, kept = 1;
		double *A = normals(N * K), *C1 = malloc(N * N * sizeof(double));
		double *C = malloc(N * N * sizeof(double)), worst = 0;

		for (int nt = 1; nt <= 5; nt++) {
			double *c = nt == 1 ? C1 : C;

			nv_set_threads(nt);
			for (size_t i = 0; i < N * N; i++)
				c[i] = 1.0;
			nv_dsyrk(upper, ta, N, K, 1.0, A, ta ? N : K, 1.0, c, N);
			same &= nt == 1 || memcmp(C, C1, N * N * sizeof(double)) == 0;
		}
		for (size_t i = 0; i < N; i++)
			for (size_t j = 0; j < N; j++) {
				long double s = 1, mag = 1;

				if (upper ? j < i : j > i) {
					kept &= C1[i * N + j] == 1.0;
					continue;
				}
				for (size_t k = 0; k < K; k++) {
					long double a = ta ? A[k * N + i] : A[i * K + k];
					long double b = ta ? A[k * N + j] : A[j * K + k];

					s += a * b;
					mag += fabsl(a * b);
				}
				worst = fmax(worst, (double)(fabsl(C1[i * N + j] - s) / mag));
			}
		ok(worst <= (double)(K + 1) * 0x1p-53,
		   "nv_dsyrk %s ta %d: C + op(A)·op(A)ᵀ within (K+1)·2^-53 (%.3g)",
		   upper ? "upper" : "lower", ta, worst / 0x1p-53);
		ok(kept, "nv_dsyrk %s ta %d: the other triangle untouched", upper ? "upper" : "lower",
		   ta);
		ok(same, "nv_dsyrk %s ta %d: the same bits at 1 to 5 threads",
		   upper ? "upper" : "lower", ta);
		free(A), free(C1), free(C);
	}
	nv_set_threads(1);
}

/* nv_dtrsm_left: op(T)·X = alpha·B with a backward error within γ_M's
 * bound (|alpha·B − op(T)·X| ≤ M·2⁻⁵³·|op(T)|·|X|, componentwise, for any
 * substitution order), the same bits at 1 to 5 threads; 1100 columns make
 * three tiles, the last partial */
static void test_dtrsm(void)
{
	const size_t M = 90, N = 1100;

	for (int t = 0; t < 8; t++) {
		int upper = t & 1, ta = (t >> 1) & 1, unit = t >> 2, same = 1;
		double *T = normals(M * M), *B = normals(M * N), worst = 0;
		double *X1 = malloc(M * N * sizeof(double)), *X = malloc(M * N * sizeof(double));

		for (size_t i = 0; i < M; i++) /* a well-conditioned triangle */
			T[i * M + i] = 4.0 + fabs(T[i * M + i]);
		for (int nt = 1; nt <= 5; nt++) {
			double *x = nt == 1 ? X1 : X;

			nv_set_threads(nt);
			memcpy(x, B, M * N * sizeof(double));
			nv_dtrsm_left(upper, ta, unit, M, N, 0.5, T, M, x, N);
			same &= nt == 1 || memcmp(X, X1, M * N * sizeof(double)) == 0;
		}
		for (size_t i = 0; i < M; i++)
			for (size_t j = 0; j < N; j++) {
				long double s = 0, mag = 0;

				for (size_t k = 0; k < M; k++) {
					/* op(T)[i][k], zero outside its triangle, one on a unit diagonal */
					size_t r = ta ? k : i, c = ta ? i : k;
					long double v = (upper ? c < r : c > r) ? 0
							: (unit && r == c) ? 1 : T[r * M + c];

					s += v * X1[k * N + j];
					mag += fabsl(v * X1[k * N + j]);
				}
				worst = fmax(worst, (double)(fabsl(0.5L * B[i * N + j] - s) / mag));
			}
		ok(worst <= (double)M * 0x1p-53,
		   "nv_dtrsm_left %s ta %d unit %d: backward error within M·2^-53 (%.3g)",
		   upper ? "upper" : "lower", ta, unit, worst / 0x1p-53);
		ok(same, "nv_dtrsm_left %s ta %d unit %d: the same bits at 1 to 5 threads",
		   upper ? "upper" : "lower", ta, unit);
		free(T), free(B), free(X1), free(X);
	}
	nv_set_threads(1);
}

/* whether /proc/cpuinfo's flags list flag (an independent reading of the CPU's features) */
static int cpu_flag(const char *flag)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192], pat[64];
	int has = 0;

	snprintf(pat, sizeof pat, " %s ", flag);
	while (f && !has && fgets(line, sizeof line, f))
		if (!strncmp(line, "flags", 5)) {
			line[strcspn(line, "\n")] = ' ';
			has = strstr(line, pat) != NULL;
		}
	if (f)
		fclose(f);
	return has;
}

/*
 * nv_blas_core: OpenBLAS's core name; a hint exactly when the core is a
 * generic one on a CPU with AVX2 and FMA, or an AVX2 one (Haswell, Zen) on
 * a CPU with AVX-512; it names SkylakeX where the CPU has AVX-512, and says
 * so when OPENBLAS_CORETYPE chose the core (the variable is read when
 * OpenBLAS loads: t0100 runs the tools under other values)
 */
static void test_blas_core(void)
{
	char hint[256], again[256];
	const char *set = getenv("OPENBLAS_CORETYPE");
	const char *core = nv_blas_core(hint, sizeof hint);
	int generic = !strcasecmp(core, "Prescott") || !strcasecmp(core, "Core2") ||
		      !strcasecmp(core, "Nehalem") || !strcasecmp(core, "Sandybridge");
	int avx512 = cpu_flag("avx512f") && cpu_flag("avx512vl") && cpu_flag("avx512bw") &&
		     cpu_flag("avx512dq");
	int avx2 = !strcasecmp(core, "Haswell") || !strcasecmp(core, "Zen");
	int want = (generic && cpu_flag("avx2") && cpu_flag("fma")) || (avx2 && avx512);

	ok(core[0] != 0, "nv_blas_core: OpenBLAS runs its %s kernels", core);
	ok((hint[0] != 0) == want, "a hint %s: '%s'", want ? "is given" : "is not given", hint);
	if (want)
		ok(strstr(hint, avx512 ? "OPENBLAS_CORETYPE=SkylakeX" : "OPENBLAS_CORETYPE=Haswell") !=
			   NULL, "it names the %s kernels", avx512 ? "SkylakeX" : "Haswell");
	if (want)
		ok((strstr(hint, "OPENBLAS_CORETYPE chose them") != NULL) == (set && *set),
		   "it says whether OPENBLAS_CORETYPE chose the core");
	unsetenv("OPENBLAS_CORETYPE");
	nv_blas_core(again, sizeof again);
	ok(!strstr(again, "chose them") && (again[0] != 0) == want,
	   "the same hint without the variable, less its naming");
	if (set)
		setenv("OPENBLAS_CORETYPE", set, 1);
	else
		unsetenv("OPENBLAS_CORETYPE");
}

typedef struct {
	volatile float a, sub; /* a normal float whose square is subnormal; a subnormal */
	int ftz, daz;
} fp_probe;

static void fp_probe_run(void *arg)
{
	fp_probe *p = arg;

	p->ftz = p->a * p->a == 0.0f;
	p->daz = p->sub * 1.0f == 0.0f && p->sub + p->sub == 0.0f;
}

/* sgemm of a subnormal-filled A (256 × 64) and ones (64 × 512) on two threads: every entry 0 */
static int sgemm_flushes(void)
{
	size_t M = 256, N = 512, K = 64;
	float *A = malloc(M * K * sizeof *A), *B = malloc(K * N * sizeof *B);
	float *C = malloc(M * N * sizeof *C);
	int zero = A && B && C;

	for (size_t i = 0; zero && i < M * K; i++)
		A[i] = FLT_MIN / 4;
	for (size_t i = 0; zero && i < K * N; i++)
		B[i] = 1.0f;
	if (zero) {
		nv_set_threads(2);
		nv_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
		nv_set_threads(1);
	}
	for (size_t i = 0; zero && i < M * N; i++)
		zero = C[i] == 0.0f;
	free(A);
	free(B);
	free(C);
	return zero;
}

/*
 * nv_fp_flush: with it on, a product that would be subnormal is 0 and a
 * subnormal operand counts as 0, in the calling thread, in the threads
 * nv_par starts after it and in nv_sgemm's tiles; off, both are kept; it
 * returns the setting it found
 */
static void test_fp_flush(void)
{
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
	fp_probe p[2] = { { 1e-20f, FLT_MIN / 4, 0, 0 }, { 1e-20f, FLT_MIN / 4, 0, 0 } };
	int was = nv_fp_flush(1);

	ok(nv_fp_flush(1) == 1, "nv_fp_flush reports the flush it set");
	fp_probe_run(&p[0]);
	ok(p[0].ftz, "flushed: 1e-20 squared (1e-40) is 0");
	ok(p[0].daz, "flushed: a subnormal operand counts as 0");
	p[0].ftz = p[0].daz = 0;
	nv_par(p, 2, sizeof p[0], fp_probe_run);
	ok(p[0].ftz && p[0].daz && p[1].ftz && p[1].daz, "a thread nv_par starts flushes too");
	ok(sgemm_flushes(), "nv_sgemm on two threads gives 0 for subnormal products");
	ok(nv_fp_flush(0) == 1, "turned off, it reports the flush it found");
	fp_probe_run(&p[0]);
	ok(!p[0].ftz && !p[0].daz, "kept: 1e-20 squared and a subnormal times 1 are not 0");
	ok(!sgemm_flushes(), "nv_sgemm keeps subnormal products");
	nv_fp_flush(was);
#else
	ok(nv_fp_flush(1) == 0, "no flush mode on this CPU: nv_fp_flush reports none");
#endif
}

/* an n × n f32 matrix of normal entries with its diagonal in f64, base +
 * 1e-9·i (not an f32 value): a damped Gram's form */
static nv_mat32 normal32_diag(size_t n, double base)
{
	nv_mat32 h = { n, n, malloc(n * n * sizeof(float)), malloc(n * sizeof(double)) };

	for (size_t i = 0; i < n * n; i++)
		h.d[i] = (float)rng_normal(&rng);
	for (size_t i = 0; i < n; i++)
		h.diag[i] = base + 1e-9 * (double)i;
	return h;
}

/* a square f32 matrix with its diagonal in f64 (a damped Gram's form), on
 * both sides of the product: the diagonal read from diag, not from d */
static void test_gemm32_diag(void)
{
	size_t n = 300;
	nv_mat32 h = normal32_diag(n, 10.0);
	nv_mat b, c, h64, want;
	int at = 1;

	nv_mat32_widen(&h, &h64);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			at &= h64.d[i * n + j] == (i == j ? h.diag[i] : (double)h.d[i * n + j]) &&
			      nv_mat32_at(&h, i, j) == h64.d[i * n + j];
	ok(at, "widen and at: f32 off the diagonal, the f64 diagonal on it");
	fill(&b, n, 7);
	nv_gemm32a_new(&h, &b, &c);
	nv_gemm_new(&h64, 0, &b, 0, &want);
	ok(synth_rel_gap(&c, &want) <= 1e-14, "gemm32a with the diagonal (%.2g)", synth_rel_gap(&c, &want));
	nv_mat_free(&c), nv_mat_free(&want), nv_mat_free(&b);
	fill(&b, 7, n);
	nv_gemm32b_new(&b, &h, &c);
	nv_gemm_new(&b, 0, &h64, 0, &want);
	ok(synth_rel_gap(&c, &want) <= 1e-14, "gemm32b with the diagonal (%.2g)", synth_rel_gap(&c, &want));
	nv_mat_free(&c), nv_mat_free(&want), nv_mat_free(&b), nv_mat_free(&h64);
	nv_mat32_free(&h);
}

/*
 * products with an f32 operand, widened in blocks of 256 (shapes that leave
 * a partial block): the f64 products of the widened matrix, to the rounding
 * of one dgemm's sums (k·ε)
 */
static void test_gemm32(void)
{
	nv_mat a, b, a64, b64, c, want;
	nv_mat32 a32 = { 300, 70, malloc(300 * 70 * sizeof(float)), NULL };
	nv_mat32 b32 = { 70, 300, malloc(70 * 300 * sizeof(float)), NULL };

	fill(&a, 300, 70);
	fill(&b, 70, 9);
	nv_mat_copy(&a64, &a);
	for (size_t i = 0; i < 300 * 70; i++)
		a64.d[i] = a32.d[i] = (float)a.d[i];
	is_int(nv_gemm32a_new(&a32, &b, &c), 0, "gemm32a: A (300 × 70, f32) · B");
	nv_gemm_new(&a64, 0, &b, 0, &want);
	ok(c.r == 300 && c.c == 9 && synth_rel_gap(&c, &want) <= 1e-14,
	   "gemm32a = the f64 product of the widened A (%.2g)", synth_rel_gap(&c, &want));
	nv_mat_free(&c), nv_mat_free(&want), nv_mat_free(&b);
	fill(&b, 70, 300);
	nv_mat_copy(&b64, &b);
	for (size_t i = 0; i < 70 * 300; i++)
		b64.d[i] = b32.d[i] = (float)b.d[i];
	fill(&c, 5, 70); /* A */
	is_int(nv_gemm32b_new(&c, &b32, &want), 0, "gemm32b: A · B (70 × 300, f32)");
	{
		nv_mat ref;
		nv_gemm_new(&c, 0, &b64, 0, &ref);
		ok(want.r == 5 && want.c == 300 && synth_rel_gap(&want, &ref) <= 1e-14,
		   "gemm32b = the f64 product of the widened B (%.2g)", synth_rel_gap(&want, &ref));
		nv_mat_free(&ref);
	}
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&a64), nv_mat_free(&b64);
	nv_mat_free(&c), nv_mat_free(&want);
	nv_mat32_free(&a32), nv_mat32_free(&b32);
	test_gemm32_diag();
}

/* want = op(A)·B in f64, bound = |op(A)|·|B|: a product's reference and
 * the magnitudes its rounding errors are measured against */
static void product_and_bound(const nv_mat *a, int ta, const nv_mat *b, nv_mat *want,
			      nv_mat *bound)
{
	nv_mat aabs, babs;

	nv_mat_copy(&aabs, a), nv_mat_copy(&babs, b);
	for (size_t i = 0; i < a->r * a->c; i++)
		aabs.d[i] = fabs(aabs.d[i]);
	for (size_t i = 0; i < b->r * b->c; i++)
		babs.d[i] = fabs(babs.d[i]);
	nv_gemm_new(a, ta, b, 0, want);
	nv_gemm_new(&aabs, ta, &babs, 0, bound);
	nv_mat_free(&aabs), nv_mat_free(&babs);
}

/* the largest |c − want| / (g·bound) over the entries (*inside: all ≤ 1) */
static double worst_gap(const nv_mat *c, const nv_mat *want, const nv_mat *bound, double g,
			int *inside)
{
	double worst = 0.0;

	for (size_t i = 0; i < want->r * want->c; i++)
		worst = fmax(worst, fabs(c->d[i] - want->d[i]) / (g * bound->d[i]));
	*inside = worst <= 1.0;
	return worst;
}

/*
 * H·B in f32 (nv_gemm32s_new), H square with its diagonal in f64 and rows
 * beyond one block: every entry within its bound γ_{k+1}·(|H|·|B|)_ij of
 * the f64 product (the f64 product's own error is 1e-9 of that bound), the
 * bound not slack by orders (the largest gap at least 1e-3 of it), the same
 * bits at one and two threads of nv_sgemm and whatever d's own diagonal holds
 */
static void test_gemm32s(void)
{
	size_t n = 600, nc = 40;
	nv_mat32 h = normal32_diag(n, 30.0);
	nv_mat b, h64, want, bound, c, c2;
	double u = ldexp(1.0, -24), g = (double)(n + 1) * u / (1.0 - (double)(n + 1) * u);
	double worst;
	int inside;

	nv_mat32_widen(&h, &h64);
	fill(&b, n, nc);
	product_and_bound(&h64, 0, &b, &want, &bound);
	is_int(nv_gemm32s_new(&h, &b, &c), 0, "gemm32s: H (600 × 600, f32, f64 diagonal) · B");
	worst = worst_gap(&c, &want, &bound, g, &inside);
	ok(c.r == n && c.c == nc && inside && worst >= 1e-3,
	   "gemm32s within gamma_(k+1)·|H|·|B| of the f64 product (largest gap %.3g of it)", worst);
	nv_set_threads(2);
	nv_gemm32s_new(&h, &b, &c2);
	nv_set_threads(1);
	ok(memcmp(c.d, c2.d, n * nc * sizeof(double)) == 0, "gemm32s: the same bits at two threads");
	nv_mat_free(&c2);
	for (size_t i = 0; i < n; i++)
		h.d[i * n + i] = (float)(i % 3) - 1.0f; /* d's own diagonal, which the diagonal replaces */
	nv_gemm32s_new(&h, &b, &c2);
	ok(memcmp(c.d, c2.d, n * nc * sizeof(double)) == 0,
	   "gemm32s: the same bits whatever d holds on its diagonal");
	nv_mat_free(&b), nv_mat_free(&h64);
	nv_mat_free(&want), nv_mat_free(&bound), nv_mat_free(&c), nv_mat_free(&c2);
	nv_mat32_free(&h);
}

/* one case of nv_gemm_f32_new: op(A)·B (m × k times k × nc) against the
 * f64 product, every entry within γ_(k+2)·(|op(A)|·|B|)_ij and the bound
 * not slack by orders; the same bits at two threads */
static void gemm_f32_case(size_t m, size_t k, size_t nc, int ta)
{
	nv_mat a, b, want, bound, c, c2;
	double u = ldexp(1.0, -24), g = (double)(k + 2) * u / (1.0 - (double)(k + 2) * u);
	double worst;
	int inside;

	fill(&a, ta ? k : m, ta ? m : k);
	fill(&b, k, nc);
	product_and_bound(&a, ta, &b, &want, &bound);
	is_int(nv_gemm_f32_new(&a, ta, &b, &c), 0, "gemm_f32 %zux%zux%zu%s", m, k, nc, ta ? " (Aᵀ)" : "");
	worst = worst_gap(&c, &want, &bound, g, &inside);
	ok(c.r == m && c.c == nc && inside && worst >= 1e-3,
	   "gemm_f32 within gamma_(k+2)·|op(A)|·|B| of the f64 product (largest gap %.3g of it)", worst);
	nv_set_threads(2);
	nv_gemm_f32_new(&a, ta, &b, &c2);
	nv_set_threads(1);
	ok(memcmp(c.d, c2.d, m * nc * sizeof(double)) == 0, "gemm_f32: the same bits at two threads");
	nv_mat_free(&a), nv_mat_free(&b);
	nv_mat_free(&want), nv_mat_free(&bound), nv_mat_free(&c), nv_mat_free(&c2);
}

static void test_gemm_f32(void)
{
	gemm_f32_case(600, 300, 70, 0);
	gemm_f32_case(90, 700, 90, 1);
	gemm_f32_case(3, 5, 2, 0);
}

/* max |(RᵀR − AᵀA)_ij| / max |AᵀA| */
static double qr_gap(const nv_mat *a, const nv_mat *r)
{
	nv_mat ata, rtr;
	double gap;

	nv_gemm_new(a, 1, a, 0, &ata);
	nv_gemm_new(r, 1, r, 0, &rtr);
	gap = synth_rel_gap(&rtr, &ata);
	nv_mat_free(&ata);
	nv_mat_free(&rtr);
	return gap;
}

/* nv_qr_r_cm on A written column-major by the caller: nv_qr_r's R, bit for
 * bit (nv_qr_r is that copy and this call) */
static void test_qr_cm(const nv_mat *a)
{
	size_t m = a->r, k = a->c;
	double *q = malloc(m * k * sizeof(double));
	nv_mat r1, r2;

	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < k; j++)
			q[i + j * m] = a->d[i * k + j];
	nv_qr_r(a, &r1);
	is_int(nv_qr_r_cm(q, m, k, &r2), 0, "qr from column-major");
	ok(!memcmp(r1.d, r2.d, k * k * sizeof(double)), "qr from column-major: nv_qr_r's R, bit for bit");
	free(q);
	nv_mat_free(&r1);
	nv_mat_free(&r2);
}

/*
 * nv_qr_r: R upper triangular with RᵀR = AᵀA, to 1e-13 of AᵀA's largest
 * entry (Householder QR is backward stable: the error is a small multiple of
 * the unit roundoff 1.1e-16 times the size); also for A without full rank
 * (two equal columns, a zero column), and square; a NaN refused with its entry
 */
static void test_qr(void)
{
	nv_mat a, r;
	int upper = 1;

	fill(&a, 300, 40);
	is_int(nv_qr_r(&a, &r), 0, "qr: 300 x 40");
	ok(r.r == 40 && r.c == 40, "qr: R is 40 x 40");
	for (size_t i = 0; i < r.r; i++)
		for (size_t j = 0; j < i; j++)
			upper &= r.d[i * r.c + j] == 0.0;
	ok(upper, "qr: R is upper triangular");
	ok(qr_gap(&a, &r) <= 1e-13, "qr: RᵀR = AᵀA (%.2g)", qr_gap(&a, &r));
	nv_mat_free(&r);
	for (size_t i = 0; i < a.r; i++) {
		a.d[i * a.c + 7] = a.d[i * a.c + 3];
		a.d[i * a.c + 11] = 0.0;
	}
	is_int(nv_qr_r(&a, &r), 0, "qr: two equal columns and a zero one");
	ok(qr_gap(&a, &r) <= 1e-13, "qr without full rank: RᵀR = AᵀA (%.2g)", qr_gap(&a, &r));
	nv_mat_free(&r);
	nv_mat_free(&a);
	fill(&a, 24, 24);
	is_int(nv_qr_r(&a, &r), 0, "qr: square");
	ok(qr_gap(&a, &r) <= 1e-13, "qr square: RᵀR = AᵀA (%.2g)", qr_gap(&a, &r));
	nv_mat_free(&r);
	test_qr_cm(&a);
	a.d[5 * 24 + 2] = NAN;
	ok(nv_qr_r(&a, &r) < 0 && strstr(nv_err(), "(5,2)") && r.d == NULL,
	   "qr: a NaN is refused: %s", nv_err());
	{
		double q[24 * 24];
		for (size_t i = 0; i < 24; i++)
			for (size_t j = 0; j < 24; j++)
				q[i + j * 24] = a.d[i * 24 + j];
		ok(nv_qr_r_cm(q, 24, 24, &r) < 0 && strstr(nv_err(), "(5,2)") && r.d == NULL,
		   "qr from column-major: a NaN is refused with A's own indices: %s", nv_err());
	}
	nv_mat_free(&a);
}

/* the threads of this process: /proc/self/task's entries */
static int task_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* helper (argv[1] "pool", under OPENBLAS_NUM_THREADS=2): the threads before
 * and after the first count of ours */
static int pool_helper(void)
{
	int before = task_count(), n = nv_get_threads();

	printf("%d %d %d\n", before, task_count(), n);
	return 0;
}

/* OpenBLAS's pool let go by the first count of our threads, which is its */
static void test_pool_gone(const char *self)
{
	char cmd[4096];
	int before = 0, after = 0, n = 0;
	FILE *p;

	snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=2 '%s' pool", self);
	p = popen(cmd, "r");
	ok(p && fscanf(p, "%d %d %d", &before, &after, &n) == 3 && pclose(p) == 0,
	   "the helper under OPENBLAS_NUM_THREADS=2 ran");
	if (before < 2) { /* one CPU: OpenBLAS made no pool */
		ok(1, "# SKIP one thread at the start (%d): no pool to let go", before);
		return;
	}
	ok(after == 1 && n == before,
	   "OpenBLAS's %d pool threads let go, its count of %d kept as ours (%d after)",
	   before - 1, n, after);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "pool") == 0)
		return pool_helper();
	test_pool_gone(argv[0]);
	nv_set_threads(1);
	test_blas_core();
	test_fp_flush();
	test_posv_many();
	test_gemm();
	test_syrk();
	test_chol();
	test_chol_bits();
	test_eig();
	test_eig_top();
	test_polar();
	test_solve();
	test_solve_take();
	test_gemm32();
	test_gemm32s();
	test_gemm_f32();
	test_qr();
	test_nonfinite();
	test_sgemm();
	test_threads();
	test_dgemm();
	test_dsyrk();
	test_dtrsm();
	return done_testing();
}
