/*
 * test-clhost.c - the host side of the device encoder (cl/clhost.c): the
 * top eigenpairs, the polar factor, the inverse of an upper factor and the
 * non-negative rank-1 fit, each against its defining property on
 * fixed-seed inputs (the packer the device shares: test-pack).
 *
 * Tolerances: f64 factorizations of well-conditioned matrices of order
 * ≤ 24 are exact to ~1e-13; 1e-10 leaves room for conditioning.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clhost.h"
#include "err.h"
#include "tap.h"

/*
 * LeakSanitizer's stop-the-world tracer now and then dies of signal 11 while
 * PoCL's worker threads wind down at exit (seen under make SAN=1 check with
 * a fresh kernel cache), failing a test whose checks all passed.  The leak
 * check of the OpenCL unit tests is off; ASan and UBSan stay on, and the
 * tools' OpenCL runs keep theirs (tests/lsan-opencl.supp).
 */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "detect_leaks=0";
}

static tap_rng rng = { 77 };

/* max |VᵀV − I| for v (rows × cols, row-major) */
static double orth_err(const double *v, int rows, int cols)
{
	double e = 0;

	for (int a = 0; a < cols; a++)
		for (int c = 0; c < cols; c++) {
			double d = 0;
			for (int i = 0; i < rows; i++)
				d += v[i * cols + a] * v[i * cols + c];
			e = fmax(e, fabs(d - (a == c)));
		}
	return e;
}

static void test_eig(void)
{
	enum { S = 12, K = 4 };
	double b[S * S], g[S * S], g0[S * S], lam[K], vec[S * K], e = 0;

	for (int i = 0; i < S * S; i++)
		b[i] = rng_normal(&rng);
	for (int i = 0; i < S; i++)
		for (int j = 0; j < S; j++) {
			double v = 0;
			for (int k = 0; k < S; k++)
				v += b[i * S + k] * b[j * S + k];
			g[i * S + j] = g0[i * S + j] = v;
		}
	ok(clh_eig_top(g, S, K, lam, vec) == 0, "eig of a 12×12 Gram");
	ok(lam[0] >= lam[1] && lam[1] >= lam[2] && lam[2] >= lam[3] && lam[3] > 0,
	   "eigenvalues descending");
	/* G v = λ v for each kept pair */
	for (int c = 0; c < K; c++)
		for (int i = 0; i < S; i++) {
			double gv = 0;
			for (int j = 0; j < S; j++)
				gv += g0[i * S + j] * vec[j * K + c];
			e = fmax(e, fabs(gv - lam[c] * vec[i * K + c]) / lam[0]);
		}
	ok(e < 1e-10, "G v = λ v (%.2g)", e);
	e = orth_err(vec, S, K);
	ok(e < 1e-12, "VᵀV = I (%.2g)", e);
	memcpy(g, g0, sizeof(g));
	g[3 * S + 5] = NAN;
	int rc = clh_eig_top(g, S, K, lam, vec);
	ok(rc < 0 && strstr(nv_err(), "not finite"), "a NaN in the Gram is an error, not an abort: %s",
	   nv_err());
}

static void test_polar(void)
{
	enum { R = 9 };
	double m[R * R], m0[R * R], rot[R * R], p[R * R], e, asym = 0;

	for (int i = 0; i < R * R; i++)
		m[i] = m0[i] = rng_normal(&rng);
	ok(clh_polar(m, R, rot) == 0, "polar of a 9×9 matrix");
	/* RᵀR = I, and Rᵀ M is symmetric positive semidefinite (M = R P) */
	e = orth_err(rot, R, R);
	for (int i = 0; i < R; i++)
		for (int j = 0; j < R; j++) {
			double q = 0;
			for (int k = 0; k < R; k++)
				q += rot[k * R + i] * m0[k * R + j];
			p[i * R + j] = q;
		}
	for (int i = 0; i < R; i++)
		for (int j = 0; j < R; j++)
			asym = fmax(asym, fabs(p[i * R + j] - p[j * R + i]));
	ok(e < 1e-12, "RᵀR = I (%.2g)", e);
	ok(asym < 1e-10, "RᵀM is symmetric (%.2g)", asym);
	m[4] = INFINITY;
	ok(clh_polar(m, R, rot) < 0 && strstr(nv_err(), "not finite"),
	   "an infinity is an error, not an abort: %s", nv_err());
}

static void test_upper_inv(void)
{
	enum { N = 7, LD = 10 };
	double u[N * LD], inv[N * N], e = 0;

	memset(u, 0, sizeof(u));
	for (int i = 0; i < N; i++)
		for (int j = i; j < N; j++)
			u[i * LD + j] = i == j ? 1.0 + rng_unif(&rng) : rng_normal(&rng);
	ok(clh_upper_inv_t(u, LD, N, inv) == 0, "inverse of an upper factor (ld 10)");
	/* inv = (U⁻¹)ᵀ: Σ_k U[i,k] inv[j,k] = (U U⁻¹)[i,j] = δ_ij */
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			double s = 0;
			for (int k = 0; k < N; k++)
				s += u[i * LD + k] * inv[j * N + k];
			e = fmax(e, fabs(s - (i == j)));
		}
	ok(e < 1e-12, "U · (U⁻¹) = I (%.2g)", e);
	ok(inv[0 * N + 3] == 0.0, "the transpose is lower triangular");
}

static void test_rank1(void)
{
	enum { R = 10, C = 5 };
	double u[R], v[C], a[R * C], l[R], rt[C], e = 0;

	for (int i = 0; i < R; i++)
		u[i] = 0.5 + rng_unif(&rng);
	for (int j = 0; j < C; j++)
		v[j] = 0.5 + rng_unif(&rng);
	for (int i = 0; i < R; i++)
		for (int j = 0; j < C; j++)
			a[i * C + j] = u[i] * v[j];
	clh_rank1_pos(a, R, C, l, rt);
	for (int i = 0; i < R; i++)
		for (int j = 0; j < C; j++)
			e = fmax(e, fabs(l[i] * rt[j] - a[i * C + j]));
	ok(e < 1e-9, "an exact positive rank-1 matrix is recovered (%.2g)", e);
}

int main(void)
{
	test_eig();
	test_polar();
	test_upper_inv();
	test_rank1();
	return done_testing();
}
