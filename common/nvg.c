/* nvg.c - the model of one tensor, the H metric, the NVG stages (see nvg.h) */
#include "nvg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "err.h"
#include "kern.h"
#include "mem.h"
#include "par.h"

/* time one statement under a stage */
#define PT(prof, name, stmt)                                              \
	do {                                                              \
		double t_ = (prof) ? nv_now() : 0.0;                      \
		stmt;                                                     \
		if (prof)                                                 \
			nv_prof_add((prof), (name), nv_now() - t_, 0);   \
	} while (0)

/* ------------------------------------------------------------------ model */

int nv_sgn_zeros(nv_sgn *s, size_t r, size_t c)
{
	s->r = r;
	s->c = c;
	s->d = nv_calloc(r * c > 0 ? r * c : 1, 1);
	return s->d ? 0 : -1;
}

void nv_sgn_free(nv_sgn *s)
{
	free(s->d);
	memset(s, 0, sizeof(*s));
}

/* ±1·(rs·cs) is exact, so this gives the bits that scaling a matrix of
 * ±1.0 in place gave */
void nv_sgn_scaled_to(const nv_sgn *s, const double *rs, const double *cs, double *o, size_t ld)
{
	for (size_t i = 0; i < s->r; i++)
		nv_i8_scaled(nv_sgn_row(s, i), rs ? rs[i] : 1.0, cs, o + i * ld, s->c);
}

int nv_sgn_scaled(const nv_sgn *s, const double *rs, const double *cs, nv_mat *o)
{
	if (nv_mat_zeros(o, s->r, s->c) < 0)
		return -1;
	nv_sgn_scaled_to(s, rs, cs, o->d, s->c);
	return 0;
}

int nv_path_alloc(nv_path *q, size_t m, size_t n, size_t r)
{
	memset(q, 0, sizeof(*q));
	q->h = nv_calloc(m, sizeof(double));
	q->l = nv_calloc(r, sizeof(double));
	q->g = nv_calloc(n, sizeof(double));
	if (!q->h || !q->l || !q->g || nv_sgn_zeros(&q->su, m, r) < 0 ||
	    nv_sgn_zeros(&q->sv, n, r) < 0) {
		nv_path_free(q);
		return -1;
	}
	return 0;
}

void nv_path_free(nv_path *q)
{
	free(q->h);
	free(q->l);
	free(q->g);
	nv_sgn_free(&q->su);
	nv_sgn_free(&q->sv);
	memset(q, 0, sizeof(*q));
}

void nv_bm_free(nv_bm *md)
{
	for (size_t p = 0; p < 2; p++)
		if (md->p[p].h)
			nv_path_free(&md->p[p]);
	md->np = 0;
}

int nv_bm_copy(nv_bm *dst, const nv_bm *src)
{
	size_t m = src->m, n = src->n, r = src->r;

	memset(dst, 0, sizeof(*dst));
	dst->m = m;
	dst->n = n;
	dst->r = r;
	for (size_t p = 0; p < src->np; p++) {
		const nv_path *s = &src->p[p];
		nv_path *d = &dst->p[p];
		if (nv_path_alloc(d, m, n, r) < 0) {
			nv_bm_free(dst);
			return -1;
		}
		dst->np = p + 1;
		memcpy(d->h, s->h, m * sizeof(double));
		memcpy(d->l, s->l, r * sizeof(double));
		memcpy(d->g, s->g, n * sizeof(double));
		memcpy(d->su.d, s->su.d, m * r);
		memcpy(d->sv.d, s->sv.d, n * r);
	}
	return 0;
}

int nv_path_hsl(const nv_bm *md, size_t p, nv_mat *o)
{
	return nv_sgn_scaled(&md->p[p].su, md->p[p].h, md->p[p].l, o);
}

int nv_path_hs(const nv_bm *md, size_t p, nv_mat *o)
{
	return nv_sgn_scaled(&md->p[p].su, md->p[p].h, NULL, o);
}

int nv_path_gs(const nv_bm *md, size_t p, nv_mat *o)
{
	return nv_sgn_scaled(&md->p[p].sv, md->p[p].g, NULL, o);
}

int nv_bm_recon(const nv_bm *md, int skip, nv_mat *out)
{
	if (nv_mat_zeros(out, md->m, md->n) < 0)
		return -1;
	for (size_t p = 0; p < md->np; p++) {
		nv_mat a, b;
		if ((int)p == skip)
			continue;
		if (nv_path_hsl(md, p, &a) < 0 || nv_path_gs(md, p, &b) < 0) {
			nv_mat_free(&a);
			nv_mat_free(out);
			return -1;
		}
		nv_gemm(1.0, &a, 0, &b, 1, 1.0, out);
		nv_mat_free(&a);
		nv_mat_free(&b);
	}
	return 0;
}

/* rows i0.. of a row-major matrix, as a matrix of its own (no copy) */
static nv_mat rows_of(const nv_mat *a, size_t i0, size_t rows)
{
	nv_mat v = {rows, a->c, a->d + i0 * a->c};
	return v;
}

/* ----------------------------------------------------------------- metric */

int nv_metric_init(nv_metric *mt, const nv_mat *w, const nv_mat *h)
{
	memset(mt, 0, sizeof(*mt));
	mt->w = w;
	mt->h = h;
	if (nv_gemm_new(w, 0, h, 0, &mt->wh) < 0)
		return -1;
	mt->whw = nv_dot_all(&mt->wh, w);
	return 0;
}

int nv_metric_init32(nv_metric *mt, const nv_mat *w, const nv_mat32 *h)
{
	memset(mt, 0, sizeof(*mt));
	mt->w = w;
	mt->h32 = h;
	if (nv_gemm32b_new(w, h, &mt->wh) < 0)
		return -1;
	mt->whw = nv_dot_all(&mt->wh, w);
	return 0;
}

/* the metric's f32 H: the caller's, or read into held when not there yet */
static const nv_mat32 *metric_h32(const nv_metric *mt)
{
	nv_mat32 t = {0};
	size_t n = mt->w->c;

	if (mt->h32 || mt->held->d)
		return mt->h32 ? mt->h32 : mt->held;
	if (mt->load(mt->arg, &t) < 0)
		return NULL;
	if (t.r != n || t.c != n) {
		nv_seterr("W has %zu columns but the Gram is %zux%zu", n, t.r, t.c);
		nv_mat32_free(&t);
		return NULL;
	}
	*mt->held = t;
	return mt->held;
}

int nv_metric_init_load(nv_metric *mt, const nv_mat *w, nv_gram_load load, void *arg)
{
	const nv_mat32 *h;

	memset(mt, 0, sizeof(*mt));
	mt->w = w;
	mt->load = load;
	mt->arg = arg;
	if (!(mt->held = nv_calloc(1, sizeof(nv_mat32))) || !(h = metric_h32(mt)) ||
	    nv_gemm32b_new(w, h, &mt->wh) < 0) {
		nv_metric_free(mt);
		return -1;
	}
	mt->whw = nv_dot_all(&mt->wh, w);
	/* not kept either: an error's cross terms take W·(H·B) (nv_herr) */
	nv_mat_free(&mt->wh);
	nv_metric_release(mt);
	return 0;
}

int nv_metric_hb(const nv_metric *mt, const nv_mat *b, nv_mat *out)
{
	const nv_mat32 *h32;

	if (mt->h)
		return nv_gemm_new(mt->h, 0, b, 0, out);
	if (!(h32 = metric_h32(mt)))
		return -1;
	return mt->hb32 ? nv_gemm32s_new(h32, b, out) : nv_gemm32a_new(h32, b, out);
}

void nv_metric_release(const nv_metric *mt)
{
	if (mt->held)
		nv_mat32_free(mt->held);
}

void nv_metric_free(nv_metric *mt)
{
	nv_metric_release(mt);
	free(mt->held);
	mt->held = NULL;
	nv_mat_free(&mt->wh);
}

int nv_herr_direct(const nv_mat *e, const nv_mat *h, double *out)
{
	nv_mat eh;

	if (nv_gemm_new(e, 0, h, 0, &eh) < 0)
		return -1;
	*out = nv_dot_all(&eh, e);
	nv_mat_free(&eh);
	return 0;
}

double nv_rel_unridged(double e, double whw, double e2, double w2, double ridge)
{
	return sqrt(fmax(e - ridge * e2, 0.0) / fmax(whw - ridge * w2, 1e-300));
}

int nv_frob2(const nv_mat *w, const nv_bm *md, double *e2, double *w2)
{
	nv_mat rec;

	if (nv_bm_recon(md, -1, &rec) < 0)
		return -1;
	*e2 = *w2 = 0.0;
	for (size_t i = 0; i < rec.r * rec.c; i++) {
		double d = w->d[i] - rec.d[i];
		*e2 += d * d;
		*w2 += w->d[i] * w->d[i];
	}
	nv_mat_free(&rec);
	return 0;
}

int nv_rel_raw(const nv_metric *mt, double ridge, const nv_bm *md, double *out)
{
	double e, e2, w2;

	if (nv_herr(mt, md, &e) < 0 || nv_frob2(mt->w, md, &e2, &w2) < 0)
		return -1;
	*out = nv_rel_unridged(e, mt->whw, e2, w2, ridge);
	return 0;
}

void nv_hbk_void(nv_hbk *k, size_t p)
{
	if (k)
		nv_mat_free(&k->hb[p]);
}

void nv_hbk_free(nv_hbk *k)
{
	nv_hbk_void(k, 0);
	nv_hbk_void(k, 1);
}

/* path p's H·B in k, made there from b = gs(p) where it is not known */
static const nv_mat *hbk_get(nv_hbk *k, const nv_metric *mt, size_t p, const nv_mat *b)
{
	if (!k->hb[p].d && nv_metric_hb(mt, b, &k->hb[p]) < 0)
		return NULL;
	return &k->hb[p];
}

/* the factors B_p and H·B_p of every path (A_p is made where it is used);
 * H·B_p borrowed from k, made there where not known */
typedef struct {
	nv_mat b[2], hb[2];
} factors;

static void factors_free(factors *f)
{
	for (int p = 0; p < 2; p++)
		nv_mat_free(&f->b[p]);
}

static int factors_of(const nv_bm *md, const nv_metric *mt, nv_hbk *k, factors *f)
{
	memset(f, 0, sizeof(*f));
	for (size_t p = 0; p < md->np; p++) {
		const nv_mat *hb;
		if (nv_path_gs(md, p, &f->b[p]) < 0 || !(hb = hbk_get(k, mt, p, &f->b[p]))) {
			factors_free(f);
			return -1;
		}
		f->hb[p] = *hb;
	}
	return 0;
}

/* ⟨X·Y, Z·T⟩-style pieces: sum(A ∘ (P·Q)) with P·Q computed */
static int dot_prod(const nv_mat *a, const nv_mat *p, int tp, const nv_mat *q, int tq,
		    double *out)
{
	nv_mat pq;

	if (nv_gemm_new(p, tp, q, tq, &pq) < 0)
		return -1;
	*out = nv_dot_all(a, &pq);
	nv_mat_free(&pq);
	return 0;
}

/*
 * ⟨A_p, (W H) B_p⟩, or ⟨A_p, W (H B_p)⟩ where W·H is not kept, made
 * NV_ROW_BLOCK_DEFAULT rows at a time: A_p's rows from its signs and their
 * rows of the product, summed in the order of one whole product's sum
 */
static int herr_cross(const nv_metric *mt, const nv_bm *md, const factors *f, size_t p,
		      double *x)
{
	size_t m = md->m, r = md->r, bs = m < NV_ROW_BLOCK_DEFAULT ? m : NV_ROW_BLOCK_DEFAULT;
	const nv_mat *lhs = mt->wh.d ? &mt->wh : mt->w, *rhs = mt->wh.d ? &f->b[p] : &f->hb[p];
	nv_mat ab = {0}, pb = {0};
	double s = 0.0;
	int rc = -1;

	if (nv_mat_zeros(&ab, bs, r) < 0 || nv_mat_zeros(&pb, bs, r) < 0)
		goto out;
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		size_t rows = m - i0 < bs ? m - i0 : bs;
		nv_mat lv = rows_of(lhs, i0, rows), pv = rows_of(&pb, 0, rows);
		nv_path_hsl_rows(&md->p[p], r, i0, rows, 1, ab.d);
		nv_gemm(1.0, &lv, 0, rhs, 0, 0.0, &pv);
		s = nv_dot_acc(s, ab.d, pb.d, rows * r);
	}
	*x = s;
	rc = 0;
out:
	nv_mat_free(&ab);
	nv_mat_free(&pb);
	return rc;
}

/* x[p], herr_cross's term, and the Grams aa[p][q] = A_pᵀ A_q: the A's whole
 * only for their Grams */
static int herr_terms(const nv_metric *mt, const nv_bm *md, const factors *f, double x[2],
		      nv_mat aa[2][2])
{
	size_t np = md->np;
	nv_mat a[2] = {{0}};
	int rc = -1;

	for (size_t p = 0; p < np; p++)
		if (herr_cross(mt, md, f, p, &x[p]) < 0)
			return -1;
	for (size_t p = 0; p < np; p++)
		if (nv_path_hsl(md, p, &a[p]) < 0)
			goto out;
	for (size_t p = 0; p < np; p++)
		for (size_t q = 0; q < np; q++)
			if (nv_gemm_new(&a[p], 1, &a[q], 0, &aa[p][q]) < 0)
				goto out;
	rc = 0;
out:
	nv_mat_free(&a[0]);
	nv_mat_free(&a[1]);
	return rc;
}

int nv_herr(const nv_metric *mt, const nv_bm *md, double *out)
{
	nv_hbk k = {{{0}}};
	int rc = nv_herr_k(mt, md, &k, out);

	nv_hbk_free(&k);
	return rc;
}

int nv_herr_k(const nv_metric *mt, const nv_bm *md, nv_hbk *k, double *out)
{
	factors f;
	nv_mat aa[2][2] = {{{0}}};
	double e = mt->whw, x[2];
	int rc = -1;

	if (factors_of(md, mt, k, &f) < 0)
		return -1;
	if (herr_terms(mt, md, &f, x, aa) < 0)
		goto out;
	for (size_t p = 0; p < md->np; p++) {
		e -= 2.0 * x[p];
		for (size_t q = 0; q < md->np; q++) {
			double y;
			/* ⟨A_pᵀ A_q, B_pᵀ H B_q⟩ */
			if (dot_prod(&aa[p][q], &f.b[p], 1, &f.hb[q], 0, &y) < 0)
				goto out;
			e += y;
		}
	}
	*out = e;
	rc = 0;
out:
	for (size_t p = 0; p < 2; p++)
		for (size_t q = 0; q < 2; q++)
			nv_mat_free(&aa[p][q]);
	factors_free(&f);
	return rc;
}

int nv_rel(const nv_metric *mt, const nv_bm *md, double *out)
{
	double e;

	if (nv_herr(mt, md, &e) < 0)
		return -1;
	*out = sqrt(fmax(e, 0.0) / fmax(mt->whw, 1e-300));
	return 0;
}

/* ---------------------------------------------------------------- context */

int nv_hold_mn(size_t m, size_t n, size_t max)
{
	return n == 0 || m <= max / sizeof(double) / n;
}

int nv_tctx_init(nv_tctx *c, const nv_mat *w, const nv_hctx *hc, nv_prof *prof, int threads)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->w = w;
	c->hc = hc;
	c->prof = prof;
	c->threads = threads < 1 ? 1 : threads;
	c->itq_tol = NV_ITQ_TOL_DEFAULT;
	c->try_sweeps = NV_TRY_SWEEPS_DEFAULT;
	c->als_tol = NV_ALS_TOL_DEFAULT;
	c->g_every = 1;
	c->row_block = NV_ROW_BLOCK_DEFAULT;
	if (w->c != hc->n) {
		nv_seterr("W has %zu columns but the context is %zu wide", w->c, hc->n);
		return -1;
	}
	c->wlat = nv_calloc(1, sizeof(*c->wlat));
	if (!c->wlat)
		return -1;
	PT(prof, "wh", rc = nv_metric_init32(&c->fit, w, &hc->hf));
	/* W·hf (m × n) is kept only where W is wider than tall: there the g
	 * step's (W·hf)ᵀ·M costs m·n·r where hf·(Wᵀ·M) would cost n²·r more;
	 * elsewhere every product takes W·(hf·B) or hf·(Wᵀ·M) (wh_times, wh_t_times) */
	if (rc == 0 && w->r >= w->c)
		nv_mat_free(&c->fit.wh);
	return rc;
}

int nv_tctx_als32(nv_tctx *c)
{
	const nv_mat *w = c->fit.wh.d ? &c->fit.wh : c->w;

	nv_mat32_free(&c->w32);
	if (!(c->w32.d = nv_malloc(w->r * w->c + 1, sizeof(float))))
		return -1;
	c->w32.r = w->r;
	c->w32.c = w->c;
	nv_f32_round(w->d, w->r * w->c, c->w32.d);
	c->als32 = 1;
	return 0;
}

void nv_tctx_free(nv_tctx *c)
{
	nv_mat32_free(&c->w32);
	nv_metric_free(&c->fit);
	if (c->wlat)
		nv_lat_basis_free(c->wlat);
	free(c->wlat);
	c->wlat = NULL;
}

/* ---------------------------------------------------------------- latents */

void nv_lat_basis_free(nv_lat_basis *b)
{
	nv_mat_free(&b->vec);
	nv_mat_free(&b->tl);
	free(b->sig);
	memset(b, 0, sizeof(*b));
}

/*
 * the matrix whose latents are taken: t = w − a·bᵀ (a m × k, b n × k), or w
 * itself when a is NULL; never formed whole, its rows made a block at a time
 * where a product needs them
 */
typedef struct {
	const nv_mat *w, *a, *b;
} lat_src;

/* rows i0.. of t: w's own (no copy) when a is NULL, else made in buf
 * (≥ rows × n) as w − a·bᵀ: the bits of nv_bm_recon's product taken from w */
static nv_mat src_rows(const lat_src *s, size_t i0, size_t rows, const nv_mat *buf)
{
	nv_mat out = {rows, s->w->c, buf ? buf->d : NULL}, ar;
	const double *w = s->w->d + i0 * s->w->c;

	if (!s->a)
		return rows_of(s->w, i0, rows);
	ar = rows_of(s->a, i0, rows);
	nv_gemm(1.0, &ar, 0, s->b, 1, 0.0, &out);
	for (size_t x = 0; x < rows * out.c; x++)
		out.d[x] = w[x] - out.d[x];
	return out;
}

/* the buffers of a block of rows: t's (when t is a difference), and t·L's or
 * t·H's (when there is a product) */
typedef struct {
	size_t bs;  /* rows per block */
	nv_mat t;   /* bs × n, or none */
	nv_mat x;   /* bs × n, or none */
} lat_blk;

static void blk_free(lat_blk *k)
{
	nv_mat_free(&k->t);
	nv_mat_free(&k->x);
}

/* the blocks' rows, and their buffers: t's where t is a difference and its
 * rows are made (diff), t·L's or t·H's where there is a product */
static int blk_init(const lat_src *s, size_t block, int diff, int product, lat_blk *k)
{
	size_t m = s->w->r, n = s->w->c;

	*k = (lat_blk){0};
	k->bs = block ? block : NV_ROW_BLOCK_DEFAULT;
	if (k->bs > m)
		k->bs = m ? m : 1;
	if ((diff && s->a && nv_mat_zeros(&k->t, k->bs, n) < 0) ||
	    (product && nv_mat_zeros(&k->x, k->bs, n) < 0)) {
		blk_free(k);
		return -1;
	}
	return 0;
}

/* rows i0.. of t·L into dst (rows × n; NULL: k->x), or those rows of t
 * itself when l is NULL */
static nv_mat tl_rows(const lat_src *s, const nv_mat *l, size_t i0, size_t rows, lat_blk *k,
		      double *dst)
{
	nv_mat tb = src_rows(s, i0, rows, &k->t), out = {rows, s->w->c, dst ? dst : k->x.d};

	if (!l)
		return tb;
	nv_gemm(1.0, &tb, 0, l, 0, 0.0, &out);
	return out;
}

/* g's rows i0.. = th_I·tᵀ = th_I·wᵀ − (th_I·b)·aᵀ, th_I rows × n */
static int gram_rows(const lat_src *s, const nv_mat *th, size_t i0, nv_mat *g)
{
	nv_mat gr = rows_of(g, i0, th->r), x = {0};

	nv_gemm(1.0, th, 0, s->w, 1, 0.0, &gr);
	if (!s->a)
		return 0;
	if (nv_gemm_new(th, 0, s->b, 0, &x) < 0)
		return -1;
	nv_gemm(-1.0, &x, 0, s->a, 1, 1.0, &gr);
	nv_mat_free(&x);
	return 0;
}

/* G = t·H·tᵀ (m × m; H the identity when hf is NULL) by row blocks of t·H
 * (mt->th's own rows when the caller has it), made exactly symmetric: no
 * m × n product held; each entry the sum one whole product would make */
static int row_gram(const lat_src *s, const nv_lat_metric *mt, nv_mat *g)
{
	size_t m = s->w->r;
	const nv_mat32 *hf = mt ? mt->hf : NULL;
	const nv_mat *th = mt ? mt->th : NULL;
	lat_blk k;
	int rc = 0;

	if (blk_init(s, mt ? mt->block : 0, 1, hf && !th, &k) < 0)
		return -1;
	if (nv_mat_zeros(g, m, m) < 0) {
		blk_free(&k);
		return -1;
	}
	for (size_t i0 = 0, rows; rc == 0 && i0 < m; i0 += rows) {
		rows = m - i0 < k.bs ? m - i0 : k.bs;
		nv_mat x = th ? rows_of(th, i0, rows) : src_rows(s, i0, rows, &k.t);
		if (hf && !th) {
			nv_mat tb = x;
			x = (nv_mat){rows, s->w->c, k.x.d};
			rc = nv_gemm32b(&tb, hf, &x);
		}
		if (rc == 0)
			rc = gram_rows(s, &x, i0, g);
	}
	blk_free(&k);
	for (size_t i = 0; rc == 0 && i < m; i++)
		for (size_t j = 0; j < i; j++) {
			double v = 0.5 * (g->d[i * m + j] + g->d[j * m + i]);
			g->d[i * m + j] = g->d[j * m + i] = v;
		}
	if (rc < 0)
		nv_mat_free(g);
	return rc;
}

/* (t·L)ᵀ·(t·L) (n × n: t taller than wide), or tᵀ·t, b->block rows at a
 * time; with hold, t·L's blocks are made into b->tl (m × n) and stay there */
static int col_gram(const lat_src *s, nv_lat_basis *b, int hold, nv_mat *g)
{
	size_t m = s->w->r, n = s->w->c;
	lat_blk k;

	hold = hold && b->l;
	if (blk_init(s, b->block, 1, b->l && !hold, &k) < 0 || nv_mat_zeros(g, n, n) < 0 ||
	    (hold && nv_mat_zeros(&b->tl, m, n) < 0)) {
		blk_free(&k);
		return -1;
	}
	for (size_t i0 = 0, rows; i0 < m; i0 += rows) {
		rows = m - i0 < k.bs ? m - i0 : k.bs;
		nv_mat tl = tl_rows(s, b->l, i0, rows, &k, hold ? nv_row(&b->tl, i0) : NULL);
		nv_syrk_t_lower(&tl, i0 ? 1.0 : 0.0, g);
	}
	nv_sym_mirror(g);
	blk_free(&k);
	return 0;
}

/* the Gram whose eigenvectors are the basis: t·H·tᵀ (rows, from H), or
 * (t·L)ᵀ·(t·L) (columns: t taller than wide), b->l kept to make t·L again
 * for the latents where b->tl does not hold it */
static int basis_gram(const lat_src *s, const nv_lat_metric *mt, nv_prof *prof,
		      nv_lat_basis *b, nv_mat *g)
{
	nv_mat tl = {0};
	int rc = 0;

	b->l = mt ? mt->l : NULL;
	if (b->byrows && ((mt && mt->hf) || (s->a && !b->l))) {
		PT(prof, "lat.gemm", rc = row_gram(s, mt, g));
		return rc;
	}
	if (mt && mt->hf && !mt->l) {
		nv_seterr("latents of a %zux%zu matrix (taller than wide) need the Cholesky factor "
			  "of the metric", s->w->r, s->w->c);
		return -1;
	}
	if (!b->byrows) {
		PT(prof, "lat.gemm", rc = col_gram(s, b, mt && mt->hold, g));
		return rc;
	}
	if (s->a) { /* rows by L alone: t·L·Lᵀ·tᵀ would need t whole */
		nv_seterr("latents of a difference by rows need the metric's H, not L alone");
		return -1;
	}
	/* m ≤ n without hf: (t·L)·(t·L)ᵀ, or t·tᵀ */
	if (b->l)
		PT(prof, "lat.gemm", rc = nv_gemm_new(s->w, 0, b->l, 0, &tl));
	if (rc == 0)
		PT(prof, "lat.gemm", rc = nv_syrk_new(1.0, b->l ? &tl : s->w, 0, g));
	nv_mat_free(&tl);
	return rc;
}

/* the eigendecomposition of the Gram of t·L: rows (m × m) when m ≤ n, else
 * columns (n × n); σ = √max(λ, 0), descending */
static int basis_build(const lat_src *s, const nv_lat_metric *mt, size_t rank, nv_prof *prof,
		       nv_lat_basis *b)
{
	nv_mat g = {0};
	double *lam = NULL;
	size_t kk;
	int rc;

	memset(b, 0, sizeof(*b));
	b->byrows = s->w->r <= s->w->c;
	b->block = mt ? mt->block : 0;
	if (basis_gram(s, mt, prof, b, &g) < 0)
		goto fail;
	kk = rank && rank < g.r ? rank : g.r;
	if (!(lam = nv_malloc(kk ? kk : 1, sizeof(double))) ||
	    !(b->sig = nv_malloc(kk ? kk : 1, sizeof(double))))
		goto fail;
	PT(prof, "lat.eig", rc = nv_sym_eig_top(&g, kk, lam, &b->vec));
	if (rc < 0)
		goto fail;
	for (size_t k = 0; k < kk; k++)
		b->sig[k] = sqrt(fmax(lam[k], 0.0));
	free(lam);
	nv_mat_free(&g);
	return 0;
fail:
	free(lam);
	nv_mat_free(&g);
	nv_lat_basis_free(b);
	return -1;
}

int nv_lat_basis_build(const nv_mat *t, const nv_lat_metric *mt, size_t rank, nv_prof *prof,
		       nv_lat_basis *b)
{
	lat_src s = {t, NULL, NULL};

	return basis_build(&s, mt, rank, prof, b);
}

/* U_r (m × r): the top-r left singular vectors of t·L */
static int lat_ur(const nv_lat_basis *b, const lat_src *s, size_t r, double floor, nv_prof *prof,
		  nv_mat *ur)
{
	nv_mat top;
	lat_blk k;

	if (nv_mat_zeros(&top, b->vec.r, r) < 0)
		return -1;
	for (size_t i = 0; i < b->vec.r; i++)
		memcpy(nv_row(&top, i), nv_row(&b->vec, i), r * sizeof(double));
	if (b->byrows) {
		*ur = top;
		return 0;
	}
	/* U_r = t·L·V_r·Σ_r⁻¹, b->block rows of t·L at a time (b->tl's where held) */
	if (blk_init(s, b->block, !b->tl.d, b->l && !b->tl.d, &k) < 0 ||
	    nv_mat_zeros(ur, s->w->r, r) < 0) {
		blk_free(&k);
		nv_mat_free(&top);
		return -1;
	}
	{
		double t0 = nv_now();
		for (size_t i0 = 0, rows; i0 < s->w->r; i0 += rows) {
			rows = s->w->r - i0 < k.bs ? s->w->r - i0 : k.bs;
			nv_mat tl = b->tl.d ? rows_of(&b->tl, i0, rows)
					    : tl_rows(s, b->l, i0, rows, &k, NULL),
			       ub = rows_of(ur, i0, rows);
			nv_gemm(1.0, &tl, 0, &top, 0, 0.0, &ub);
		}
		nv_prof_add(prof, "lat.gemm", nv_now() - t0, 0);
	}
	blk_free(&k);
	nv_mat_free(&top);
	for (size_t i = 0; i < ur->r; i++)
		for (size_t c = 0; c < r; c++)
			ur->d[i * r + c] /= fmax(b->sig[c], floor);
	return 0;
}

/* vp = tᵀ·U_r = wᵀ·U_r − b·(aᵀ·U_r) (n × r) */
static int src_t_times(const lat_src *s, const nv_mat *ur, nv_mat *vp)
{
	nv_mat x = {0};

	if (nv_gemm_new(s->w, 1, ur, 0, vp) < 0)
		return -1;
	if (!s->a)
		return 0;
	if (nv_gemm_new(s->a, 1, ur, 0, &x) < 0) {
		nv_mat_free(vp);
		return -1;
	}
	nv_gemm(-1.0, s->b, 0, &x, 0, 1.0, vp);
	nv_mat_free(&x);
	return 0;
}

static int latents_from(const nv_lat_basis *b, const lat_src *s, size_t r, nv_prof *prof,
			nv_mat *up, nv_mat *vp)
{
	size_t m = s->w->r, n = s->w->c;
	double floor;
	nv_mat ur;
	int rc;

	up->d = vp->d = NULL;
	if (r > b->vec.c) {
		nv_seterr("latents of rank %zu from a basis of %zu pairs", r, b->vec.c);
		return -1;
	}
	floor = fmax(b->sig[0], 1e-300) * 1e-15;
	if (lat_ur(b, s, r, floor, prof, &ur) < 0)
		return -1;
	PT(prof, "lat.gemm", rc = src_t_times(s, &ur, vp));
	if (rc < 0) {
		nv_mat_free(&ur);
		return -1;
	}
	*up = ur; /* U_r becomes up in place: no m × r copy beside it */
	/* up = U_r Σ^{1/2}, vp = tᵀ U_r Σ^{-1/2} */
	for (size_t i = 0; i < m; i++)
		for (size_t k = 0; k < r; k++)
			up->d[i * r + k] *= sqrt(b->sig[k]);
	for (size_t j = 0; j < n; j++)
		for (size_t k = 0; k < r; k++)
			vp->d[j * r + k] /= sqrt(fmax(b->sig[k], floor));
	return 0;
}

int nv_latents_from(const nv_lat_basis *b, const nv_mat *t, size_t r, nv_prof *prof,
		    nv_mat *up, nv_mat *vp)
{
	lat_src s = {t, NULL, NULL};

	return latents_from(b, &s, r, prof, up, vp);
}

static int latents_src(const lat_src *s, size_t r, const nv_lat_metric *mt, nv_prof *prof,
		       nv_mat *up, nv_mat *vp)
{
	nv_lat_basis b;
	int rc;

	up->d = vp->d = NULL;
	if (basis_build(s, mt, r, prof, &b) < 0)
		return -1;
	rc = latents_from(&b, s, r, prof, up, vp);
	nv_lat_basis_free(&b);
	return rc;
}

int nv_latents(const nv_mat *t, size_t r, const nv_lat_metric *mt, nv_prof *prof, nv_mat *up,
	       nv_mat *vp)
{
	lat_src s = {t, NULL, NULL};

	return latents_src(&s, r, mt, prof, up, vp);
}

int nv_latents_minus(const nv_mat *w, const nv_mat *a, const nv_mat *b, size_t r,
		     const nv_lat_metric *mt, nv_prof *prof, nv_mat *up, nv_mat *vp)
{
	lat_src s = {w, a, b};

	if (a->r != w->r || b->r != w->c || a->c != b->c) {
		nv_seterr("latents of W (%zux%zu) minus A·Bᵀ of %zux%zu and %zux%zu: shapes disagree",
			  w->r, w->c, a->r, a->c, b->r, b->c);
		up->d = vp->d = NULL;
		return -1;
	}
	if (mt && mt->th) {
		nv_seterr("latents of a difference take t·H from its rows, not the caller's");
		up->d = vp->d = NULL;
		return -1;
	}
	return latents_src(&s, r, mt, prof, up, vp);
}

/* -------------------------------------------------------------------- ITQ */

/*
 * The ITQ's inputs: x = row-normalised [up; vp] ((m+n) × r), held as its two
 * parts xs[0] (m × r) and xs[1] (n × r), never joined; w2 = [wu²; wv²] / mean.
 * With f32, the parts are held as floats in xf (xs keeps only their shapes)
 */
typedef struct {
	nv_mat xs[2];
	float *xf[2];
	double *w2;
	size_t block; /* rows per product: x·R and xᵀ·B are never whole */
	int f32;
} itq_in;

static void itq_in_free(itq_in *in)
{
	nv_mat_free(&in->xs[0]);
	nv_mat_free(&in->xs[1]);
	free(in->xf[0]);
	free(in->xf[1]);
	free(in->w2);
	*in = (itq_in){0};
}

/* the f64 parts made f32, each freed once its copy is made */
static int itq_inputs_f32(itq_in *in)
{
	for (size_t h = 0; h < 2; h++) {
		size_t cnt = in->xs[h].r * in->xs[h].c;
		if (!(in->xf[h] = nv_malloc(cnt ? cnt : 1, sizeof(float))))
			return -1;
		nv_f32_round(in->xs[h].d, cnt, in->xf[h]);
		free(in->xs[h].d);
		in->xs[h].d = NULL;
	}
	return 0;
}

/* xs: up and vp taken (they are left empty), their rows normalized in place */
static int itq_inputs(nv_mat *up, nv_mat *vp, const double *wu, const double *wv,
		      const nv_itq_cfg *cfg, itq_in *in)
{
	size_t m = up->r, nn = up->r + vp->r, r = up->c;
	double mean = 0.0;

	*in = (itq_in){ .xs = {*up, *vp}, .block = cfg->block ? cfg->block : NV_ROW_BLOCK_DEFAULT,
			.f32 = cfg->f32 };
	*up = *vp = (nv_mat){0};
	if (!(in->w2 = nv_malloc(nn ? nn : 1, sizeof(double))))
		return -1;
	for (size_t i = 0; i < nn; i++) {
		double *row = i < m ? nv_row(&in->xs[0], i) : nv_row(&in->xs[1], i - m), s = 0.0;
		for (size_t k = 0; k < r; k++)
			s += row[k] * row[k];
		s = fmax(sqrt(s), 1e-300);
		for (size_t k = 0; k < r; k++)
			row[k] /= s;
		in->w2[i] = i < m ? wu[i] * wu[i] : wv[i - m] * wv[i - m];
		mean += in->w2[i];
	}
	mean = fmax(mean / (double)nn, 1e-300);
	for (size_t i = 0; i < nn; i++)
		in->w2[i] /= mean;
	return in->f32 ? itq_inputs_f32(in) : 0;
}

/* what sign_bits calls for each entry whose sign changed: its index from
 * b0 and whether it is now ≥ 0 */
typedef void (*sign_flip_fn)(void *ctx, size_t e, int pos);

/* the signs (≥ 0: 1) of the cnt entries from entry b0 on (doubles, or
 * floats with f32) set in prev's bits, 64 at a time; the number that
 * changed, each of them passed to flip when given */
static size_t sign_bits(uint64_t *prev, size_t b0, const void *e, int f32, size_t cnt,
			sign_flip_fn flip, void *ctx)
{
	const double *ed = e;
	const float *ef = e;
	size_t ch = 0;

	for (size_t k = 0, take; k < cnt; k += take) {
		size_t b = b0 + k, off = b & 63;
		uint64_t nb = 0, mask, diff, *w = prev + (b >> 6);
		take = 64 - off < cnt - k ? 64 - off : cnt - k;
		for (size_t t = 0; t < take; t++)
			nb |= (uint64_t)(f32 ? ef[k + t] >= 0.0f : ed[k + t] >= 0.0) << (off + t);
		mask = (take == 64 ? ~UINT64_C(0) : (UINT64_C(1) << take) - 1) << off;
		diff = (*w ^ nb) & mask;
		ch += (size_t)__builtin_popcountll(diff);
		*w = (*w & ~mask) | nb;
		for (; flip && diff; diff &= diff - 1) {
			unsigned bit = (unsigned)__builtin_ctzll(diff);
			flip(ctx, k + bit - off, (int)((nb >> bit) & 1));
		}
	}
	return ch;
}

/*
 * One block of an ITQ step, rows i0.. of part h (x's rows from i on): the
 * block's signs sgn(x_b·rot) ∘ w2 in buf, counted against prev's (one bit
 * per entry), and x_bᵀ·(those) added to mm (set at i = 0).  In f64, or with
 * in->f32 in f32 products (nv_sgemm, rot given as rf) summed into mm in f64.
 * f64 after the first step: mm moved by the changed signs alone (acc).
 */
typedef struct {
	const itq_in *in;
	const nv_mat *rot;
	const float *rf;
	void *buf; /* block × r, double or float */
	float *xf; /* block × 2r: x_b and x_b·rot in f32 (f64 after the first step) */
	size_t redo; /* entries of x·rot taken again in f64 */
	float *mf; /* r × r (f32) */
	uint64_t *prev;
	nv_mat *mm;
	nv_mat *acc; /* r × r: mmᵀ, kept from step to step (f64) */
	const double *xb; /* the block's rows of x, for flip_acc */
	size_t i;         /* the block's first row of x */
} itq_blk;

static size_t itq_block64(const itq_blk *k, size_t h, size_t i0, size_t rows, size_t i)
{
	const itq_in *in = k->in;
	size_t r = k->mm->r, ch;
	nv_mat xb = rows_of(&in->xs[h], i0, rows), xr = { rows, r, k->buf };

	nv_gemm(1.0, &xb, 0, k->rot, 0, 0.0, &xr);
	ch = sign_bits(k->prev, i * r, xr.d, 0, rows * r, NULL, NULL);
	for (size_t a = 0; a < rows; a++) {
		double w = in->w2[i + a], *e = xr.d + a * r;
		for (size_t c = 0; c < r; c++)
			e[c] = e[c] >= 0.0 ? w : -w; /* sgn(e)·w, the same bits */
	}
	nv_gemm(1.0, &xb, 1, &xr, 0, i ? 1.0 : 0.0, k->mm);
	return ch;
}

/* entry e of the block (row a, column c) changed sign to s: column c of
 * mm = xᵀ·(S ∘ w2), row c of acc, moves by (s − (−s))·w2_a·x_a */
static void flip_acc(void *ctx, size_t e, int pos)
{
	const itq_blk *k = ctx;
	size_t r = k->acc->r, a = e / r, c = e % r;
	double coef = 2.0 * k->in->w2[k->i + a];

	cblas_daxpy((int)r, pos ? coef : -coef, k->xb + a * r, 1, k->acc->d + c * r, 1);
	nv_flops_add(2ull * r);
}

/* x_b·rot for its signs (nvg.h), the f32 product's slack γ_(r+2) with a 1%
 * margin, which also covers the f64 product's own γ_r */
void nv_itq_signs32(const nv_mat *xb, const nv_mat *rot, const float *rf, float *xf, double *o,
		    size_t *redo)
{
	size_t rows = xb->r, r = xb->c;
	float *yf = xf + rows * r;
	double g = (double)(r + 2) * 0x1p-24, slack = 1.01 * g / (1.0 - g);

	nv_f32_round(xb->d, rows * r, xf);
	nv_flops_add(2ull * rows * r * r);
	nv_sgemm(0, 0, rows, r, r, 1.0f, xf, r, rf, r, 0.0f, yf, r);
	for (size_t e = 0; e < rows * r; e++) {
		o[e] = yf[e];
		if (fabs(o[e]) <= slack) {
			size_t a = e / r, c = e % r;
			o[e] = cblas_ddot((int)r, xb->d + a * r, 1, rot->d + c, (int)r);
			nv_flops_add(2ull * r);
			++*redo;
		}
	}
}

/* a later step's block in f64: x_b·rot's signs (nv_itq_signs32), and acc
 * moved by those that changed (after the first steps few do: mm in a
 * fraction of its product's flops, equal to it up to f64 rounding) */
static size_t itq_flips64(itq_blk *k, size_t h, size_t i0, size_t rows, size_t i)
{
	size_t r = k->acc->r;
	nv_mat xb = rows_of(&k->in->xs[h], i0, rows), xr = { rows, r, k->buf };

	nv_itq_signs32(&xb, k->rot, k->rf, k->xf, xr.d, &k->redo);
	k->xb = xb.d;
	k->i = i;
	return sign_bits(k->prev, i * r, xr.d, 0, rows * r, flip_acc, k);
}

static size_t itq_block32(const itq_blk *k, size_t h, size_t i0, size_t rows, size_t i)
{
	const itq_in *in = k->in;
	size_t r = k->mm->r, ch;
	const float *xb = in->xf[h] + i0 * r;
	float *xr = k->buf;

	nv_sgemm(0, 0, rows, r, r, 1.0f, xb, r, k->rf, r, 0.0f, xr, r);
	ch = sign_bits(k->prev, i * r, xr, 1, rows * r, NULL, NULL);
	for (size_t a = 0; a < rows; a++) {
		float w = (float)in->w2[i + a], *e = xr + a * r;
		for (size_t c = 0; c < r; c++)
			e[c] = e[c] >= 0.0f ? w : -w;
	}
	nv_sgemm(1, 0, r, r, rows, 1.0f, xb, r, xr, r, 0.0f, k->mf, r);
	for (size_t a = 0; a < r * r; a++)
		k->mm->d[a] = (i ? k->mm->d[a] : 0.0) + (double)k->mf[a];
	nv_flops_add(4ull * rows * r * r);
	return ch;
}

/* the step's scratch: buf (bs rows); rf (rot in f32, freed after the step)
 * in f32 and for f64's later steps (inc), with mf in f32 and xf in f64 */
static int itq_scratch(const itq_in *in, const nv_mat *rot, size_t bs, int inc, itq_blk *k)
{
	size_t r = rot->r, nb = bs * r + 1, nr = r * r + 1; /* + 1: never 0 */
	float *rf;

	if (!(k->buf = nv_malloc(nb, in->f32 ? sizeof(float) : sizeof(double))))
		return -1;
	if (!in->f32 && !inc)
		return 0;
	if ((in->f32 ? !(k->mf = nv_malloc(nr, sizeof(float)))
		     : !(k->xf = nv_malloc(2 * nb, sizeof(float)))) ||
	    !(rf = nv_malloc(nr, sizeof(float))))
		return -1;
	nv_f32_round(rot->d, r * r, rf);
	k->rf = rf;
	return 0;
}

/* b ← aᵀ (r × r each; b already made) */
static void transpose_into(const nv_mat *a, nv_mat *b)
{
	size_t r = a->r;

	for (size_t u = 0; u < r; u++)
		for (size_t v = 0; v < r; v++)
			b->d[u * r + v] = a->d[v * r + u];
}

/*
 * one ITQ step: rot = polar(xᵀ·(sgn(x·rot) ∘ w2)), in->block rows of x at a
 * time; *changed counts the entries of sgn(x·rot) that differ from the last
 * step's, kept in prev (one bit per entry).  In f64, acc keeps mmᵀ from
 * step to step: the first step (acc empty) makes it by products, each later
 * one moves it by the signs that changed.  rot is freed before the polar
 * factor is taken (so that it is not held beside the factor's work)
 */
static int itq_step(const itq_in *in, nv_prof *prof, nv_mat *rot, uint64_t *prev, nv_mat *acc,
		    size_t *changed)
{
	size_t r = rot->r, i = 0, ch = 0, bs = in->block;
	size_t tallest = in->xs[0].r > in->xs[1].r ? in->xs[0].r : in->xs[1].r;
	int inc = !in->f32 && acc->d;
	nv_mat mm = {0}, nr;
	itq_blk k = { .in = in, .rot = rot, .prev = prev, .mm = &mm, .acc = acc };
	int rc = -1;

	if (bs > tallest) /* no room beyond the taller part's rows */
		bs = tallest ? tallest : 1;
	if (nv_mat_zeros(&mm, r, r) == 0 && itq_scratch(in, rot, bs, inc, &k) == 0 &&
	    (in->f32 || acc->d || nv_mat_zeros(acc, r, r) == 0)) {
		double t0 = nv_now();
		for (size_t h = 0; h < 2; h++)
			for (size_t i0 = 0, rows; i0 < in->xs[h].r; i0 += rows, i += rows) {
				rows = in->xs[h].r - i0 < bs ? in->xs[h].r - i0 : bs;
				ch += in->f32 ? itq_block32(&k, h, i0, rows, i)
				      : inc   ? itq_flips64(&k, h, i0, rows, i)
					      : itq_block64(&k, h, i0, rows, i);
			}
		if (!in->f32)
			transpose_into(inc ? acc : &mm, inc ? &mm : acc);
		nv_prof_add(prof, "itq.gemm", nv_now() - t0, 0);
		nv_prof_add(prof, "itq.f64", 0.0, k.redo);
		rc = 0;
	}
	free(k.buf);
	free(k.mf);
	free(k.xf);
	free((float *)k.rf);
	if (rc < 0) {
		nv_mat_free(&mm);
		return -1;
	}
	nv_mat_free(rot);
	*changed = ch;
	{
		int by_svd = 0;
		PT(prof, "itq.polar", rc = nv_polar_take(&mm, &nr, &by_svd)); /* mm is taken */
		nv_prof_add(prof, "itq.polar.svd", 0.0, (uint64_t)by_svd);
	}
	if (rc < 0)
		return -1;
	*rot = nr;
	return 0;
}

/* the ITQ steps on x (its rows normalized, w2 their weights) from R = I */
static int itq_run(const itq_in *in, const nv_itq_cfg *cfg, nv_prof *prof, nv_mat *rot,
		   int *used)
{
	size_t nn = in->xs[0].r + in->xs[1].r, r = in->xs[0].c, changed = 0;
	uint64_t *prev = nv_calloc(nn * r / 64 + 1, sizeof(uint64_t));
	nv_mat acc = {0};
	int it = 0;

	*rot = (nv_mat){ 0 };
	if (!prev || nv_mat_eye(rot, r) < 0)
		goto fail;
	/* a step whose signs are the last step's gives the last rotation again:
	 * stopping there (tol 0) changes nothing; tol > 0 stops near that point */
	while (it < cfg->iters) {
		if (itq_step(in, prof, rot, prev, &acc, &changed) < 0)
			goto fail;
		if (++it > 1 && (double)changed <= cfg->tol * (double)(nn * r))
			break;
	}
	nv_prof_add(prof, "itq.steps", 0.0, (uint64_t)it);
	if (used)
		*used = it;
	free(prev);
	nv_mat_free(&acc);
	return 0;
fail:
	free(prev);
	nv_mat_free(&acc);
	nv_mat_free(rot);
	return -1;
}

int nv_itq_rotation_spend(nv_mat *up, nv_mat *vp, const double *wu, const double *wv,
			  const nv_itq_cfg *cfg, nv_prof *prof, nv_mat *rot, int *used)
{
	itq_in in;
	int rc = -1;

	*rot = (nv_mat){ 0 };
	if (itq_inputs(up, vp, wu, wv, cfg, &in) == 0)
		rc = itq_run(&in, cfg, prof, rot, used);
	itq_in_free(&in);
	return rc;
}

int nv_itq_weighted(const nv_mat *up, const nv_mat *vp, const double *wu, const double *wv,
		    const nv_itq_cfg *cfg, nv_prof *prof, nv_mat *uo, nv_mat *vo, int *used)
{
	nv_mat rot = {0}, cu = {0}, cv = {0};
	itq_in in = {0};
	int rc = -1;

	uo->d = vo->d = NULL;
	if (nv_mat_copy(&cu, up) == 0 && nv_mat_copy(&cv, vp) == 0 &&
	    itq_inputs(&cu, &cv, wu, wv, cfg, &in) == 0)
		rc = itq_run(&in, cfg, prof, &rot, used);
	nv_mat_free(&cu);
	nv_mat_free(&cv);
	itq_in_free(&in); /* done with: not held beside the rotated latents */
	if (rc == 0 && (nv_mat_copy(uo, up) < 0 || nv_mat_copy(vo, vp) < 0 ||
			nv_itq_apply_in(uo, vo, &rot, cfg->block, prof) < 0)) {
		nv_mat_free(uo);
		nv_mat_free(vo);
		rc = -1;
	}
	nv_mat_free(&rot);
	return rc;
}

/* a ← a·rot in place, block rows at a time (one block's product beside a) */
static int rotate_rows(nv_mat *a, const nv_mat *rot, size_t block)
{
	size_t r = a->c, bs = block ? block : NV_ROW_BLOCK_DEFAULT;
	nv_mat buf = {0};

	if (bs > a->r)
		bs = a->r ? a->r : 1;
	if (nv_mat_zeros(&buf, bs, r) < 0)
		return -1;
	for (size_t i0 = 0, rows; i0 < a->r; i0 += rows) {
		rows = a->r - i0 < bs ? a->r - i0 : bs;
		nv_mat ab = rows_of(a, i0, rows), bb = rows_of(&buf, 0, rows);
		nv_gemm(1.0, &ab, 0, rot, 0, 0.0, &bb);
		memcpy(ab.d, bb.d, rows * r * sizeof(double));
	}
	nv_mat_free(&buf);
	return 0;
}

int nv_itq_apply_in(nv_mat *up, nv_mat *vp, const nv_mat *rot, size_t block, nv_prof *prof)
{
	int rc;

	PT(prof, "itq.gemm", rc = rotate_rows(up, rot, block);
	   if (rc == 0) rc = rotate_rows(vp, rot, block));
	return rc;
}

/* -------------------------------------------------------------------- ALS */

size_t nv_row_block(const nv_tctx *c, size_t m)
{
	size_t b = c->row_block ? c->row_block : 1;

	return m < b ? (m ? m : 1) : b;
}

void nv_path_hsl_rows(const nv_path *q, size_t r, size_t i0, size_t rows, int with_h, double *o)
{
	nv_sgn blk = {rows, r, q->su.d + i0 * r};

	nv_sgn_scaled_to(&blk, with_h ? q->h + i0 : NULL, q->l, o, r);
}

void nv_path_mtm(const nv_path *q, size_t m, size_t r, size_t bs, double *blk, nv_mat *k)
{
	for (size_t i0 = 0, rows; i0 < m; i0 += rows) {
		nv_mat mb;
		rows = m - i0 < bs ? m - i0 : bs;
		nv_path_hsl_rows(q, r, i0, rows, 1, blk);
		mb = (nv_mat){ rows, r, blk };
		nv_syrk_t_lower(&mb, i0 ? 1.0 : 0.0, k);
	}
}

/* rows i0.. of [X_0 | X_1] (the paths' matrices side by side, np·r wide)
 * written to o: X_p = diag(h_p)·S_p (side 'u') or diag(g_p)·T_p (side 'v'),
 * the values that nv_path_hs and nv_path_gs give */
static void hstack_rows(const nv_bm *md, char side, size_t i0, size_t rows, double *o)
{
	size_t r = md->r, pr = md->np * r;

	for (size_t p = 0; p < md->np; p++) {
		const nv_path *q = &md->p[p];
		nv_sgn blk = {rows, r, (side == 'u' ? q->su.d : q->sv.d) + i0 * r};
		nv_sgn_scaled_to(&blk, (side == 'u' ? q->h : q->g) + i0, NULL, o + p * r, pr);
	}
}

/* [X_0 | X_1] whole (n × np·r: side 'v' only, the ℓ step's B) */
static int hstack(const nv_bm *md, char side, nv_mat *o)
{
	size_t rows = side == 'u' ? md->m : md->n;

	if (nv_mat_zeros(o, rows, md->np * md->r) < 0)
		return -1;
	hstack_rows(md, side, 0, rows, o->d);
	return 0;
}

/* what the ℓ step leaves for the h and g steps: H·B (n × pr; the g steps
 * read the last path's columns, hb_keep_last), and for the h step alone BHB
 * (pr × pr) and WHB (m × pr), freed before the g steps; H·B_q stays valid
 * until path q's g is solved.  hbk (NULL:
 * none): the call's H·B_q made by a g step after g_q moved, kept for the
 * next sweep's ℓ step while g_q has not moved again (.d set) */
typedef struct {
	nv_mat hb, bhb, whb;
	nv_mat *hbk;
} als_state;

/*
 * H·B = [H·B_0 | H·B_1] (n × np·r) for B = [gs] (b): path p's columns from
 * hbk[p], its H·B_p kept from the sweep before, where that is valid (.d
 * set: g_p has not moved since), else by a product of their own.  A kept
 * one is let go once copied: the sweep's g steps move every g, so nothing
 * reads it again, and it is not held beside its copy.  In f32 each path's
 * product is its own, also where none is kept: nv_sgemm's tiles follow the
 * product's width, so that H·B_p has the bits of every other H·B_p (kept,
 * or made for an error) only when it is made alone
 */
static int hb_all(const nv_bm *md, const nv_tctx *c, const nv_mat *b, nv_mat hbk[2], nv_mat *hb)
{
	size_t n = md->n, r = md->r, pr = md->np * r;
	int fresh = 0;

	for (size_t p = 0; p < md->np; p++)
		fresh += !hbk || !hbk[p].d;
	if (fresh == (int)md->np && !c->fit.hb32)
		return nv_metric_hb(&c->fit, b, hb);
	if (nv_mat_zeros(hb, n, pr) < 0)
		return -1;
	for (size_t p = 0; p < md->np; p++) {
		nv_mat one = {0}, bp;
		const nv_mat *src = hbk ? &hbk[p] : &one;
		if (!src->d) {
			int rc;
			if (nv_path_gs(md, p, &bp) < 0)
				return -1;
			rc = nv_metric_hb(&c->fit, &bp, &one);
			nv_mat_free(&bp);
			if (rc < 0)
				return -1;
			src = &one;
		}
		for (size_t j = 0; j < n; j++)
			memcpy(hb->d + j * pr + p * r, nv_row(src, j), r * sizeof(double));
		nv_mat_free(&one);
		if (hbk)
			nv_mat_free(&hbk[p]);
	}
	return 0;
}

/* W·hf·B (m × k): (W·hf)·B where W·hf is kept, else W·(hf·B) from the
 * caller's hb = hf·B; the same flops either way */
static int wh_times(const nv_tctx *c, const nv_mat *b, const nv_mat *hb, nv_mat *out)
{
	if (c->als32)
		return nv_gemm32s_new(&c->w32, c->fit.wh.d ? b : hb, out);
	if (c->fit.wh.d)
		return nv_gemm_new(&c->fit.wh, 0, b, 0, out);
	return nv_gemm_new(c->w, 0, hb, 0, out);
}

/*
 * ℓ (joint over paths): (AᵀA ∘ BᵀHB)·λ = diag(Aᵀ·W·H·B), A = [hs], B = [gs];
 * *e: the fit error at the new ℓ, tr(W H Wᵀ) − λ·rhs (the least squares'
 * minimum: ‖W − Ŵ‖²_H = whw − 2λ·rhs + λᵀQλ with Qλ = rhs), NaN when the
 * system was singular and ℓ kept
 */
static int als_l(nv_bm *md, const nv_tctx *c, als_state *st, double *e)
{
	size_t m = md->m, r = md->r, pr = md->np * r, bs = nv_row_block(c, m);
	nv_mat b = {0}, a = {0}, ata = {0};
	double *rhs = NULL, *lam = NULL;
	int rc = -1;

	if (hstack(md, 'v', &b) < 0 || hb_all(md, c, &b, st->hbk, &st->hb) < 0 ||
	    (c->als32 ? nv_gemm_f32_new(&b, 1, &st->hb, &st->bhb)
		      : nv_gemm_new(&b, 1, &st->hb, 0, &st->bhb)) < 0 ||
	    wh_times(c, &b, &st->hb, &st->whb) < 0)
		goto out;
	nv_mat_free(&b); /* B's last reader: not held through the solve */
	if (nv_mat_zeros(&a, bs, pr) < 0 || nv_mat_zeros(&ata, pr, pr) < 0)
		goto out;
	rhs = nv_calloc(pr, sizeof(double));
	lam = nv_malloc(pr, sizeof(double));
	if (!rhs || !lam)
		goto out;
	/* AᵀA and diag(Aᵀ·W·H·B) with A = [hs] made a block of rows at a time */
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		size_t rows = m - i0 < bs ? m - i0 : bs;
		nv_mat av = rows_of(&a, 0, rows);
		hstack_rows(md, 'u', i0, rows, a.d);
		nv_syrk_t_lower(&av, i0 ? 1.0 : 0.0, &ata);
		for (size_t i = 0; i < rows; i++)
			for (size_t k = 0; k < pr; k++)
				rhs[k] += a.d[i * pr + k] * st->whb.d[(i0 + i) * pr + k];
	}
	nv_sym_mirror(&ata);
	for (size_t i = 0; i < pr * pr; i++)
		ata.d[i] *= st->bhb.d[i];
	nv_mat_free(&a);
	/* a singular system keeps the old ℓ: the error cannot rise */
	rc = nv_solve_spd_take(&ata, rhs, lam, 1e-10);
	*e = NAN;
	if (rc == 0) {
		*e = c->fit.whw;
		for (size_t k = 0; k < pr; k++)
			*e -= lam[k] * rhs[k];
		for (size_t p = 0; p < md->np; p++)
			memcpy(md->p[p].l, lam + p * r, r * sizeof(double));
	}
	rc = rc < 0 ? -1 : 0;
out:
	free(rhs);
	free(lam);
	nv_mat_free(&b);
	nv_mat_free(&a);
	nv_mat_free(&ata);
	return rc;
}

/* the 2 × 2 (or 1 × 1) row systems of the h step */
static void als_h_solve(nv_bm *md, const double *gm, const double *rh)
{
	size_t np = md->np;

	for (size_t i = 0; i < md->m; i++) {
		const double *G = gm + i * 4, *R = rh + i * 2;
		double tr = np == 1 ? G[0] : 0.5 * (G[0] + G[3]);
		double ridge = 1e-10 * fmax(tr, 1e-300);
		if (np == 1) {
			md->p[0].h[i] = R[0] / (G[0] + ridge);
		} else {
			double a11 = G[0] + ridge, a12 = G[1], a22 = G[3] + ridge;
			double det = a11 * a22 - a12 * a12;
			if (fabs(det) > 0.0) {
				md->p[0].h[i] = (a22 * R[0] - a12 * R[1]) / det;
				md->p[1].h[i] = (a11 * R[1] - a12 * R[0]) / det;
			}
		}
	}
}


/* rows i0.. (ms: their M_p = S_U,p·diag(ℓ_p), mk room for M_a·K_ac) */
static void als_h_rows(const nv_bm *md, const als_state *st, size_t i0, nv_mat ms[2],
		       const nv_mat kac[3], nv_mat *mk, double *gm, double *rh)
{
	size_t r = md->r, np = md->np, pr = np * r, rows = ms[0].r;

	for (size_t a = 0; a < np; a++)
		nv_path_hsl_rows(&md->p[a], r, i0, rows, 0, ms[a].d);
	for (size_t a = 0, ac = 0; a < np; a++) {
		for (size_t i = 0; i < rows; i++)
			rh[(i0 + i) * 2 + a] = cblas_ddot((int)r, st->whb.d + (i0 + i) * pr + a * r,
							  1, nv_row(&ms[a], i), 1);
		for (size_t cc = a; cc < np; cc++, ac++) {
			nv_gemm(1.0, &ms[a], 0, &kac[ac], 0, 0.0, mk);
			for (size_t i = 0; i < rows; i++) {
				double v = cblas_ddot((int)r, nv_row(mk, i), 1, nv_row(&ms[cc], i), 1);
				gm[(i0 + i) * 4 + a * 2 + cc] = v;
				gm[(i0 + i) * 4 + cc * 2 + a] = v;
			}
		}
	}
}

/* the fit error at the h held: the error is whw − 2·Σ_i h_iᵀR_i + Σ_i h_iᵀG_i h_i in h */
static double h_err(const nv_bm *md, double whw, const double *gm, const double *rh)
{
	double e = whw;

	for (size_t i = 0; i < md->m; i++)
		for (size_t a = 0; a < md->np; a++) {
			double gh = 0.0;
			for (size_t b = 0; b < md->np; b++)
				gh += gm[i * 4 + a * 2 + b] * md->p[b].h[i];
			e -= md->p[a].h[i] * (2.0 * rh[i * 2 + a] - gh);
		}
	return e;
}

/* h (per row, joint over paths), with M_p = S_U,p·diag(ℓ_p):
 * G_i[a][c] = M_a,i · (BᵀHB)_ac · M_c,iᵀ,  R_i[a] = (W H B)_i,a · M_a,i;
 * c->row_block rows at a time; *e (NULL: not asked): the fit error after */
static int als_h(nv_bm *md, const nv_tctx *c, const als_state *st, double *e)
{
	size_t m = md->m, r = md->r, np = md->np, pr = np * r;
	size_t bs = nv_row_block(c, m);
	nv_mat ms[2] = {{0}}, kac[3] = {{0}}, mk = {0};
	double *gm = nv_calloc(m * 4, sizeof(double)), *rh = nv_calloc(m * 2, sizeof(double));
	int rc = -1;

	if (!gm || !rh || nv_mat_zeros(&mk, bs, r) < 0)
		goto out;
	for (size_t a = 0; a < np; a++)
		if (nv_mat_zeros(&ms[a], bs, r) < 0)
			goto out;
	for (size_t a = 0, ac = 0; a < np; a++)
		for (size_t cc = a; cc < np; cc++, ac++) {
			if (nv_mat_zeros(&kac[ac], r, r) < 0)
				goto out;
			for (size_t x = 0; x < r; x++)
				memcpy(nv_row(&kac[ac], x), st->bhb.d + (a * r + x) * pr + cc * r,
				       r * sizeof(double));
		}
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		size_t rows = m - i0 < bs ? m - i0 : bs;
		nv_mat v[2] = {rows_of(&ms[0], 0, rows), rows_of(&ms[1], 0, rows)};
		nv_mat vk = rows_of(&mk, 0, rows);
		als_h_rows(md, st, i0, v, kac, &vk, gm, rh);
	}
	als_h_solve(md, gm, rh);
	if (e)
		*e = h_err(md, c->fit.whw, gm, rh);
	rc = 0;
out:
	free(gm);
	free(rh);
	for (size_t k = 0; k < 3; k++)
		nv_mat_free(&kac[k]);
	nv_mat_free(&ms[0]);
	nv_mat_free(&ms[1]);
	nv_mat_free(&mk);
	return rc;
}

/* after the h step: the ℓ step's H·B cut to what the g steps read, the
 * last path's columns (path 0's g takes path 1's), none for one path */
static int hb_keep_last(const nv_bm *md, als_state *st)
{
	size_t n = md->n, r = md->r, pr = md->np * r;
	nv_mat last = {0};

	if (md->np == 1) {
		nv_mat_free(&st->hb);
		return 0;
	}
	if (nv_mat_zeros(&last, n, r) < 0)
		return -1;
	for (size_t j = 0; j < n; j++)
		memcpy(nv_row(&last, j), nv_row(&st->hb, j) + pr - r, r * sizeof(double));
	nv_mat_free(&st->hb);
	st->hb = last;
	return 0;
}

/* H·B_q (n × r) in *src: hb_keep_last's, moved to own, while path q's g has
 * not moved since (q > p in this sweep), else made afresh into the kept
 * hbk[q] (own where nothing is kept) */
static int hb_of(const nv_bm *md, const nv_tctx *c, als_state *st, size_t p, size_t q,
		 nv_mat *own, const nv_mat **src)
{
	nv_mat bq, *dst = st->hbk ? &st->hbk[q] : own;
	int rc;

	if (q > p) {
		*own = st->hb;
		st->hb = (nv_mat){0};
		*src = own;
		return 0;
	}
	if (nv_path_gs(md, q, &bq) < 0)
		return -1;
	nv_mat_free(dst);
	rc = nv_metric_hb(&c->fit, &bq, dst);
	nv_mat_free(&bq);
	*src = dst;
	return rc;
}

/* y (n × r) = beta·y + (rows i0.. of W·hf or W)ᵀ·mb in f32 (c->w32): mb
 * rounded into sc, the product into sc + rows·r, widened */
static void wt_block32(const nv_tctx *c, size_t i0, const nv_mat *mb, double beta, float *sc,
		       nv_mat *y)
{
	size_t rows = mb->r, r = mb->c, n = y->r;
	float *yf = sc + rows * r;

	nv_f32_round(mb->d, rows * r, sc);
	nv_flops_add(2ull * n * r * rows);
	nv_sgemm(1, 0, n, r, rows, 1.0f, c->w32.d + i0 * n, n, sc, r, 0.0f, yf, r);
	for (size_t i = 0; i < n * r; i++)
		y->d[i] = beta * y->d[i] + yf[i];
}

/* one block of rows i0.. of M = hsl(p), and of A_q = hsl(q) for q ≠ p:
 * y += (rows of wt)ᵀ·M (in f32 with c->als32, sc its room), aqm[q] +=
 * A_qᵀ·M (the first block sets them) */
static void target_block(const nv_bm *md, const nv_tctx *c, size_t p, const nv_mat *wt,
			 size_t i0, nv_mat *mb, nv_mat *ab, nv_mat *y, nv_mat aqm[2], float *sc)
{
	size_t r = md->r, rows = mb->r;
	nv_mat av = rows_of(ab, 0, rows), wv = rows_of(wt, i0, rows);
	double beta = i0 ? 1.0 : 0.0;

	nv_path_hsl_rows(&md->p[p], r, i0, rows, 1, mb->d);
	if (c->als32)
		wt_block32(c, i0, mb, beta, sc, y);
	else
		nv_gemm(1.0, &wv, 1, mb, 0, beta, y);
	for (size_t q = 0; q < md->np; q++)
		if (q != p) {
			nv_path_hsl_rows(&md->p[q], r, i0, rows, 1, ab->d);
			nv_gemm(1.0, &av, 1, mb, 0, beta, &aqm[q]);
		}
}

/*
 * X = (W H − Σ_{q≠p} Ŵ_q H)ᵀ·M (n × r) for M = hsl(p) (m × r): with Ŵ_q =
 * A_q·B_qᵀ, X = (W·hf)ᵀ·M − Σ_q H·B_q·(A_qᵀ·M), and (W·hf)ᵀ·M = hf·(Wᵀ·M)
 * where W·hf is not kept.  No m × n product, and M and A_q are made
 * c->row_block rows at a time, never whole
 */
static int target_h_t_times(const nv_bm *md, const nv_tctx *c, als_state *st, size_t p,
			    nv_mat *x)
{
	size_t m = md->m, n = md->n, r = md->r, bs = nv_row_block(c, m);
	const nv_mat *wt = c->fit.wh.d ? &c->fit.wh : c->w;
	nv_mat y = {0}, mb = {0}, ab = {0}, aqm[2] = {{0}}, hbq = {0};
	float *sc = NULL;
	int rc = -1;

	x->d = NULL;
	if (nv_mat_zeros(&y, n, r) < 0 || nv_mat_zeros(&mb, bs, r) < 0 ||
	    nv_mat_zeros(&ab, bs, r) < 0 ||
	    (c->als32 && !(sc = nv_malloc((bs + n) * r + 1, sizeof(float)))))
		goto out;
	for (size_t q = 0; q < md->np; q++)
		if (q != p && nv_mat_zeros(&aqm[q], r, r) < 0)
			goto out;
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		nv_mat mv = rows_of(&mb, 0, m - i0 < bs ? m - i0 : bs);
		target_block(md, c, p, wt, i0, &mv, &ab, &y, aqm, sc);
	}
	if (c->fit.wh.d) {
		*x = y;
		y = (nv_mat){0};
	} else if (nv_metric_hb(&c->fit, &y, x) < 0) {
		goto out;
	}
	for (size_t q = 0; q < md->np; q++) {
		if (q == p)
			continue;
		const nv_mat *src;
		if (hb_of(md, c, st, p, q, &hbq, &src) < 0)
			goto out;
		nv_gemm(-1.0, src, 0, &aqm[q], 0, 1.0, x);
		nv_mat_free(&hbq);
	}
	rc = 0;
out:
	free(sc);
	nv_mat_free(&y);
	nv_mat_free(&mb);
	nv_mat_free(&ab);
	nv_mat_free(&aqm[0]);
	nv_mat_free(&aqm[1]);
	nv_mat_free(&hbq);
	if (rc < 0)
		nv_mat_free(x);
	return rc;
}

/* PCG's stop (relative excess of the g step's objective: tol²) and its most steps */
#define G_PCG_TOL 1e-6
#define G_PCG_STEPS 30

/*
 * a·g = rhs (the system a in RFP, half its memory) with nv_solve_spd's
 * ridge: by conjugate gradients from the current g, preconditioned with pc,
 * the f32 factor of this path's matrix from an earlier sweep (ALS moves it
 * little), when there is one and they converge; else directly, factoring a
 * in place (it is spent) and keeping the factor in pc.  pc NULL: directly,
 * nothing kept.  A matrix that is not positive definite keeps the old g (0),
 * as nv_solve_spd's callers do.  *quad: gᵀ·a·g at the g left (a's product
 * after conjugate gradients; gᵀ·rhs − shift·gᵀg after the direct solve,
 * which a factored in place no longer gives), NaN where g was kept.
 */
static int g_solve(nv_rfp *a, const double *rhs, double *g, nv_pchol *pc, nv_prof *prof,
		   double *quad)
{
	size_t n = a->n;
	double tr = 0.0, shift, *x = nv_malloc(n + 1, sizeof(double));
	int rc = 0, its;

	*quad = NAN;
	if (!x)
		return -1;
	for (size_t i = 0; i < n; i++)
		tr += a->a[nv_rfp_idx(a->nn, i, i)];
	shift = 1e-10 * (tr / (double)n);
	if (pc && pc->p) {
		memcpy(x, g, n * sizeof(double));
		rc = nv_pcg_rfp(a, shift, pc, rhs, x, G_PCG_TOL, G_PCG_STEPS, &its);
		nv_prof_add(prof, "als.g.pcg", 0.0, (uint64_t)its);
		if (rc == 0 && nv_check_finite(x, 1, n, 0, "solution entry") == 0) {
			if ((rc = nv_rfp_quad(a, x, quad)) < 0)
				goto out;
			goto done;
		}
		nv_pchol_free(pc);
		if (rc < 0)
			goto out;
	}
	nv_prof_add(prof, "als.g.chol", 0.0, 1);
	if ((rc = nv_rfp_chol(a, shift)) != 0) {
		rc = rc < 0 ? -1 : 0;
		goto out;
	}
	memcpy(x, rhs, n * sizeof(double));
	if ((rc = nv_rfp_chol_solve(a, x)) < 0 ||
	    (rc = nv_check_finite(x, 1, n, 0, "solution entry")) < 0 ||
	    (pc && (rc = nv_pchol_keep(a, pc)) < 0)) /* 1: beyond f32, not kept: the next solve is direct */
		goto out;
	*quad = 0.0; /* (a + shift·I)·x = rhs */
	for (size_t i = 0; i < n; i++)
		*quad += x[i] * rhs[i] - shift * x[i] * x[i];
done:
	memcpy(g, x, n * sizeof(double));
	rc = 0;
out:
	free(x);
	return rc;
}

/* R (r × r, upper) with RᵀR = K = MᵀM, M = hsl(p) written column-major
 * for its QR: the factor for an M whose rank is short of r */
static int k_qr(const nv_path *q, size_t m, size_t r, nv_mat *k)
{
	double *cm = nv_malloc(m * r > 0 ? m * r : 1, sizeof(double));
	int rc;

	if (!cm)
		return -1;
	for (size_t j = 0; j < r; j++)
		for (size_t i = 0; i < m; i++)
			cm[i + j * m] = (double)nv_sgn_row(&q->su, i)[j] * (q->h[i] * q->l[j]);
	rc = nv_qr_r_cm(cm, m, r, k);
	free(cm);
	return rc;
}

/*
 * a factor F (r × r) with F·Fᵀ = K = MᵀM, M = hsl(p): K summed by syrk over
 * row blocks of M (m·r² flops, no m × r copy) and factored by Cholesky (F
 * lower, backward stable: F·Fᵀ = K to γ_(r+1) of |F|·|Fᵀ|); when K is not
 * positive definite (M's rank short of r), Rᵀ of M's QR, which holds then
 */
static int k_factor(const nv_path *q, size_t m, size_t r, size_t bs, nv_mat *k)
{
	nv_mat rt = {0};
	double *blk = nv_malloc(bs * r + 1, sizeof(double));
	int rc;

	k->d = NULL;
	if (!blk || nv_mat_zeros(k, r, r) < 0) {
		free(blk);
		return -1;
	}
	nv_path_mtm(q, m, r, bs, blk, k);
	free(blk);
	if ((rc = nv_potrf_lower(k)) <= 0)
		return rc < 0 ? (nv_mat_free(k), -1) : 0;
	nv_mat_free(k);
	if (k_qr(q, m, r, &rt) < 0 || nv_mat_zeros(k, r, r) < 0) {
		nv_mat_free(&rt);
		return -1;
	}
	transpose_into(&rt, k);
	nv_mat_free(&rt);
	return 0;
}

/* path p's g system, ((S_V K S_Vᵀ) ∘ hf) in RFP with K = MᵀM = F·Fᵀ:
 * S_V K S_Vᵀ = (S_V F)(S_V F)ᵀ, a symmetric rank-r product, n²r flops */
static int g_system(const nv_bm *md, const nv_tctx *c, size_t p, nv_rfp *a)
{
	const nv_path *q = &md->p[p];
	nv_mat k = {0}, s = {0}, svk = {0};
	int rc = k_factor(q, md->m, md->r, nv_row_block(c, md->m), &k);

	if (rc == 0)
		rc = nv_sgn_scaled(&q->sv, NULL, NULL, &s) < 0 || nv_gemm_new(&s, 0, &k, 0, &svk) < 0
			     ? -1 : 0;
	nv_mat_free(&s); /* S_V as doubles for this product only */
	if (rc == 0)
		rc = c->als32 ? nv_rfp_syrk32(&svk, a) : nv_rfp_syrk(&svk, a);
	if (rc == 0)
		nv_rfp_hadamard32(a, &c->hc->hf);
	nv_mat_free(&k);
	nv_mat_free(&svk);
	return rc;
}

/* rhs_j = S_V,j · X_j, each row's ±1 as doubles in the dot product of before */
static int signed_rowdots(const nv_sgn *sv, const nv_mat *x, double *rhs)
{
	size_t r = sv->c;
	double *row = nv_malloc(r ? r : 1, sizeof(double));

	if (!row)
		return -1;
	for (size_t j = 0; j < sv->r; j++) {
		const int8_t *s = nv_sgn_row(sv, j);
		for (size_t k = 0; k < r; k++)
			row[k] = s[k];
		rhs[j] = cblas_ddot((int)r, row, 1, nv_row(x, j), 1);
	}
	free(row);
	return 0;
}

/*
 * g of path p: ((S_V K S_Vᵀ) ∘ hf)·g = diag(S_V·Xᵀ), K = MᵀM, M = hsl(p);
 * pc: path p's factor from an earlier sweep (g_solve); without g_pcg,
 * solved directly each time
 */
static int als_g(nv_bm *md, const nv_tctx *c, als_state *st, size_t p, nv_pchol *pc,
		 double *gain)
{
	size_t n = md->n;
	nv_mat x = {0};
	nv_rfp a = {0};
	const nv_sgn *sv = &md->p[p].sv;
	double *g = md->p[p].g, *rhs = nv_malloc(n + 1, sizeof(double)), *old = NULL;
	double qold = 0.0, qnew;
	int rc = -1;

	if (!rhs || (gain && !(old = nv_malloc(n + 1, sizeof(double)))) ||
	    g_system(md, c, p, &a) < 0 || target_h_t_times(md, c, st, p, &x) < 0 ||
	    signed_rowdots(sv, &x, rhs) < 0 || (gain && nv_rfp_quad(&a, g, &qold) < 0))
		goto out;
	if (gain)
		memcpy(old, g, n * sizeof(double));
	rc = g_solve(&a, rhs, g, c->g_pcg ? pc : NULL, c->prof, &qnew);
	/* the error is const − 2gᵀ·rhs + gᵀ·a·g in g */
	if (rc == 0 && gain) {
		double lin = 0.0;
		for (size_t i = 0; i < n; i++)
			lin += (g[i] - old[i]) * rhs[i];
		*gain = isfinite(qnew) ? 2.0 * lin - qnew + qold : 0.0;
	}
out:
	if (st->hbk) /* g_p moved: its kept H·B_p no longer holds */
		nv_mat_free(&st->hbk[p]);
	free(old);
	free(rhs);
	nv_rfp_free(&a);
	nv_mat_free(&x);
	return rc;
}

/* a sweep's products freed (not the kept H·B_q, which outlive it) */
static void als_state_free(als_state *st)
{
	nv_mat_free(&st->hb);
	nv_mat_free(&st->bhb);
	nv_mat_free(&st->whb);
}

int nv_als_l(nv_bm *md, const nv_tctx *c, double *err)
{
	als_state st = {{0}, {0}, {0}, NULL};
	int rc = als_l(md, c, &st, err);

	als_state_free(&st);
	return rc;
}

int nv_als_g(nv_bm *md, const nv_tctx *c, size_t p)
{
	als_state st = {{0}, {0}, {0}, NULL};
	nv_mat b = {0};
	int rc = 0;

	if (p >= md->np)
		return nv_seterr("path %zu of a model with %zu", p, md->np), -1;
	/* the g step of an earlier path reads the last one's H·B_q from the sweep */
	if (p + 1 < md->np)
		rc = nv_path_gs(md, md->np - 1, &b) < 0 || nv_metric_hb(&c->fit, &b, &st.hb) < 0
			     ? -1 : 0;
	if (rc == 0)
		rc = als_g(md, c, &st, p, NULL, NULL);
	nv_mat_free(&b);
	als_state_free(&st);
	return rc;
}

/* c->als_tol's stop: the fit error last (at the previous ℓ step) and now */
static int als_converged(const nv_tctx *c, double last, double now)
{
	return c->als_tol > 0.0 && isfinite(last) && isfinite(now) &&
	       last - now <= c->als_tol * fabs(now);
}

int nv_als_pc(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2])
{
	return nv_als_k(md, c, sweeps, pc, NULL);
}

int nv_als_k(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k)
{
	return nv_als_ke(md, c, sweeps, pc, k, NULL);
}

int nv_als_ke(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k, double *err)
{
	return nv_als_bar(md, c, sweeps, pc, k, err, NAN);
}

/* a try above bar by more than the last sweep's gain (after its ℓ step)
 * times the sweeps left: a gain that does not grow cannot bring it below */
static int try_hopeless(double bar, double now, double gain, int left)
{
	return isfinite(bar) && left > 0 && now > bar && now - bar > (double)left * gain;
}

int nv_als_bar(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k, double *err,
	       double bar)
{
	nv_hbk own = {{{0}}};
	nv_mat *hbk = (k ? k : &own)->hb;
	double last = NAN, now = NAN;
	int rc = 0;

	for (int s = 0; s < sweeps && rc == 0; s++) {
		als_state st = {{0}, {0}, {0}, hbk};
		double e, t = nv_now();
		int g_now;

		rc = als_l(md, c, &st, &e);
		now = e;
		nv_prof_add(c->prof, "als.l", nv_now() - t, 1);
		if (rc == 0 && als_converged(c, last, e)) {
			/* the sweep before gained less than als_tol: this ℓ step ends it */
			nv_prof_add(c->prof, "als.stop", 0.0, 1);
			als_state_free(&st);
			break;
		}
		last = e;
		t = nv_now();
		if (rc == 0)
			rc = als_h(md, c, &st, err ? &now : NULL);
		nv_mat_free(&st.whb); /* the h step was their last reader: not held through g */
		nv_mat_free(&st.bhb);
		g_now = c->g_every <= 1 || s % c->g_every == 0;
		if (rc == 0 && g_now) /* H·B_last serves this sweep's g steps only */
			rc = hb_keep_last(md, &st);
		nv_prof_add(c->prof, "als.h", nv_now() - t, 1);
		if (!g_now) {
			als_state_free(&st); /* a sweep of ℓ and h only */
			continue;
		}
		t = nv_now();
		for (size_t p = 0; p < md->np && rc == 0; p++) {
			double gain = 0.0;
			rc = als_g(md, c, &st, p, &pc[p], err ? &gain : NULL);
			now -= gain;
		}
		nv_prof_add(c->prof, "als.g", nv_now() - t, 1);
		als_state_free(&st);
		if (rc == 0 && err && try_hopeless(bar, now, e - now, sweeps - 1 - s)) {
			nv_prof_add(c->prof, "als.abort", 0.0, 1);
			break;
		}
	}
	if (err)
		*err = rc == 0 ? now : NAN;
	if (rc < 0 && k) /* a failed step may have moved a g: nothing kept holds */
		nv_hbk_free(k);
	nv_hbk_free(&own);
	return rc < 0 ? -1 : 0;
}

int nv_als(nv_bm *md, const nv_tctx *c, int sweeps)
{
	nv_pchol pc[2] = {{0}, {0}}; /* each path's g-step factor, from its last direct solve */
	int rc = nv_als_pc(md, c, sweeps, pc);

	nv_pchol_free(&pc[0]);
	nv_pchol_free(&pc[1]);
	return rc;
}

/* ----------------------------------------------------------------- flip_u */

typedef struct {
	size_t lo, hi, r;
	int8_t *su;        /* (m × r) of the path, rows lo..hi written */
	double *qs;        /* (m × r) S_U·Q */
	const double *q;   /* (r × r) */
	const double *qd;  /* (r) diag Q */
	const double *whb; /* (m × r) target·H·B */
	const double *l, *h;
	uint64_t flips;
} flip_job;

/* per row i: minimise h²·sᵀQs − 2h·sᵀ(whb∘ℓ) by exact single flips, ≤ 4 passes */
static void flip_rows(void *arg)
{
	flip_job *j = arg;
	size_t r = j->r;

	for (size_t i = j->lo; i < j->hi; i++) {
		int8_t *s = j->su + i * r;
		double *qs = j->qs + i * r, hi = j->h[i];
		const double *wr = j->whb + i * r;
		for (int pass = 0; pass < 4; pass++) {
			size_t changed = 0;
			for (size_t k = 0; k < r; k++) {
				double bm = wr[k] * j->l[k];
				double d = -4.0 * hi * hi * s[k] * (qs[k] - j->qd[k] * s[k]) +
					   4.0 * hi * s[k] * bm;
				if (d < -1e-12 * (hi * hi * j->qd[k] + 1e-300)) {
					cblas_daxpy((int)r, -2.0 * s[k], j->q + k * r, 1, qs, 1);
					s[k] = -s[k];
					changed++;
				}
			}
			j->flips += changed;
			if (!changed)
				break;
		}
	}
}

/* rows split into `threads` fixed contiguous ranges: rows are independent,
 * so the result does not depend on the split */
static uint64_t flip_parallel(flip_job *proto, size_t m, int threads)
{
	flip_job jobs[NV_PAR_MAX];
	size_t nt = (size_t)(threads < 1 ? 1 : threads > NV_PAR_MAX ? NV_PAR_MAX : threads), chunk;
	uint64_t total = 0;

	if (nt > m)
		nt = m ? m : 1;
	chunk = (m + nt - 1) / nt;
	for (size_t t = 0; t < nt; t++) {
		jobs[t] = *proto;
		jobs[t].lo = t * chunk < m ? t * chunk : m;
		jobs[t].hi = (t + 1) * chunk < m ? (t + 1) * chunk : m;
		jobs[t].flips = 0;
	}
	nv_par(jobs, nt, sizeof jobs[0], flip_rows);
	for (size_t t = 0; t < nt; t++)
		total += jobs[t].flips;
	return total;
}

/* whb −= A_o·bhb (A_o = hsl(o), m × r) c->row_block rows at a time */
static int minus_path_times(const nv_bm *md, const nv_tctx *c, size_t o, const nv_mat *bhb,
			    nv_mat *whb)
{
	const nv_path *q = &md->p[o];
	size_t m = md->m, r = md->r, bs = nv_row_block(c, m);
	nv_mat a = {0};

	if (nv_mat_zeros(&a, bs, r) < 0)
		return -1;
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		size_t rows = m - i0 < bs ? m - i0 : bs;
		nv_mat av = rows_of(&a, 0, rows), wv = rows_of(whb, i0, rows);
		nv_path_hsl_rows(q, r, i0, rows, 1, a.d);
		nv_gemm(-1.0, &av, 0, bhb, 0, 1.0, &wv);
	}
	nv_mat_free(&a);
	return 0;
}

/* the flips of path pi's rows, c->row_block at a time: each block's S_U·Q made
 * for it (rows are independent, so the blocks give the whole's flips) */
static int flip_blocks(nv_bm *md, const nv_tctx *c, size_t pi, const nv_mat *q,
		       const double *qd, const nv_mat *whb, uint64_t *flips)
{
	nv_path *p = &md->p[pi];
	size_t m = md->m, r = md->r, bs = nv_row_block(c, m);
	nv_mat b = {0}, qs = {0};
	int rc = -1;

	*flips = 0;
	if (nv_mat_zeros(&b, bs, r) < 0 || nv_mat_zeros(&qs, bs, r) < 0)
		goto out;
	for (size_t i0 = 0; i0 < m; i0 += bs) {
		size_t rows = m - i0 < bs ? m - i0 : bs;
		nv_sgn blk = {rows, r, p->su.d + i0 * r};
		nv_mat bv = rows_of(&b, 0, rows), qv = rows_of(&qs, 0, rows);
		flip_job proto = {0, 0, r, blk.d, qs.d, q->d, qd, whb->d + i0 * r, p->l, p->h + i0, 0};
		nv_sgn_scaled_to(&blk, NULL, NULL, b.d, r);
		nv_gemm(1.0, &bv, 0, q, 0, 0.0, &qv);
		*flips += flip_parallel(&proto, rows, c->threads);
	}
	rc = 0;
out:
	nv_mat_free(&b);
	nv_mat_free(&qs);
	return rc;
}

static int flip_u_inner(nv_bm *md, const nv_tctx *c, size_t pi, nv_hbk *kept,
			uint64_t *flips)
{
	size_t r = md->r;
	nv_mat b = {0}, k = {0}, whb = {0}, q = {0};
	const nv_mat *hb = NULL;
	double *qd = nv_malloc(r, sizeof(double));
	const double *l = md->p[pi].l;
	int rc = -1;

	if (!qd || nv_path_gs(md, pi, &b) < 0 || !(hb = hbk_get(kept, &c->fit, pi, &b)) ||
	    nv_gemm_new(&b, 1, hb, 0, &k) < 0 || wh_times(c, &b, hb, &whb) < 0)
		goto out;
	/* whb = (W H − Σ_{q≠pi} Ŵ_q H)·B = W H B − Σ A_q·(B_qᵀ·H B) */
	for (size_t o = 0; o < md->np; o++) {
		nv_mat bq = {0}, bhb = {0};
		int bad;
		if (o == pi)
			continue;
		bad = nv_path_gs(md, o, &bq) < 0 || nv_gemm_new(&bq, 1, hb, 0, &bhb) < 0 ||
		      minus_path_times(md, c, o, &bhb, &whb) < 0;
		nv_mat_free(&bq);
		nv_mat_free(&bhb);
		if (bad)
			goto out;
	}
	if (nv_mat_zeros(&q, r, r) < 0)
		goto out;
	for (size_t x = 0; x < r; x++) {
		for (size_t y = 0; y < r; y++)
			q.d[x * r + y] = l[x] * k.d[x * r + y] * l[y];
		qd[x] = q.d[x * r + x];
	}
	nv_mat_free(&b);
	rc = flip_blocks(md, c, pi, &q, qd, &whb, flips);
out:
	free(qd);
	nv_mat_free(&b);
	nv_mat_free(&k);
	nv_mat_free(&whb);
	nv_mat_free(&q);
	return rc;
}

int nv_flip_u(nv_bm *md, const nv_tctx *c, size_t pi, uint64_t *flips)
{
	nv_hbk k = {{{0}}};
	int rc = nv_flip_u_k(md, c, pi, &k, flips);

	nv_hbk_free(&k);
	return rc;
}

int nv_flip_u_k(nv_bm *md, const nv_tctx *c, size_t pi, nv_hbk *k, uint64_t *flips)
{
	double t = nv_now();
	uint64_t f = 0;
	int rc = flip_u_inner(md, c, pi, k, &f);

	nv_prof_add(c->prof, "flip_u", nv_now() - t, 1);
	nv_prof_add(c->prof, "flip_u.flips", 0.0, f);
	if (flips)
		*flips = f;
	return rc;
}
