/* nvgenc.c - gptq_v, refine and the NVG init (see nvg.h; packing: pack.c) */
#include "nvg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "err.h"
#include "kern.h"
#include "mem.h"
#include "svid.h"

#define GPTQ_BLOCK 128

/* ----------------------------------------------------------------- gptq_v */

/* what the column search of one path reads and writes */
typedef struct {
	size_t m, n, r;
	const nv_path *q; /* the path: M = diag(h)·S_U·diag(ℓ) (m × r), made bs rows at a
			   * time into blk, never whole */
	size_t bs;
	double *blk;    /* (bs × r) */
	nv_mat k;       /* (r × r) MᵀM */
	double *kd;     /* (r) its diagonal */
	double *gain;   /* (r) col_flips' scratch */
	nv_mat wpt;     /* (n × m) row j = column perm[j] of the target, fed back */
	nv_mat s;       /* (n × r) S_V rows in act order */
	double *g;      /* (n) in act order */
	const nv_hctx *hc; /* its uc, packed: a block's rows are widened to a strip */
	uint64_t flips;
} gptq_state;

static double dot(const double *a, const double *b, size_t r)
{
	return cblas_ddot((int)r, a, 1, b, 1);
}

/* g = ⟨bv,s⟩/⟨s,Ks⟩, made non-negative by negating s (and ks) */
static double col_scale(double *s, double *ks, const double *bv, size_t r)
{
	double g = dot(bv, s, r) / fmax(dot(s, ks, r), 1e-300);

	if (g < 0.0) {
		for (size_t x = 0; x < r; x++) {
			s[x] = -s[x];
			ks[x] = -ks[x];
		}
		g = -g;
	}
	return g;
}

/* greedy best single flips of s for a fixed g, at most 4r; returns the count */
static size_t col_flips(const gptq_state *st, double g, double *s, double *ks, const double *bv)
{
	size_t r = st->r, nf = 0;
	const double *kd = st->kd;
	double *d = st->gain;

	while (nf < 4 * r) {
		size_t best = 0;
		double bd = 0.0;
		nv_flip_gains(s, ks, kd, bv, r, g, d);
		for (size_t x = 0; x < r; x++)
			if (x == 0 || d[x] < bd) {
				bd = d[x];
				best = x;
			}
		if (bd >= -1e-12 * (g * g * kd[best] + 1e-300))
			break;
		cblas_daxpy((int)r, -2.0 * s[best], nv_row(&st->k, best), 1, ks, 1);
		s[best] = -s[best];
		nf++;
	}
	return nf;
}

/* column j: signs and scale for the target whose Mᵀ·w is bv; ≤ 3 rounds */
static double col_search(gptq_state *st, size_t j, const double *bv, double *ks)
{
	size_t r = st->r;
	double *s = nv_row(&st->s, j), g;

	cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)r, (int)r, 1.0, st->k.d, (int)r, s, 1, 0.0,
		    ks, 1);
	g = col_scale(s, ks, bv, r);
	for (int round = 0; round < 3; round++) {
		size_t nf = col_flips(st, g, s, ks, bv);
		double g2;
		st->flips += nf;
		g2 = col_scale(s, ks, bv, r);
		if (nf == 0 || fabs(g2 - g) <= 1e-9 * fabs(g)) {
			g = g2;
			break;
		}
		g = g2;
	}
	return g;
}

/* one lazy block [b0, b1): columns in order with the in-block Schur feedback
 * carried on Mᵀ·w (r-vectors), then the block's errors E from
 * Ucᵀ_blk·E = W_blk − diag(g)·S_blk·Mᵀ and the trailing update
 * W[b1:] −= Uc[b0:b1, b1:]ᵀ·E; uc here is the block's strip (ld n − b0) */
static int gptq_block(gptq_state *st, size_t b0, size_t b1)
{
	size_t m = st->m, n = st->n, r = st->r, nb = b1 - b0, w = n - b0;
	double *uc = nv_hctx_uc_rows(st->hc, b0, b1);
	nv_mat bv = {0}, res = {0}, gs = {0};
	double *ks = nv_malloc(r, sizeof(double)), *mte = nv_malloc(r, sizeof(double));
	nv_mat wblk = {nb, m, st->wpt.d + b0 * m};
	int rc = -1;

	if (!uc || !ks || !mte || nv_mat_zeros(&bv, nb, r) < 0)
		goto out;
	/* Mᵀ·w for the block's columns: bv = W_blk·M, bs rows of M at a time */
	for (size_t i0 = 0, rows; i0 < m; i0 += rows) {
		rows = m - i0 < st->bs ? m - i0 : st->bs;
		nv_path_hsl_rows(st->q, r, i0, rows, 1, st->blk);
		nv_flops_add(2ull * nb * r * rows);
		nv_dgemm(0, 0, nb, r, rows, 1.0, wblk.d + i0, m, st->blk, r, i0 ? 1.0 : 0.0, bv.d,
			 r);
	}
	/* the columns one by one: r-vector work that OpenBLAS's threads would
	 * only slow down (a wake-up per call, and spinning on a busy machine) */
	nv_serial();
	for (size_t j = b0; j < b1; j++) {
		/* uj[x]: uc[j][j + x], row j of the strip from its diagonal on */
		double *bj = nv_row(&bv, j - b0), *uj = uc + (j - b0) * w + (j - b0), ujj = uj[0];
		double g = col_search(st, j, bj, ks);
		/* Mᵀ·e_j = (Mᵀw_j − g·K s_j)/Uc[j,j] feeds the later columns */
		for (size_t x = 0; x < r; x++)
			mte[x] = (bj[x] - g * ks[x]) / ujj;
		for (size_t jj = j + 1; jj < b1; jj++)
			if (uj[jj - j] != 0.0)
				cblas_daxpy((int)r, -uj[jj - j], mte, 1, nv_row(&bv, jj - b0), 1);
		st->g[j] = g;
	}
	nv_unserial();
	if (nv_mat_copy(&res, &wblk) < 0 || nv_mat_zeros(&gs, nb, r) < 0)
		goto out;
	for (size_t j = 0; j < nb; j++)
		for (size_t x = 0; x < r; x++)
			gs.d[j * r + x] = st->g[b0 + j] * st->s.d[(b0 + j) * r + x];
	for (size_t i0 = 0, rows; i0 < m; i0 += rows) { /* res −= gs·Mᵀ, by M's rows */
		rows = m - i0 < st->bs ? m - i0 : st->bs;
		nv_path_hsl_rows(st->q, r, i0, rows, 1, st->blk);
		nv_flops_add(2ull * nb * rows * r);
		nv_dgemm(0, 1, nb, rows, r, -1.0, gs.d, r, st->blk, r, 1.0, res.d + i0, m);
	}
	nv_flops_add((uint64_t)nb * nb * m);
	nv_dtrsm_left(1, 1, 0, nb, m, 1.0, uc, w, res.d, m);
	if (b1 < n) {
		nv_flops_add(2ull * (n - b1) * m * nb);
		nv_dgemm(1, 0, n - b1, m, nb, -1.0, uc + nb, w, res.d, m, 1.0, st->wpt.d + b1 * m,
			 m);
	}
	rc = 0;
out:
	free(uc);
	free(ks);
	free(mte);
	nv_mat_free(&bv);
	nv_mat_free(&res);
	nv_mat_free(&gs);
	return rc;
}

static void gptq_free(gptq_state *st)
{
	free(st->blk);
	st->blk = NULL;
	nv_mat_free(&st->k);
	free(st->kd);
	free(st->gain);
	nv_mat_free(&st->wpt);
	nv_mat_free(&st->s);
	free(st->g);
}

/* rows of the target W − Ŵ_o (o the other path; W when there is none),
 * permuted and transposed into wpt, GPTQ_ROWS rows of Ŵ_o at a time: the
 * products of nv_bm_recon(md, pi) on its rows, not an m × n matrix held */
#define GPTQ_ROWS 256
static int gptq_target(gptq_state *st, const nv_bm *md, const nv_tctx *c, size_t pi)
{
	size_t m = md->m, n = md->n, r = md->r, o = 1 - pi;
	const uint32_t *perm = c->hc->perm;
	nv_mat a = {0}, b = {0}, rest = {0};
	int rc = -1;

	if (md->np > 1 && (nv_mat_zeros(&a, m < GPTQ_ROWS ? m : GPTQ_ROWS, r) < 0 ||
			   nv_path_gs(md, o, &b) < 0))
		goto out;
	for (size_t i0 = 0; i0 < m; i0 += GPTQ_ROWS) {
		size_t k = m - i0 < GPTQ_ROWS ? m - i0 : GPTQ_ROWS;
		if (md->np > 1) {
			nv_mat ar = { k, r, a.d };
			nv_path_hsl_rows(&md->p[o], r, i0, k, 1, a.d);
			if (nv_mat_zeros(&rest, k, n) < 0)
				goto out;
			nv_gemm(1.0, &ar, 0, &b, 1, 1.0, &rest);
		}
		for (size_t i = i0; i < i0 + k; i++) {
			const double *w = nv_row(c->w, i);
			const double *ro = rest.d ? nv_row(&rest, i - i0) : NULL;
			for (size_t j = 0; j < n; j++)
				st->wpt.d[j * m + i] = w[perm[j]] - (ro ? ro[perm[j]] : 0.0);
		}
		nv_mat_free(&rest);
	}
	rc = 0;
out:
	nv_mat_free(&a);
	nv_mat_free(&b);
	nv_mat_free(&rest);
	return rc;
}

/* target W − Σ_{q≠pi} Ŵ_q, permuted and transposed; path pi's S_V and g in act order */
static int gptq_setup(gptq_state *st, const nv_bm *md, const nv_tctx *c, size_t pi)
{
	size_t n = md->n, r = md->r;
	const uint32_t *perm = c->hc->perm;

	memset(st, 0, sizeof(*st));
	st->m = md->m;
	st->n = n;
	st->r = r;
	st->hc = c->hc;
	st->g = nv_malloc(n, sizeof(double));
	st->q = &md->p[pi];
	st->bs = nv_row_block(c, md->m);
	st->blk = nv_malloc(st->bs * (r ? r : 1), sizeof(double));
	if (!st->g || !st->blk || nv_mat_zeros(&st->k, r, r) < 0)
		return -1;
	nv_path_mtm(st->q, md->m, r, st->bs, st->blk, &st->k); /* K = MᵀM by blocks of rows */
	nv_sym_mirror(&st->k);
	if (!(st->kd = nv_malloc(r + 1, sizeof(double))) ||
	    !(st->gain = nv_malloc(r + 1, sizeof(double))) ||
	    nv_mat_zeros(&st->wpt, n, md->m) < 0 || nv_mat_zeros(&st->s, n, r) < 0)
		return -1;
	for (size_t x = 0; x < r; x++)
		st->kd[x] = st->k.d[x * r + x];
	if (gptq_target(st, md, c, pi) < 0)
		return -1;
	for (size_t j = 0; j < n; j++) {
		const int8_t *sv = nv_sgn_row(&md->p[pi].sv, perm[j]);
		double *sj = nv_row(&st->s, j);
		for (size_t k = 0; k < r; k++)
			sj[k] = sv[k];
		st->g[j] = md->p[pi].g[perm[j]];
	}
	return 0;
}

static int gptq_v_inner(nv_bm *md, const nv_tctx *c, size_t pi, uint64_t *flips)
{
	gptq_state st;
	const uint32_t *perm = c->hc->perm;
	size_t n = md->n, r = md->r;

	if (gptq_setup(&st, md, c, pi) < 0)
		goto fail;
	for (size_t b0 = 0; b0 < n; b0 += GPTQ_BLOCK)
		if (gptq_block(&st, b0, b0 + GPTQ_BLOCK < n ? b0 + GPTQ_BLOCK : n) < 0)
			goto fail;
	for (size_t j = 0; j < n; j++) {
		int8_t *sv = nv_sgn_row(&md->p[pi].sv, perm[j]);
		const double *sj = nv_row(&st.s, j);
		for (size_t k = 0; k < r; k++)
			sv[k] = sj[k] > 0.0 ? 1 : -1;
		md->p[pi].g[perm[j]] = st.g[j];
	}
	*flips = st.flips;
	gptq_free(&st);
	return 0;
fail:
	gptq_free(&st);
	return -1;
}

int nv_gptq_v(nv_bm *md, const nv_tctx *c, size_t pi, uint64_t *flips)
{
	double t = nv_now();
	uint64_t f = 0;
	int rc = gptq_v_inner(md, c, pi, &f);

	nv_prof_add(c->prof, "gptq_v", nv_now() - t, 1);
	nv_prof_add(c->prof, "gptq_v.flips", 0.0, f);
	if (flips)
		*flips = f;
	return rc;
}

/* ----------------------------------------------------------------- refine */

static int fit_err(const nv_tctx *c, const nv_bm *md, nv_hbk *k, double *e)
{
	double t = nv_now();
	int rc = nv_herr_k(&c->fit, md, k, e);

	nv_prof_add(c->prof, "err", nv_now() - t, 0);
	return rc;
}

/*
 * one try on path pi of trial (a copy of the model), kind 0 the row flips,
 * 1 the column search, then its ALS sweeps and its fit error *e, followed
 * through the sweeps (nv_als_ke; a product of its own only where that is
 * not known); k: the model's H·B products on entry, the trial's on return
 * (those the sweeps left).  The flips move S_U only, so both products hold
 * through them; the column search moves path pi's S_V and g, and its
 * product goes before the search runs.  With c->try_abort the sweeps end
 * once the try cannot come below cur, the model's error (nv_als_bar).
 */
static int refine_try(nv_bm *trial, const nv_tctx *c, size_t pi, int kind, nv_pchol pc[2],
		      nv_hbk *k, double cur, double *e)
{
	int rc;

	if (kind == 0) {
		rc = nv_flip_u_k(trial, c, pi, k, NULL);
	} else {
		nv_hbk_void(k, pi);
		rc = nv_gptq_v(trial, c, pi, NULL);
	}
	if (rc == 0)
		rc = nv_als_bar(trial, c, c->try_sweeps, pc, k, e, c->try_abort ? cur : NAN);
	if (rc == 0 && !isfinite(*e))
		rc = fit_err(c, trial, k, e);
	return rc;
}

/* the tries of a refinement share the paths' g-step factors (nv_als_pc):
 * a try moves one path's signs from the model the last factors were of.
 * The model's H·B products pass to each try, and stay with the model only
 * when the try is kept (a try that is not leaves none: the next makes them).
 * kept (NULL: none) and *cur (NULL: none; NaN: not known) hold the model's
 * products and fit error from a call before, and are left for the next */
static int refine_sweeps(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *kept,
			 double *cur_io)
{
	nv_hbk own = {{{0}}}, *k = kept ? kept : &own;
	double cur = cur_io ? *cur_io : NAN, e;
	int rc = isfinite(cur) ? 0 : fit_err(c, md, k, &cur);

	for (int s = 0; s < sweeps && rc == 0; s++)
		for (size_t pi = 0; pi < md->np && rc == 0; pi++)
			for (int kind = 0; kind < 2 && rc == 0; kind++) {
				nv_bm trial;
				if ((rc = nv_bm_copy(&trial, md)) < 0)
					break;
				rc = refine_try(&trial, c, pi, kind, pc, k, cur, &e);
				if (rc == 0 && e < cur) {
					nv_bm_free(md);
					*md = trial;
					cur = e;
				} else {
					nv_bm_free(&trial);
					nv_hbk_free(k);
				}
			}
	nv_hbk_free(&own);
	if (rc < 0 && kept)
		nv_hbk_free(kept);
	if (cur_io)
		*cur_io = rc < 0 ? NAN : cur;
	return rc < 0 ? -1 : 0;
}

int nv_refine_pc(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2])
{
	return refine_sweeps(md, c, sweeps, pc, NULL, NULL);
}

int nv_refine_kept(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k,
		   double *cur)
{
	return refine_sweeps(md, c, sweeps, pc, k, cur);
}

int nv_refine(nv_bm *md, const nv_tctx *c, int sweeps)
{
	nv_pchol pc[2] = {{0}, {0}};
	int rc = refine_sweeps(md, c, sweeps, pc, NULL, NULL);

	nv_pchol_free(&pc[0]);
	nv_pchol_free(&pc[1]);
	return rc;
}

/* ------------------------------------------------------------------- init */

/* row weights of the ITQ: the latents' row norms, vp's scaled by √d */
static void itq_weights(const nv_tctx *c, const nv_mat *up, const nv_mat *vp, double *wu,
			double *wv)
{
	for (size_t i = 0; i < up->r; i++)
		wu[i] = cblas_dnrm2((int)up->c, nv_row(up, i), 1);
	for (size_t j = 0; j < vp->r; j++)
		wv[j] = cblas_dnrm2((int)vp->c, nv_row(vp, j), 1) * c->hc->sqd[j];
}

/*
 * the rotated latents of W at rank r from its whitened basis (kept in
 * c->wlat for every candidate rank).  Where the context holds W's products
 * (c->hold) the latents stay beside the ITQ's inputs (nv_itq_weighted); a
 * large W's are spent on the inputs and made again for the rotation's
 * product, so that they are not held through the ITQ steps (the same bits)
 */
static int w_rotated(const nv_tctx *c, size_t r, double *wu, double *wv, nv_mat *uo, nv_mat *vo)
{
	const nv_mat *t = c->w;
	nv_lat_metric mw = { &c->hc->hf, c->hc->l.d ? &c->hc->l : NULL,
			     c->fit.wh.d ? &c->fit.wh : NULL, c->row_block, c->hold };
	nv_itq_cfg ic = { NV_ITQ_STEPS, c->itq_tol, c->row_block, c->itq_f32 };
	nv_mat up = {0}, vp = {0}, rot = {0};
	int rc = -1;

	if (!c->wlat->sig &&
	    nv_lat_basis_build(t, &mw, c->wlat->want ? c->wlat->want : r, c->prof, c->wlat) < 0)
		return -1;
	if (nv_latents_from(c->wlat, t, r, c->prof, &up, &vp) < 0)
		return -1;
	itq_weights(c, &up, &vp, wu, wv);
	if (c->hold) {
		rc = nv_itq_weighted(&up, &vp, wu, wv, &ic, c->prof, uo, vo, NULL);
	} else if (nv_itq_rotation_spend(&up, &vp, wu, wv, &ic, c->prof, &rot, NULL) == 0 &&
		   nv_latents_from(c->wlat, t, r, c->prof, &up, &vp) == 0 &&
		   nv_itq_apply_in(&up, &vp, &rot, c->row_block, c->prof) == 0) {
		*uo = up; /* rotated in place: the latents are the path's */
		*vo = vp;
		up = vp = (nv_mat){0};
		rc = 0;
	}
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&rot);
	return rc;
}

/* whitened latents of W (a NULL) or of its residual W − a·bᵀ, never formed
 * whole; the weighted ITQ; svid_path */
static int nvg_path(const nv_tctx *c, const nv_mat *a, const nv_mat *b, size_t r, nv_path *q)
{
	nv_mat up = {0}, vp = {0}, uo = {0}, vo = {0};
	size_t m = c->w->r, n = c->w->c;
	double *wu = nv_malloc(m, sizeof(double)), *wv = nv_malloc(n, sizeof(double));
	int rc = -1;

	if (!wu || !wv)
		goto out;
	if (!a) {
		if (w_rotated(c, r, wu, wv, &uo, &vo) < 0)
			goto out;
	} else {
		nv_lat_metric mt = { &c->hc->hf, c->hc->l.d ? &c->hc->l : NULL, NULL,
				     c->row_block, c->hold };
		if (nv_latents_minus(c->w, a, b, r, &mt, c->prof, &up, &vp) < 0)
			goto out;
		nv_itq_cfg ic = { NV_ITQ_STEPS, c->itq_tol, c->row_block, c->itq_f32 };
		itq_weights(c, &up, &vp, wu, wv);
		if (nv_itq_weighted(&up, &vp, wu, wv, &ic, c->prof, &uo, &vo, NULL) < 0)
			goto out;
		nv_mat_free(&up); /* the rotated latents are what the path is made of */
		nv_mat_free(&vp);
	}
	{
		double t0 = nv_now();
		rc = nv_svid_path_take(&uo, &vo, q);
		nv_prof_add(c->prof, "svid", nv_now() - t0, 0);
	}
out:
	free(wu);
	free(wv);
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&uo);
	nv_mat_free(&vo);
	return rc;
}

int nv_build_nvg_start(const nv_tctx *c, size_t r, nv_bm *md)
{
	memset(md, 0, sizeof(*md));
	md->m = c->w->r;
	md->n = c->w->c;
	md->r = r;
	if (nvg_path(c, NULL, NULL, r, &md->p[0]) < 0)
		return -1;
	md->np = 1;
	return 0;
}

/* the second path is fitted to W − A₀·B₀ᵀ (A₀ = h∘S·ℓ, B₀ = g∘V), taken
 * from W a block of rows at a time, never an m × n residual */
int nv_build_nvg_finish(const nv_tctx *c, size_t np, nv_bm *md)
{
	nv_mat a = {0}, b = {0};

	if (nv_als(md, c, 3) < 0)
		goto fail;
	if (np == 2) {
		if (nv_path_hsl(md, 0, &a) < 0 || nv_path_gs(md, 0, &b) < 0 ||
		    nvg_path(c, &a, &b, md->r, &md->p[1]) < 0)
			goto fail;
		nv_mat_free(&a);
		nv_mat_free(&b);
		md->np = 2;
		if (c->l_spend) /* l's last reader: a driver's one P2 candidate */
			nv_mat_free(c->l_spend);
		if (nv_als(md, c, 6) < 0)
			goto fail;
	}
	return 0;
fail:
	nv_mat_free(&a);
	nv_mat_free(&b);
	nv_bm_free(md);
	return -1;
}

int nv_build_nvg_init(const nv_tctx *c, size_t r, size_t np, nv_bm *md)
{
	if (nv_build_nvg_start(c, r, md) < 0)
		return -1;
	return nv_build_nvg_finish(c, np, md);
}
