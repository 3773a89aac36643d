/*
 * test-vmath.c - the vectorized exponentials against f64 loops of their
 * definitions (TAP): max, softmax, log-sum-exp, KL and its gradient, SwiGLU
 * and its backward; the same bits on every call; lengths that leave every
 * vector width (4, 8, 16 lanes) a remainder.
 *
 * Tolerances: libmvec's expf is within 4 ulp (2.4e-7 relative) and an f32
 * result is rounded once more, so f32 outputs are held to 1e-6 relative
 * (2e-6 where a quotient and a product follow the exponential); sums of
 * f64 exponentials (4 ulp each, summed in another order) to 1e-13 relative.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vmath.h"

static tap_rng rng = { 7 };
static const size_t lens[] = { 1, 3, 17, 50, 511, 49152 };

static float *rnd(size_t n, double scale)
{
	float *x = malloc(n * sizeof *x);

	for (size_t i = 0; i < n; i++)
		x[i] = (float)(scale * rng_normal(&rng));
	return x;
}

static double ref_lse(const float *x, size_t n)
{
	double mx = x[0], s = 0;

	for (size_t i = 1; i < n; i++)
		mx = fmax(mx, x[i]);
	for (size_t i = 0; i < n; i++)
		s += exp((double)x[i] - mx);
	return mx + log(s);
}

static double rel(double a, double b)
{
	return fabs(a - b) / fmax(fabs(b), 1e-30);
}

static void check_softmax(size_t n)
{
	float *x = rnd(n, 4.0), *y = malloc(n * sizeof *y), *y2 = malloc(n * sizeof *y2);
	double lse = ref_lse(x, n), err = 0, sum = 0;
	float mx = x[0];

	for (size_t i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	ok(nv_max_f(x, n) == mx, "max of %zu", n);
	ok(rel(nv_lse(x, n), lse) < 1e-13, "log-sum-exp of %zu (%.2g)", n, rel(nv_lse(x, n), lse));
	memcpy(y, x, n * sizeof *y);
	nv_softmax_f(y, n);
	memcpy(y2, x, n * sizeof *y2);
	nv_softmax_f(y2, n);
	/* x − max is rounded to f32 first: exp moves by 2^-24 of |x − max| more */
	for (size_t i = 0; i < n; i++) {
		err = fmax(err, rel(y[i], exp((double)x[i] - lse)) /
					(1e-6 + 0x1p-24 * fabs((double)x[i] - mx)));
		sum += y[i];
	}
	ok(err <= 1, "softmax of %zu: each probability within 1e-6 + 2^-24·|x − max| of f64's "
	   "(%.2g of it)", n, err);
	ok(fabs(sum - 1) < 1e-6, "softmax of %zu sums to 1 (%.2g)", n, sum - 1);
	ok(!memcmp(y, y2, n * sizeof *y), "softmax of %zu: the same bits twice", n);
	free(x);
	free(y);
	free(y2);
}

static void check_kl(size_t n)
{
	float *p = rnd(n, 3.0), *q = rnd(n, 3.0), *d = malloc(n * sizeof *d);
	double lp = ref_lse(p, n), lq = ref_lse(q, n), kl = 0, derr = 0, kd;

	for (size_t i = 0; i < n; i++) {
		double a = p[i] - lp, b = q[i] - lq;

		kl += exp(a) * (a - b);
	}
	ok(rel(nv_kl_row(p, lp, q, lq, n), kl) < 1e-12 || fabs(nv_kl_row(p, lp, q, lq, n) - kl) < 1e-15,
	   "KL of %zu: %.17g against %.17g", n, nv_kl_row(p, lp, q, lq, n), kl);
	ok(nv_kl_row(p, lp, p, lp, n) == 0, "KL(p ‖ p) of %zu is 0", n);
	memcpy(d, q, n * sizeof *d);
	kd = nv_kl_row_diff(p, lp, d, lq, n);
	ok(kd == nv_kl_row(p, lp, q, lq, n), "the KL with its gradient is the same bits");
	for (size_t i = 0; i < n; i++)
		derr = fmax(derr, fabs(d[i] - (exp(q[i] - lq) - exp(p[i] - lp))));
	ok(derr < 1e-7, "its gradient q − p of %zu within %.2g (f32 of probabilities)", n, derr);
	free(p);
	free(q);
	free(d);
}

static void check_silu(size_t n)
{
	float *g = rnd(n, 5.0), *u = rnd(n, 1.0), *dm = rnd(n, 1.0), *y = malloc(n * sizeof *y);
	float *dg = malloc(n * sizeof *dg), *du = malloc(n * sizeof *du);
	double ey = 0, eg = 0, eu = 0;

	nv_silu_mul(g, u, y, n);
	nv_silu_back(g, u, dm, dg, du, n);
	for (size_t i = 0; i < n; i++) {
		double s = 1 / (1 + exp(-(double)g[i])), a = g[i] * s;
		double da = s * (1 + g[i] * (1 - s));

		ey = fmax(ey, rel(y[i], a * u[i]));
		/* silu' takes 1 − s in f32: an absolute error of s's ulps times |g| */
		eg = fmax(eg, fabs(dg[i] - dm[i] * u[i] * da) /
				      (fabs((double)dm[i] * u[i]) * (1 + fabs((double)g[i])) * 1e-6));
		eu = fmax(eu, rel(du[i], dm[i] * a));
	}
	ok(ey < 2e-6, "silu(g)·u of %zu within %.2g", n, ey);
	ok(eg <= 1 && eu < 2e-6,
	   "its backward of %zu: dg within 1e-6·|dm·u|·(1 + |g|) (%.2g of it), du within %.2g", n,
	   eg, eu);
	memcpy(dg, g, n * sizeof *dg);
	nv_silu_mul(dg, u, dg, n);
	ok(!memcmp(dg, y, n * sizeof *y), "silu(g)·u in place of g: the same bits");
	free(g);
	free(u);
	free(dm);
	free(y);
	free(dg);
	free(du);
}

int main(void)
{
	for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
		check_softmax(lens[i]);
		check_kl(lens[i]);
		check_silu(lens[i]);
	}
	return done_testing();
}
