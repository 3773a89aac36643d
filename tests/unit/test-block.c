/*
 * test-block.c - the block forward with intermediates and its backward
 * (block.h) on the tiny qwen2-style model: the forward is fw_layer_run's,
 * bit for bit, and agrees with a naive f64 block written here; the gradient
 * of ½‖y − t‖² with respect to every projection agrees with central
 * differences of that f64 block.
 */
#include "block.h"
#include "err.h"
#include "forward.h"
#include "tap.h"
#include "tinymodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 9, D = 16, FF = 24, QD = 16, KD = 8, NH = 4, NKV = 2, HD = 4 };

static void norm(const double *x, const float *w, double *y)
{
	double ss = 0;

	for (size_t i = 0; i < D; i++)
		ss += x[i] * x[i];
	for (size_t i = 0; i < D; i++)
		y[i] = x[i] / sqrt(ss / D + 1e-6) * w[i];
}

static void rope(double *v, size_t nh, size_t pos)
{
	for (size_t h = 0; h < nh; h++)
		for (size_t j = 0; j < HD / 2; j++) {
			double ang = (double)pos * pow(1e6, -2.0 * (double)j / HD);
			double a = v[h * HD + j], b = v[h * HD + j + HD / 2];

			v[h * HD + j] = a * cos(ang) - b * sin(ang);
			v[h * HD + j + HD / 2] = b * cos(ang) + a * sin(ang);
		}
}

/* the block of layer 0 in f64, position by position; w[i] the projections to use */
static void ref_block(const ref_w *rw, float *const w[FW_NMAT], const double *x, double *y)
{
	static double q[T][QD], k[T][KD], v[T][KD];

	for (size_t t = 0; t < T; t++) {
		double a[D];

		norm(x + t * D, rw->an[0], a);
		ref_mv(w[FW_Q], rw->b[0][0], a, q[t], QD, D);
		ref_mv(w[FW_K], rw->b[0][1], a, k[t], KD, D);
		ref_mv(w[FW_V], rw->b[0][2], a, v[t], KD, D);
		rope(q[t], NH, t);
		rope(k[t], NKV, t);
	}
	for (size_t t = 0; t < T; t++) {
		double o[QD] = { 0 }, x1[D], f[D], g[FF], u[FF], md[D];

		for (size_t h = 0; h < NH; h++) {
			size_t gk = h / (NH / NKV);
			double s[T], mx = -INFINITY, sum = 0;

			for (size_t j = 0; j <= t; j++) {
				s[j] = 0;
				for (size_t e = 0; e < HD; e++)
					s[j] += q[t][h * HD + e] * k[j][gk * HD + e] / sqrt((double)HD);
				mx = fmax(mx, s[j]);
			}
			for (size_t j = 0; j <= t; j++)
				sum += exp(s[j] - mx);
			for (size_t j = 0; j <= t; j++)
				for (size_t e = 0; e < HD; e++)
					o[h * HD + e] += exp(s[j] - mx) / sum * v[j][gk * HD + e];
		}
		ref_mv(w[FW_O], NULL, o, x1, D, QD);
		for (size_t i = 0; i < D; i++)
			x1[i] += x[t * D + i];
		norm(x1, rw->fn[0], f);
		ref_mv(w[FW_GATE], NULL, f, g, FF, D);
		ref_mv(w[FW_UP], NULL, f, u, FF, D);
		for (size_t i = 0; i < FF; i++)
			g[i] = g[i] / (1 + exp(-g[i])) * u[i];
		ref_mv(w[FW_DOWN], NULL, g, md, D, FF);
		for (size_t i = 0; i < D; i++)
			y[t * D + i] = x1[i] + md[i];
	}
}

static double ref_loss(const ref_w *rw, float *const w[FW_NMAT], const double *x, const float *tgt)
{
	double y[T * D], l = 0;

	ref_block(rw, w, x, y);
	for (size_t i = 0; i < T * D; i++)
		l += 0.5 * (y[i] - tgt[i]) * (y[i] - tgt[i]);
	return l;
}

static void check_gradient(fw_model *m, const fw_layer *ly, bk_cache *c, const ref_w *rw,
			   const float *xf, const float *tgt, tap_rng *r)
{
	static const char *const name[FW_NMAT] = { "q", "k", "v", "o", "gate", "up", "down" };
	size_t rows[FW_NMAT] = { QD, KD, KD, D, FF, FF, D }, cols[FW_NMAT] = { D, D, D, QD, D, D, FF };
	float *dw[FW_NMAT], *w[FW_NMAT], dy[T * D];
	double x[T * D];

	for (size_t i = 0; i < T * D; i++)
		x[i] = xf[i];
	bk_forward(m, ly, c, xf, T);
	for (size_t i = 0; i < T * D; i++)
		dy[i] = c->y[i] - tgt[i];
	for (int i = 0; i < FW_NMAT; i++) {
		dw[i] = calloc(rows[i] * cols[i], sizeof(float));
		w[i] = ly->w[i];
	}
	bk_backward(m, ly, c, dy, dw);
	for (int i = 0; i < FW_NMAT; i++) {
		double worst = 0, big = 0;

		/* every entry: central differences of the f64 block, step 1e-3 (truncation
		 * O(h²) ≈ 1e-6 of the gradient; the f32 analytic side ≈ 1e-6 relative) */
		for (size_t e = 0; e < rows[i] * cols[i]; e++) {
			float keep = w[i][e], up, dn;
			double lu, ld, fd;

			w[i][e] = up = keep + 1e-3f;
			lu = ref_loss(rw, w, x, tgt);
			w[i][e] = dn = keep - 1e-3f;
			ld = ref_loss(rw, w, x, tgt);
			w[i][e] = keep;
			fd = (lu - ld) / ((double)up - dn);
			worst = fmax(worst, fabs(fd - dw[i][e]));
			big = fmax(big, fabs(fd));
		}
		ok(worst <= 1e-4 * big, "∂L/∂W_%s is the central differences' (|err| %.2g of %.2g)",
		   name[i], worst, big);
		free(dw[i]);
	}
	(void)r;
}

int main(void)
{
	tap_rng r = { 7 };
	mem_model mm;
	ref_w rw;
	fw_model m;
	fw_layer ly;
	fw_scratch s;
	bk_cache c;
	float x[T * D], x2[T * D], tgt[T * D];
	double y[T * D], err = 0;

	build_tiny(&mm, &rw, &r);
	for (size_t i = 0; i < T * D; i++) {
		x[i] = (float)rng_normal(&r);
		tgt[i] = x[i] + (float)rng_normal(&r);
	}
	ok(fw_open(&m, &mm.f) == 0 && fw_layer_load(&m, 0, NULL, 0, &ly) == 0 &&
	   fw_scratch_init(&s, &m, T) == 0 && bk_init(&c, &m, T) == 0, "the tiny model, layer 0");
	ok(bk_forward(&m, &ly, &c, x, T) == 0, "forward of %d positions", T);
	memcpy(x2, x, sizeof x);
	fw_layer_run(&m, &ly, &s, x2, T, NULL);
	ok(!memcmp(x2, c.y, sizeof x2), "the output is fw_layer_run's, bit for bit");
	double xd[T * D];
	for (size_t i = 0; i < T * D; i++)
		xd[i] = x[i];
	ref_block(&rw, rw.w[0], xd, y);
	for (size_t i = 0; i < T * D; i++)
		err = fmax(err, fabs(y[i] - c.y[i]));
	/* f32 sums of ≤ 24 terms of magnitude ~1 through two residual branches: 1e-5 */
	ok(err <= 1e-5, "and the naive f64 block's (|err| %.2g)", err);
	ok(bk_forward(&m, &ly, &c, x, T + 1) < 0, "a window beyond the cache is refused: %s",
	   nv_err());
	check_gradient(&m, &ly, &c, &rw, x, tgt, &r);
	bk_free(&c);
	fw_scratch_free(&s);
	fw_layer_free(&ly);
	fw_close(&m);
	free_model(&mm);
	free_ref(&rw);
	return done_testing();
}
