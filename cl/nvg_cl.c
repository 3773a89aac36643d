/* nvg_cl.c - the nvg encoder in f32 on an OpenCL device (see nvg_cl.h) */
#include "nvg_cl.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "cleig.h"
#include "clhost.h"
#include "clops.h"
#include "clpolar.h"
#include "clsolve.h"
#include "err.h"
#include "mem.h"
#include "nvg.h"
#include "pack.h"
#include "prof.h"
#include "repline.h"

/*
 * the g step's stop: the excess of its objective over the minimum, relative
 * to it (the CPU's PCG stops at 1e-12 in f64; f32 residuals stop meaning
 * much below about 1e-10)
 */
#define G_TOL 1e-10

/* the ITQ polar factor's Newton–Schulz: at most 60 steps (a σ of 10⁻⁶ of
 * ‖M‖_F takes about 40), to an orthogonality of 1e-6 or f32's floor */
#define NS_STEPS 60
#define NS_TOL 1e-6

#define BLOCK 128       /* columns of one lazy block of the V search */
#define FLIP_THR 1e-6f  /* a flip must beat this relative size (f32 resolution) */

struct nvcl_hctx {
	nvcl_ctx *c;
	size_t n;
	cl_mem hf, l, uc, hsel;       /* (n × n) */
	double ridge;                 /* what hf adds to the FIT Gram's diagonal */
	cl_mem perm;                  /* (n) int */
	cl_mem uinvt;                 /* (blocks × 128 × 128): (U_bb⁻¹)ᵀ of each diagonal block */
	double *sqd;                  /* (n) */
	uint32_t *perm_h;             /* (n) */
};

/* ---------------------------------------------------------------- tensor */

typedef struct {
	nvcl_q *q;
	const nvcl_hctx *hc;
	size_t m, n;
	cl_mem w, wh;      /* (m × n) target and W·Hf */
	cl_mem e1, e2, e3; /* (m × n) scratch */
	double wfit, wsel; /* tr(W H Wᵀ) for hf and SEL */
	double w2;         /* ‖W‖²_F */
	nvcl_pc gpc[2];    /* each path's g factor, kept from sweep to sweep */
	nv_prof pfs;
	nv_prof *pf;       /* &pfs when profiling, else NULL */
} tctx;

typedef struct {
	double *h, *l, *g; /* (m), (r), (n) */
	cl_mem su, sv;     /* (m × r), (n × r) entries ±1 */
} dpath;

typedef struct {
	dpath p[2];
	size_t np, m, n, r;
} dmodel;

/* a stage's start: wait for the device when profiling so times are honest */
static double t0(tctx *t)
{
	if (t->pf && !t->q->err)
		clFinish(t->q->q);
	return nv_now();
}

static void t1(tctx *t, const char *k, double start, unsigned long long n)
{
	if (t->pf) {
		if (!t->q->err)
			clFinish(t->q->q);
		nv_prof_add(t->pf, k, nv_now() - start, n);
	}
}

static cl_mem up_d(tctx *t, const double *v, size_t k, const char *what)
{
	return nvcl_q_upload_d(t->q, v, k, what);
}

/* host vectors that abort the tensor when they cannot be had */
static double *hvec(tctx *t, size_t k)
{
	double *v = t->q->err ? NULL : nv_calloc(k ? k : 1, sizeof(double));

	if (!v && !t->q->err)
		nvcl_q_fail(t->q, "host memory for %zu values: %s", k, nv_err());
	return v;
}

static void path_free(dpath *p)
{
	free(p->h);
	free(p->l);
	free(p->g);
	nvcl_release(&p->su);
	nvcl_release(&p->sv);
	memset(p, 0, sizeof(*p));
}

static void model_free(dmodel *md)
{
	for (size_t p = 0; p < md->np; p++)
		path_free(&md->p[p]);
	md->np = 0;
}

static void model_clone(tctx *t, const dmodel *src, dmodel *dst)
{
	size_t m = src->m, n = src->n, r = src->r;

	*dst = (dmodel){ .np = 0, .m = m, .n = n, .r = r };
	for (size_t p = 0; p < src->np; p++) {
		dpath *d = &dst->p[p];
		d->h = hvec(t, m);
		d->l = hvec(t, r);
		d->g = hvec(t, n);
		d->su = nvcl_q_buf(t->q, m * r, "S_U");
		d->sv = nvcl_q_buf(t->q, n * r, "S_V");
		dst->np = p + 1;
		if (t->q->err)
			return;
		memcpy(d->h, src->p[p].h, m * sizeof(double));
		memcpy(d->l, src->p[p].l, r * sizeof(double));
		memcpy(d->g, src->p[p].g, n * sizeof(double));
		nvcl_q_copy(t->q, d->su, 0, src->p[p].su, 0, m * r);
		nvcl_q_copy(t->q, d->sv, 0, src->p[p].sv, 0, n * r);
	}
}

/* diag(h) S_U diag(ℓ) (m × r), a fresh buffer; h or ℓ may be left out */
static cl_mem hsl(tctx *t, const dmodel *md, size_t p, int with_h, int with_l)
{
	cl_mem o = nvcl_q_buf(t->q, md->m * md->r, "diag(h)·S_U·diag(l)");
	cl_mem h = with_h ? up_d(t, md->p[p].h, md->m, "h") : NULL;
	cl_mem l = with_l ? up_d(t, md->p[p].l, md->r, "l") : NULL;

	nvcl_scale_rc(t->q, o, 0, md->r, md->p[p].su, md->r, h, l, md->m, md->r);
	nvcl_release(&h);
	nvcl_release(&l);
	return o;
}

/* diag(g) S_V (n × r) into out at column offset off with leading dimension ld */
static void gs_into(tctx *t, const dmodel *md, size_t p, cl_mem out, size_t off, size_t ld)
{
	cl_mem g = up_d(t, md->p[p].g, md->n, "g");

	nvcl_scale_rc(t->q, out, off, ld, md->p[p].sv, md->r, g, NULL, md->n, md->r);
	nvcl_release(&g);
}

static cl_mem gs(tctx *t, const dmodel *md, size_t p)
{
	cl_mem o = nvcl_q_buf(t->q, md->n * md->r, "diag(g)·S_V");

	gs_into(t, md, p, o, 0, md->r);
	return o;
}

/* out (m × n) = base − Σ_{p ≠ skip} Ŵ_p  (skip = np: none) */
static void residual(tctx *t, const dmodel *md, cl_mem base, size_t skip, cl_mem out)
{
	nvcl_q_copy(t->q, out, 0, base, 0, md->m * md->n);
	for (size_t p = 0; p < md->np; p++) {
		if (p == skip)
			continue;
		cl_mem a = hsl(t, md, p, 1, 1), b = gs(t, md, p);
		nvcl_gemm(t->q, 0, 1, md->m, md->n, md->r, -1.0f, a, b, 1.0f, out);
		nvcl_release(&a);
		nvcl_release(&b);
	}
}

/* out (m × n) = W·Hf − Σ_{q ≠ skip} Ŵ_q·Hf (the H-side residual target) */
static void residual_h(tctx *t, const dmodel *md, size_t skip, cl_mem out)
{
	nvcl_q_copy(t->q, out, 0, t->wh, 0, md->m * md->n);
	for (size_t p = 0; p < md->np; p++) {
		if (p == skip)
			continue;
		cl_mem a = hsl(t, md, p, 1, 1), b = gs(t, md, p);
		cl_mem hb = nvcl_q_buf(t->q, md->n * md->r, "Hf·diag(g)·S_V");
		nvcl_gemm(t->q, 0, 0, md->n, md->r, md->n, 1.0f, t->hc->hf, b, 0.0f, hb);
		nvcl_gemm(t->q, 0, 1, md->m, md->n, md->r, -1.0f, a, hb, 1.0f, out);
		nvcl_release(&a);
		nvcl_release(&b);
		nvcl_release(&hb);
	}
}

/* the sum of a device vector (k), in f64 */
static double dsum(tctx *t, cl_mem v, size_t k)
{
	double *h = hvec(t, k), s = 0;

	nvcl_q_read_d(t->q, v, 0, h, k);
	if (h && !t->q->err)
		for (size_t i = 0; i < k; i++)
			s += h[i];
	free(h);
	return s;
}

/* Σ a ∘ b of two (m × n) matrices */
static double sum_prod(tctx *t, cl_mem a, cl_mem b)
{
	cl_mem rows = nvcl_q_buf(t->q, t->m, "row sums");
	double s;

	nvcl_rowdot(t->q, rows, a, 0, t->n, b, 0, t->n, t->m, t->n);
	s = dsum(t, rows, t->m);
	nvcl_release(&rows);
	return s;
}

/* tr(E H Eᵀ) for e (m × n) using scratch (m × n) */
static double herr(tctx *t, cl_mem e, cl_mem h, cl_mem scratch)
{
	nvcl_gemm(t->q, 0, 0, t->m, t->n, t->n, 1.0f, e, h, 0.0f, scratch);
	return sum_prod(t, scratch, e);
}

/* the fit error tr(E Hf Eᵀ) of a model */
static double fit_err(tctx *t, const dmodel *md)
{
	double st = t0(t), e;

	residual(t, md, t->w, md->np, t->e1);
	e = herr(t, t->e1, t->hc->hf, t->e2);
	t1(t, "err", st, 0);
	return e;
}

/* sqrt(tr(E H Eᵀ) / tr(W H Wᵀ)) of a model on H (hsel) */
static double rel_err(tctx *t, const dmodel *md, cl_mem h, double wref)
{
	residual(t, md, t->w, md->np, t->e1);
	return sqrt(herr(t, t->e1, h, t->e2) / fmax(wref, 1e-300));
}

/* the same on the raw FIT Gram, from hf and the ridge (nv_rel_unridged) */
static double raw_fit_err(tctx *t, const dmodel *md)
{
	double e;

	residual(t, md, t->w, md->np, t->e1);
	e = herr(t, t->e1, t->hc->hf, t->e2);
	return nv_rel_unridged(e, t->wfit, sum_prod(t, t->e1, t->e1), t->w2, t->hc->ridge);
}

/* ---------------------------------------------------------------- latents */

/* per-row norms of a (rows × cols) into host out (rows) */
static void row_norms(tctx *t, cl_mem a, size_t rows, size_t cols, double *out)
{
	cl_mem v = nvcl_q_buf(t->q, rows, "row norms");

	nvcl_rowdot(t->q, v, a, 0, cols, a, 0, cols, rows, cols);
	nvcl_q_read_d(t->q, v, 0, out, rows);
	nvcl_release(&v);
	if (!t->q->err)
		for (size_t i = 0; i < rows; i++)
			out[i] = sqrt(fmax(out[i], 0.0));
}

/*
 * the top r eigenpairs of the latent Gram g (s × s): lam (host) and vec
 * (device, s × r), on the device by subspace iteration (cleig.h), or where
 * that declines, by the host's eigensolver on the whole Gram
 */
static void gram_top(tctx *t, cl_mem g, size_t s, size_t r, double *lam, cl_mem vec)
{
	double *gh, *vh;
	int rc = nvcl_eig_top(t->q, g, s, r, NVCL_EIG_ITERS, lam, vec, NULL);

	if (rc != 1)
		return;
	nv_prof_add(t->pf, "lat.eig.host", 0.0, 1);
	gh = hvec(t, s * s), vh = hvec(t, s * r);
	nvcl_q_read_d(t->q, g, 0, gh, s * s);
	if (!t->q->err && clh_eig_top(gh, s, r, lam, vh) < 0)
		nvcl_q_fail(t->q, "%s", nv_err());
	nvcl_q_write_d(t->q, vec, 0, vh, s * r);
	free(gh), free(vh);
}

/*
 * U′ (m × r), V′ (n × r) with U′V′ᵀ the best rank-r approximation of tm
 * (m × n) in the metric L Lᵀ: U′ = U_r Σ^{1/2}, V′ = tmᵀ U_r Σ^{-1/2}, from
 * the top eigenpairs of the smaller Gram of tm·L
 */
static void latents(tctx *t, cl_mem tm, size_t r, cl_mem *up, cl_mem *vp)
{
	size_t m = t->m, n = t->n, s = m <= n ? m : n;
	double st = t0(t);
	cl_mem tl = nvcl_q_buf(t->q, m * n, "T·L"), g = nvcl_q_buf(t->q, s * s, "latent Gram");
	cl_mem ur = nvcl_q_buf(t->q, m * r, "U_r");
	cl_mem vr = m <= n ? NULL : nvcl_q_buf(t->q, n * r, "V_r"); /* U_r's basis when m ≤ n */
	double *lam = hvec(t, r), *sc = hvec(t, r);

	nvcl_gemm(t->q, 0, 0, m, n, n, 1.0f, tm, t->hc->l, 0.0f, tl);
	if (m <= n)
		nvcl_gemm(t->q, 0, 1, m, m, n, 1.0f, tl, tl, 0.0f, g);
	else
		nvcl_gemm(t->q, 1, 0, n, n, m, 1.0f, tl, tl, 0.0f, g);
	t1(t, "lat.gemm", st, 0);
	st = t0(t);
	gram_top(t, g, s, r, lam, m <= n ? ur : vr);
	t1(t, "lat.eig", st, 0);
	st = t0(t);
	if (!t->q->err) {
		double floor = fmax(sqrt(fmax(lam[0], 0.0)), 1e-300) * 1e-15;
		for (size_t k = 0; k < r; k++)
			lam[k] = fmax(sqrt(fmax(lam[k], 0.0)), floor); /* σ_k, floored */
		if (m > n) {
			for (size_t k = 0; k < r; k++)
				sc[k] = 1.0 / lam[k];
			cl_mem inv = up_d(t, sc, r, "1/σ");
			nvcl_gemm(t->q, 0, 0, m, r, n, 1.0f, tl, vr, 0.0f, ur);
			nvcl_scale_rc(t->q, ur, 0, r, ur, r, NULL, inv, m, r);
			nvcl_release(&inv);
		}
		/* the seed scales U′ by √σ unfloored and V′ by 1/√σ floored: σ ≥ floor here */
		for (size_t k = 0; k < r; k++)
			sc[k] = sqrt(lam[k]);
		cl_mem sq = up_d(t, sc, r, "√σ");
		for (size_t k = 0; k < r; k++)
			sc[k] = 1.0 / sqrt(lam[k]);
		cl_mem isq = up_d(t, sc, r, "1/√σ");
		*up = nvcl_q_buf(t->q, m * r, "U′");
		*vp = nvcl_q_buf(t->q, n * r, "V′");
		nvcl_scale_rc(t->q, *up, 0, r, ur, r, NULL, sq, m, r);
		nvcl_gemm(t->q, 1, 0, n, r, m, 1.0f, tm, ur, 0.0f, *vp);
		nvcl_scale_rc(t->q, *vp, 0, r, *vp, r, NULL, isq, n, r);
		nvcl_release(&sq);
		nvcl_release(&isq);
	}
	t1(t, "lat.gemm", st, 0);
	nvcl_release(&tl);
	nvcl_release(&g);
	nvcl_release(&ur);
	nvcl_release(&vr);
	free(lam), free(sc);
}

/* ---------------------------------------------------------------- ITQ */

/*
 * rot ← the polar factor of mm (r × r), on the device by Newton–Schulz; an
 * mm too ill-conditioned for it goes to the host's SVD (rh, mh: r × r host
 * scratch)
 */
static void itq_polar(tctx *t, cl_mem mm, size_t r, cl_mem rot, double *rh, double *mh)
{
	if (nvcl_polar_ns(t->q, mm, r, rot, NS_STEPS, NS_TOL, NULL, NULL) != 1)
		return;
	nvcl_q_read_d(t->q, mm, 0, mh, r * r);
	if (!t->q->err && clh_polar(mh, r, rh) < 0)
		nvcl_q_fail(t->q, "%s", nv_err());
	nvcl_q_write_d(t->q, rot, 0, rh, r * r);
}

/*
 * the H-weighted ITQ gauge: the orthogonal R that brings the row-normalised
 * [U′; V′] R nearest the hypercube with rows weighted by w²; up, vp ← ·R
 */
static void itq(tctx *t, cl_mem *up, cl_mem *vp, const double *wu, const double *wv,
		size_t r, int iters)
{
	size_t m = t->m, n = t->n, nn = m + n;
	cl_mem x = nvcl_q_buf(t->q, nn * r, "ITQ X"), xr = nvcl_q_buf(t->q, nn * r, "ITQ XR");
	cl_mem rot = nvcl_q_buf(t->q, r * r, "ITQ R"), mm = nvcl_q_buf(t->q, r * r, "ITQ M");
	double *nr = hvec(t, nn), *w2 = hvec(t, nn), *rh = hvec(t, r * r), *mh = hvec(t, r * r);
	cl_mem inr = NULL, w2d = NULL;
	double mean = 0, st;

	nvcl_q_copy(t->q, x, 0, *up, 0, m * r);
	nvcl_q_copy(t->q, x, m * r, *vp, 0, n * r);
	row_norms(t, x, nn, r, nr);
	if (t->q->err)
		goto out;
	for (size_t i = 0; i < nn; i++) {
		nr[i] = 1.0 / fmax(nr[i], 1e-300);
		w2[i] = i < m ? wu[i] * wu[i] : wv[i - m] * wv[i - m];
		mean += w2[i];
	}
	mean /= (double)nn;
	for (size_t i = 0; i < nn; i++)
		w2[i] /= fmax(mean, 1e-300);
	inr = up_d(t, nr, nn, "1/|x|");
	w2d = up_d(t, w2, nn, "ITQ weights");
	nvcl_scale_rc(t->q, x, 0, r, x, r, inr, NULL, nn, r);
	for (size_t i = 0; i < r; i++)
		rh[i * r + i] = 1.0;
	nvcl_q_write_d(t->q, rot, 0, rh, r * r);
	for (int it = 0; it < iters && !t->q->err; it++) {
		st = t0(t);
		nvcl_gemm(t->q, 0, 0, nn, r, r, 1.0f, x, rot, 0.0f, xr);
		nvcl_sign_w(t->q, xr, xr, w2d, nn, r);
		nvcl_gemm(t->q, 1, 0, r, r, nn, 1.0f, x, xr, 0.0f, mm);
		t1(t, "itq.gemm", st, 0);
		st = t0(t);
		itq_polar(t, mm, r, rot, rh, mh);
		t1(t, "itq.polar", st, 0);
	}
	st = t0(t);
	nvcl_gemm(t->q, 0, 0, m, r, r, 1.0f, *up, rot, 0.0f, xr);
	nvcl_q_copy(t->q, *up, 0, xr, 0, m * r);
	nvcl_gemm(t->q, 0, 0, n, r, r, 1.0f, *vp, rot, 0.0f, xr);
	nvcl_q_copy(t->q, *vp, 0, xr, 0, n * r);
	t1(t, "itq.gemm", st, 0);
out:
	nvcl_release(&x), nvcl_release(&xr), nvcl_release(&rot), nvcl_release(&mm);
	nvcl_release(&inr), nvcl_release(&w2d);
	free(nr), free(w2), free(rh), free(mh);
}

/* ---------------------------------------------------------------- svid path */

/* signs of a latent (rows × r) to a ±1 buffer, and its |·| fit: left (rows), right (r) */
static cl_mem signs_fit(tctx *t, cl_mem lat, size_t rows, size_t r, double *left,
			double *right, const char *what)
{
	double *a = hvec(t, rows * r);
	float *s = t->q->err ? NULL : nv_malloc(rows * r, sizeof(float));
	cl_mem out = NULL;

	if (!s && !t->q->err)
		nvcl_q_fail(t->q, "host memory for %s: %s", what, nv_err());
	nvcl_q_read_d(t->q, lat, 0, a, rows * r);
	if (!t->q->err) {
		for (size_t i = 0; i < rows * r; i++) {
			s[i] = a[i] >= 0 ? 1.0f : -1.0f;
			a[i] = fabs(a[i]);
		}
		clh_rank1_pos(a, rows, r, left, right);
		out = nvcl_q_upload(t->q, s, rows * r, what);
	}
	free(a);
	free(s);
	return out;
}

/* the signs of the latents and non-negative rank-1 magnitude fits */
static void svid_path(tctx *t, cl_mem up, cl_mem vp, size_t r, dpath *p)
{
	double st = t0(t);
	double *lu = hvec(t, r), *lv = hvec(t, r);

	p->h = hvec(t, t->m);
	p->g = hvec(t, t->n);
	p->l = hvec(t, r);
	p->su = signs_fit(t, up, t->m, r, p->h, lu, "S_U");
	p->sv = signs_fit(t, vp, t->n, r, p->g, lv, "S_V");
	if (!t->q->err)
		for (size_t k = 0; k < r; k++)
			p->l[k] = lu[k] * lv[k];
	free(lu);
	free(lv);
	t1(t, "svid", st, 0);
}

/* one path of the whitened topology: latents, ITQ gauge, signs */
static void nvg_path(tctx *t, cl_mem tm, size_t r, dpath *p)
{
	cl_mem up = NULL, vp = NULL;
	double *wu = hvec(t, t->m), *wv = hvec(t, t->n);

	latents(t, tm, r, &up, &vp);
	row_norms(t, up, t->m, r, wu);
	row_norms(t, vp, t->n, r, wv);
	if (!t->q->err)
		for (size_t j = 0; j < t->n; j++)
			wv[j] *= t->hc->sqd[j];
	itq(t, &up, &vp, wu, wv, r, NV_ITQ_STEPS);
	svid_path(t, up, vp, r, p);
	nvcl_release(&up);
	nvcl_release(&vp);
	free(wu);
	free(wv);
}

/* ---------------------------------------------------------------- ALS */

/* ℓ (joint over paths): (AᵀA ∘ BᵀHB) ℓ = diag(Aᵀ·WHB); B = [gs_p], A = [hs_p] */
static void als_l(tctx *t, dmodel *md, cl_mem b, cl_mem bhb, cl_mem whb)
{
	size_t m = md->m, n = md->n, r = md->r, pr = md->np * r;
	cl_mem hb = nvcl_q_buf(t->q, n * pr, "Hf·B"), a = nvcl_q_buf(t->q, m * pr, "A");
	cl_mem ata = nvcl_q_buf(t->q, pr * pr, "AᵀA"), rv = nvcl_q_buf(t->q, pr, "ℓ rhs");
	double *lam = hvec(t, pr);

	for (size_t p = 0; p < md->np; p++) {
		gs_into(t, md, p, b, p * r, pr);
		cl_mem h = up_d(t, md->p[p].h, m, "h");
		nvcl_scale_rc(t->q, a, p * r, pr, md->p[p].su, r, h, NULL, m, r);
		nvcl_release(&h);
	}
	nvcl_gemm(t->q, 0, 0, n, pr, n, 1.0f, t->hc->hf, b, 0.0f, hb);
	nvcl_gemm(t->q, 1, 0, pr, pr, n, 1.0f, b, hb, 0.0f, bhb);
	nvcl_gemm(t->q, 0, 0, m, pr, n, 1.0f, t->wh, b, 0.0f, whb);
	nvcl_gemm(t->q, 1, 0, pr, pr, m, 1.0f, a, a, 0.0f, ata);
	nvcl_coldot(t->q, rv, a, 0, pr, whb, 0, pr, m, pr);
	nvcl_hadamard(t->q, ata, bhb, pr * pr);
	/* on the device as the g step, from the current ℓ; a singular system keeps the old ℓ */
	for (size_t p = 0; p < md->np && !t->q->err; p++)
		memcpy(lam + p * r, md->p[p].l, r * sizeof(double));
	if (!t->q->err && nvcl_solve_spd(t->q, ata, rv, pr, 1e-10, G_TOL, NVCL_CHOL_NB, lam,
					 NULL) == 0)
		for (size_t p = 0; p < md->np; p++)
			memcpy(md->p[p].l, lam + p * r, r * sizeof(double));
	nvcl_release(&hb), nvcl_release(&a), nvcl_release(&ata), nvcl_release(&rv);
	free(lam);
}

/* h (per row, joint over paths): 2×2 (or 1×1) normal equations per row */
static void als_h(tctx *t, dmodel *md, cl_mem bhb, cl_mem whb)
{
	size_t m = md->m, r = md->r, np = md->np, pr = np * r;
	cl_mem ms[2] = { 0 }, mk = nvcl_q_buf(t->q, m * r, "M·K"), v = nvcl_q_buf(t->q, m, "h");
	double *rh[2] = { hvec(t, m), hvec(t, m) }, *gm[2][2] = { { hvec(t, m), hvec(t, m) },
								 { hvec(t, m), hvec(t, m) } };

	for (size_t a = 0; a < np; a++)
		ms[a] = hsl(t, md, a, 0, 1);
	for (size_t a = 0; a < np; a++) {
		nvcl_rowdot(t->q, v, whb, a * r, pr, ms[a], 0, r, m, r);
		nvcl_q_read_d(t->q, v, 0, rh[a], m);
		for (size_t c = a; c < np; c++) {
			nvcl_gemm_ld(t->q, 0, 0, m, r, r, 1.0f, ms[a], 0, r, bhb, a * r * pr + c * r,
				     pr, 0.0f, mk, 0, r);
			nvcl_rowdot(t->q, v, mk, 0, r, ms[c], 0, r, m, r);
			nvcl_q_read_d(t->q, v, 0, gm[a][c], m);
			if (c != a)
				memcpy(gm[c][a], gm[a][c], m * sizeof(double));
		}
	}
	for (size_t i = 0; i < m && !t->q->err; i++) {
		double tr = np == 1 ? gm[0][0][i] : (gm[0][0][i] + gm[1][1][i]) / 2;
		double ridge = 1e-10 * fmax(tr, 1e-300);
		if (np == 1) {
			md->p[0].h[i] = rh[0][i] / (gm[0][0][i] + ridge);
			continue;
		}
		double a11 = gm[0][0][i] + ridge, a12 = gm[0][1][i], a22 = gm[1][1][i] + ridge;
		double det = a11 * a22 - a12 * a12;
		if (fabs(det) > 0) {
			md->p[0].h[i] = (a22 * rh[0][i] - a12 * rh[1][i]) / det;
			md->p[1].h[i] = (a11 * rh[1][i] - a12 * rh[0][i]) / det;
		}
	}
	nvcl_release(&ms[0]), nvcl_release(&ms[1]), nvcl_release(&mk), nvcl_release(&v);
	free(rh[0]), free(rh[1]);
	for (int a = 0; a < 2; a++)
		free(gm[a][0]), free(gm[a][1]);
}

/* g of path p: (Hf ∘ S_V K S_Vᵀ) g = diag(Cᵀ·(WH − other paths)), C = M S_Vᵀ */
static void als_g(tctx *t, dmodel *md, size_t p)
{
	size_t m = md->m, n = md->n, r = md->r;
	cl_mem mm = hsl(t, md, p, 1, 1), k = nvcl_q_buf(t->q, r * r, "K");
	cl_mem svk = nvcl_q_buf(t->q, n * r, "S_V·K"), ctc = nvcl_q_buf(t->q, n * n, "CᵀC");
	cl_mem rv = nvcl_q_buf(t->q, n, "g rhs");

	if (md->np > 1)
		residual_h(t, md, p, t->e2);
	/* C (m × n) in e1; the target in e2 (or WH itself) */
	nvcl_gemm(t->q, 0, 1, m, n, r, 1.0f, mm, md->p[p].sv, 0.0f, t->e1);
	nvcl_gemm(t->q, 1, 0, r, r, m, 1.0f, mm, mm, 0.0f, k);
	nvcl_gemm(t->q, 0, 0, n, r, r, 1.0f, md->p[p].sv, k, 0.0f, svk);
	nvcl_gemm(t->q, 0, 1, n, n, r, 1.0f, svk, md->p[p].sv, 0.0f, ctc);
	nvcl_hadamard(t->q, ctc, t->hc->hf, n * n);
	nvcl_coldot(t->q, rv, t->e1, 0, n, md->np > 1 ? t->e2 : t->wh, 0, n, m, n);
	/* on the device, from the current g and the path's kept factor; a singular
	 * system keeps the old g, a failure leaves the queue failed with its reason */
	nvcl_solve_info in;
	nvcl_solve_spd_pc(t->q, ctc, rv, n, 1e-10, G_TOL, &t->gpc[p], md->p[p].g, &in);
	nv_prof_add(t->pf, "als.g.chol", 0, (uint64_t)in.factors);
	nv_prof_add(t->pf, "als.g.pcg", 0, (uint64_t)in.iters);
	nvcl_release(&mm), nvcl_release(&k), nvcl_release(&svk), nvcl_release(&ctc);
	nvcl_release(&rv);
}

/* exact block least squares in the H metric: ℓ, h, g; each step a minimum */
static void als(tctx *t, dmodel *md, int sweeps)
{
	size_t m = md->m, n = md->n, pr = md->np * md->r;

	for (int s = 0; s < sweeps && !t->q->err; s++) {
		cl_mem b = nvcl_q_buf(t->q, n * pr, "B"), bhb = nvcl_q_buf(t->q, pr * pr, "BᵀHB");
		cl_mem whb = nvcl_q_buf(t->q, m * pr, "WH·B");
		double st = t0(t);
		als_l(t, md, b, bhb, whb);
		t1(t, "als.l", st, 1);
		st = t0(t);
		als_h(t, md, bhb, whb);
		t1(t, "als.h", st, 1);
		st = t0(t);
		for (size_t p = 0; p < md->np; p++)
			als_g(t, md, p);
		t1(t, "als.g", st, 1);
		nvcl_release(&b), nvcl_release(&bhb), nvcl_release(&whb);
	}
}

/* ---------------------------------------------------------------- knots */

/* row flips on S_U of path pi: exact single-bit deltas, greedy passes; the flips made */
static unsigned long long flip_u(tctx *t, dmodel *md, size_t pi)
{
	size_t m = md->m, n = md->n, r = md->r;
	double st = t0(t);
	cl_mem b = gs(t, md, pi), hb = nvcl_q_buf(t->q, n * r, "Hf·B");
	cl_mem k = nvcl_q_buf(t->q, r * r, "BᵀHB"), whb = nvcl_q_buf(t->q, m * r, "Wt·B");
	cl_mem qs = nvcl_q_buf(t->q, m * r, "S_U·Q"), fl = nvcl_q_buf(t->q, m, "flips");
	cl_mem qd = NULL, qm = NULL, l = NULL, h = NULL;
	double *kh = hvec(t, r * r), *qdh = hvec(t, r), *cnt = hvec(t, m), tot = 0;
	cl_uint *ci = NULL;

	if (md->np > 1)
		residual_h(t, md, pi, t->e2);
	nvcl_gemm(t->q, 0, 0, n, r, n, 1.0f, t->hc->hf, b, 0.0f, hb);
	nvcl_gemm(t->q, 1, 0, r, r, n, 1.0f, b, hb, 0.0f, k);
	nvcl_gemm(t->q, 0, 0, m, r, n, 1.0f, md->np > 1 ? t->e2 : t->wh, b, 0.0f, whb);
	nvcl_q_read_d(t->q, k, 0, kh, r * r);
	if (!t->q->err) {
		const double *lv = md->p[pi].l;
		for (size_t x = 0; x < r; x++)
			for (size_t y = 0; y < r; y++)
				kh[x * r + y] *= lv[x] * lv[y];
		for (size_t x = 0; x < r; x++)
			qdh[x] = kh[x * r + x];
	}
	qm = up_d(t, kh, r * r, "Q");
	qd = up_d(t, qdh, r, "diag Q");
	l = up_d(t, md->p[pi].l, r, "l");
	h = up_d(t, md->p[pi].h, m, "h");
	nvcl_gemm(t->q, 0, 0, m, r, r, 1.0f, md->p[pi].su, qm, 0.0f, qs);
	nvcl_flip_rows(t->q, md->p[pi].su, qs, qm, whb, l, qd, h, fl, m, r, FLIP_THR);
	ci = t->q->err ? NULL : nv_malloc(m, sizeof(cl_uint));
	if (ci && clEnqueueReadBuffer(t->q->q, fl, CL_TRUE, 0, m * sizeof(cl_uint), ci, 0, NULL,
				      NULL) == CL_SUCCESS)
		for (size_t i = 0; i < m; i++)
			tot += ci[i];
	cl_mem all[] = { b, hb, k, whb, qs, fl, qd, qm, l, h };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		nvcl_release(&all[i]);
	free(kh), free(qdh), free(cnt), free(ci);
	t1(t, "flip_u", st, 1);
	nv_prof_add(t->pf, "flip_u.flips", 0, (uint64_t)tot);
	return (unsigned long long)tot;
}

/* the block products around one gptq_block launch: errors, feedback, next
 * inputs.  The search reads the target only through Mᵀ·w (a column's r
 * numbers), so the target is held and fed back as Wp·M (n × r), not Wpᵀ
 * (n × m): the feedback of a block costs (n − b1)·nb·r, not (n − b1)·nb·m,
 * as the CPU's gptq_v carries it */
typedef struct {
	cl_mem wpm, sall, gall, mm, k, kd;   /* (n × r), (n × r), (n), (m × r), (r × r), (r) */
	cl_mem bv, ks, sb, gb, pe, gsb, d, err, fl;
} gptq_bufs;

static void gptq_run_block(tctx *t, gptq_bufs *B, size_t b0, size_t nb, size_t r)
{
	size_t n = t->n, b1 = b0 + nb, blk = b0 / BLOCK;
	nvcl_q *q = t->q;

	nvcl_q_copy(q, B->sb, 0, B->sall, b0 * r, nb * r);
	nvcl_q_copy(q, B->bv, 0, B->wpm, b0 * r, nb * r);
	nvcl_gemm(q, 0, 0, nb, r, r, 1.0f, B->sb, B->k, 0.0f, B->ks);
	nvcl_gptq_block(q, B->bv, B->ks, B->sb, B->pe, B->gb, B->k, B->kd, t->hc->uc, n, b0, nb,
			r, FLIP_THR, B->fl);
	nvcl_q_copy(q, B->sall, b0 * r, B->sb, 0, nb * r);
	nvcl_q_copy(q, B->gall, b0, B->gb, 0, nb);
	/* D·M = (Wpᵀ_b − diag(g_b) S_b Mᵀ)·M = WpM_b − diag(g_b) S_b K;
	 * Errᵀ·M = (U_bb⁻¹)ᵀ D·M */
	nvcl_scale_rc(q, B->gsb, 0, r, B->sb, r, B->gb, NULL, nb, r);
	nvcl_q_copy(q, B->d, 0, B->wpm, b0 * r, nb * r);
	nvcl_gemm(q, 0, 0, nb, r, r, -1.0f, B->gsb, B->k, 1.0f, B->d);
	nvcl_gemm_ld(q, 0, 0, nb, r, nb, 1.0f, t->hc->uinvt, blk * BLOCK * BLOCK, BLOCK, B->d, 0, r,
		     0.0f, B->err, 0, r);
	/* WpM[b1:] −= Uc[b0:b1, b1:]ᵀ · Errᵀ·M */
	if (b1 < n)
		nvcl_gemm_ld(q, 1, 0, n - b1, r, nb, -1.0f, t->hc->uc, b0 * n + b1, n, B->err, 0, r,
			     1.0f, B->wpm, b1 * r, r);
}

/* the column-sequential sign search on S_V of path pi (act order, lazy blocks) */
static void gptq_v(tctx *t, dmodel *md, size_t pi)
{
	size_t m = md->m, n = md->n, r = md->r, nb0 = n < BLOCK ? n : BLOCK;
	double st = t0(t), *kh = hvec(t, r * r), *kdh = hvec(t, r), *gh = hvec(t, n);
	gptq_bufs B = { 0 };
	cl_uint flips = 0;

	B.wpm = nvcl_q_buf(t->q, n * r, "Wp·M");
	B.sall = nvcl_q_buf(t->q, n * r, "S_V (act order)");
	B.gall = nvcl_q_buf(t->q, n, "g (act order)");
	B.k = nvcl_q_buf(t->q, r * r, "K");
	B.bv = nvcl_q_buf(t->q, nb0 * r, "bv");
	B.ks = nvcl_q_buf(t->q, nb0 * r, "K·s");
	B.sb = nvcl_q_buf(t->q, nb0 * r, "S block");
	B.gb = nvcl_q_buf(t->q, nb0, "g block");
	B.pe = nvcl_q_buf(t->q, nb0 * r, "Mᵀe");
	B.gsb = nvcl_q_buf(t->q, nb0 * r, "g·S block");
	B.d = nvcl_q_buf(t->q, nb0 * r, "D·M block");
	B.err = nvcl_q_buf(t->q, nb0 * r, "Errᵀ·M block");
	B.fl = nvcl_q_buf(t->q, 1, "flips");
	nvcl_q_zero(t->q, B.fl, 1);
	residual(t, md, t->w, pi, t->e1);
	B.mm = hsl(t, md, pi, 1, 1);
	nvcl_gemm(t->q, 1, 0, r, r, m, 1.0f, B.mm, B.mm, 0.0f, B.k);
	nvcl_q_read_d(t->q, B.k, 0, kh, r * r);
	if (!t->q->err)
		for (size_t x = 0; x < r; x++)
			kdh[x] = kh[x * r + x];
	B.kd = up_d(t, kdh, r, "diag K");
	/* Wp·M: targetᵀ·M (n × r) with its rows in act order */
	{
		cl_mem x = nvcl_q_buf(t->q, n * r, "targetᵀ·M");
		nvcl_gemm(t->q, 1, 0, n, r, m, 1.0f, t->e1, B.mm, 0.0f, x);
		nvcl_perm_rows(t->q, B.wpm, x, t->hc->perm, 0, n, r);
		nvcl_release(&x);
	}
	nvcl_perm_rows(t->q, B.sall, md->p[pi].sv, t->hc->perm, 0, n, r);
	for (size_t b0 = 0; b0 < n && !t->q->err; b0 += BLOCK)
		gptq_run_block(t, &B, b0, n - b0 < BLOCK ? n - b0 : BLOCK, r);
	nvcl_perm_rows(t->q, md->p[pi].sv, B.sall, t->hc->perm, 1, n, r);
	nvcl_q_read_d(t->q, B.gall, 0, gh, n);
	if (!t->q->err &&
	    clEnqueueReadBuffer(t->q->q, B.fl, CL_TRUE, 0, sizeof(flips), &flips, 0, NULL, NULL) ==
		    CL_SUCCESS)
		for (size_t j = 0; j < n; j++)
			md->p[pi].g[t->hc->perm_h[j]] = gh[j];
	cl_mem *all = &B.wpm;
	for (size_t i = 0; i < sizeof(B) / sizeof(cl_mem); i++)
		nvcl_release(&all[i]);
	free(kh), free(kdh), free(gh);
	t1(t, "gptq_v", st, 1);
	nv_prof_add(t->pf, "gptq_v.flips", 0, flips);
}

/* discrete-knot refinement alternating with the exact metric; a step is kept
 * only when it lowers the fit error */
static void refine(tctx *t, dmodel *md, int sweeps, int try_sweeps)
{
	double cur = fit_err(t, md);

	for (int s = 0; s < sweeps && !t->q->err; s++)
		for (size_t pi = 0; pi < md->np; pi++)
			for (int kind = 0; kind < 2 && !t->q->err; kind++) {
				dmodel trial;
				model_clone(t, md, &trial);
				if (kind == 0)
					flip_u(t, &trial, pi);
				else
					gptq_v(t, &trial, pi);
				als(t, &trial, try_sweeps);
				double e = fit_err(t, &trial);
				if (!t->q->err && e < cur) {
					model_free(md);
					*md = trial;
					cur = e;
				} else {
					model_free(&trial);
				}
			}
}

/* whitened topology, ITQ gauge, closed-form metric; the residual path on the
 * H-residual of the refitted primary */
static void build_init(tctx *t, size_t r, size_t paths, dmodel *md)
{
	*md = (dmodel){ .np = 1, .m = t->m, .n = t->n, .r = r };
	/* a candidate's paths factor their first g systems afresh */
	nvcl_pc_free(&t->gpc[0]);
	nvcl_pc_free(&t->gpc[1]);
	nvg_path(t, t->w, r, &md->p[0]);
	als(t, md, 3);
	if (paths == 2 && !t->q->err) {
		double st = t0(t);
		residual(t, md, t->w, md->np, t->e3);
		t1(t, "recon", st, 0);
		md->np = 2;
		nvg_path(t, t->e3, r, &md->p[1]);
		als(t, md, 6);
	}
}

/* ---------------------------------------------------------------- driver */

size_t nvcl_tensor_bytes(size_t m, size_t n, size_t r)
{
	size_t s = m < n ? m : n, big = m > n ? m : n, k = nvcl_eig_dim(s, r);
	/* W, WH, three scratch, T·L: 6 m×n; the latent Gram; CᵀC and the two
	 * paths' kept factors (with their block inverses, and a panel); rank-r
	 * pieces; the latents' subspace (two s × k, its k × k and their blocks) */
	double f = 6.0 * (double)m * n + (double)s * s + 3.0 * (double)n * n +
		   3.0 * (double)n * NVCL_CHOL_NB +
		   24.0 * (double)(m + n) * r + 4.0 * (double)r * r + 8.0 * big +
		   2.0 * (double)s * k + (double)k * k + (double)(s + k) * NVCL_CHOL_NB;
	return f * 4 > (double)SIZE_MAX ? SIZE_MAX : (size_t)(f * 4);
}

static int fits_device(nvcl_ctx *c, const nvcl_job *job, size_t r, char *why, size_t len)
{
	size_t need = nvcl_tensor_bytes(job->m, job->n, r);
	char a[32], b[32];

	if (need > c->global_mem) {
		nvcl_fmt_bytes(need, a, sizeof(a));
		nvcl_fmt_bytes(c->global_mem, b, sizeof(b));
		snprintf(why, len, "device out of memory: %zux%zu at rank %zu needs %s, '%s' has %s",
			 job->m, job->n, r, a, c->dev_name, b);
		return 0;
	}
	return 1;
}

/* upload W and the per-tensor references */
static void tensor_setup(tctx *t, const nvcl_job *job)
{
	size_t mn = job->m * job->n;
	double st = t0(t);

	t->gpc[0] = t->gpc[1] = (nvcl_pc){ .nb = NVCL_CHOL_NB };
	t->w = nvcl_q_upload(t->q, job->w, mn, "W");
	t->wh = nvcl_q_buf(t->q, mn, "W·Hf");
	t->e1 = nvcl_q_buf(t->q, mn, "scratch 1");
	t->e2 = nvcl_q_buf(t->q, mn, "scratch 2");
	t->e3 = nvcl_q_buf(t->q, mn, "scratch 3");
	nvcl_gemm(t->q, 0, 0, t->m, t->n, t->n, 1.0f, t->w, t->hc->hf, 0.0f, t->wh);
	t1(t, "wh", st, 0);
	st = t0(t);
	t->wfit = herr(t, t->w, t->hc->hf, t->e1);
	t->w2 = sum_prod(t, t->w, t->w);
	t->wsel = herr(t, t->w, t->hc->hsel, t->e1);
	t1(t, "select", st, 0);
}

static void tensor_free(tctx *t)
{
	nvcl_pc_free(&t->gpc[0]);
	nvcl_pc_free(&t->gpc[1]);
	nvcl_release(&t->w), nvcl_release(&t->wh);
	nvcl_release(&t->e1), nvcl_release(&t->e2), nvcl_release(&t->e3);
}

/* pack the chosen model and report the stored payload's errors */
static int pack_model(tctx *t, dmodel *md, nvcl_result *res)
{
	size_t m = md->m, n = md->n, r = md->r;
	nv_pack_path cp[2];
	int8_t *sg[2][2] = { { 0 } };
	int rc = -1;

	for (size_t p = 0; p < md->np; p++) {
		float *tmp = nv_malloc(m > n ? m * r : n * r, sizeof(float));
		sg[p][0] = nv_malloc(m * r, 1);
		sg[p][1] = nv_malloc(n * r, 1);
		if (!tmp || !sg[p][0] || !sg[p][1]) {
			free(tmp);
			nvcl_q_fail(t->q, "host memory for the signs: %s", nv_err());
			goto out;
		}
		nvcl_q_read(t->q, md->p[p].su, 0, tmp, m * r);
		for (size_t i = 0; i < m * r; i++)
			sg[p][0][i] = tmp[i] > 0 ? 1 : -1;
		nvcl_q_read(t->q, md->p[p].sv, 0, tmp, n * r);
		for (size_t i = 0; i < n * r; i++)
			sg[p][1][i] = tmp[i] > 0 ? 1 : -1;
		free(tmp);
		cp[p] = (nv_pack_path){ md->p[p].h, md->p[p].l, md->p[p].g, sg[p][0], sg[p][1] };
	}
	if (t->q->err)
		goto out;
	/* the scales are rebalanced and rounded in place: md becomes the stored model */
	rc = nv_pack_paths(m, n, r, md->np, cp, &res->bytes, &res->len);
	if (rc < 0)
		nvcl_q_fail(t->q, "%s", nv_err());
out:
	for (int p = 0; p < 2; p++)
		free(sg[p][0]), free(sg[p][1]);
	return rc;
}

typedef struct {
	size_t paths;
	dmodel md;
} cand;

/* the candidate of the nc (two) with the least SEL error, the first on a
 * tie, each noted "P<paths> e" */
static void pick(tctx *t, const cand *cs, size_t nc, char *notes, size_t cap, size_t *best)
{
	double be = INFINITY;

	for (size_t i = 0; i < nc && !t->q->err; i++) {
		double st = t0(t), e = rel_err(t, &cs[i].md, t->hc->hsel, t->wsel);
		char name[16];
		t1(t, "select", st, 0);
		snprintf(name, sizeof(name), "P%zu", cs[i].paths);
		nv_rep_note(notes, cap, name, e);
		if (e < be) {
			be = e;
			*best = i;
		}
	}
}

static void encode_tensor(tctx *t, const nvcl_job *job, nvcl_result *res)
{
	size_t r1 = 0, r2 = 0;
	blr_clip clip;
	cand cs[2];
	size_t nc = 0, best = 0;
	double e3 = 0, st;
	char notes[160] = "";

	if (job->paths != 1)
		blr_rank(job->m, job->n, job->bpw, 2, job->kv, &r2, &clip);
	if (job->paths != 2)
		blr_rank(job->m, job->n, job->bpw, 1, job->kv, &r1, &clip);
	tensor_setup(t, job);
	if (job->paths != 1 && !t->q->err) {
		cs[nc].paths = 2;
		build_init(t, r2, 2, &cs[nc].md);
		/* measured where there is a choice to make, as the CPU's driver */
		if (job->paths == 0) {
			st = t0(t);
			e3 = rel_err(t, &cs[nc].md, t->hc->hsel, t->wsel);
			t1(t, "select", st, 0);
			nv_rep_note(notes, sizeof(notes), "init", e3);
		}
		refine(t, &cs[nc].md, job->sweeps, job->try_sweeps);
		nc++;
	}
	if (job->paths != 2 && !t->q->err) {
		cs[nc].paths = 1;
		build_init(t, r1, 1, &cs[nc].md);
		refine(t, &cs[nc].md, job->sweeps, job->try_sweeps);
		nc++;
	}
	if (nc == 1)
		nv_rep_only(notes, sizeof(notes), cs[0].paths);
	else
		pick(t, cs, nc, notes, sizeof(notes), &best);
	if (!t->q->err && nc > 0) {
		dmodel *md = &cs[best].md;
		int rc = pack_model(t, md, res);
		if (rc == 1) {
			res->status = NVCL_REFUSED;
			snprintf(res->err, sizeof(res->err), "%s", nv_err());
		} else if (rc == 0) {
			st = t0(t);
			res->fit = raw_fit_err(t, md);
			res->sel = rel_err(t, md, t->hc->hsel, t->wsel);
			t1(t, "select", st, 0);
			res->paths = (int)cs[best].paths;
			res->rank = md->r;
			nv_rep_line(res->line, sizeof(res->line), cs[best].paths, res->rank, notes,
				    res->fit, res->sel);
		}
	}
	for (size_t i = 0; i < nc; i++)
		model_free(&cs[i].md);
	tensor_free(t);
}

int nvcl_encode_q(nvcl_q *q, const nvcl_hctx *hc, const nvcl_job *job, int profile,
		  nvcl_result *res);

int nvcl_encode_q(nvcl_q *q, const nvcl_hctx *hc, const nvcl_job *job, int profile,
		  nvcl_result *res)
{
	tctx t = { .q = q, .hc = hc, .m = job->m, .n = job->n };
	size_t r = 0, r1 = 0;
	blr_clip clip;
	double start = nv_now();

	memset(res, 0, sizeof(*res));
	res->status = NVCL_FAILED;
	if (job->n != hc->n) {
		snprintf(res->err, sizeof(res->err), "%zu input columns vs a %zu-wide context",
			 job->n, hc->n);
		return -1;
	}
	if (blr_rank(job->m, job->n, job->bpw, 1, job->kv, &r1, &clip) < 0) {
		snprintf(res->err, sizeof(res->err), "%zux%zu is too small to encode (min < 8)",
			 job->m, job->n);
		return -1;
	}
	blr_rank(job->m, job->n, job->bpw, 2, job->kv, &r, &clip);
	r = r > r1 ? r : r1;
	if (!fits_device(q->c, job, r, res->err, sizeof(res->err)))
		return -1;
	if (nvcl_gptq_local_bytes(q, r) > q->c->local_mem) {
		snprintf(res->err, sizeof(res->err),
			 "device '%s' lacks local memory: the sign search at rank %zu needs %zu "
			 "bytes, it has %zu", q->c->dev_name, r, nvcl_gptq_local_bytes(q, r),
			 q->c->local_mem);
		return -1;
	}
	q->err = 0;
	q->flops = 0;
	res->status = NVCL_OK;
	nv_prof_init(&t.pfs);
	t.pf = profile ? &t.pfs : NULL;
	encode_tensor(&t, job, res);
	if (nvcl_q_ok(q) < 0) {
		snprintf(res->err, sizeof(res->err), "%s", q->why);
		res->status = NVCL_FAILED;
		free(res->bytes);
		res->bytes = NULL;
	}
	res->secs = nv_now() - start;
	res->flops = q->flops;
	if (t.pf)
		nv_prof_line(t.pf, res->prof, sizeof(res->prof));
	nv_prof_free(&t.pfs);
	return res->status == NVCL_FAILED ? -1 : 0;
}

int nvcl_encode(nvcl_ctx *c, const nvcl_hctx *hc, const nvcl_job *job, int profile,
		nvcl_result *res)
{
	nvcl_q q;
	int rc;

	if (nvcl_q_init(&q, c) < 0) {
		memset(res, 0, sizeof(*res));
		res->status = NVCL_FAILED;
		snprintf(res->err, sizeof(res->err), "%s", nv_err());
		return -1;
	}
	rc = nvcl_encode_q(&q, hc, job, profile, res);
	nvcl_q_free(&q);
	return rc;
}

void nvcl_result_free(nvcl_result *r)
{
	free(r->bytes);
	r->bytes = NULL;
}

/* ---------------------------------------------------------------- context */

static int upload_uinvt(nvcl_q *q, nvcl_hctx *h, const double *uc)
{
	size_t n = h->n, nbk = (n + BLOCK - 1) / BLOCK;
	double *all = nv_calloc(nbk * BLOCK * BLOCK, sizeof(double));
	double *inv = nv_malloc(BLOCK * BLOCK, sizeof(double));
	int rc = -1;

	if (!all || !inv)
		goto out;
	for (size_t b = 0; b < nbk; b++) {
		size_t b0 = b * BLOCK, nb = n - b0 < BLOCK ? n - b0 : BLOCK;
		if (clh_upper_inv_t(uc + b0 * n + b0, n, nb, inv) < 0)
			goto out;
		for (size_t i = 0; i < nb; i++)
			memcpy(all + b * BLOCK * BLOCK + i * BLOCK, inv + i * nb, nb * sizeof(double));
	}
	h->uinvt = nvcl_q_upload_d(q, all, nbk * BLOCK * BLOCK, "the inverse Uc blocks");
	rc = 0;
out:
	free(all);
	free(inv);
	return rc;
}

nvcl_hctx *nvcl_hctx_upload(nvcl_ctx *c, const nvcl_hin *in)
{
	nvcl_hctx *h = nv_calloc(1, sizeof(*h));
	size_t n = in->n, nn = n * n;
	int *perm = nv_malloc(n, sizeof(int));
	nvcl_q q;

	if (!h || !perm || nvcl_q_init(&q, c) < 0) {
		free(h);
		free(perm);
		return NULL;
	}
	h->c = c;
	h->n = n;
	h->ridge = in->ridge;
	h->sqd = nv_malloc(n, sizeof(double));
	h->perm_h = nv_malloc(n, sizeof(uint32_t));
	if (!h->sqd || !h->perm_h)
		nvcl_q_fail(&q, "%s", nv_err());
	else {
		memcpy(h->sqd, in->sqd, n * sizeof(double));
		memcpy(h->perm_h, in->perm, n * sizeof(uint32_t));
		for (size_t j = 0; j < n; j++)
			perm[j] = (int)in->perm[j];
	}
	h->hf = nvcl_q_upload_d(&q, in->hf, nn, "the damped Gram");
	h->l = nvcl_q_upload_d(&q, in->l, nn, "its Cholesky factor");
	h->uc = nvcl_q_upload_d(&q, in->uc, nn, "the permuted inverse factor");
	h->hsel = nvcl_q_upload(&q, in->hsel, nn, "the SEL Gram");
	h->perm = nvcl_q_buf(&q, n, "the act order");
	if (!q.err && clEnqueueWriteBuffer(q.q, h->perm, CL_TRUE, 0, n * sizeof(int), perm, 0,
					   NULL, NULL) != CL_SUCCESS)
		nvcl_q_fail(&q, "writing the act order to the device");
	if (!q.err && upload_uinvt(&q, h, in->uc) < 0)
		nvcl_q_fail(&q, "%s", nv_err());
	free(perm);
	if (nvcl_q_ok(&q) < 0) {
		nv_preerr("uploading the input context (n = %zu)", n);
		nvcl_q_free(&q);
		nvcl_hctx_free(h);
		return NULL;
	}
	nvcl_q_free(&q);
	return h;
}

void nvcl_hctx_free(nvcl_hctx *h)
{
	if (!h)
		return;
	nvcl_release(&h->hf), nvcl_release(&h->l), nvcl_release(&h->uc);
	nvcl_release(&h->hsel), nvcl_release(&h->perm);
	nvcl_release(&h->uinvt);
	free(h->sqd);
	free(h->perm_h);
	free(h);
}

/* ---------------------------------------------------------------- in flight */

typedef struct {
	nvcl_ctx *c;
	const nvcl_hctx *hc;
	const nvcl_job *jobs;
	cl_command_queue shared; /* the one queue of every job, or NULL for one each */
	size_t k, next;
	int profile, failed;
	nvcl_result *res;
	void (*done)(void *, size_t, const nvcl_result *);
	void *arg;
	pthread_mutex_t lock;
} flight;

static void *worker(void *p)
{
	flight *f = p;
	nvcl_q q;
	int have_q = nvcl_q_init_on(&q, f->c, f->shared) == 0;
	char why[512];

	snprintf(why, sizeof(why), "%s", have_q ? "" : nv_err());
	for (;;) {
		pthread_mutex_lock(&f->lock);
		size_t i = f->next++;
		pthread_mutex_unlock(&f->lock);
		if (i >= f->k)
			break;
		if (have_q) {
			nvcl_encode_q(&q, f->hc, &f->jobs[i], f->profile, &f->res[i]);
		} else {
			memset(&f->res[i], 0, sizeof(f->res[i]));
			f->res[i].status = NVCL_FAILED;
			snprintf(f->res[i].err, sizeof(f->res[i].err), "%s", why);
		}
		pthread_mutex_lock(&f->lock);
		if (f->res[i].status == NVCL_FAILED)
			f->failed = 1;
		if (f->done)
			f->done(f->arg, i, &f->res[i]);
		pthread_mutex_unlock(&f->lock);
	}
	if (have_q)
		nvcl_q_free(&q);
	return NULL;
}

int nvcl_encode_many(nvcl_ctx *c, const nvcl_hctx *hc, const nvcl_job *jobs, size_t k,
		     size_t inflight, int profile, nvcl_result *res,
		     void (*done)(void *arg, size_t i, const nvcl_result *r), void *arg)
{
	flight f = { .c = c, .hc = hc, .jobs = jobs, .k = k, .profile = profile, .res = res,
		     .done = done, .arg = arg };
	pthread_t th[64];
	size_t nt = inflight < 1 ? 1 : inflight > 64 ? 64 : inflight, started = 0;

	if (nt > k)
		nt = k;
	/*
	 * On a device that is not a GPU the jobs share one in-order queue: their
	 * host work still overlaps, and the device (whose driver spreads each
	 * kernel over every core already) runs one command at a time.  PoCL needs
	 * it: two of its CPU commands in flight at once, of one kernel at two
	 * grid sizes, can release each other's cached kernel binary and abort
	 * (pocl_release_dlhandle_cache's "ref_count > 0" assertion, PoCL 3.1).
	 */
	if (nt > 1 && !c->is_gpu) {
		cl_int st;
		f.shared = clCreateCommandQueue(c->ctx, c->device, 0, &st);
		if (st != CL_SUCCESS)
			f.shared = NULL, nt = 1;
	}
	pthread_mutex_init(&f.lock, NULL);
	for (size_t i = 0; i < nt; i++)
		if (pthread_create(&th[i], NULL, worker, &f) == 0)
			started++;
	if (started == 0)
		worker(&f);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&f.lock);
	if (f.shared)
		clReleaseCommandQueue(f.shared);
	return f.failed ? -1 : 0;
}
