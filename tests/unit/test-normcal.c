/*
 * test-normcal.c - the final-norm calibration (normcal.h): its KL against a
 * naive f64 one written here, its gradient against central differences,
 * the fit's promises (SEL never worse, the planted weights found, the
 * stored dtype's rounding, same bytes twice) and its refusals.
 */
#include "err.h"
#include "f16.h"
#include "normcal.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { D = 24, V = 50, FIT = 96, SEL = 48, ROWS = FIT + SEL };

typedef struct {
	float E[V * D], n[ROWS * D], ns[ROWS * D], wstar[D];
	nc_data d;
} problem;

/* rows of unit rms, a head of entries ~N(0, 1): logits of spread ~√D ≈ 5 */
static void make(problem *p, tap_rng *r)
{
	for (size_t i = 0; i < V * D; i++)
		p->E[i] = (float)rng_normal(r);
	for (size_t t = 0; t < ROWS; t++) {
		double ss = 0;

		for (size_t i = 0; i < D; i++) {
			p->n[t * D + i] = (float)rng_normal(r);
			ss += p->n[t * D + i] * p->n[t * D + i];
		}
		for (size_t i = 0; i < D; i++)
			p->n[t * D + i] /= (float)sqrt(ss / D);
	}
	/* the source: the same states and head, the planted weights w* ∈ [0.1, 0.4] */
	for (size_t i = 0; i < D; i++)
		p->wstar[i] = (float)(0.1 + 0.3 * rng_unif(r));
	for (size_t t = 0; t < ROWS; t++)
		for (size_t i = 0; i < D; i++)
			p->ns[t * D + i] = p->wstar[i] * p->n[t * D + i];
	p->d = (nc_data){ D, V, p->E, p->E, p->n, p->ns, FIT, SEL };
}

/* the mean KL over rows [r0, r0+n) in f64, straight from the definition */
static double naive_kl(const problem *p, const float *w, size_t r0, size_t n)
{
	double sum = 0;

	for (size_t t = r0; t < r0 + n; t++) {
		double z[V], zs[V], mz = -INFINITY, ms = -INFINITY, sz = 0, ss = 0;

		for (size_t v = 0; v < V; v++) {
			z[v] = zs[v] = 0;
			for (size_t i = 0; i < D; i++) {
				z[v] += (double)w[i] * p->n[t * D + i] * p->E[v * D + i];
				zs[v] += (double)p->ns[t * D + i] * p->E[v * D + i];
			}
			mz = fmax(mz, z[v]);
			ms = fmax(ms, zs[v]);
		}
		for (size_t v = 0; v < V; v++) {
			sz += exp(z[v] - mz);
			ss += exp(zs[v] - ms);
		}
		for (size_t v = 0; v < V; v++) {
			double lp = zs[v] - ms - log(ss), lq = z[v] - mz - log(sz);

			sum += exp(lp) * (lp - lq);
		}
	}
	return sum / (double)n;
}

static void check_kl_and_gradient(const problem *p, tap_rng *r)
{
	float w[D], wp[D];
	double kl, g[D], worst = 0, gmax = 0, want = 0;

	for (size_t i = 0; i < D; i++)
		w[i] = (float)(0.05 + 0.5 * rng_unif(r));
	ok(nc_kl(&p->d, w, 0, NULL, ROWS, &kl, g, NULL) == 0, "KL and gradient of all rows");
	want = naive_kl(p, w, 0, ROWS);
	/* f32 logits of magnitude ≤ ~10: KL agrees to ~1e-6 relative; 1e-5 leaves room */
	ok(fabs(kl - want) <= 1e-5 * want, "the KL is the f64 definition's (%.8f, want %.8f)", kl,
	   want);
	/* central differences of the f64 KL, step 1e-3: truncation O(h²·KL''') ≈ 1e-6 */
	for (size_t i = 0; i < D; i++) {
		double h = 1e-3, up, dn;

		memcpy(wp, w, sizeof w);
		wp[i] = w[i] + (float)h;
		up = naive_kl(p, wp, 0, ROWS);
		wp[i] = w[i] - (float)h;
		dn = naive_kl(p, wp, 0, ROWS);
		worst = fmax(worst, fabs(g[i] - (up - dn) / (double)(wp[i] + 2 * h - wp[i])));
		gmax = fmax(gmax, fabs(g[i]));
	}
	ok(worst <= 1e-3 * gmax, "the gradient is the central differences' (|err| %.2g of %.2g)",
	   worst, gmax);
	size_t idx[3] = { 5, 100, 7 };
	double k3, g3[D], k1 = 0;
	nc_kl(&p->d, w, 0, idx, 3, &k3, g3, NULL);
	for (size_t j = 0; j < 3; j++)
		k1 += naive_kl(p, w, idx[j], 1) / 3;
	ok(fabs(k3 - k1) <= 1e-5 * k1, "an index list picks those rows (%.8f, want %.8f)", k3, k1);
}

/*
 * the source's logits kept (all rows, the SEL rows and one chunk of FIT
 * rows, the SEL rows, none) on a problem of full chunks (256 rows, the
 * products kept logits are made and read in) and tails: the same weights
 * and figures as none kept, in fewer flops wherever some are kept.  The
 * same bits where the BLAS gives a row the same bits at any place in a
 * product (chunk_source); where it does not (OpenBLAS's Zen sgemm), a kept
 * row's logits differ from one made again in their last bit (2⁻²⁴ of
 * them), and 12 Adam steps carry that to the weights at about 1e-7 and to
 * the KL figures at about 2e-8: within 1e-5 and 1e-6, the best step the same
 */
static int near_f(double a, double b, double tol)
{
	return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

static int same_fit(const float *w, const float *wk, const nc_result *a, const nc_result *b)
{
	int same = a->best_step == b->best_step && near_f(a->sel_after, b->sel_after, 1e-6) &&
		   near_f(a->sel_before, b->sel_before, 1e-6) &&
		   near_f(a->fit_before, b->fit_before, 1e-6) &&
		   near_f(a->fit_after, b->fit_after, 1e-6);

	for (size_t i = 0; i < D && same; i++)
		same = near_f(w[i], wk[i], 1e-5);
	return same;
}

enum { KF = 256 * 3 + 40, KS = 256 * 2 + 12, KR = KF + KS };

static void check_kept(tap_rng *r)
{
	float *E = malloc(V * D * sizeof(float)), *n = malloc(KR * D * sizeof(float));
	float *ns = malloc(KR * D * sizeof(float)), w0[D], w[D], wk[D];
	size_t want[4] = { KR, KS + 256, KS, 0 }, per = V * sizeof(float) + sizeof(double) + 1;
	nc_opts o = { .steps = 12, .batch = 256, .eval_every = 4, .lr = 0.03, .seed = 3 };
	nc_result res, kr;

	for (size_t i = 0; i < V * D; i++)
		E[i] = (float)rng_normal(r);
	for (size_t i = 0; i < KR * D; i++) {
		n[i] = (float)rng_normal(r);
		ns[i] = (float)(0.3 * n[i] + 0.05 * rng_normal(r));
	}
	for (size_t i = 0; i < D; i++)
		w0[i] = 0.2f;
	nc_data kd = { D, V, E, E, n, ns, KF, KS };
	ok(nc_fit(&kd, w0, &o, w, &res) == 0 && res.kept == 0, "a fit of full chunks and tails");
	for (size_t i = 0; i < 4; i++) {
		o.cache_bytes = want[i] * per + per - 1;
		int rc = nc_fit(&kd, w0, &o, wk, &kr);
		ok(rc == 0 && kr.kept == want[i] && kr.rows == KR && same_fit(w, wk, &res, &kr) &&
		   (want[i] ? kr.flops < res.flops : kr.flops == res.flops),
		   "the source's logits of %zu rows kept: none kept's weights and figures, %.3g of "
		   "the flops", want[i], kr.flops / res.flops);
	}
	/*
	 * every source product is one of 256 rows: without kept logits one for
	 * each chunk of each pass (FIT before and after: 4 chunks each; SEL at
	 * the start and at steps 4, 8, 12: 3 each; 12 steps of one), with all
	 * kept only the first passes' 4 + 3, the tails' rows kept as the others
	 */
	o.cache_bytes = KR * per;
	nc_fit(&kd, w0, &o, wk, &kr);
	double prod = 2.0 * 256 * V * D, saved = res.flops - kr.flops;
	ok(saved == (double)(2 * 4 + 4 * 3 + 12 - (4 + 3)) * prod,
	   "all kept: the source's logits made once each, in 7 products (%.4g of 27 saved)",
	   saved / prod);
	free(E);
	free(n);
	free(ns);
}

static void check_fit(const problem *p)
{
	float w0[D], w[D], w2[D];
	nc_result res, res2;
	nc_opts o = { .steps = 300, .batch = 32, .eval_every = 10, .lr = 0.03, .seed = 7 };

	/* the converted model is the source at half its weights: the logits too flat */
	for (size_t i = 0; i < D; i++)
		w0[i] = 0.5f * p->wstar[i];
	int rc = nc_fit(&p->d, w0, &o, w, &res);

	ok(rc == 0, "a fit of 300 steps: %s", rc ? nv_err() : "done");
	ok(res.sel_after <= res.sel_before, "never worse on SEL: %.6f -> %.6f", res.sel_before,
	   res.sel_after);
	ok(res.sel_after <= 0.02 * res.sel_before && res.best_step > 0,
	   "the planted weights' KL of 0 is approached: %.6f -> %.6f (step %zu)", res.sel_before,
	   res.sel_after, res.best_step);
	ok(fabs(naive_kl(p, w, FIT, SEL) - res.sel_after) <= 1e-5 * res.sel_before,
	   "the reported SEL KL is the returned weights'");
	ok(nc_fit(&p->d, w0, &o, w2, &res2) == 0 && !memcmp(w, w2, sizeof w) &&
	   res.sel_after == res2.sel_after, "a second run gives the same bytes");
	o.cosine = 1;
	rc = nc_fit(&p->d, w0, &o, w2, &res2);
	ok(rc == 0 && res2.sel_after <= 0.02 * res2.sel_before && memcmp(w, w2, sizeof w),
	   "a cosine rate: other weights, the KL approached as well: %.6f -> %.6f", res2.sel_before,
	   res2.sel_after);
	o.steps = 1;
	o.eval_every = 1;
	rc = nc_fit(&p->d, w0, &o, w, &res) | nc_fit(&p->d, w0, &(nc_opts){ .steps = 1, .batch = 32,
		.eval_every = 1, .lr = 0.03, .seed = 7 }, w2, &res2);
	ok(rc == 0 && res.best_step == 1 && !memcmp(w, w2, sizeof w),
	   "one step: the constant rate's weights (the cosine starts at lr)");
	o.round = NULL;
	o.steps = 0;
	ok(nc_fit(&p->d, w0, &o, w, &res) == 0 && !memcmp(w, w0, sizeof w) && res.best_step == 0 &&
	   res.sel_after == res.sel_before, "no steps: the start, unchanged");
}

static float round_f16(float v)
{
	return nv_f16_to_f32(nv_f32_to_f16(v));
}

/* the source is the model itself: the start is optimal and must be kept */
static void check_keeps_start(problem *p)
{
	float w[D];
	nc_result res;
	nc_opts o = { .steps = 40, .batch = 16, .eval_every = 5, .lr = 0.1, .seed = 1,
		      .round = round_f16 };
	float ws[D];
	int rounded = 1;

	for (size_t i = 0; i < D; i++)
		ws[i] = round_f16(p->wstar[i]);
	for (size_t t = 0; t < ROWS; t++)
		for (size_t i = 0; i < D; i++)
			p->ns[t * D + i] = ws[i] * p->n[t * D + i];
	int rc = nc_fit(&p->d, ws, &o, w, &res);

	ok(rc == 0 && res.sel_after <= res.sel_before,
	   "at the optimum a fit keeps SEL where it was: %.3g -> %.3g (step %zu)", res.sel_before,
	   res.sel_after, res.best_step);
	for (size_t i = 0; i < D; i++)
		rounded &= round_f16(w[i]) == w[i];
	ok(rounded, "the weights come back as f16 values");
}

static void check_refusals(problem *p)
{
	float w[D];
	nc_result res;
	nc_opts o = { .steps = 5, .batch = 8, .eval_every = 1, .lr = 0.01 };
	double kl;

	for (size_t i = 0; i < D; i++)
		w[i] = p->wstar[i];
	nc_data z = p->d;
	z.sel = 0;
	int rc = nc_fit(&z, w, &o, w, &res);

	ok(rc < 0, "no SEL rows is refused: %s", nv_err());
	rc = nc_kl(&p->d, w, 0, NULL, 0, &kl, NULL, NULL);
	ok(rc < 0, "no rows is refused: %s", nv_err());
	p->n[3 * D + 2] = NAN;
	rc = nc_kl(&p->d, w, 0, NULL, ROWS, &kl, NULL, NULL);
	ok(rc < 0 && strstr(nv_err(), "row 3"), "a non-finite state names its row: %s", nv_err());
	ok(nc_fit(&p->d, w, &o, w, &res) < 0, "and stops the fit");
}

int main(void)
{
	tap_rng r = { 2026 };
	problem *p = malloc(sizeof *p);

	make(p, &r);
	check_kl_and_gradient(p, &r);
	check_fit(p);
	check_keeps_start(p);
	check_refusals(p);
	check_kept(&r);
	free(p);
	return done_testing();
}
