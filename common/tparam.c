/* tparam.c - a BLR payload's scales as tunable parameters (tparam.h) */
#include "tparam.h"

#include "adam.h"
#include "blr.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"
#include "par.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TP_VISIT 10 /* arrays a visit holds: TP_SIDE of m rows, then as many of n */
#define TP_SIDE 5   /* a side's arrays: its signs of each path, then three of k columns */

/* the arrays of a visit: the signs per path, the factors of every path
 * together, P and Q; each with its rows (m or n) and columns (r or k) */
static void visit_arrays(tp_tensor *t, float **v[TP_VISIT], size_t rows[TP_VISIT],
			 size_t cols[TP_VISIT])
{
	float **a[TP_VISIT] = { &t->su[0], &t->su[1], &t->a, &t->al, &t->pg,
				&t->sv[0], &t->sv[1], &t->b, &t->bl, &t->qg };
	size_t k = t->np * t->r;

	for (int j = 0; j < TP_VISIT; j++) {
		int e = j % TP_SIDE; /* 0, 1: path e's signs (none past np) */

		v[j] = a[j];
		rows[j] = j < TP_SIDE ? t->m : t->n;
		cols[j] = e < 2 ? ((size_t)e < t->np ? t->r : 0) : k;
	}
}

/* sp's arrays, in visit_arrays' order */
static void spare_arrays(tp_spare *sp, float **v[TP_VISIT])
{
	float **a[TP_VISIT] = { &sp->su[0], &sp->su[1], &sp->a, &sp->al, &sp->pg,
				&sp->sv[0], &sp->sv[1], &sp->b, &sp->bl, &sp->qg };

	memcpy(v, a, sizeof a);
}

void tp_spare_free(tp_spare *sp)
{
	float **v[TP_VISIT];

	spare_arrays(sp, v);
	for (int j = 0; j < TP_VISIT; j++)
		free(*v[j]);
	memset(sp, 0, sizeof *sp);
}

void tp_close_into(tp_tensor *t, tp_spare *sp)
{
	float **v[TP_VISIT], **s[TP_VISIT];
	size_t rows[TP_VISIT], cols[TP_VISIT];

	visit_arrays(t, v, rows, cols);
	if (sp && t->a) { /* open: its arrays become the spare */
		tp_spare_free(sp);
		spare_arrays(sp, s);
		for (int j = 0; j < TP_VISIT; j++)
			*s[j] = *v[j];
		sp->m = t->m, sp->n = t->n, sp->r = t->r, sp->np = t->np;
	} else {
		for (int j = 0; j < TP_VISIT; j++)
			free(*v[j]);
	}
	for (int j = 0; j < TP_VISIT; j++)
		*v[j] = NULL;
	memset(&t->fac, 0, sizeof t->fac);
}

void tp_close(tp_tensor *t)
{
	tp_close_into(t, NULL);
}

void tp_free(tp_tensor *t)
{
	tp_close(t);
	for (int p = 0; p < 2; p++) {
		free(t->v0[p]);
		free(t->v[p]);
		free(t->s[p]);
		free(t->am[p]);
		free(t->av[p]);
		free(t->gr[p]);
	}
	free(t->bytes);
	memset(t, 0, sizeof *t);
}

int tp_init(tp_tensor *t, int which, const uint8_t *payload, size_t len)
{
	blr_header hd;
	blr_view v[2];

	memset(t, 0, sizeof *t);
	if (blr_parse(payload, len, &hd, v) < 0)
		return -1;
	t->which = which;
	t->m = hd.m, t->n = hd.n, t->r = hd.r, t->np = hd.paths, t->nv = t->m + t->n + t->r;
	if (!(t->bytes = nv_malloc(len, 1)))
		return -1;
	memcpy(t->bytes, payload, len);
	t->len = len;
	for (size_t p = 0; p < t->np; p++) {
		const uint8_t *sc[3] = { v[p].h, v[p].g, v[p].l };
		size_t cnt[3] = { t->m, t->n, t->r }, k = 0;

		t->v0[p] = nv_malloc(t->nv, sizeof(float));
		t->v[p] = nv_malloc(t->nv, sizeof(float));
		t->s[p] = nv_calloc(t->nv, sizeof(double));
		t->am[p] = nv_calloc(t->nv, sizeof(double));
		t->av[p] = nv_calloc(t->nv, sizeof(double));
		t->gr[p] = nv_calloc(t->nv, sizeof(double));
		if (!t->v0[p] || !t->v[p] || !t->s[p] || !t->am[p] || !t->av[p] || !t->gr[p])
			return -1;
		t->off[p] = (size_t)(v[p].h - payload);
		for (int part = 0; part < 3; part++)
			for (size_t i = 0; i < cnt[part]; i++, k++)
				t->v0[p][k] = t->v[p][k] = nv_f16_to_f32(le_u16(sc[part] + 2 * i));
	}
	return 0;
}

/* rows × r packed signs (r a multiple of 8: rows start on bytes) as ±1 floats,
 * eight at a time from a table of every byte */
static void unpack_signs(const uint8_t *bits, size_t rows, size_t r, float *out)
{
	float lut[256][8];

	for (int v = 0; v < 256; v++)
		for (int t = 0; t < 8; t++)
			lut[v][t] = (v >> t) & 1 ? 1.0f : -1.0f;
	for (size_t b = 0; b < rows * r / 8; b++)
		memcpy(out + 8 * b, lut[bits[b]], sizeof lut[0]);
}

/* path p's signs as ±1 floats */
static void unpack(tp_tensor *t, size_t p, const blr_view *v)
{
	unpack_signs(v->su, t->m, t->r, t->su[p]);
	unpack_signs(v->sv, t->n, t->r, t->sv[p]);
}

int tp_open_from(tp_tensor *t, tp_spare *sp)
{
	float **v[TP_VISIT], **s[TP_VISIT];
	size_t rows[TP_VISIT], cols[TP_VISIT];
	blr_header hd;
	blr_view bv[2];

	if (blr_parse(t->bytes, t->len, &hd, bv) < 0)
		return -1;
	visit_arrays(t, v, rows, cols);
	if (sp && sp->a && sp->m == t->m && sp->n == t->n && sp->r == t->r && sp->np == t->np) {
		spare_arrays(sp, s);
		for (int j = 0; j < TP_VISIT; j++)
			*v[j] = *s[j], *s[j] = NULL;
		memset(sp, 0, sizeof *sp);
	} else {
		if (sp) /* of another shape: not kept beside this visit's */
			tp_spare_free(sp);
		for (int j = 0; j < TP_VISIT; j++)
			if (cols[j] && !(*v[j] = nv_malloc(rows[j], cols[j] * sizeof(float)))) {
				tp_close(t);
				return -1;
			}
	}
	for (size_t p = 0; p < t->np; p++)
		unpack(t, p, &bv[p]);
	return 0;
}

int tp_open(tp_tensor *t)
{
	return tp_open_from(t, NULL);
}

/* one row of a path's factors: x[c] = s·sgn[c], xl[c] = x[c]·l[c] */
static void factor_row(float *restrict x, float *restrict xl, const float *restrict sgn,
		       const float *restrict l, float s, size_t r)
{
	for (size_t c = 0; c < r; c++) {
		x[c] = s * sgn[c];
		xl[c] = x[c] * l[c];
	}
}

const bk_factor *tp_factor(tp_tensor *t)
{
	size_t m = t->m, n = t->n, r = t->r, k = t->np * r;

	for (size_t p = 0; p < t->np; p++) {
		const float *h = t->v[p], *g = h + m, *lv = g + n;

		for (size_t i = 0; i < m; i++)
			factor_row(t->a + i * k + p * r, t->al + i * k + p * r, t->su[p] + i * r, lv, h[i], r);
		for (size_t j = 0; j < n; j++)
			factor_row(t->b + j * k + p * r, t->bl + j * k + p * r, t->sv[p] + j * r, lv, g[j], r);
	}
	memset(t->pg, 0, m * k * sizeof(float));
	memset(t->qg, 0, n * k * sizeof(float));
	t->fac = (bk_factor){ k, t->a, t->al, t->b, t->bl, t->pg, t->qg };
	return &t->fac;
}

/* Σ_k sgn_k ℓ_k x_k in double, in k's order */
static double signed_dot(const float *restrict sgn, const float *restrict lv,
			 const float *restrict x, size_t r)
{
	double sum = 0;

	for (size_t k = 0; k < r; k++)
		sum += (double)sgn[k] * lv[k] * x[k];
	return sum;
}

/* gl_k += h·sgn_k·x_k (sgn = ±1: the products are exact in either order) */
static void signed_axpy(double *restrict gl, const float *restrict sgn, const float *restrict x,
			double h, size_t r)
{
	for (size_t k = 0; k < r; k++)
		gl[k] += h * ((double)sgn[k] * x[k]);
}

/*
 * ∂/∂h_i = Σ_k S_U,ik ℓ_k P_ik, ∂/∂ℓ_k = Σ_i h_i S_U,ik P_ik,
 * ∂/∂g_j = Σ_k S_V,jk ℓ_k Q_jk; then times the scale, for s
 */
void tp_chain(tp_tensor *t)
{
	size_t m = t->m, n = t->n, r = t->r, kk = t->np * r;

	for (size_t p = 0; p < t->np; p++) {
		const float *h = t->v[p], *g = h + m, *lv = g + n;
		const float *P = t->pg + p * r, *Q = t->qg + p * r; /* path p's columns */
		double *gh = t->gr[p], *gg = gh + m, *gl = gg + n;

		memset(gl, 0, r * sizeof(double));
		for (size_t i = 0; i < m; i++) {
			gh[i] = signed_dot(t->su[p] + i * r, lv, P + i * kk, r);
			signed_axpy(gl, t->su[p] + i * r, P + i * kk, h[i], r);
		}
		for (size_t j = 0; j < n; j++)
			gg[j] = signed_dot(t->sv[p] + j * r, lv, Q + j * kk, r);
		for (size_t i = 0; i < t->nv; i++)
			gh[i] *= t->v[p][i];
	}
}

static void factor_item(void *ctx, size_t i, size_t thread)
{
	(void)thread;
	tp_factor(((tp_tensor *const *)ctx)[i]);
}

static void chain_item(void *ctx, size_t i, size_t thread)
{
	(void)thread;
	tp_chain(((tp_tensor *const *)ctx)[i]);
}

/* fn of each of n tensors on the BLAS thread count of our own threads */
static void each_tensor(tp_tensor *const *t, size_t n, void (*fn)(void *, size_t, size_t))
{
	int nt = nv_get_threads();

	nv_par_items(n, nt < 1 ? 1 : (size_t)nt, fn, (void *)t);
}

void tp_factor_many(tp_tensor *const *t, size_t n)
{
	each_tensor(t, n, factor_item);
}

void tp_chain_many(tp_tensor *const *t, size_t n)
{
	each_tensor(t, n, chain_item);
}

void tp_adam(tp_tensor *t, double lr, size_t step)
{
	for (size_t p = 0; p < t->np; p++) {
		nv_adam(t->s[p], t->am[p], t->av[p], t->gr[p], t->nv, lr, step);
		for (size_t i = 0; i < t->nv; i++)
			t->v[p][i] = (float)((double)t->v0[p][i] * exp(t->s[p][i]));
	}
}

int tp_store(tp_tensor *t)
{
	for (size_t p = 0; p < t->np; p++)
		for (size_t i = 0; i < t->nv; i++) {
			uint16_t h = nv_f32_to_f16(t->v[p][i]);

			if (!isfinite(nv_f16_to_f32(h)))
				return -1;
			put_u16(t->bytes + t->off[p] + 2 * i, h);
		}
	return 0;
}

int tp_snapshot(const tp_tensor *t, size_t nt, uint8_t **out)
{
	for (size_t i = 0; i < nt; i++) {
		if (!(out[i] = nv_malloc(t[i].len, 1))) {
			tp_snapshot_free(out, i);
			return -1;
		}
		memcpy(out[i], t[i].bytes, t[i].len);
	}
	return 0;
}

void tp_reload(tp_tensor *t, size_t nt, uint8_t *const *from)
{
	for (size_t i = 0; i < nt; i++)
		memcpy(t[i].bytes, from[i], t[i].len);
}

void tp_snapshot_free(uint8_t **out, size_t nt)
{
	for (size_t i = 0; i < nt; i++) {
		free(out[i]);
		out[i] = NULL;
	}
}

/* the measured step: stored, its SEL loss, kept when better */
static int measure(tp_tensor *t, size_t nt, const tp_loop *lp, uint8_t **keep, double *best,
		   size_t *best_step, size_t k)
{
	double sel;

	for (size_t i = 0; i < nt; i++)
		if (tp_store(&t[i]) < 0)
			return 0; /* a scale beyond f16: this step cannot be stored */
	if (lp->sel(lp->ctx, &sel) < 0)
		return -1;
	if (lp->measured)
		lp->measured(lp->ctx, k, sel);
	if (sel < *best) {
		*best = sel;
		*best_step = k;
		for (size_t i = 0; i < nt; i++)
			memcpy(keep[i], t[i].bytes, t[i].len);
		if (lp->kept)
			lp->kept(lp->ctx);
	}
	return 0;
}

int tp_steps(tp_tensor *t, size_t nt, const size_t *fit, size_t nfit, const tp_sched *o,
	     const tp_loop *lp, uint8_t **keep, double *best, size_t *best_step)
{
	size_t nb = o->batch < nfit ? o->batch : nfit, per = nfit / nb;
	size_t *perm = nv_malloc(nfit, sizeof(size_t)), win[64];
	uint64_t st = o->seed;
	int rc = 0;

	if (!perm)
		return -1;
	for (size_t k = 1; k <= o->steps && rc == 0; k++) {
		size_t at = (k - 1) % per;

		if (at == 0)
			nv_shuffle(perm, nfit, &st);
		for (size_t b = 0; b < nb; b++)
			win[b] = fit[perm[at * nb + b]];
		if ((rc = lp->grad(lp->ctx, win, nb)) < 0)
			break;
		for (size_t i = 0; i < nt; i++)
			tp_adam(&t[i], nv_lr_at(o->lr, o->cosine, k, o->steps), k);
		if (k % o->eval_every == 0 || k == o->steps)
			rc = measure(t, nt, lp, keep, best, best_step, k);
	}
	free(perm);
	return rc;
}
