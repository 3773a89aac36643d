/* test-rfp.c - the g step's system in rectangular full packed form, against
 * LAPACK's own conversions and the full-matrix solves (TAP) */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "err.h"
#include "linalg.h"
#include "rfp.h"
#include "spd.h"
#include "tap.h"

static tap_rng rng = {7};

/* the even order that holds n */
static size_t even(size_t n)
{
	return n + (n & 1);
}

/* the lower triangle of symmetric a (n × n), padded to the even order with
 * the identity's last row, into RFP by LAPACK's dtrttf (the reference) */
static void to_rfp(const nv_mat *a, nv_rfp *c)
{
	size_t n = a->r, nn = even(n);
	double *full = calloc(nn * nn + 1, sizeof(double));

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			full[i + j * nn] = a->d[i * n + j];
	if (nn != n)
		full[nn * nn - 1] = 1.0;
	c->n = n;
	c->nn = nn;
	c->a = calloc((nn / 2) * (nn + 1) + 1, sizeof(double));
	LAPACKE_dtrttf(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)nn, full, (lapack_int)nn, c->a);
	free(full);
}

/* the lower triangle L (n × n, row-major, zero above) of an RFP factor, by
 * LAPACK's dtfttr */
static void from_rfp(const nv_rfp *c, nv_mat *l)
{
	size_t n = c->n, nn = c->nn;
	double *full = calloc(nn * nn + 1, sizeof(double));

	LAPACKE_dtfttr(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)nn, c->a, full, (lapack_int)nn);
	nv_mat_zeros(l, n, n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			l->d[i * n + j] = full[i + j * nn];
	free(full);
}

/* every entry (i, j), i ≥ j, where LAPACK's dtrttf puts it, at even orders */
static void test_layout(void)
{
	static const size_t orders[] = {2, 6, 10, 64};

	for (size_t t = 0; t < sizeof(orders) / sizeof(orders[0]); t++) {
		size_t nn = orders[t], bad = 0;
		double *full = malloc(nn * nn * sizeof(double));
		double *arf = malloc((nn / 2) * (nn + 1) * sizeof(double));

		for (size_t i = 0; i < nn * nn; i++)
			full[i] = (double)(i + 1);
		LAPACKE_dtrttf(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)nn, full, (lapack_int)nn, arf);
		for (size_t i = 0; i < nn; i++)
			for (size_t j = 0; j <= i; j++)
				bad += arf[nv_rfp_idx(nn, i, j)] != full[i + j * nn];
		is_int((int)bad, 0, "rfp_idx: order %zu, every entry where dtrttf puts it", nn);
		free(full);
		free(arf);
	}
}

/* nv_rfp_syrk against nv_syrk_new's full B·Bᵀ, at an even and an odd
 * order: the same entries (to dsyrk's blocking: 1e-14 of the largest), the
 * odd order's padding the identity's; a rank of 0; a NaN refused */
static void syrk_case(size_t n, size_t r)
{
	nv_mat b, full, got;
	nv_rfp c;
	double gap = 0.0, top = 0.0;
	int pad_ok;

	nv_mat_zeros(&b, n, r);
	for (size_t i = 0; i < n * r; i++)
		b.d[i] = rng_normal(&rng);
	nv_syrk_new(1.0, &b, 0, &full);
	is_int(nv_rfp_syrk(&b, &c), 0, "rfp_syrk %zux%zu", n, r);
	ok(c.n == n && c.nn == even(n), "rfp_syrk %zux%zu: order %zu stored as %zu", n, r, c.n, c.nn);
	from_rfp(&c, &got);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++) {
			gap = fmax(gap, fabs(got.d[i * n + j] - full.d[i * n + j]));
			top = fmax(top, fabs(full.d[i * n + j]));
		}
	ok(gap <= 1e-14 * top, "rfp_syrk %zux%zu: B·Bᵀ's lower triangle (gap %.2g of %.2g)", n, r,
	   gap, top);
	pad_ok = 1;
	if (c.nn != n)
		for (size_t j = 0; j <= n; j++)
			pad_ok &= c.a[nv_rfp_idx(c.nn, n, j)] == (j == n ? 1.0 : 0.0);
	ok(pad_ok, "rfp_syrk %zux%zu: the padding is the identity's last row", n, r);
	nv_rfp_free(&c);
	nv_mat_free(&b);
	nv_mat_free(&full);
	nv_mat_free(&got);
}

static void test_syrk(void)
{
	nv_mat b;
	nv_rfp c;

	syrk_case(10, 5);
	syrk_case(11, 5);
	syrk_case(1, 3);
	nv_mat_zeros(&b, 9, 0);
	is_int(nv_rfp_syrk(&b, &c), 0, "rfp_syrk of rank 0");
	ok(c.a[nv_rfp_idx(10, 3, 2)] == 0.0 && c.a[nv_rfp_idx(10, 9, 9)] == 1.0,
	   "rank 0: zero, the padding's diagonal 1");
	nv_rfp_free(&c);
	nv_mat_free(&b);
	nv_mat_zeros(&b, 6, 2);
	b.d[7] = NAN;
	is_int(nv_rfp_syrk(&b, &c), -1, "rfp_syrk: a NaN factor entry is refused: %s", nv_err());
	ok(c.a == NULL, "and nothing is left");
	nv_mat_free(&b);
}

/* nv_rfp_syrk32 against the f64 B·Bᵀ: each entry of the lower triangle
 * within γ_(r+2)·(|B|·|Bᵀ|)_ij (u = 2⁻²⁴: B rounded on both sides, r terms summed in f32),
 * and no closer than f32 allows somewhere (the products are f32's); the
 * padding as nv_rfp_syrk's; the same bits at one and two threads (fixed
 * tiles: n = 1100 makes several of NV_TILE_SYRK's) */
static void syrk32_case(size_t n, size_t r)
{
	nv_mat b, full, got, babs, bnd;
	nv_rfp c, c2;
	double u = ldexp(1.0, -24), gam = (r + 2) * u / (1 - (r + 2) * u), worst = 0.0, gap = 0.0;
	int pad_ok = 1;

	nv_mat_zeros(&b, n, r);
	nv_mat_zeros(&babs, n, r);
	for (size_t i = 0; i < n * r; i++) {
		b.d[i] = rng_normal(&rng) * (1.0 + (double)(i % 7));
		babs.d[i] = fabs(b.d[i]);
	}
	nv_syrk_new(1.0, &b, 0, &full);
	nv_syrk_new(1.0, &babs, 0, &bnd);
	is_int(nv_rfp_syrk32(&b, &c), 0, "rfp_syrk32 %zux%zu", n, r);
	from_rfp(&c, &got);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++) {
			double e = fabs(got.d[i * n + j] - full.d[i * n + j]);
			worst = fmax(worst, e / (gam * bnd.d[i * n + j]));
			gap = fmax(gap, e / bnd.d[i * n + j]);
		}
	ok(worst <= 1.0, "rfp_syrk32 %zux%zu: every entry within γ_(r+2)·(|B||Bᵀ|)_ij (worst %.3g of it)",
	   n, r, worst);
	ok(gap > 1e-12, "rfp_syrk32 %zux%zu: f32's sums, not f64's (largest gap %.2g of |B||Bᵀ|)", n,
	   r, gap);
	if (c.nn != n)
		for (size_t j = 0; j <= n; j++)
			pad_ok &= c.a[nv_rfp_idx(c.nn, n, j)] == (j == n ? 1.0 : 0.0);
	ok(pad_ok, "rfp_syrk32 %zux%zu: the padding is the identity's last row", n, r);
	nv_set_threads(2);
	is_int(nv_rfp_syrk32(&b, &c2), 0, "rfp_syrk32 %zux%zu at two threads", n, r);
	nv_set_threads(1);
	ok(!memcmp(c.a, c2.a, (c.nn / 2) * (c.nn + 1) * sizeof(double)),
	   "rfp_syrk32 %zux%zu: the same bits at one and two threads", n, r);
	nv_rfp_free(&c);
	nv_rfp_free(&c2);
	nv_mat_free(&b);
	nv_mat_free(&babs);
	nv_mat_free(&full);
	nv_mat_free(&bnd);
	nv_mat_free(&got);
}

static void test_syrk32(void)
{
	nv_mat b;
	nv_rfp c;

	syrk32_case(10, 5);
	syrk32_case(11, 37);
	syrk32_case(1100, 40);
	syrk32_case(1101, 3);
	nv_mat_zeros(&b, 6, 2);
	b.d[3] = INFINITY;
	is_int(nv_rfp_syrk32(&b, &c), -1, "rfp_syrk32: an infinite factor entry is refused: %s",
	       nv_err());
	ok(c.a == NULL, "and nothing is left");
	nv_mat_free(&b);
}

/* c ∘ H with H symmetric in f32 and its f64 diagonal: each entry the
 * product with H's entry there, exactly, at an even and an odd order (the
 * layout's two shapes) */
static void test_hadamard(void)
{
	for (size_t n = 37; n <= 38; n++) {
		nv_mat b, full, got;
		nv_mat32 h = {n, n, malloc(n * n * sizeof(float)), malloc(n * sizeof(double))};
		nv_rfp c;
		size_t bad = 0;

		nv_mat_zeros(&b, n, 4);
		for (size_t i = 0; i < n * 4; i++)
			b.d[i] = rng_normal(&rng);
		for (size_t i = 0; i < n; i++) {
			for (size_t j = 0; j <= i; j++)
				h.d[i * n + j] = h.d[j * n + i] = (float)rng_normal(&rng);
			h.d[i * n + i] = 1e6f; /* the f64 diagonal is read, not this */
			h.diag[i] = 1.0 + rng_unif(&rng) + 1e-12; /* not an f32 value */
		}
		nv_rfp_syrk(&b, &c);
		from_rfp(&c, &full);
		nv_rfp_hadamard32(&c, &h);
		from_rfp(&c, &got);
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j <= i; j++)
				bad += got.d[i * n + j] != full.d[i * n + j] * nv_mat32_at(&h, i, j);
		is_int((int)bad, 0, "rfp_hadamard32 (order %zu): every entry times H's entry there", n);
		if (n & 1)
			ok(c.a[nv_rfp_idx(c.nn, n, n)] == 1.0 && c.a[nv_rfp_idx(c.nn, n, 0)] == 0.0,
			   "rfp_hadamard32: the padding left as it was");
		nv_rfp_free(&c);
		nv_mat_free(&b);
		nv_mat_free(&full);
		nv_mat_free(&got);
		free(h.d);
		free(h.diag);
	}
}

/* max_i |x_i − y_i| / |y_i| */
static double max_rel_gap(const double *x, const double *y, size_t n)
{
	double gap = 0.0;

	for (size_t i = 0; i < n; i++)
		gap = fmax(gap, fabs(x[i] - y[i]) / fmax(fabs(y[i]), 1e-300));
	return gap;
}

/* x ← (L·Lᵀ)⁻¹·x for row-major lower L, by BLAS's triangular solves */
static void trsv_solve(const nv_mat *l, double *x)
{
	blasint n = (blasint)l->r;

	cblas_dtrsv(CblasRowMajor, CblasLower, CblasNoTrans, CblasNonUnit, n, l->d, n, x, 1);
	cblas_dtrsv(CblasRowMajor, CblasLower, CblasTrans, CblasNonUnit, n, l->d, n, x, 1);
}

/*
 * the factor in place and its solves, at an even and an odd order: L·Lᵀ =
 * A + shift·I to rounding, the solve the direct one; the f32 factor applied
 * is the f64 solve with the rounded factor; a factor beyond f32 is not kept
 */
static void chol_case(size_t n)
{
	nv_mat a, l, llt, lr;
	nv_rfp c;
	nv_pchol f = {0};
	double *b = malloc(n * sizeof(double)), *x = malloc(n * sizeof(double));
	double *y = malloc(n * sizeof(double)), gap = 0.0, amax = 0.0;

	spd_graded(&rng, &a, n, 1e6);
	to_rfp(&a, &c);
	is_int(nv_rfp_chol(&c, 0.5), 0, "rfp_chol of a Gram of condition 1e6 (order %zu)", n);
	from_rfp(&c, &l);
	nv_gemm_new(&l, 0, &l, 1, &llt);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double want = a.d[i * n + j] + (i == j ? 0.5 : 0.0);
			gap = fmax(gap, fabs(llt.d[i * n + j] - want));
			amax = fmax(amax, fabs(want));
		}
	/* Cholesky is backward stable: n·ε of max |A| */
	ok(gap <= 1e-13 * amax, "order %zu: L·Lᵀ = A + shift·I (gap %.2g of %.2g)", n, gap, amax);
	for (size_t i = 0; i < n; i++)
		b[i] = rng_normal(&rng);
	for (size_t i = 0; i < n; i++)
		a.d[i * n + i] += 0.5;
	nv_solve_spd(&a, b, y, 0.0);
	memcpy(x, b, n * sizeof(double));
	is_int(nv_rfp_chol_solve(&c, x), 0, "order %zu: rfp_chol_solve", n);
	gap = max_rel_gap(x, y, n);
	/* two factorizations of one matrix of condition ≤ 1e6: 1e-9 relative */
	ok(gap <= 1e-9, "order %zu: rfp_chol_solve is the direct solve (%.2g)", n, gap);
	is_int(nv_pchol_keep(&c, &f), 0, "order %zu: the factor kept in f32", n);
	ok(f.n == n && f.p[n * (n + 1) / 2 - 1] == (float)l.d[n * n - 1],
	   "packed by rows: the last entry is L[n-1][n-1]");
	/* the reference: the f32 entries back in f64, solved by BLAS */
	nv_mat_zeros(&lr, n, n);
	for (size_t i = 0, k = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++, k++)
			lr.d[i * n + j] = (double)f.p[k];
	memcpy(y, b, n * sizeof(double));
	trsv_solve(&lr, y);
	memcpy(x, b, n * sizeof(double));
	nv_pchol_apply(&f, x);
	gap = max_rel_gap(x, y, n);
	/* the same triangular solves in another summation order: cond(L) · n · ε */
	ok(gap <= 1e-10, "order %zu: pchol_apply is the f64 solve with the f32 factor (%.2g)", n, gap);
	c.a[nv_rfp_idx(c.nn, n - 1, 0)] = 1e39;
	is_int(nv_pchol_keep(&c, &f), 1, "order %zu: an entry beyond f32 is not kept: 1", n);
	ok(f.p == NULL && f.n == 0, "and nothing is left");
	x[1] = NAN;
	is_int(nv_rfp_chol_solve(&c, x), -1, "rfp_chol_solve: a NaN right-hand side is refused: %s",
	       nv_err());
	c.a[nv_rfp_idx(c.nn, 1, 0)] = INFINITY;
	is_int(nv_rfp_chol(&c, 0.0), -1, "rfp_chol: an infinite entry is refused: %s", nv_err());
	nv_rfp_free(&c);
	nv_mat_free(&a), nv_mat_free(&l), nv_mat_free(&llt), nv_mat_free(&lr);
	free(b), free(x), free(y);
}

/*
 * nv_pchol_apply's two kernels (AVX2, the portable loops) give the same
 * bits: every order from 0 to 40 (each remainder of the four-wide steps,
 * and rows shorter than one step) and 333, on a random factor with a
 * positive diagonal and a random right-hand side
 */
static void test_apply_kernels(void)
{
	int avx = (nv_pchol_simd(1), nv_pchol_simd(1)), same = 1;

	for (size_t n = 0; n <= 41; n++) {
		size_t o = n == 41 ? 333 : n;
		nv_pchol f = {o, malloc((o * (o + 1) / 2 + 1) * sizeof(float))};
		double *a = malloc((o + 1) * sizeof(double)), *b = malloc((o + 1) * sizeof(double));
		for (size_t i = 0, k = 0; i < o; i++)
			for (size_t j = 0; j <= i; j++, k++)
				f.p[k] = (float)(j == i ? 1.0 + fabs(rng_normal(&rng)) : 0.3 * rng_normal(&rng));
		for (size_t i = 0; i < o; i++)
			a[i] = b[i] = rng_normal(&rng);
		nv_pchol_simd(1);
		nv_pchol_apply(&f, a);
		nv_pchol_simd(0);
		nv_pchol_apply(&f, b);
		if (memcmp(a, b, o * sizeof(double))) {
			diag("order %zu: the kernels differ", o);
			same = 0;
		}
		nv_pchol_free(&f);
		free(a), free(b);
	}
	ok(same, "pchol_apply: the AVX2 kernel%s and the portable loops give the same bits",
	   avx ? "" : " (not on this CPU: the portable twice)");
	nv_pchol_simd(1);
}

/* (x − y)ᵀ A (x − y) / yᵀ A y: x's excess of the quadratic over its minimum y, relative */
static double energy_gap(const nv_mat *a, const double *x, const double *y)
{
	size_t n = a->r;
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			num += (x[i] - y[i]) * a->d[i * n + j] * (x[j] - y[j]);
			den += y[i] * a->d[i * n + j] * y[j];
		}
	return num / den;
}

/* the kept f32 factor of a + shift·I (n × n), factored in place in RFP */
static int keep_factor(const nv_mat *a, double shift, nv_pchol *f)
{
	nv_rfp l;
	int rc;

	to_rfp(a, &l);
	rc = nv_rfp_chol(&l, shift);
	if (rc == 0)
		rc = nv_pchol_keep(&l, f);
	nv_rfp_free(&l);
	return rc;
}

/* PCG's runs on a2 from x = 0: its own factor, then that of the matrix
 * before the change, bounded steps and the same bits at two threads */
static void pcg_runs(size_t n, const nv_mat *a, const nv_mat *a2, const nv_rfp *c2,
		     const double *b, const double *y)
{
	nv_pchol f = {0};
	double *x = calloc(n, sizeof(double)), *x2 = calloc(n, sizeof(double));
	int its, its2;

	is_int(keep_factor(a2, 0.0, &f), 0, "pcg: the changed Gram's own factor, kept in f32");
	is_int(nv_pcg_rfp(c2, 0.0, &f, b, x, 1e-6, 30, &its), 0, "pcg with its own factor: converges");
	/* f32 rounding moves M⁻¹A from I by about √cond·6e-8 = 6e-4: a step or two more */
	ok(its <= 3, "pcg with its own f32 factor: %d step(s)", its);
	ok(energy_gap(a2, x, y) <= 1e-12, "pcg with its own factor: the exact solve (%.2g)",
	   energy_gap(a2, x, y));
	nv_pchol_free(&f);
	is_int(keep_factor(a, 0.0, &f), 0, "pcg: the factor of the Gram before the change");
	memset(x, 0, n * sizeof(double));
	is_int(nv_pcg_rfp(c2, 0.0, &f, b, x, 1e-6, 30, &its), 0,
	       "pcg with a nearby factor: converges within 30 steps");
	ok(its >= 2 && its <= 30, "pcg with a nearby factor: %d steps", its);
	ok(energy_gap(a2, x, y) <= 1e-12 * 1.5,
	   "pcg: excess %.2g of the quadratic, at most tol^2 (1e-12) with M near A",
	   energy_gap(a2, x, y));
	memset(x, 0, n * sizeof(double));
	is_int(nv_pcg_rfp(c2, 0.0, &f, b, x, 1e-6, 1, &its), 1, "pcg: not converged within 1 step: 1");
	is_int(its, 1, "pcg: no more steps than allowed");
	memset(x, 0, n * sizeof(double));
	nv_pcg_rfp(c2, 0.0, &f, b, x, 1e-6, 30, &its);
	nv_set_threads(2);
	nv_pcg_rfp(c2, 0.0, &f, b, x2, 1e-6, 30, &its2);
	nv_set_threads(1);
	ok(its == its2 && memcmp(x, x2, n * sizeof(double)) == 0, "pcg: the same bits at 1 and 2 threads");
	nv_pchol_free(&f);
	free(x);
	free(x2);
}

/*
 * nv_pcg_rfp on a Gram of condition 1e8, at an even and an odd order:
 * preconditioned with its own factor (kept in f32) it is the direct solve
 * within three steps; with the factor of a nearby matrix (a rank-8 change
 * of 1%, as an ALS sweep makes) it stops within its bound, its excess of
 * the quadratic at most tol² (the exact solve as the reference); never
 * after more steps than allowed; a system that is not positive definite is
 * reported (1); the same bits at 1 and 2 threads.
 */
static void pcg_case(size_t n)
{
	nv_mat a, a2, u;
	nv_rfp c2;
	nv_pchol f = {0};
	double *b = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
	double *x = calloc(n, sizeof(double));
	int its;

	spd_graded(&rng, &a, n, 1e8);
	nv_mat_zeros(&u, n, 8);
	for (size_t i = 0; i < n * 8; i++)
		u.d[i] = rng_normal(&rng);
	nv_syrk_new(0.01 / 8, &u, 0, &a2); /* a2 = a + 1% · U Uᵀ / 8 */
	for (size_t i = 0; i < n * n; i++)
		a2.d[i] += a.d[i];
	for (size_t i = 0; i < n; i++)
		b[i] = rng_normal(&rng);
	/* the exact solution, by LAPACK on the whole matrix */
	is_int(nv_solve_spd(&a2, b, y, 0.0), 0, "pcg (order %zu): the direct solve of the changed Gram", n);
	to_rfp(&a2, &c2);
	pcg_runs(n, &a, &a2, &c2, b, y);
	/* an indefinite system: a direction of negative curvature */
	keep_factor(&a, 0.0, &f);
	for (size_t i = 0; i < n; i++)
		c2.a[nv_rfp_idx(c2.nn, i, i)] -= 2.0;
	is_int(nv_pcg_rfp(&c2, 0.0, &f, b, x, 1e-6, 30, &its), 1, "pcg: an indefinite system is 1");
	nv_pchol_free(&f);
	for (size_t i = 0; i < n; i++)
		c2.a[nv_rfp_idx(c2.nn, i, i)] -= 1e3;
	is_int(nv_rfp_chol(&c2, 0.0), 1, "rfp_chol of a negative definite matrix: 1 (%s)", nv_err());
	nv_rfp_free(&c2);
	nv_mat_free(&a);
	nv_mat_free(&a2);
	nv_mat_free(&u);
	free(b);
	free(y);
	free(x);
}

int main(void)
{
	nv_set_threads(1);
	test_layout();
	test_syrk();
	test_syrk32();
	test_hadamard();
	test_apply_kernels();
	chol_case(90);
	chol_case(91);
	pcg_case(120);
	pcg_case(121);
	return done_testing();
}
