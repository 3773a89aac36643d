/*
 * synth.h - the seed's synthetic layer for the encoder unit tests: W 96×64
 * with a decaying column spectrum, inputs with three heavy channels, T = 1024,
 * H = X·Xᵀ/T.  The generator is the seed's 64-bit LCG, so the layer is the
 * one its tests ran on; synth_shape draws the same way at other shapes.
 */
#ifndef NV_TEST_SYNTH_H
#define NV_TEST_SYNTH_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "linalg.h"

static double synth_rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* the generator at any shape: w (m × n), h (n × n) from seed; 0 on success */
static int synth_shape(size_t m, size_t n, uint64_t seed, nv_mat *w, nv_mat *h)
	__attribute__((unused));
static int synth_shape(size_t m, size_t n, uint64_t seed, nv_mat *w, nv_mat *h)
{
	size_t t = 1024;
	uint64_t s = seed;
	double *sc = malloc(n * sizeof(double));
	nv_mat x = {0};
	int rc = -1;

	if (!sc || n < 3 || nv_mat_zeros(w, m, n) < 0 || nv_mat_zeros(&x, n, t) < 0)
		goto out;
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++)
			w->d[i * n + j] = synth_rnd(&s) * pow(1.0 + (double)j, -0.4);
	for (size_t i = 0; i < n; i++)
		sc[i] = exp(synth_rnd(&s) * 1.6);
	sc[0] *= 20.0;
	sc[1] *= 20.0;
	sc[2] *= 20.0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < t; k++)
			x.d[i * t + k] = sc[i] * synth_rnd(&s);
	if (nv_gemm_new(&x, 0, &x, 1, h) < 0)
		goto out;
	for (size_t i = 0; i < n * n; i++)
		h->d[i] /= (double)t;
	rc = 0;
out:
	free(sc);
	nv_mat_free(&x);
	return rc;
}

/* the seed's layer: w (96 × 64), h (64 × 64); 0 on success */
static int synth(nv_mat *w, nv_mat *h) __attribute__((unused));
static int synth(nv_mat *w, nv_mat *h)
{
	return synth_shape(96, 64, 1, w, h);
}

/* h rounded to f32 in place (the values a Gram file holds), and h32 its
 * f32 copy: the f64 and f32 forms then hold the same numbers */
static int synth_f32(nv_mat *h, nv_mat32 *h32) __attribute__((unused));
static int synth_f32(nv_mat *h, nv_mat32 *h32)
{
	h32->r = h->r;
	h32->c = h->c;
	h32->diag = NULL;
	h32->d = malloc(h->r * h->c * sizeof(float));
	if (!h32->d)
		return -1;
	for (size_t i = 0; i < h->r * h->c; i++) {
		h32->d[i] = (float)h->d[i];
		h->d[i] = h32->d[i];
	}
	return 0;
}

/* max |got − want| over max |want| (same shapes) */
static double synth_rel_gap(const nv_mat *got, const nv_mat *want) __attribute__((unused));
static double synth_rel_gap(const nv_mat *got, const nv_mat *want)
{
	double gap = 0, big = 0;

	for (size_t i = 0; i < want->r * want->c; i++) {
		gap = fmax(gap, fabs(got->d[i] - want->d[i]));
		big = fmax(big, fabs(want->d[i]));
	}
	return gap / fmax(big, 1e-300);
}

#endif
