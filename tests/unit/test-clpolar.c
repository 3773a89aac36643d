/*
 * test-clpolar.c - the Newton–Schulz polar factor on the device (PoCL)
 * against the host's, which nv_polar takes from an f64 SVD: on a Gaussian
 * matrix, on one like the ITQ rotation's products (near a rotation times a
 * positive diagonal), and on an ill-conditioned one; and the refusals.
 *
 * Tolerances: both factors are U·Vᵀ; the device's is f32 with its
 * orthogonality at about r·2⁻²⁴ (6e-6 at r = 96), and a relative
 * perturbation δ of M (f32 rounding: 6e-8) moves U·Vᵀ by about δ·‖M‖ over
 * the smallest sum of two singular values: some 1e-5 for a Gaussian (κ in
 * the hundreds) and for the case at κ = 10³.  Asked: 1e-4 entrywise,
 * relative to the entries' scale (1/√r).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clhost.h"
#include "clpolar.h"
#include "err.h"
#include "tap.h"
#include "cltest.h"


enum { R = 96 };

static tap_rng rng = { 0x9017 };

/* max |device − host| · √r over the entries, and the steps taken; rc from the device */
static int compare(nvcl_q *q, const double *m, double *dev_err, int *steps)
{
	double mh[R * R], rot[R * R], orth;
	float mf[R * R], xf[R * R];
	cl_mem M, X = nvcl_q_buf(q, R * R, "X");
	int rc;

	for (size_t i = 0; i < R * R; i++)
		mf[i] = (float)m[i], mh[i] = mf[i];
	M = nvcl_q_upload(q, mf, R * R, "M");
	rc = nvcl_polar_ns(q, M, R, X, 60, 1e-7, steps, &orth);
	nvcl_q_read(q, X, 0, xf, R * R);
	if (clh_polar(mh, R, rot) < 0)
		diag("host polar: %s", nv_err());
	*dev_err = 0;
	for (size_t i = 0; i < R * R; i++)
		*dev_err = fmax(*dev_err, fabs(xf[i] - rot[i]) * sqrt((double)R));
	nvcl_release(&M);
	nvcl_release(&X);
	return rc;
}

static void test_cases(nvcl_q *q)
{
	double *m = malloc(sizeof(double) * R * R), e;
	int steps, rc;

	for (size_t i = 0; i < R * R; i++)
		m[i] = rng_normal(&rng);
	rc = compare(q, m, &e, &steps);
	ok(rc == 0 && e < 1e-4, "a Gaussian %d × %d: U·Vᵀ within %.1e of the SVD's, %d steps", R,
	   R, e, steps);
	/* ITQ's products: a rotation-like part with a spread of positive weights */
	for (size_t i = 0; i < R * R; i++)
		m[i] = 0.05 * rng_normal(&rng);
	for (size_t i = 0; i < R; i++)
		m[i * R + i] += 1.0 + (double)i / R;
	rc = compare(q, m, &e, &steps);
	ok(rc == 0 && e < 1e-4, "an ITQ-like product: within %.1e, %d steps", e, steps);
	/* singular values from 1 down to 1e-3 */
	for (size_t i = 0; i < R * R; i++)
		m[i] = 0.01 * rng_normal(&rng);
	for (size_t i = 0; i < R; i++)
		m[i * R + i] += pow(1e-3, (double)i / (R - 1));
	rc = compare(q, m, &e, &steps);
	ok(rc == 0 && e < 1e-4, "condition near 10³: within %.1e, %d steps", e, steps);
	free(m);
}

static void test_refusals(nvcl_q *q, nvcl_ctx *c)
{
	float m[R * R];
	cl_mem M, X = nvcl_q_buf(q, R * R, "X");
	int steps;

	/* rank R − 1: a σ of 0 never grows */
	for (size_t i = 0; i < R * R; i++)
		m[i] = (float)rng_normal(&rng);
	for (size_t j = 0; j < R; j++)
		m[(R - 1) * R + j] = m[j];
	M = nvcl_q_upload(q, m, R * R, "M");
	int rc = nvcl_polar_ns(q, M, R, X, 40, 1e-7, &steps, NULL);
	ok(rc == 1 && !q->err && steps == 40, "a singular M: 1 after %d steps, the queue unharmed",
	   steps);
	memset(m, 0, sizeof(m));
	nvcl_q_write(q, M, 0, m, R * R);
	rc = nvcl_polar_ns(q, M, R, X, 40, 1e-7, &steps, NULL);
	ok(rc == 1 && steps == 0, "M = 0: 1, no step");
	m[5] = NAN;
	nvcl_q_write(q, M, 0, m, R * R);
	ok(nvcl_polar_ns(q, M, R, X, 40, 1e-7, NULL, NULL) == -1 && strstr(q->why, "not finite"),
	   "a NaN: -1, '%s'", q->why);
	nvcl_release(&M);
	nvcl_release(&X);
	nvcl_q_free(q);
	ok(nvcl_q_init(q, c) == 0, "a fresh queue");
}

int main(void)
{
	nvcl_ctx c;
	nvcl_q q;

	if (!cl_open_q(&c, &q))
		return done_testing();
	test_cases(&q);
	test_refusals(&q, &c);
	nvcl_q_free(&q);
	nvcl_close(&c);
	return done_testing();
}
