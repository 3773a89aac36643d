/* normcal.c - the final RMSNorm's weight fitted to the source's logits (normcal.h) */
#include "normcal.h"

#include "adam.h"
#include "err.h"
#include "linalg.h"
#include "mem.h"
#include "par.h"
#include "rng.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* rows of logits held at a time: bounds the scratch to 2·NC_CHUNK·vocab floats */
#define NC_CHUNK 256

typedef struct {
	float *a, *as;     /* (NC_CHUNK × d) w ⊙ n of the chunk's rows, w°⊙ n° of those not kept */
	float *z, *zs;     /* (NC_CHUNK × vocab) logits; z becomes q − p */
	float *g;          /* (NC_CHUNK × d) (q − p) · E */
	double *kl;        /* (NC_CHUNK) each row's KL */
	const float **zp;  /* (NC_CHUNK) each row's source logits: in zs or kept */
	double *lp;        /* (NC_CHUNK) their log-sum-exp (NaN: not yet known) */
	size_t *slot;      /* (NC_CHUNK) each row's place in the kept logits, SIZE_MAX none */
} nc_scratch;

/*
 * the source's logits kept from their first computation (nc_fit): they do
 * not change while w does.  The SEL rows first (every evaluation reads them
 * all), then the first FIT rows, as many as o->cache_bytes holds; a kept
 * row's logits are the bits its first product of NC_CHUNK rows gave, which
 * are the bits every later such product would give (test-normcal and t0701
 * check)
 */
typedef struct {
	float *z;         /* (rows × vocab) */
	double *lse;      /* (rows) */
	uint8_t *have;    /* (rows) made yet */
	size_t nsel, nfit; /* SEL rows kept, the first nfit FIT rows kept */
} nc_cache;

static void scratch_free(nc_scratch *s)
{
	free(s->a);
	free(s->as);
	free(s->z);
	free(s->zs);
	free(s->g);
	free(s->kl);
	free(s->zp);
	free(s->lp);
	free(s->slot);
}

static int scratch_init(nc_scratch *s, const nc_data *D)
{
	memset(s, 0, sizeof *s);
	s->a = nv_malloc(NC_CHUNK, D->d * sizeof(float));
	s->as = nv_malloc(NC_CHUNK, D->d * sizeof(float));
	s->z = nv_malloc(NC_CHUNK, D->vocab * sizeof(float));
	s->zs = nv_malloc(NC_CHUNK, D->vocab * sizeof(float));
	s->g = nv_malloc(NC_CHUNK, D->d * sizeof(float));
	s->kl = nv_malloc(NC_CHUNK, sizeof(double));
	s->zp = nv_malloc(NC_CHUNK, sizeof(*s->zp));
	s->lp = nv_malloc(NC_CHUNK, sizeof(double));
	s->slot = nv_malloc(NC_CHUNK, sizeof(size_t));
	if (!s->a || !s->as || !s->z || !s->zs || !s->g || !s->kl || !s->zp || !s->lp || !s->slot) {
		scratch_free(s);
		return -1;
	}
	return 0;
}

static void cache_free(nc_cache *k)
{
	free(k->z);
	free(k->lse);
	free(k->have);
	memset(k, 0, sizeof *k);
}

/* room for the rows that bytes holds; where the memory is not there, none
 * kept (the same weights, only slower: chunk_source) */
static void cache_init(nc_cache *k, const nc_data *D, size_t bytes)
{
	size_t per = D->vocab * sizeof(float) + sizeof(double) + 1, rows = bytes / per;

	memset(k, 0, sizeof *k);
	k->nsel = rows < D->sel ? rows : D->sel;
	rows -= k->nsel;
	k->nfit = rows < D->fit ? rows : D->fit;
	rows = k->nsel + k->nfit;
	if (rows == 0)
		return;
	k->z = malloc(rows * D->vocab * sizeof(float));
	k->lse = malloc(rows * sizeof(double));
	k->have = calloc(rows, 1);
	if (!k->z || !k->lse || !k->have)
		cache_free(k);
}

/* row's place in the kept logits, SIZE_MAX where it is not kept */
static size_t cache_slot(const nc_cache *k, const nc_data *D, size_t row)
{
	if (!k || !k->z)
		return SIZE_MAX;
	if (row >= D->fit)
		return row - D->fit < k->nsel ? row - D->fit : SIZE_MAX;
	return row < k->nfit ? k->nsel + row : SIZE_MAX;
}

typedef struct {
	nc_scratch *s;
	size_t V;
	int diff;
} kl_job;

/* KL(p ‖ q) of one row; z ← q − p when the gradient is wanted */
static void kl_row(void *ctx, size_t b, size_t thread)
{
	const kl_job *j = ctx;
	nc_scratch *s = j->s;
	float *z = s->z + b * j->V;
	double lq = nv_lse(z, j->V);

	(void)thread;
	if (isnan(s->lp[b]))
		s->lp[b] = nv_lse(s->zp[b], j->V);
	s->kl[b] = j->diff ? nv_kl_row_diff(s->zp[b], s->lp[b], z, lq, j->V)
			   : nv_kl_row(s->zp[b], s->lp[b], z, lq, j->V);
}

/* each of c rows' KL into s->kl, the rows on OpenBLAS's count of our threads */
static void rows_kl(nc_scratch *s, size_t c, size_t V, int diff)
{
	int nt = nv_get_threads();

	nv_par_items(c, nt < 1 ? 1 : (size_t)nt, kl_row, &(kl_job){ s, V, diff });
}

/*
 * the chunk's source logits: the kept ones where k has them, the others
 * made together by one sgemm of NC_CHUNK rows, zeros after them (chunk_keep
 * keeps those k has room for, once their KL is done).  Every source logit
 * of a calibration (nc_fit: k given, with room or none) is made in a
 * product of NC_CHUNK rows, so each row has the same bits wherever it is
 * made where the BLAS gives a row the same bits at any place in a product
 * of one shape (OpenBLAS's Cooperlake kernels); a product of other rows
 * gives a row's bits in another order of sums.  Some kernels sum a row in
 * an order that follows its place (OpenBLAS's Zen sgemm: places 0-5 and
 * 6-11 of each 12), and there a row kept from one place and one made again
 * at another differ in their last bits.  Without k (nc_kl, nc_kl_back) the
 * chunk's c rows are one product.
 */
static void chunk_source(const nc_data *D, nc_scratch *s, const nc_cache *k,
			 const size_t *rows, size_t c, double *flops)
{
	size_t d = D->d, V = D->vocab, need = 0;

	for (size_t b = 0; b < c; b++) {
		s->slot[b] = cache_slot(k, D, rows[b]);
		if (s->slot[b] != SIZE_MAX && k->have[s->slot[b]]) {
			s->zp[b] = k->z + s->slot[b] * V;
			s->lp[b] = k->lse[s->slot[b]];
			continue;
		}
		memcpy(s->as + need * d, D->ns + rows[b] * d, d * sizeof(float));
		s->zp[b] = s->zs + need * V;
		s->lp[b] = NAN;
		need++;
	}
	if (need == 0)
		return;
	size_t M = k ? NC_CHUNK : need; /* no k (nc_kl, nc_kl_back): the chunk's own product */
	memset(s->as + need * d, 0, (M - need) * d * sizeof(float));
	nv_sgemm(0, 1, M, V, d, 1.0f, s->as, d, D->Es, d, 0.0f, s->zs, V);
	*flops += 2.0 * (double)M * (double)V * (double)d;
}

static void chunk_keep(const nc_data *D, const nc_scratch *s, nc_cache *k, size_t c)
{
	for (size_t b = 0; b < c; b++) {
		size_t sl = s->slot[b];

		if (sl == SIZE_MAX || k->have[sl])
			continue;
		memcpy(k->z + sl * D->vocab, s->zp[b], D->vocab * sizeof(float));
		k->lse[sl] = s->lp[b];
		k->have[sl] = 1;
	}
}

/*
 * one chunk of c rows: Σ KL into *kl, Σ gradient into grad (d) when given,
 * and each row's (q − p)·E into rowg (c × d) when given
 */
static int chunk_kl(const nc_data *D, nc_scratch *s, nc_cache *k, const float *w,
		    const size_t *rows, size_t c, double *kl, double *grad, float *rowg, double *flops)
{
	int diff = grad != NULL || rowg != NULL;
	size_t d = D->d, V = D->vocab;

	for (size_t b = 0; b < c; b++) {
		const float *n = D->n + rows[b] * d;

		for (size_t i = 0; i < d; i++)
			s->a[b * d + i] = w[i] * n[i];
	}
	/* z (c × V) = a (c × d) · Eᵀ; zs likewise with the source's head */
	nv_sgemm(0, 1, c, V, d, 1.0f, s->a, d, D->E, d, 0.0f, s->z, V);
	*flops += 2.0 * (double)c * (double)V * (double)d;
	chunk_source(D, s, k, rows, c, flops);
	rows_kl(s, c, V, diff);
	if (k)
		chunk_keep(D, s, k, c);
	for (size_t b = 0; b < c; b++) {
		if (!isfinite(s->kl[b])) {
			nv_seterr("the KL of calibration row %zu is not finite", rows[b]);
			return -1;
		}
		*kl += s->kl[b];
	}
	if (!diff)
		return 0;
	/* g (c × d) = (q − p) (c × V) · E (V × d) */
	nv_sgemm(0, 0, c, d, V, 1.0f, s->z, V, D->E, d, 0.0f, rowg ? rowg : s->g, d);
	*flops += 2.0 * (double)c * (double)V * (double)d;
	for (size_t b = 0; b < c && grad; b++)
		for (size_t i = 0; i < d; i++)
			grad[i] += (double)D->n[rows[b] * d + i] * (rowg ? rowg : s->g)[b * d + i];
	return 0;
}

/*
 * nc_kl with the caller's scratch (a fit allocates its 2·NC_CHUNK·vocab
 * floats once), and with rowg (n × d) each row's (q − p)·E when given
 */
static int kl_rows(const nc_data *D, nc_scratch *s, nc_cache *k, const float *w, size_t r0,
		   const size_t *idx, size_t n, double *kl, double *grad, float *rowg, double *flops)
{
	size_t rows[NC_CHUNK];
	double sum = 0, fl = 0;
	int rc = 0;

	if (n == 0) {
		nv_seterr("no calibration rows to measure");
		return -1;
	}
	if (grad)
		memset(grad, 0, D->d * sizeof *grad);
	for (size_t b0 = 0; b0 < n && rc == 0; b0 += NC_CHUNK) {
		size_t c = n - b0 < NC_CHUNK ? n - b0 : NC_CHUNK;

		for (size_t b = 0; b < c; b++)
			rows[b] = idx ? idx[b0 + b] : r0 + b0 + b;
		rc = chunk_kl(D, s, k, w, rows, c, &sum, grad, rowg ? rowg + b0 * D->d : NULL, &fl);
	}
	if (rc < 0)
		return -1;
	*kl = sum / (double)n;
	if (grad)
		for (size_t i = 0; i < D->d; i++)
			grad[i] /= (double)n;
	if (flops)
		*flops += fl;
	return 0;
}

int nc_kl(const nc_data *D, const float *w, size_t r0, const size_t *idx, size_t n, double *kl,
	  double *grad, double *flops)
{
	nc_scratch s;
	int rc;

	if (scratch_init(&s, D) < 0)
		return -1;
	rc = kl_rows(D, &s, NULL, w, r0, idx, n, kl, grad, NULL, flops);
	scratch_free(&s);
	return rc;
}

int nc_kl_back(const nc_data *D, const float *w, size_t r0, size_t n, double *kl, float *gz,
	       double *flops)
{
	nc_scratch s;
	int rc;

	if (scratch_init(&s, D) < 0)
		return -1;
	rc = kl_rows(D, &s, NULL, w, r0, NULL, n, kl, NULL, gz, flops);
	scratch_free(&s);
	if (rc == 0)
		*kl *= (double)n; /* the sum, as the header says */
	return rc;
}

/* w = w_start ⊙ exp(s), rounded as stored; a value the dtype cannot hold is an error */
static int weights(const float *w0, const double *s, size_t d, float (*round)(float), float *w)
{
	for (size_t i = 0; i < d; i++) {
		w[i] = (float)((double)w0[i] * exp(s[i]));
		if (round)
			w[i] = round(w[i]);
		if (!isfinite(w[i])) {
			nv_seterr("the final norm's weight %zu left the stored dtype's range", i);
			return -1;
		}
	}
	return 0;
}

typedef struct {
	double *s, *m, *v, *g; /* (d) log-scales, Adam's moments, the gradient */
	float *w;              /* (d) the current weights */
	size_t *perm;          /* (fit) the FIT rows' order */
	nc_scratch sc;         /* the logits of every step and evaluation */
	nc_cache k;            /* the source's logits kept */
} nc_state;

static void state_free(nc_state *t)
{
	scratch_free(&t->sc);
	cache_free(&t->k);
	free(t->s);
	free(t->m);
	free(t->v);
	free(t->g);
	free(t->w);
	free(t->perm);
}

static int state_init(nc_state *t, const nc_data *D, size_t cache_bytes)
{
	size_t d = D->d, fit = D->fit;

	memset(t, 0, sizeof *t);
	if (scratch_init(&t->sc, D) < 0)
		return -1;
	cache_init(&t->k, D, cache_bytes);
	t->s = nv_calloc(d, sizeof(double));
	t->m = nv_calloc(d, sizeof(double));
	t->v = nv_calloc(d, sizeof(double));
	t->g = nv_calloc(d, sizeof(double));
	t->w = nv_calloc(d, sizeof(float));
	t->perm = nv_calloc(fit, sizeof(size_t));
	if (!t->s || !t->m || !t->v || !t->g || !t->w || !t->perm) {
		state_free(t);
		return -1;
	}
	return 0;
}

/* one Adam step on s, the gradient in w turned into ∂/∂s_i = ∂/∂w_i · w_i */
static void adam(nc_state *t, const float *w0, size_t d, double lr, size_t step)
{
	for (size_t i = 0; i < d; i++)
		t->g[i] = t->g[i] * (double)w0[i] * exp(t->s[i]);
	nv_adam(t->s, t->m, t->v, t->g, d, lr, step);
}

/* the batch of step k (1-based) from the FIT order, reshuffled at each pass */
static const size_t *batch_rows(nc_state *t, const nc_data *D, size_t b, size_t k, uint64_t *st)
{
	size_t per = D->fit / b, at = (k - 1) % per;

	if (at == 0)
		nv_shuffle(t->perm, D->fit, st);
	return t->perm + at * b;
}

static int sel_kl(const nc_data *D, nc_state *t, const float *w, double *kl, double *flops)
{
	return kl_rows(D, &t->sc, &t->k, w, D->fit, NULL, D->sel, kl, NULL, NULL, flops);
}

int nc_fit(const nc_data *D, const float *w_start, const nc_opts *o, float *w, nc_result *r)
{
	nc_state t;
	size_t b = o->batch < D->fit ? o->batch : D->fit;
	uint64_t st = o->seed;
	double kl, best;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (D->fit == 0 || D->sel == 0 || b == 0 || o->eval_every == 0) {
		nv_seterr("the calibration needs FIT and SEL rows, a batch and an evaluation period");
		return -1;
	}
	if (state_init(&t, D, o->cache_bytes) < 0)
		return -1;
	memcpy(w, w_start, D->d * sizeof *w);
	if (kl_rows(D, &t.sc, &t.k, w, 0, NULL, D->fit, &r->fit_before, NULL, NULL, &r->flops) < 0 ||
	    sel_kl(D, &t, w, &r->sel_before, &r->flops) < 0)
		goto out;
	best = r->sel_before;
	for (size_t k = 1; k <= o->steps; k++) {
		const size_t *rows = batch_rows(&t, D, b, k, &st);

		if (weights(w_start, t.s, D->d, NULL, t.w) < 0 ||
		    kl_rows(D, &t.sc, &t.k, t.w, 0, rows, b, &kl, t.g, NULL, &r->flops) < 0)
			goto out;
		adam(&t, w_start, D->d, nv_lr_at(o->lr, o->cosine, k, o->steps), k);
		if (k % o->eval_every && k != o->steps)
			continue;
		if (weights(w_start, t.s, D->d, o->round, t.w) < 0 || sel_kl(D, &t, t.w, &kl, &r->flops) < 0)
			goto out;
		if (kl < best) {
			best = kl;
			r->best_step = k;
			memcpy(w, t.w, D->d * sizeof *w);
		}
	}
	r->sel_after = best;
	r->kept = t.k.z ? t.k.nsel + t.k.nfit : 0;
	r->rows = D->fit + D->sel;
	rc = kl_rows(D, &t.sc, &t.k, w, 0, NULL, D->fit, &r->fit_after, NULL, NULL, &r->flops);
out:
	state_free(&t);
	return rc;
}
