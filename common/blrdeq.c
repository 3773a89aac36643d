/*
 * blrdeq.c - a payload's Ŵ as f32 (blr_dequantize, see blr.h)
 *
 * Ŵ_ij = Σ_p h_p[i]·g_p[j]·T_p[i,j], T_p = S_U,p·diag(ℓ_p)·S_V,pᵀ.
 *
 * T_p is summed exactly, in f32 products: an f16 ℓ_k is q_k·2^u_k with
 * |q_k| < 2^11 an integer, so the ranks fall into groups that share an
 * exponent e (ℓ_k = q'_k·2^e, q'_k = q_k·2^(u_k − e) an integer) and whose
 * Σ|q'_k| is at most 2^24.  Every partial sum of ±q'_k is then an integer
 * of at most 2^24: exact in f32 in any order, whatever the kernel, the tiles
 * or the threads.  The groups' sums, scaled by 2^e, add in f64 exactly
 * while T_p spans at most 53 bits: always for r ≤ 8192, since ℓ lies
 * between 2^-24 and 2^16 (beyond, in the groups' fixed order).  Then h·g (a
 * product of two f16, exact) times T_p rounds once in f64, the paths add in
 * order (one more rounding), and the sum rounds to f32.  So the bits are
 * the same on every machine, and the products are sgemm's, not dgemm's.
 */
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"
#include "par.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEQ_ROWS 256		/* rows of Ŵ per product: bounds the scratch */
#define DEQ_SUM 16777216.0	/* 2^24: the most a group's Σ|q'| may reach */

/* a rank's ℓ = q·2^u, |q| < 2^11 an integer (q = 0: ℓ = 0) */
typedef struct {
	int u;
	uint32_t k;
	float q;
} deq_rank;

/* one path's ranks in groups: cols (n × c, the ranks' S_V columns in group
 * order), q (c: their q'), k (c: their rank), start (groups + 1), e
 * (groups); g (n) its column scales */
typedef struct {
	size_t c, groups;
	int ranked; /* the ranks in their own order (one group of all) */
	float *cols, *q;
	double *g;
	uint32_t *k;
	size_t *start;
	int *e;
} deq_path;

static void deq_path_free(deq_path *d)
{
	free(d->cols);
	free(d->g);
	free(d->q);
	free(d->k);
	free(d->start);
	free(d->e);
	memset(d, 0, sizeof(*d));
}

static int by_exponent(const void *a, const void *b)
{
	const deq_rank *x = a, *y = b;

	if (x->u != y->u)
		return x->u < y->u ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* the nonzero ranks of ℓ (f16, r) as q·2^u, sorted by u then k; their count */
static size_t deq_ranks(const uint8_t *l, size_t r, deq_rank *out)
{
	size_t c = 0;

	for (size_t k = 0; k < r; k++) {
		float v = nv_f16_to_f32(le_u16(l + 2 * k));
		int ex;
		float fr;

		if (v == 0)
			continue; /* adds nothing to any sum */
		fr = frexpf(v, &ex);
		out[c++] = (deq_rank){ ex - 11, (uint32_t)k, ldexpf(fr, 11) };
	}
	qsort(out, c, sizeof(*out), by_exponent);
	return c;
}

/*
 * the groups of sorted ranks: each opens at its first rank's exponent and
 * takes ranks while Σ|q'| stays within 2^24 (a rank alone: |q| < 2^11)
 */
static void deq_group(deq_path *d, const deq_rank *rk)
{
	double sum = 0;

	d->groups = 0;
	for (size_t c = 0; c < d->c; c++) {
		double q = ldexp(fabs(rk[c].q), d->groups ? rk[c].u - d->e[d->groups - 1] : 0);

		if (!d->groups || sum + q > DEQ_SUM) {
			d->start[d->groups] = c;
			d->e[d->groups++] = rk[c].u;
			q = fabs(rk[c].q);
			sum = 0;
		}
		sum += q;
		d->q[c] = (float)ldexp(rk[c].q, rk[c].u - d->e[d->groups - 1]);
		d->k[c] = rk[c].k;
	}
	d->start[d->groups] = d->c;
}

/* ±1 of a sign bit: the 8 of each byte value, bit 0 first */
static float deq_byte[256][8];
static pthread_once_t deq_once = PTHREAD_ONCE_INIT;

static void deq_byte_init(void)
{
	for (int b = 0; b < 256; b++)
		for (int k = 0; k < 8; k++)
			deq_byte[b][k] = (b >> k) & 1 ? 1.0f : -1.0f;
}

/* row i of a packed sign matrix (r wide) at the path's ranks, times q
 * (NULL: ±1) into out (c) */
static void deq_signs(const uint8_t *bits, size_t i, size_t r, const deq_path *d, const float *q,
		      float *out)
{
	const uint8_t *row = bits + i * (r / 8); /* r is a multiple of 8 */

	if (d->ranked) {
		for (size_t k = 0; k < r; k += 8)
			memcpy(out + k, deq_byte[row[k / 8]], sizeof(deq_byte[0]));
	} else {
		for (size_t c = 0; c < d->c; c++)
			out[c] = (float)blr_sign(bits, i, d->k[c], r);
	}
	for (size_t c = 0; q && c < d->c; c++)
		out[c] *= q[c];
}

/* path v's groups and its S_V columns (±1, n × c) in their order */
static int deq_path_init(const blr_view *v, size_t n, size_t r, deq_path *d)
{
	deq_rank *rk = nv_malloc(r ? r : 1, sizeof(*rk));

	memset(d, 0, sizeof(*d));
	if (!rk)
		return -1;
	d->c = deq_ranks(v->l, r, rk);
	d->q = nv_malloc(d->c + 1, sizeof(float));
	d->k = nv_malloc(d->c + 1, sizeof(uint32_t));
	d->start = nv_malloc(d->c + 2, sizeof(size_t));
	d->e = nv_malloc(d->c + 1, sizeof(int));
	d->cols = nv_malloc(n, (d->c + 1) * sizeof(float));
	d->g = nv_malloc(n ? n : 1, sizeof(double));
	if (!d->q || !d->k || !d->start || !d->e || !d->cols || !d->g) {
		free(rk);
		deq_path_free(d);
		return -1;
	}
	deq_group(d, rk);
	free(rk);
	/* one group of every rank: taken in rank order, its signs by the byte
	 * (ℓ_k·2^-e is the q' deq_group gave rank k) */
	d->ranked = d->groups == 1 && d->c == r;
	for (size_t k = 0; d->ranked && k < r; k++) {
		d->q[k] = ldexpf(nv_f16_to_f32(le_u16(v->l + 2 * k)), -d->e[0]);
		d->k[k] = (uint32_t)k;
	}
	for (size_t j = 0; j < n; j++)
		d->g[j] = nv_f16_to_f32(le_u16(v->g + 2 * j));
	for (size_t j = 0; j < n; j++)
		deq_signs(v->sv, j, r, d, NULL, d->cols + j * d->c);
	return 0;
}

/* a (rows × c) = S_U rows i0.. times q' in group order */
static void deq_left(const blr_view *v, const deq_path *d, size_t r, size_t i0, size_t rows,
		     float *a)
{
	for (size_t i = 0; i < rows; i++)
		deq_signs(v->su, i0 + i, r, d, d->q, a + i * d->c);
}

/* scratch of one block of rows: a (rows × c), s (rows × n f32), t and acc
 * (rows × n f64) */
typedef struct {
	float *a, *s;
	double *t, *acc;
} deq_blk;

/*
 * T_p's rows: each group's exact f32 product (in s), scaled by 2^e and summed
 * in f64 in the groups' order (in t); of one group, s is T_p / 2^e itself and
 * t is not made.  The scale of what it leaves: 2^e, or 1.
 */
static double deq_t(const deq_path *d, size_t rows, size_t n, deq_blk *b)
{
	for (size_t g = 0; g < d->groups; g++) {
		size_t c0 = d->start[g], kc = d->start[g + 1] - c0;
		double sc = ldexp(1.0, d->e[g]); /* 2^-35 .. 2^5: normal */

		nv_sgemm(0, 1, rows, n, kc, 1.0f, b->a + c0, d->c, d->cols + c0, d->c, 0.0f, b->s,
			 n);
		if (d->groups == 1)
			return sc;
		for (size_t i = 0; i < rows * n; i++)
			b->t[i] = g ? b->t[i] + sc * b->s[i] : sc * b->s[i];
	}
	if (!d->groups)
		memset(b->t, 0, rows * n * sizeof(double));
	return 1.0;
}

/*
 * path p's term h_i·g_j·T_p[i,j] of rows i0.. (h·g exact, times T_p one
 * rounding; of one group (h·g·2^e)·s is that product exactly): into acc
 * (first), else added to acc; the last path's sum rounded into w's rows
 */
static void deq_scale(const blr_view *v, const deq_path *d, size_t i0, size_t rows, size_t n,
		      int first, int last, deq_blk *b, float *w)
{
	double sc = deq_t(d, rows, n, b);
	int one = d->groups == 1;

	for (size_t i = 0; i < rows; i++) {
		double h = nv_f16_to_f32(le_u16(v->h + 2 * (i0 + i))) * sc;
		double *acc = b->acc + i * n;
		const double *t = b->t + i * n;
		const float *s = b->s + i * n;

		if (one && first)
			for (size_t j = 0; j < n; j++)
				acc[j] = h * d->g[j] * s[j];
		else if (one)
			for (size_t j = 0; j < n; j++)
				acc[j] += h * d->g[j] * s[j];
		else if (first)
			for (size_t j = 0; j < n; j++)
				acc[j] = h * d->g[j] * t[j];
		else
			for (size_t j = 0; j < n; j++)
				acc[j] += h * d->g[j] * t[j];
		for (size_t j = 0; last && j < n; j++)
			w[(i0 + i) * n + j] = (float)acc[j];
	}
}

static void deq_blk_free(deq_blk *b)
{
	free(b->a);
	free(b->s);
	free(b->t);
	free(b->acc);
}

/* one block of Ŵ's rows for nv_par_items: each thread its own scratch */
typedef struct {
	const blr_header *hd;
	const blr_view *v;
	const deq_path *d;
	float *w;
	deq_blk *b;
} deq_job;

static void deq_block(void *ctx, size_t item, size_t thread)
{
	const deq_job *j = ctx;
	size_t i0 = item * DEQ_ROWS, m = j->hd->m, rows = m - i0 < DEQ_ROWS ? m - i0 : DEQ_ROWS;

	for (size_t p = 0; p < j->hd->paths; p++) {
		deq_left(&j->v[p], &j->d[p], j->hd->r, i0, rows, j->b[thread].a);
		deq_scale(&j->v[p], &j->d[p], i0, rows, j->hd->n, p == 0, p + 1 == j->hd->paths,
			  &j->b[thread], j->w);
	}
}

/*
 * Ŵ's rows, blocks of them on nv_get_threads() threads, each block's
 * products on its own thread (a serial section): a block's bits are its
 * own whatever thread makes it
 */
static int deq_rows(const blr_header *hd, const blr_view *v, const deq_path *d, float *w)
{
	size_t n = hd->n, cmax = d[0].c, nb = (hd->m + DEQ_ROWS - 1) / DEQ_ROWS;
	size_t nt = (size_t)nv_get_threads();
	deq_blk b[NV_PAR_MAX];
	int rc = 0;

	nt = nt < nb ? nt : nb;
	nt = nt < NV_PAR_MAX ? (nt ? nt : 1) : NV_PAR_MAX;
	if (hd->paths > 1 && d[1].c > cmax)
		cmax = d[1].c;
	memset(b, 0, sizeof(b));
	for (size_t k = 0; k < nt; k++) {
		b[k].a = nv_malloc(DEQ_ROWS, (cmax + 1) * sizeof(float));
		b[k].s = nv_malloc(DEQ_ROWS, n * sizeof(float));
		b[k].t = nv_malloc(DEQ_ROWS, n * sizeof(double));
		b[k].acc = nv_malloc(DEQ_ROWS, n * sizeof(double));
		if (!b[k].a || !b[k].s || !b[k].t || !b[k].acc)
			rc = -1;
	}
	if (rc == 0) {
		deq_job j = { hd, v, d, w, b };

		nv_serial();
		nv_par_items(nb, nt, deq_block, &j);
		nv_unserial();
	}
	for (size_t k = 0; k < nt; k++)
		deq_blk_free(&b[k]);
	return rc;
}

int blr_dequantize(const uint8_t *buf, size_t len, float *w)
{
	blr_header hd;
	blr_view v[2];
	deq_path d[2];
	int rc = -1;

	if (blr_parse(buf, len, &hd, v) < 0)
		return -1;
	pthread_once(&deq_once, deq_byte_init);
	if (hd.n > INT_MAX) {
		nv_seterr("d_in %u is beyond what BLAS takes (%d)", hd.n, INT_MAX);
		return -1;
	}
	memset(d, 0, sizeof(d));
	for (size_t p = 0; p < hd.paths; p++)
		if (deq_path_init(&v[p], hd.n, hd.r, &d[p]) < 0)
			goto out;
	rc = deq_rows(&hd, v, d, w);
out:
	deq_path_free(&d[0]);
	deq_path_free(&d[1]);
	return rc;
}
