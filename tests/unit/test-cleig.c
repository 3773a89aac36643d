/*
 * test-cleig.c - the latents' top eigenpairs on the device (PoCL) by subspace
 * iteration, against the host's f64 eigensolver on Grams of known spectrum.
 *
 * G = U·diag(λ)·Uᵀ, U orthogonal, λ_i = i^(−1.2) (the squares of singular
 * values falling as i^(−0.6), as a whitened weight's do), s = 192, r = 48,
 * so k = 64 and the gap λ_(k+1)/λ_r = (49/65)^1.2 = 0.71.  What must hold:
 * - Cauchy's interlacing: no Ritz value above the eigenvalue of its place
 *   (up to f32 rounding of G: 1e-6 of λ_1 asked);
 * - the Ritz vectors orthonormal to 1e-4 (f32, k·2⁻²⁴ ≈ 4e-6 expected);
 * - the leading pairs converged: ‖G·v − λ·v‖ ≤ 1e-3·λ_1 for the top 8,
 *   whose error falls as (λ_65/λ_8)^5 ≈ 1e-5 (f32 rounding then dominates);
 * - the r Ritz values' sum within 0.5% of the eigenvalues' (the subspace's
 *   error in λ_i falls as (λ_(k+1)/λ_i)^(2·5): at most 3% for the last,
 *   less than 0.3% summed over these λ);
 * - the same bytes from a second run (a fixed start);
 * - the host's solver where the subspace is the whole space (k ≥ s), and
 *   -1 with the reason for a Gram that is not finite;
 * - a Gram of rank 12 below the subspace's 16 (r = 8): never wrong pairs;
 *   either the top 8 to 1e-5 with orthonormal vectors, or the host's solver
 *   asked for (today: the basis comes out 0.5 from orthonormal, so 1);
 *   the same where the subspace reaches below f32's resolution of G
 *   (eigenvalues down to 1e-12): the leading pairs right, or the host's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleig.h"
#include "linalg.h"
#include "tap.h"
#include "cltest.h"

enum { S = 192, R = 48 };

static tap_rng rng = { 0xe16 };

/* g (s × s) ← U·diag(lam)·Uᵀ with U the eigenvectors of a random symmetric matrix */
static void known_gram(size_t s, const double *lam, double *g)
{
	nv_mat a, u;
	double *ev = malloc(s * sizeof(double));

	nv_mat_zeros(&a, s, s);
	for (size_t i = 0; i < s; i++)
		for (size_t j = 0; j <= i; j++)
			a.d[i * s + j] = a.d[j * s + i] = rng_normal(&rng);
	nv_sym_eig(&a, ev, &u);
	for (size_t i = 0; i < s; i++)
		for (size_t j = 0; j < s; j++) {
			double v = 0.0;
			for (size_t k = 0; k < s; k++)
				v += u.d[i * s + k] * lam[k] * u.d[j * s + k];
			g[i * s + j] = v;
		}
	nv_mat_free(&a);
	nv_mat_free(&u);
	free(ev);
}

/* max over the top `top` pairs of ‖G·v − λ·v‖ (G, v on the host) */
static double residual(const double *g, size_t s, const float *v, const double *lam, size_t r,
		       size_t top)
{
	double worst = 0.0;

	for (size_t c = 0; c < top; c++) {
		double e2 = 0.0;
		for (size_t i = 0; i < s; i++) {
			double x = -lam[c] * v[i * r + c];
			for (size_t j = 0; j < s; j++)
				x += g[i * s + j] * v[j * r + c];
			e2 += x * x;
		}
		worst = fmax(worst, sqrt(e2));
	}
	return worst;
}

/* ‖VᵀV − I‖_max of v (s × r) */
static double orthonormality(const float *v, size_t s, size_t r)
{
	double worst = 0.0;

	for (size_t a = 0; a < r; a++)
		for (size_t b = 0; b < r; b++) {
			double x = a == b ? -1.0 : 0.0;
			for (size_t i = 0; i < s; i++)
				x += (double)v[i * r + a] * v[i * r + b];
			worst = fmax(worst, fabs(x));
		}
	return worst;
}

/* G = U·diag(lam)·Uᵀ (g, the host's f64) to the device, and its top r pairs
 * there: the return of nvcl_eig_top, ritz and v (s × r) read back; G left on
 * the device in *gd */
static int run_known(nvcl_q *q, const double *lam, size_t r, double *g, double *ritz, float *v,
		     nvcl_eig_info *info, cl_mem *gd)
{
	float *gf = malloc(sizeof(float) * S * S);
	cl_mem vd = nvcl_q_buf(q, S * r, "V");
	int rc;

	known_gram(S, lam, g);
	for (size_t i = 0; i < S * S; i++)
		gf[i] = (float)g[i];
	*gd = nvcl_q_upload(q, gf, S * S, "G");
	rc = nvcl_eig_top(q, *gd, S, r, NVCL_EIG_ITERS, ritz, vd, info);
	nvcl_q_read(q, vd, 0, v, S * r);
	nvcl_release(&vd);
	free(gf);
	return rc;
}

static void test_known(nvcl_q *q)
{
	double lam[S], g[S * S], ritz[R], exact = 0.0, got = 0.0, over = 0.0;
	float v[S * R], v2[S * R];
	nvcl_eig_info info;
	cl_mem G, V = nvcl_q_buf(q, S * R, "V");
	int rc;

	for (size_t i = 0; i < S; i++)
		lam[i] = pow((double)(i + 1), -1.2);
	rc = run_known(q, lam, R, g, ritz, v, &info, &G);
	if (!ok(rc == 0 && nvcl_q_ok(q) == 0 && info.k == 64,
		"G of %d × %d, r %d: done in a subspace of %zu (orth %.1e, %d ridge growths)", S,
		S, R, info.k, info.orth, info.grows))
		diag("rc %d: %s", rc, q->why);
	for (size_t i = 0; i < R; i++) {
		over = fmax(over, ritz[i] - lam[i]);
		exact += lam[i];
		got += ritz[i];
	}
	ok(over <= 1e-6 * lam[0], "no Ritz value above its eigenvalue (worst excess %.1e)", over);
	ok(fabs(got / exact - 1.0) <= 5e-3, "the %d values' sum within 0.5%% of the eigenvalues' "
	   "(%.5f of it)", R, got / exact);
	double e = residual(g, S, v, ritz, R, 8);
	ok(e <= 1e-3 * lam[0], "the top 8 pairs: ‖G·v − λ·v‖ at most %.1e (λ₁ = 1)", e);
	e = orthonormality(v, S, R);
	ok(e <= 1e-4, "the Ritz vectors orthonormal to %.1e", e);
	rc = nvcl_eig_top(q, G, S, R, NVCL_EIG_ITERS, ritz, V, NULL);
	nvcl_q_read(q, V, 0, v2, S * R);
	ok(rc == 0 && memcmp(v, v2, sizeof(v)) == 0, "a second run: the same bytes");
	nvcl_release(&G);
	nvcl_release(&V);
}

/* a Gram of rank 12 below the subspace's 16 (r = 8): its pairs right, or the host's asked for */
static void test_low_rank(nvcl_q *q)
{
	double lam[S], g[S * S], ritz[8], worst = 0.0;
	float v[S * 8];
	nvcl_eig_info info;
	cl_mem G;
	int rc;

	for (size_t i = 0; i < S; i++)
		lam[i] = i < 12 ? pow((double)(i + 1), -1.2) : 0.0;
	rc = run_known(q, lam, 8, g, ritz, v, &info, &G);
	for (size_t i = 0; rc == 0 && i < 8; i++)
		worst = fmax(worst, fabs(ritz[i] - lam[i]));
	ok(!q->err && (rc == 1 || (worst <= 1e-5 && orthonormality(v, S, 8) <= 1e-4)),
	   "rank 12 < k = %zu: %s", info.k,
	   rc == 1 ? "the host's solver asked for" : "its pairs right");
	nvcl_release(&G);
}

/* eigenvalues from 1 down to 1e-12 over the first 32 (geometric), then
 * 1e-12: the subspace's 24 directions reach 1e-9 of λ₁, below what an f32
 * G resolves (some 1e-7 of λ₁), so its later columns are rounding.  The
 * leading pairs must still come out right (the top 6, down to 1e-2, to
 * 1e-4 of themselves; none above its eigenvalue by more than G's rounding)
 * with orthonormal vectors, or the host's solver be asked for */
static void test_wide_range(nvcl_q *q)
{
	double lam[S], g[S * S], ritz[16], rel = 0.0, over = 0.0;
	float v[S * 16];
	nvcl_eig_info info;
	cl_mem G;
	int rc;

	for (size_t i = 0; i < S; i++)
		lam[i] = pow(1e-12, (double)(i < 31 ? i : 31) / 31.0);
	rc = run_known(q, lam, 16, g, ritz, v, &info, &G);
	for (size_t i = 0; rc == 0 && i < 16; i++) {
		if (i < 6)
			rel = fmax(rel, fabs(ritz[i] - lam[i]) / lam[i]);
		over = fmax(over, ritz[i] - lam[i]);
	}
	ok(!q->err &&
	   (rc == 1 || (rel <= 1e-4 && over <= 1e-6 && orthonormality(v, S, 16) <= 1e-4)),
	   "λ from 1 to 1e-12, r 16: %s (top 6 within %.1e, excess %.1e, %d ridge growths)",
	   rc == 1 ? "the host's solver asked for" : "its pairs right", rel, over, info.grows);
	nvcl_release(&G);
}

static void test_declines(nvcl_q *q)
{
	float gf[S * S];
	double lam[S];
	cl_mem G, V = nvcl_q_buf(q, S * S, "V");

	for (size_t i = 0; i < S * S; i++)
		gf[i] = 0.0f;
	for (size_t i = 0; i < S; i++)
		gf[i * S + i] = 1.0f;
	G = nvcl_q_upload(q, gf, S * S, "G");
	is_int(nvcl_eig_dim(S, 160), S, "r 160 of %d: the subspace would be all of it", S);
	ok(nvcl_eig_top(q, G, S, 160, NVCL_EIG_ITERS, lam, V, NULL) == 1 && !q->err,
	   "so the host's solver is asked for (1), the queue unharmed");
	ok(nvcl_eig_top(q, G, S, 8, 0, lam, V, NULL) == 1 && !q->err, "no iterations: 1");
	gf[7 * S + 3] = NAN;
	nvcl_q_write(q, G, 0, gf, S * S);
	ok(nvcl_eig_top(q, G, S, 8, NVCL_EIG_ITERS, lam, V, NULL) == -1 &&
	   strstr(q->why, "not finite"), "a NaN in G: -1, '%s'", q->why);
	nvcl_release(&G);
	nvcl_release(&V);
}

int main(void)
{
	nvcl_ctx c;
	nvcl_q q;

	if (cl_open_q(&c, &q)) {
		test_known(&q);
		test_low_rank(&q);
		test_wide_range(&q);
		test_declines(&q); /* last: it leaves the queue failed */
		nvcl_q_free(&q);
		nvcl_close(&c);
	}
	return done_testing();
}
