/*
 * test-clsolve.c - the g step's SPD solve on the device (PoCL): the blocked
 * Cholesky factor against its defining property (L·Lᵀ = A + ridge·I), and
 * the preconditioned conjugate gradients against the host's f64 LAPACK
 * solve of the same system, on a system built as the g step builds it
 * (H ∘ S K Sᵀ, H a Gram of columns whose scales span 10⁴, so the system's
 * condition number is of the order of 10⁵ to 10⁶).
 *
 * Tolerances: an f32 Cholesky factor has a backward error of about
 * √n·2⁻²⁴ relative to ‖A‖ in practice (n·2⁻²⁴ in the worst case: 1.8e-5 at
 * n = 300); 1e-5 is asked.  The solve's excess of the quadratic's value
 * over its minimum is what the g step loses; in f32 it cannot go below
 * about (2⁻²⁴·κ)²-ish relative on the worst direction, far below the 1e-6
 * asked here, and the CG's own stop (1e-9 relative) sits between.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clsolve.h"
#include "err.h"
#include "linalg.h"
#include "tap.h"
#include "cltest.h"


enum { N = 300, R = 40, T = 600, NB = 64 };

static tap_rng rng = { 0xc501 };

/* the g step's system: H ∘ S K Sᵀ (n × n) and a right-hand side */
static void g_system(double *a, double *b)
{
	double *x = malloc(sizeof(double) * T * N), *h = calloc((size_t)N * N, sizeof(double));
	double *s = malloc(sizeof(double) * N * R), *m = malloc(sizeof(double) * R * R);
	double *k = calloc(R * R, sizeof(double));

	for (size_t t = 0; t < T; t++)
		for (size_t j = 0; j < N; j++)
			x[t * N + j] = rng_normal(&rng) * pow(10.0, -2.0 * (double)j / N);
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < N; j++)
			for (size_t t = 0; t < T; t++)
				h[i * N + j] += x[t * N + i] * x[t * N + j] / T;
	for (size_t i = 0; i < N * R; i++)
		s[i] = rng_u64(&rng) & 1 ? 1.0 : -1.0;
	for (size_t i = 0; i < R * R; i++)
		m[i] = rng_normal(&rng);
	for (size_t i = 0; i < R; i++)
		for (size_t j = 0; j < R; j++)
			for (size_t c = 0; c < R; c++)
				k[i * R + j] += m[c * R + i] * m[c * R + j] / R;
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < N; j++) {
			double v = 0;
			for (size_t p = 0; p < R; p++)
				for (size_t q = 0; q < R; q++)
					v += s[i * R + p] * k[p * R + q] * s[j * R + q];
			a[i * N + j] = h[i * N + j] * v;
		}
	for (size_t i = 0; i < N; i++)
		b[i] = rng_normal(&rng) * a[i * N + i];
	free(x), free(h), free(s), free(m), free(k);
}

static float *to_f32(const double *v, size_t k)
{
	float *f = malloc(k * sizeof(float));
	for (size_t i = 0; i < k; i++)
		f[i] = (float)v[i];
	return f;
}

/* (x − y)ᵀ A (x − y) / yᵀ A y */
static double energy_rel(const double *a, const double *x, const double *y)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < N; j++) {
			num += (x[i] - y[i]) * a[i * N + j] * (x[j] - y[j]);
			den += y[i] * a[i * N + j] * y[j];
		}
	return num / den;
}

static void test_rect(nvcl_q *q)
{
	float all[12 * 10], blk[3 * 4] = { 0 }, back[12 * 10];

	for (size_t i = 0; i < 120; i++)
		all[i] = (float)i;
	for (size_t i = 0; i < 12; i++)
		blk[i] = -1.0f - (float)i;
	cl_mem m = nvcl_q_upload(q, all, 120, "all");
	nvcl_q_rect(q, m, 2 * 10 + 5, 10, 3, 4, blk, 1);
	nvcl_q_read(q, m, 0, back, 120);
	int same = 1;
	for (size_t i = 0; i < 120; i++) {
		size_t r = i / 10, c = i % 10;
		int in = r >= 2 && r < 5 && c >= 5 && c < 9;
		same &= back[i] == (in ? blk[(r - 2) * 4 + c - 5] : all[i]);
	}
	ok(nvcl_q_ok(q) == 0 && same, "a 3 × 4 block written at (2, 5) of a 12 × 10 buffer, and "
				       "nothing else");
	memset(blk, 0, sizeof(blk));
	nvcl_q_rect(q, m, 7 * 10 + 1, 10, 3, 4, blk, 0);
	ok(nvcl_q_ok(q) == 0 && blk[0] == 71 && blk[3] == 74 && blk[11] == 94,
	   "and one read back from (7, 1)");
	nvcl_release(&m);
}

/* (L·Lᵀ)⁻¹ x on the device against substitution in f64 with the same L */
static void test_apply(nvcl_q *q, cl_mem f, cl_mem inv, const float *l)
{
	double y[N], want[N], e = 0, scale = 0;
	float x[N], got[N];
	cl_mem X, t = nvcl_q_buf(q, NB, "t");

	for (size_t i = 0; i < N; i++)
		x[i] = (float)rng_normal(&rng);
	for (size_t i = 0; i < N; i++) {
		double s = x[i];
		for (size_t k = 0; k < i; k++)
			s -= l[i * N + k] * y[k];
		y[i] = s / l[i * N + i];
	}
	for (size_t i = N; i-- > 0;) {
		double s = y[i];
		for (size_t k = i + 1; k < N; k++)
			s -= l[k * N + i] * want[k];
		want[i] = s / l[i * N + i];
	}
	X = nvcl_q_upload(q, x, N, "x");
	nvcl_chol_apply(q, f, inv, N, NB, X, t);
	nvcl_q_read(q, X, 0, got, N);
	for (size_t i = 0; i < N; i++) {
		e = fmax(e, fabs(got[i] - want[i]));
		scale = fmax(scale, fabs(want[i]));
	}
	/* f32 substitution through inverted blocks: the error grows with the
	 * factor's condition (here its diagonal spans 10² to 10⁻³) */
	ok(nvcl_q_ok(q) == 0 && e / scale < 1e-3, "(L·Lᵀ)⁻¹·x by blocks: %.1e relative to f64 "
						   "substitution", e / scale);
	nvcl_release(&X);
	nvcl_release(&t);
}

static void test_chol(nvcl_q *q, const double *a)
{
	float *af = to_f32(a, N * N), *l = malloc(sizeof(float) * N * N);
	double ridge = 1e-3, num = 0, den = 0;
	cl_mem f = nvcl_q_upload(q, af, N * N, "A"), inv = nvcl_q_buf(q, N * NB, "inv");

	ok(nvcl_chol(q, f, inv, N, NB, ridge) == 0, "the factor of a %d × %d system in blocks of %d",
	   N, N, NB);
	nvcl_q_read(q, f, 0, l, N * N);
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j <= i; j++) {
			double s = 0;
			for (size_t k = 0; k <= j; k++)
				s += (double)l[i * N + k] * l[j * N + k];
			double want = af[i * N + j] + (i == j ? ridge : 0);
			num += (s - want) * (s - want);
			den += want * want;
		}
	ok(nvcl_q_ok(q) == 0 && sqrt(num / den) < 1e-5,
	   "L·Lᵀ = A + ridge·I (relative %.2e, f32)", sqrt(num / den));
	int diag_pos = 1;
	for (size_t i = 0; i < N; i++)
		diag_pos &= l[i * N + i] > 0;
	ok(diag_pos, "its diagonal is positive");
	test_apply(q, f, inv, l);

	for (size_t i = 0; i < N * N; i++)
		af[i] = -af[i];
	nvcl_q_write(q, f, 0, af, N * N);
	ok(nvcl_chol(q, f, inv, N, NB, ridge) == 1 && !q->err, "a negative definite system: 1");
	af[7 * N + 3] = NAN;
	nvcl_q_write(q, f, 0, af, N * N);
	ok(nvcl_chol(q, f, inv, N, NB, ridge) == -1 && strstr(q->why, "not finite"),
	   "a NaN: -1, '%s'", q->why);
	nvcl_release(&f);
	nvcl_release(&inv);
	free(af);
	free(l);
}

/* a fresh queue on c */
static int fresh(nvcl_q *q, nvcl_ctx *c)
{
	nvcl_q_free(q);
	return nvcl_q_init(q, c);
}

/* rank one, indefinite by a hair: the ridges make it solvable, as on the CPU */
static void test_barely(nvcl_q *q)
{
	enum { K = 40 };
	float a[K * K], b[K];
	double x[K] = { 0 }, sum = 0;
	nvcl_solve_info in;

	for (size_t i = 0; i < K; i++) {
		b[i] = 1.0f;
		for (size_t j = 0; j < K; j++)
			a[i * K + j] = 1.0f - (i == j ? 1e-7f : 0.0f);
	}
	cl_mem A = nvcl_q_upload(q, a, K * K, "A"), B = nvcl_q_upload(q, b, K, "b");
	int rc = nvcl_solve_spd(q, A, B, K, 1e-10, 1e-9, 16, x, &in);
	for (size_t i = 0; i < K; i++)
		sum += x[i];
	/* any solution of the rank-one part has Σx = 1; the ridges pull it by ~1e-6 */
	ok(rc == 0 && fabs(sum - 1.0) < 1e-3, "a barely indefinite rank-one system: Σx = %.6f (1), %d "
				  "factorizations, ridge %.1e", sum, in.factors, in.ridge);
	nvcl_release(&A);
	nvcl_release(&B);
}

static void test_solve(nvcl_q *q, nvcl_ctx *c, const double *a, const double *b)
{
	double *want = malloc(sizeof(double) * N), *w = malloc(sizeof(double) * N * N);
	double *x = calloc(N, sizeof(double)), *x2 = calloc(N, sizeof(double)), tr = 0;
	float *af = to_f32(a, N * N), *bf = to_f32(b, N);
	nvcl_solve_info in;

	/* the reference: the f32-rounded system in f64 LAPACK, with the CPU encoder's ridge */
	double *ar = malloc(sizeof(double) * N * N);
	for (size_t i = 0; i < N * N; i++)
		ar[i] = af[i];
	for (size_t i = 0; i < N; i++)
		want[i] = bf[i], tr += ar[i * N + i];
	ok(nv_posv_rm(ar, N, 'U', 1e-10 * tr / N, w, want) == 0, "the host's f64 solve");

	cl_mem A = nvcl_q_upload(q, af, N * N, "A"), B = nvcl_q_upload(q, bf, N, "b");
	int rc = nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, x, &in);
	double e = energy_rel(ar, x, want);
	ok(rc == 0, "the device's solve from 0 (%d factorization, %d CG steps, factor ridge "
		    "%.1e)", in.factors, in.iters, in.fridge);
	ok(e < 1e-6, "its excess over the minimum: %.2e relative (< 1e-6)", e);
	ok(in.excess <= 1e-9 && in.iters <= 50, "the CG stopped at its tolerance (%.1e)",
	   in.excess);
	rc = nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, x2, &in);
	ok(rc == 0 && memcmp(x, x2, sizeof(double) * N) == 0, "again: the same bits");
	int steps_cold = in.iters;
	rc = nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, x2, &in);
	ok(rc == 0 && in.iters < steps_cold, "from its own answer: %d steps, not %d", in.iters,
	   steps_cold);

	test_barely(q);
	for (size_t i = 0; i < N * N; i++)
		af[i] = -af[i];
	nvcl_q_write(q, A, 0, af, N * N);
	memcpy(x2, x, sizeof(double) * N);
	rc = nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, x2, &in);
	ok(rc == 1 && !q->err && memcmp(x, x2, sizeof(double) * N) == 0,
	   "a negative definite system: 1, x kept (%d factorizations)", in.factors);
	af[5] = INFINITY;
	nvcl_q_write(q, A, 0, af, N * N);
	ok(nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, x2, &in) == -1 &&
		   strstr(q->why, "not finite"),
	   "an infinite entry: -1, '%s'", q->why);
	nvcl_release(&A);
	nvcl_release(&B);
	ok(fresh(q, c) == 0, "a fresh queue");
	free(want), free(w), free(x), free(x2), free(af), free(bf), free(ar);
}

/* a kept factor: a nearby system solves through it without factoring, to the
 * same answer; a far one, and one of another size, factor afresh */
static void test_kept(nvcl_q *q, const double *a, const double *b)
{
	float *af = to_f32(a, N * N), *bf = to_f32(b, N);
	double *x = calloc(N, sizeof(double)), *y = calloc(N, sizeof(double));
	double *ar = malloc(sizeof(double) * N * N);
	nvcl_pc pc = { .nb = NB };
	nvcl_solve_info in;
	cl_mem A = nvcl_q_upload(q, af, N * N, "A"), B = nvcl_q_upload(q, bf, N, "b");

	ok(nvcl_solve_spd_pc(q, A, B, N, 1e-10, 1e-9, &pc, x, &in) == 0 && in.factors == 1 &&
		   pc.f != NULL,
	   "the first solve factors, and keeps the factor");
	/* the system a sweep makes next: every entry moved by up to 1% */
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j <= i; j++) {
			double u = 1.0 + 0.01 * (2.0 * rng_unif(&rng) - 1.0);
			af[i * N + j] = af[j * N + i] = (float)(a[i * N + j] * u);
		}
	for (size_t i = 0; i < N * N; i++)
		ar[i] = af[i];
	nvcl_q_write(q, A, 0, af, N * N);
	int rc = nvcl_solve_spd_pc(q, A, B, N, 1e-10, 1e-9, &pc, x, &in);
	ok(rc == 0 && in.factors == 0, "a system moved by 1%%: no factorization, %d CG steps",
	   in.iters);
	rc = nvcl_solve_spd(q, A, B, N, 1e-10, 1e-9, NB, y, NULL);
	double e = energy_rel(ar, x, y);
	ok(rc == 0 && e < 1e-6, "the same answer as a fresh factor's (%.1e)", e);
	/* a far system: the variables in reverse order, whose scales the old
	 * factor has backwards */
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < N; j++)
			af[i * N + j] = (float)a[(N - 1 - i) * N + (N - 1 - j)];
	nvcl_q_write(q, A, 0, af, N * N);
	rc = nvcl_solve_spd_pc(q, A, B, N, 1e-10, 1e-9, &pc, x, &in);
	ok(rc == 0 && in.factors == 1 && in.iters >= 30,
	   "the variables reversed: factored afresh after %d steps", in.iters);
	/* the leading half of that system */
	for (size_t i = 0; i < N / 2; i++)
		for (size_t j = 0; j < N / 2; j++)
			af[i * (N / 2) + j] = af[i * N + j];
	nvcl_q_write(q, A, 0, af, N * N / 4);
	rc = nvcl_solve_spd_pc(q, A, B, N / 2, 1e-10, 1e-9, &pc, x, &in);
	ok(rc == 0 && in.factors == 1 && pc.n == N / 2, "another size: factored afresh");
	nvcl_pc_free(&pc);
	nvcl_release(&A);
	nvcl_release(&B);
	free(af), free(bf), free(x), free(y), free(ar);
}

int main(void)
{
	double *a = malloc(sizeof(double) * N * N), *b = malloc(sizeof(double) * N);
	nvcl_ctx c;
	nvcl_q q;

	if (!cl_open_q(&c, &q))
		return done_testing();
	g_system(a, b);
	test_rect(&q);
	test_chol(&q, a);
	ok(fresh(&q, &c) == 0, "a fresh queue");
	test_solve(&q, &c, a, b);
	test_kept(&q, a, b);
	nvcl_q_free(&q);
	nvcl_close(&c);
	free(a);
	free(b);
	return done_testing();
}
