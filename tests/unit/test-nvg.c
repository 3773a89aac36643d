/* test-nvg.c - the NVG encoder on the seed's synthetic layer (TAP) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "f16.h"
#include "hctx.h"
#include "nvg.h"
#include "prof.h"
#include "svid.h"
#include "synth.h"
#include "tap.h"

static nv_mat W, H;
static nv_mat32 H32; /* H's f32 form (H is f32-exact): the SEL Gram as read */

/* tr(E hf Eᵀ) by the direct formula */
static double direct_err(const nv_bm *md, const nv_mat *h)
{
	nv_mat rec;
	double e;

	nv_bm_recon(md, -1, &rec);
	for (size_t i = 0; i < rec.r * rec.c; i++)
		rec.d[i] = W.d[i] - rec.d[i];
	nv_herr_direct(&rec, h, &e);
	nv_mat_free(&rec);
	return e;
}

/* the column-sequential search written the seed's way: one column at a
 * time, its error fed to every later column of the block row by row */
static void ref_gptq_v(nv_bm *md, const nv_hctx *hc, size_t pi)
{
	size_t m = md->m, n = md->n, r = md->r;
	nv_mat mm, k, wt, wpt, s;
	double *g = malloc(n * sizeof(double)), *bv = malloc(r * sizeof(double));
	double *ks = malloc(r * sizeof(double)), *e = malloc(m * sizeof(double));

	nv_path_hsl(md, pi, &mm);
	nv_gemm_new(&mm, 1, &mm, 0, &k);
	if (md->np > 1) {
		nv_bm_recon(md, (int)pi, &wt);
		for (size_t i = 0; i < m * n; i++)
			wt.d[i] = W.d[i] - wt.d[i];
	} else {
		nv_mat_copy(&wt, &W);
	}
	nv_mat_zeros(&wpt, n, m);
	nv_mat_zeros(&s, n, r);
	for (size_t j = 0; j < n; j++) {
		for (size_t i = 0; i < m; i++)
			wpt.d[j * m + i] = wt.d[i * n + hc->perm[j]];
		for (size_t k = 0; k < r; k++)
			s.d[j * r + k] = md->p[pi].sv.d[hc->perm[j] * r + k];
	}
	for (size_t b0 = 0; b0 < n; b0 += 128) {
		size_t b1 = b0 + 128 < n ? b0 + 128 : n;
		nv_mat errt;
		nv_mat_zeros(&errt, b1 - b0, m);
		for (size_t j = b0; j < b1; j++) {
			double *sj = s.d + j * r, gj, ss = 0, sb = 0;
			for (size_t x = 0; x < r; x++) {
				bv[x] = 0;
				for (size_t i = 0; i < m; i++)
					bv[x] += mm.d[i * r + x] * wpt.d[j * m + i];
				ks[x] = 0;
				for (size_t y = 0; y < r; y++)
					ks[x] += k.d[x * r + y] * sj[y];
			}
			for (size_t x = 0; x < r; x++) {
				sb += bv[x] * sj[x];
				ss += sj[x] * ks[x];
			}
			gj = sb / fmax(ss, 1e-300);
			if (gj < 0) {
				for (size_t x = 0; x < r; x++)
					sj[x] = -sj[x], ks[x] = -ks[x];
				gj = -gj;
			}
			for (int round = 0; round < 3; round++) {
				size_t nf = 0;
				double g2;
				while (nf < 4 * r) {
					size_t best = 0;
					double bd = 0;
					for (size_t x = 0; x < r; x++) {
						double d = -4 * gj * gj * sj[x] * (ks[x] - k.d[x * r + x] * sj[x]) +
							   4 * gj * sj[x] * bv[x];
						if (x == 0 || d < bd)
							bd = d, best = x;
					}
					if (bd >= -1e-12 * (gj * gj * k.d[best * r + best] + 1e-300))
						break;
					for (size_t y = 0; y < r; y++)
						ks[y] -= 2 * sj[best] * k.d[best * r + y];
					sj[best] = -sj[best];
					nf++;
				}
				sb = ss = 0;
				for (size_t x = 0; x < r; x++) {
					sb += bv[x] * sj[x];
					ss += sj[x] * ks[x];
				}
				g2 = sb / fmax(ss, 1e-300);
				if (g2 < 0) {
					for (size_t x = 0; x < r; x++)
						sj[x] = -sj[x], ks[x] = -ks[x];
					g2 = -g2;
				}
				if (nf == 0 || fabs(g2 - gj) <= 1e-9 * fabs(gj)) {
					gj = g2;
					break;
				}
				gj = g2;
			}
			for (size_t i = 0; i < m; i++) {
				double q = 0;
				for (size_t x = 0; x < r; x++)
					q += mm.d[i * r + x] * sj[x];
				e[i] = (wpt.d[j * m + i] - gj * q) / nv_hctx_uc_at(hc, j, j);
			}
			for (size_t jj = j + 1; jj < b1; jj++)
				for (size_t i = 0; i < m; i++)
					wpt.d[jj * m + i] -= nv_hctx_uc_at(hc, j, jj) * e[i];
			memcpy(errt.d + (j - b0) * m, e, m * sizeof(double));
			g[j] = gj;
		}
		for (size_t jj = b1; jj < n; jj++)
			for (size_t x = b0; x < b1; x++)
				for (size_t i = 0; i < m; i++)
					wpt.d[jj * m + i] -= nv_hctx_uc_at(hc, x, jj) * errt.d[(x - b0) * m + i];
		nv_mat_free(&errt);
	}
	for (size_t j = 0; j < n; j++) {
		for (size_t k = 0; k < r; k++)
			md->p[pi].sv.d[hc->perm[j] * r + k] = s.d[j * r + k] > 0.0 ? 1 : -1;
		md->p[pi].g[hc->perm[j]] = g[j];
	}
	free(g), free(bv), free(ks), free(e);
	nv_mat_free(&mm), nv_mat_free(&k), nv_mat_free(&wt), nv_mat_free(&wpt), nv_mat_free(&s);
}

static double fit_err(const nv_tctx *c, const nv_bm *md)
{
	double e = NAN;

	nv_herr(&c->fit, md, &e);
	return e;
}

static void test_low_rank_error(const nv_tctx *c, const nv_bm *md)
{
	nv_mat hff;
	double lr = fit_err(c, md), d;

	nv_mat32_widen(&c->hc->hf, &hff);
	d = direct_err(md, &hff);
	nv_mat_free(&hff);

	/* the factor formula and E·H·Eᵀ differ by cancellation only: 1e-9 relative */
	ok(fabs(lr - d) <= 1e-9 * d, "tr(E H Eᵀ) from the factors %.12g = direct %.12g", lr, d);
}

/* the stored fit error on the raw Gram H, from hf = H + δI and δ alone */
static void test_rel_raw(const nv_tctx *c, const nv_bm *md)
{
	nv_metric raw;
	double tr = 0.0, want, got = NAN, delta = nv_hctx_ridge(c->hc);

	for (size_t i = 0; i < 64; i++)
		tr += H.d[i * 64 + i];
	/* tr hf = (1 + ρ)·tr H: δ back to rounding (1e-14 relative) */
	near(delta, c->hc->rho * tr / 64.0, 1e-14 * delta, "the ridge %.6g from hf", delta);
	nv_metric_init(&raw, c->w, &H);
	nv_rel(&raw, md, &want);
	is_int(nv_rel_raw(&c->fit, delta, md, &got), 0, "the raw error from hf");
	/* tr(E H Eᵀ) = tr(E hf Eᵀ) − δ‖E‖²: equal but for the rounding of the
	 * subtraction, 1e-16 of δ‖E‖² each; 1e-10 allows δ‖E‖² up to 1e5 times
	 * the result */
	near(got, want, 1e-10 * want, "raw-Gram error %.12g from hf less its ridge = %.12g on H",
	     got, want);
	nv_metric_free(&raw);
	/* the metric on H held in f32 (H is f32-exact): the same error to the
	 * rounding of the blocked products, 1e-12 */
	nv_metric_init32(&raw, c->w, &H32);
	nv_rel(&raw, md, &got);
	near(got, want, 1e-12 * want, "on H held in f32: %.12g", got);
	nv_metric_free(&raw);
}

static void test_als_monotone(const nv_tctx *c)
{
	nv_bm md;
	double prev, now;
	int mono = 1;

	nv_build_dual_svid(&W, 16, 2, &md);
	prev = fit_err(c, &md);
	test_low_rank_error(c, &md);
	test_rel_raw(c, &md);
	for (int s = 0; s < 5; s++) {
		nv_als(&md, c, 1);
		now = fit_err(c, &md);
		/* an exact block minimum: the error may only move by rounding */
		if (!(now <= prev * (1 + 1e-9))) {
			diag("sweep %d: %.12g -> %.12g", s, prev, now);
			mono = 0;
		}
		prev = now;
	}
	ok(mono, "als never raises the H error over 5 sweeps (P=2, r=16)");
	nv_bm_free(&md);
}

/*
 * g of path p by nv_als_g against the normal equations made densely here:
 * with P = hsl(p)·S_Vᵀ (m × n) and R = W − (the other path), g minimises
 * tr((R − P·diag g)·hf·(R − P·diag g)ᵀ), so ((PᵀP) ∘ hf)·g = diag(Pᵀ·R·hf),
 * solved with the g step's own shift (1e-10 of the mean diagonal).  Both
 * are f64 solves of a 64-wide system, so 1e-9 of the largest |g| covers
 * their rounding.  Then M made 32 rows at a time; then ℓ_3 = 0 on each path, so that MᵀM (M =
 * hsl(p)) is singular and the g step's factor of it comes from M's QR.
 */
static double g_ref_gap(const nv_tctx *c, const nv_bm *md, size_t p)
{
	nv_mat m, sv, pm, res, prh, hf, a;
	double rhs[64], x[64], tr = 0.0, gap = 0.0, big = 0.0;

	nv_path_hsl(md, p, &m);
	nv_sgn_scaled(&md->p[p].sv, NULL, NULL, &sv);
	nv_gemm_new(&m, 0, &sv, 1, &pm);
	nv_bm_recon(md, (int)p, &res);
	for (size_t i = 0; i < 96 * 64; i++)
		res.d[i] = W.d[i] - res.d[i];
	nv_mat32_widen(&c->hc->hf, &hf);
	nv_gemm_new(&res, 0, &hf, 0, &prh); /* R·hf */
	nv_gemm_new(&pm, 1, &pm, 0, &a);    /* PᵀP */
	for (size_t j = 0; j < 64; j++) {
		rhs[j] = 0.0;
		for (size_t i = 0; i < 96; i++)
			rhs[j] += pm.d[i * 64 + j] * prh.d[i * 64 + j];
		for (size_t k = 0; k < 64; k++)
			a.d[j * 64 + k] *= hf.d[j * 64 + k];
		tr += a.d[j * 64 + j];
	}
	for (size_t j = 0; j < 64; j++)
		a.d[j * 64 + j] += 1e-10 * (tr / 64.0);
	nv_solve_spd(&a, rhs, x, 0.0);
	for (size_t j = 0; j < 64; j++) {
		gap = fmax(gap, fabs(x[j] - md->p[p].g[j]));
		big = fmax(big, fabs(x[j]));
	}
	nv_mat_free(&m), nv_mat_free(&sv), nv_mat_free(&pm), nv_mat_free(&res);
	nv_mat_free(&prh), nv_mat_free(&hf), nv_mat_free(&a);
	return gap / big;
}

static void test_g_step(const nv_tctx *c)
{
	nv_bm md;
	nv_tctx blk = *c; /* MᵀM summed over row blocks of 32 */

	blk.row_block = 32;
	nv_build_nvg_init(c, 16, 2, &md);
	for (int pass = 0; pass < 3; pass++)
		for (size_t p = 0; p < 2; p++) {
			if (pass == 2)
				md.p[p].l[3] = 0.0;
			is_int(nv_als_g(&md, pass == 1 ? &blk : c, p), 0, "g step of path %zu%s", p,
			       pass == 1 ? " (row blocks of 32)" : pass == 2 ? " (ℓ_3 = 0)" : "");
			double gap = g_ref_gap(c, &md, p);
			ok(gap <= 1e-9, "  the normal equations' g to %.2g of the largest", gap);
		}
	is_int(nv_als_g(&md, c, 2), -1, "no g step for a third path");
	nv_bm_free(&md);
}

/* a profile stage's count (0 when absent) */
static uint64_t prof_count(const nv_prof *p, const char *name)
{
	for (size_t i = 0; i < p->k; i++)
		if (!strcmp(p->e[i].name, name))
			return p->e[i].n;
	return 0;
}

/*
 * nv_als_ke's followed error against nv_herr's product of the model left:
 * 1 to 3 sweeps on one and two paths, with the g steps by PCG (factors
 * kept from the call before) and direct, and with an early stop at an ℓ
 * step.  Both are f64 sums of the same quantities in other orders, the PCG
 * solve 1e-12 from its minimum in the objective: 1e-9 of the error.
 */
static void test_als_err(nv_tctx *c)
{
	double worst = 0.0;
	int all = 1;
	uint64_t stops = 0;
	nv_prof prof;

	nv_prof_init(&prof);

	for (size_t np = 1; np <= 2; np++)
		for (int s = 1; s <= 3; s++)
			for (int mode = 0; mode < 3; mode++) {
				nv_bm md;
				nv_pchol pc[2] = {{0}, {0}};
				double e, ref, tol = c->als_tol;
				uint64_t its;
				nv_build_dual_svid(&W, 16, np, &md);
				c->g_pcg = mode == 1;
				c->prof = &prof;
				if (mode == 1) /* factors kept: the next call's g steps by PCG */
					nv_als_pc(&md, c, 1, pc);
				its = prof_count(&prof, "als.g.pcg");
				c->als_tol = mode == 2 ? 0.5 : 0.0; /* 2: stop at the second ℓ step */
				all &= nv_als_ke(&md, c, s, pc, NULL, &e) == 0;
				all &= mode != 1 || prof_count(&prof, "als.g.pcg") > its;
				stops += prof_count(&prof, "als.stop");
				c->als_tol = tol;
				c->g_pcg = 0;
				c->prof = NULL;
				nv_herr(&c->fit, &md, &ref);
				worst = fmax(worst, fabs(e - ref) / ref);
				nv_pchol_free(&pc[0]), nv_pchol_free(&pc[1]);
				nv_bm_free(&md);
			}
	ok(all && stops > 0 && worst <= 1e-9,
	   "als's followed error is nv_herr's (worst %.2g relative; PCG steps taken, %llu stops)",
	   worst, (unsigned long long)stops);
	nv_prof_free(&prof);
}

/* a and b hold the same signs and scales, bit for bit */
static int same_model(const nv_bm *a, const nv_bm *b)
{
	int same = a->np == b->np && a->r == b->r;

	for (size_t p = 0; same && p < a->np; p++) {
		same &= !memcmp(a->p[p].su.d, b->p[p].su.d, a->m * a->r);
		same &= !memcmp(a->p[p].sv.d, b->p[p].sv.d, a->n * a->r);
		same &= !memcmp(a->p[p].h, b->p[p].h, a->m * sizeof(double));
		same &= !memcmp(a->p[p].g, b->p[p].g, a->n * sizeof(double));
		same &= !memcmp(a->p[p].l, b->p[p].l, a->r * sizeof(double));
	}
	return same;
}

/*
 * ALS's early stop (c->als_tol): the ℓ step's error, whw − λ·rhs, is the
 * FIT error of the model it leaves (the least squares' minimum; it differs
 * from nv_herr by the solve's ridge, 1e-10 of the system's mean diagonal
 * times |λ|², and by cancellation against whw: 1e-9 of whw covers both);
 * a tolerance every sweep meets stops at the second ℓ step, leaving the
 * bits of one sweep and one ℓ step; tolerance 0 runs every sweep; a small
 * one never runs more steps than the count, and never raises the error
 */
static void test_als_tol(nv_tctx *c)
{
	nv_bm a, b, d;
	nv_prof prof;
	double el, eh, e0, e1;

	nv_build_dual_svid(&W, 16, 2, &a);
	nv_bm_copy(&b, &a);
	nv_bm_copy(&d, &a);
	nv_als(&a, c, 1);
	nv_als_l(&a, c, &el);
	eh = fit_err(c, &a);
	ok(fabs(el - eh) <= 1e-9 * c->fit.whw, "ℓ step's error %.12g = nv_herr's %.12g", el, eh);
	nv_prof_init(&prof);
	c->prof = &prof;
	c->als_tol = 1e300;
	nv_als(&b, c, 6);
	ok(prof_count(&prof, "als.l") == 2 && prof_count(&prof, "als.g") == 1 &&
	   prof_count(&prof, "als.stop") == 1 && same_model(&a, &b),
	   "als_tol 1e300: one sweep and one ℓ step, bit for bit (ℓ %llu, g %llu, stops %llu)",
	   (unsigned long long)prof_count(&prof, "als.l"),
	   (unsigned long long)prof_count(&prof, "als.g"),
	   (unsigned long long)prof_count(&prof, "als.stop"));
	nv_prof_free(&prof);
	nv_prof_init(&prof);
	c->als_tol = 0.0;
	nv_bm_free(&b);
	nv_bm_copy(&b, &d);
	nv_als(&b, c, 6);
	ok(prof_count(&prof, "als.l") == 6 && prof_count(&prof, "als.stop") == 0,
	   "als_tol 0: all 6 sweeps");
	nv_prof_free(&prof);
	nv_prof_init(&prof);
	c->als_tol = 1e-3;
	e0 = fit_err(c, &d);
	nv_als(&d, c, 6);
	e1 = fit_err(c, &d);
	ok(prof_count(&prof, "als.l") <= 6 && prof_count(&prof, "als.g") <= 6 && e1 <= e0,
	   "als_tol 1e-3: %llu ℓ and %llu g steps of at most 6, error %.6g -> %.6g",
	   (unsigned long long)prof_count(&prof, "als.l"),
	   (unsigned long long)prof_count(&prof, "als.g"), e0, e1);
	nv_prof_free(&prof);
	c->prof = NULL;
	c->als_tol = 0.0;
	nv_bm_free(&a);
	nv_bm_free(&b);
	nv_bm_free(&d);
}

/*
 * the H·B_0 that path 1's g step makes serves the next sweep's ℓ step (g_0
 * has not moved since): with direct g solves, 4 sweeps in one call are 4
 * calls of one sweep bit for bit, and count 3 products H·B_0 (2n²r flops
 * each) fewer
 */
static void test_als_kept_hb(const nv_tctx *c)
{
	nv_bm a, b;
	uint64_t fa, fb, hb;

	nv_build_dual_svid(&W, 16, 2, &a);
	nv_bm_copy(&b, &a);
	nv_flops_reset();
	nv_als(&a, c, 4);
	fa = nv_flops();
	nv_flops_reset();
	for (int s = 0; s < 4; s++)
		nv_als(&b, c, 1);
	fb = nv_flops();
	hb = 2ull * a.n * a.n * a.r;
	ok(same_model(&a, &b) && fb - fa == 3 * hb,
	   "kept H·B_0: 4 sweeps = 4 × 1 bit for bit, %llu flops fewer (3 × 2n²r = %llu)",
	   (unsigned long long)(fb - fa), (unsigned long long)(3 * hb));
	nv_bm_free(&a);
	nv_bm_free(&b);
}

/*
 * g_every 2: the g step on sweeps 0, 2, 4… of a run.  Two sweeps leave the
 * g of one sweep bit for bit (the second moved ℓ and h only) and count 2
 * ℓ steps and one g step; the error never rises; 3 sweeps in one run are
 * those 2 and a run of 1 (whose first sweep takes g) bit for bit
 */
static void test_g_every(nv_tctx *c)
{
	nv_bm a, b, d;
	nv_prof prof;
	double e0, e1, e2;
	int same_g = 1;

	nv_build_dual_svid(&W, 16, 2, &a);
	nv_bm_copy(&b, &a);
	nv_bm_copy(&d, &a);
	e0 = fit_err(c, &a);
	nv_als(&a, c, 1);
	e1 = fit_err(c, &a);
	nv_prof_init(&prof);
	c->prof = &prof;
	c->g_every = 2;
	nv_als(&b, c, 2);
	e2 = fit_err(c, &b);
	for (size_t p = 0; p < a.np; p++)
		same_g &= !memcmp(a.p[p].g, b.p[p].g, a.n * sizeof(double));
	ok(same_g && !same_model(&a, &b) && prof_count(&prof, "als.l") == 2 &&
	   prof_count(&prof, "als.g") == 1 && e1 <= e0 && e2 <= e1,
	   "g_every 2: 2 sweeps leave one sweep's g bits, ℓ %llu g %llu steps, error %.9g -> %.9g -> %.9g",
	   (unsigned long long)prof_count(&prof, "als.l"),
	   (unsigned long long)prof_count(&prof, "als.g"), e0, e1, e2);
	c->prof = NULL;
	nv_prof_free(&prof);
	nv_als(&d, c, 3);
	nv_als(&b, c, 1);
	ok(same_model(&b, &d), "g_every 2: a run of 3 sweeps = runs of 2 and 1, bit for bit");
	c->g_every = 1;
	nv_bm_free(&a);
	nv_bm_free(&b);
	nv_bm_free(&d);
}

/* every product k holds is nv_metric_hb's of its path's gs, bit for bit */
static int hbk_holds(const nv_tctx *c, const nv_bm *md, const nv_hbk *k)
{
	int same = 1;

	for (size_t p = 0; p < md->np; p++) {
		nv_mat b = {0}, hb = {0};
		if (!k->hb[p].d)
			continue;
		nv_path_gs(md, p, &b);
		nv_metric_hb(&c->fit, &b, &hb);
		same &= hb.r == k->hb[p].r && hb.c == k->hb[p].c &&
			!memcmp(hb.d, k->hb[p].d, hb.r * hb.c * sizeof(double));
		nv_mat_free(&b), nv_mat_free(&hb);
	}
	return same;
}

/*
 * the kept products H·B_p (nv_hbk): nv_herr_k, nv_flip_u_k and nv_als_k
 * give the bits of their versions without (fresh products) and leave in k
 * only products that hold for the model, each read one where it saves one
 * (2n²r flops)
 */
static void test_hbk(const nv_tctx *c)
{
	nv_bm a, b;
	nv_hbk k = {{{0}}};
	double e, ek;
	uint64_t f0, f1, hb;

	nv_build_nvg_init(c, 16, 2, &a);
	hb = 2ull * a.n * a.n * a.r;
	nv_herr(&c->fit, &a, &e);
	nv_herr_k(&c->fit, &a, &k, &ek);
	ok(e == ek && k.hb[0].d && k.hb[1].d && hbk_holds(c, &a, &k),
	   "nv_herr_k: nv_herr's bits, both products left in k and holding");
	nv_flops_reset();
	nv_herr_k(&c->fit, &a, &k, &ek);
	f1 = nv_flops();
	nv_flops_reset();
	nv_herr(&c->fit, &a, &e);
	f0 = nv_flops();
	ok(e == ek && f0 - f1 == 2 * hb, "nv_herr_k from k: the same bits, 2 products fewer (%llu)",
	   (unsigned long long)(f0 - f1));
	nv_bm_copy(&b, &a);
	nv_flops_reset();
	nv_flip_u(&a, c, 1, NULL);
	f0 = nv_flops();
	nv_flops_reset();
	nv_flip_u_k(&b, c, 1, &k, NULL);
	f1 = nv_flops();
	ok(same_model(&a, &b) && f0 - f1 == hb && hbk_holds(c, &b, &k),
	   "nv_flip_u_k: nv_flip_u's signs, one product fewer, k still holds");
	nv_flops_reset();
	nv_als(&a, c, 2);
	f0 = nv_flops();
	nv_flops_reset();
	nv_als_k(&b, c, 2, (nv_pchol[2]){{0}, {0}}, &k);
	f1 = nv_flops();
	ok(same_model(&a, &b) && f1 < f0 && hbk_holds(c, &b, &k) && (k.hb[0].d || k.hb[1].d),
	   "nv_als_k: nv_als's bits, fewer flops (%llu against %llu), what k keeps holds",
	   (unsigned long long)f1, (unsigned long long)f0);
	nv_hbk_free(&k);
	nv_bm_free(&a);
	nv_bm_free(&b);
}

/*
 * nv_refine against the refinement written out with fresh products (each
 * try: a copy, its sign move, nv_als_pc, nv_herr, kept when lower): the same
 * bits, with fewer flops
 */
static void test_refine_kept(nv_tctx *c)
{
	nv_bm a, b;
	nv_pchol pa[2] = {{0}, {0}}, pb[2] = {{0}, {0}};
	double cur, e;
	uint64_t f0, f1;

	c->g_pcg = 1;
	nv_build_nvg_init(c, 16, 2, &a);
	nv_bm_copy(&b, &a);
	nv_flops_reset();
	nv_herr(&c->fit, &a, &cur);
	for (int s = 0; s < 2; s++)
		for (size_t pi = 0; pi < a.np; pi++)
			for (int kind = 0; kind < 2; kind++) {
				nv_bm t;
				nv_bm_copy(&t, &a);
				if (kind == 0)
					nv_flip_u(&t, c, pi, NULL);
				else
					nv_gptq_v(&t, c, pi, NULL);
				nv_als_pc(&t, c, c->try_sweeps, pa);
				nv_herr(&c->fit, &t, &e);
				if (e < cur) {
					nv_bm_free(&a);
					a = t;
					cur = e;
				} else {
					nv_bm_free(&t);
				}
			}
	f0 = nv_flops();
	nv_flops_reset();
	nv_refine_pc(&b, c, 2, pb);
	f1 = nv_flops();
	ok(same_model(&a, &b) && f1 < f0,
	   "nv_refine with kept products: the fresh refinement's bits, %llu flops against %llu",
	   (unsigned long long)f1, (unsigned long long)f0);
	for (int p = 0; p < 2; p++)
		nv_pchol_free(&pa[p]), nv_pchol_free(&pb[p]);
	nv_bm_free(&a);
	nv_bm_free(&b);
	c->g_pcg = 0;
}

/*
 * nv_als_pc with the g steps by PCG: factors kept from a call on the model
 * before a sign move serve the next call (nv_refine's tries): its error is
 * the fresh call's to 1e-9 (both minimise the same blocks to PCG's 1e-12 of
 * the objective), never above the start's, and it factors less (fewer flops)
 */
static void test_als_kept_factors(nv_tctx *c)
{
	nv_bm a, b;
	nv_pchol pc[2] = {{0}, {0}};
	double e0, ea, eb;
	uint64_t fa, fb;

	c->g_pcg = 1;
	nv_build_nvg_init(c, 16, 2, &a);
	nv_als_pc(&a, c, 3, pc); /* the factors of the start */
	nv_flip_u(&a, c, 0, NULL);
	nv_bm_copy(&b, &a);
	e0 = fit_err(c, &a);
	nv_flops_reset();
	nv_als(&a, c, 3);
	fa = nv_flops();
	nv_flops_reset();
	nv_als_pc(&b, c, 3, pc);
	fb = nv_flops();
	ea = fit_err(c, &a);
	eb = fit_err(c, &b);
	ok(fabs(ea - eb) <= 1e-9 * ea && eb <= e0 * (1 + 1e-9),
	   "kept factors: the fresh call's error (%.12g, %.12g), not above the start's %.12g", ea,
	   eb, e0);
	ok(fb < fa, "kept factors: fewer flops (%llu against %llu)", (unsigned long long)fb,
	   (unsigned long long)fa);
	nv_pchol_free(&pc[0]);
	nv_pchol_free(&pc[1]);
	nv_bm_free(&a);
	nv_bm_free(&b);
	c->g_pcg = 0;
}

/* refinement sweeps (--refine), the g step direct: k sweeps are k single
 * sweeps in a row, bit for bit (a sweep starts from the model alone), and
 * each lowers the FIT error
 * or leaves it: exactly, as a try is kept only when it lowers it */
static void test_sweeps(const nv_tctx *c, const nv_bm *init)
{
	nv_bm a, b;
	double e[5];
	int mono = 1;

	nv_bm_copy(&a, init);
	e[0] = fit_err(c, &a);
	for (int k = 1; k <= 4; k++) {
		nv_refine(&a, c, 1);
		e[k] = fit_err(c, &a);
		mono &= e[k] <= e[k - 1];
	}
	ok(mono, "sweeps 1-4 never raise the FIT error (%.6g %.6g %.6g %.6g %.6g)", e[0], e[1],
	   e[2], e[3], e[4]);
	ok(e[4] < e[0], "four sweeps lower it (%.6g -> %.6g)", e[0], e[4]);
	nv_bm_copy(&b, init);
	nv_refine(&b, c, 4);
	ok(same_model(&a, &b), "refine(4) is refine(1) four times, bit for bit");
	nv_bm_free(&a);
	nv_bm_free(&b);
}

static void test_stages(const nv_tctx *c, const nv_hctx *hc)
{
	nv_bm init, q, ref, dual, one, two;
	double e_init, e_q, e_ref, d1, d2;
	int same = 1;
	uint64_t flips;

	nv_build_nvg_init(c, 16, 2, &init);
	e_init = fit_err(c, &init);
	nv_bm_copy(&q, &init);
	nv_flip_u(&q, c, 0, &flips);
	e_q = fit_err(c, &q);
	ok(e_q <= e_init * (1 + 1e-9), "flip_u never raises the error (%.6g -> %.6g, %llu flips)",
	   e_init, e_q, (unsigned long long)flips);
	nv_bm_free(&q);

	/* gptq_v: the blocked BLAS form against the seed's column loop */
	nv_bm_copy(&q, &init);
	nv_bm_copy(&ref, &init);
	nv_gptq_v(&q, c, 1, NULL);
	ref_gptq_v(&ref, hc, 1);
	for (size_t i = 0; i < 64 * 16; i++)
		same &= q.p[1].sv.d[i] == ref.p[1].sv.d[i];
	ok(same, "gptq_v picks the same signs as the column-by-column reference");
	same = 1;
	for (size_t j = 0; j < 64; j++)
		same &= fabs(q.p[1].g[j] - ref.p[1].g[j]) <= 1e-9 * fabs(ref.p[1].g[j]) + 1e-300;
	ok(same, "gptq_v column scales agree with the reference to 1e-9 relative");
	nv_bm_free(&q);
	nv_bm_free(&ref);

	test_sweeps(c, &init);
	nv_bm_copy(&q, &init);
	nv_refine(&q, c, 2);
	e_ref = fit_err(c, &q);
	ok(e_ref <= e_init * (1 + 1e-12), "refine never raises the error (%.6g -> %.6g)", e_init,
	   e_ref);
	test_low_rank_error(c, &q);
	nv_build_dual_svid(&W, 16, 2, &dual);
	ok(e_ref < fit_err(c, &dual), "nvg beats dual-svid in the H metric (%.6g < %.6g)", e_ref,
	   fit_err(c, &dual));
	nv_build_dual_svid(&W, 16, 1, &one);
	nv_build_dual_svid(&W, 16, 2, &two);
	{
		nv_mat r1, r2;
		nv_bm_recon(&one, -1, &r1);
		nv_bm_recon(&two, -1, &r2);
		d1 = d2 = 0;
		for (size_t i = 0; i < 96 * 64; i++) {
			d1 += (W.d[i] - r1.d[i]) * (W.d[i] - r1.d[i]);
			d2 += (W.d[i] - r2.d[i]) * (W.d[i] - r2.d[i]);
		}
		nv_mat_free(&r1);
		nv_mat_free(&r2);
	}
	ok(d2 < d1, "two dual-svid paths beat one at the same rank (%.6g < %.6g)", d2, d1);

	/* pack round-trip through the BLR dequantizer */
	{
		uint8_t *bytes;
		size_t len;
		nv_bm st;
		nv_mat rec;
		float *deq = malloc(96 * 64 * sizeof(float));
		int fine = 1;
		is_int(nv_pack(&q, &bytes, &len, &st), 0, "pack accepts the refined model");
		is_int(blr_dequantize(bytes, len, deq), 0, "the payload dequantizes");
		nv_bm_recon(&st, -1, &rec);
		/* the dequantizer sums in f32: 1e-4 relative covers its rounding */
		for (size_t i = 0; i < 96 * 64; i++)
			fine &= fabs(deq[i] - rec.d[i]) < 1e-4 * (1 + fabs(rec.d[i]));
		ok(fine, "dequantized payload = stored model within f32 rounding");
		fine = 1;
		for (size_t k = 0; k < 16; k++)
			fine &= st.p[0].l[k] == (double)nv_f16_to_f32(nv_f32_to_f16((float)st.p[0].l[k]));
		ok(fine, "stored scales are f16 values");
		free(deq);
		free(bytes);
		nv_mat_free(&rec);
		nv_bm_free(&st);
	}
	nv_bm_free(&init), nv_bm_free(&q), nv_bm_free(&dual), nv_bm_free(&one),
		nv_bm_free(&two);
}

/* H error of a payload's dequantized matrix, relative */
static double payload_rel(const uint8_t *b, size_t len)
{
	float *deq = malloc(96 * 64 * sizeof(float));
	nv_mat e;
	double num, den;

	blr_dequantize(b, len, deq);
	nv_mat_zeros(&e, 96, 64);
	for (size_t i = 0; i < 96 * 64; i++)
		e.d[i] = W.d[i] - deq[i];
	nv_herr_direct(&e, &H, &num);
	nv_herr_direct(&W, &H, &den);
	free(deq);
	nv_mat_free(&e);
	return sqrt(num / den);
}

static void test_drivers(const nv_hctx *hc)
{
	nv_enc_opts o;
	nv_enc_result d, n, n2, n3, n2b;
	size_t r;
	blr_clip clip;
	double ed, en;

	nv_enc_opts_default(&o);
	o.bpw = 3.0;
	o.method = NV_METHOD_DUAL_SVID;
	is_int(nv_encode(&W, NULL, NULL, &o, &d), 0, "dual-svid encodes at 3 bpw");
	blr_rank(96, 64, 3.0, 2, 1.0, &r, &clip);
	is_int(d.r, r, "dual-svid rank is the rule's (P2)");
	ok(d.bits == blr_bits(96, 64, r, 2), "dual-svid strict bit count");
	is_int(blr_verify_shape(d.bytes, d.len, 96, 64), 0, "dual-svid payload validates");
	ok(strncmp(d.line, "P2 r", 4) == 0 && strstr(d.line, " frob "), "dual-svid line: %s", d.line);

	o.method = NV_METHOD_NVG;
	is_int(nv_encode(&W, hc, &H32, &o, &n), 0, "nvg encodes at 3 bpw");
	blr_rank(96, 64, 3.0, (size_t)n.paths, 1.0, &r, &clip);
	is_int(n.r, r, "nvg rank is the rule's for the picked P%d", n.paths);
	ok(n.bits == blr_bits(96, 64, r, (size_t)n.paths), "nvg strict bit count");
	is_int(blr_verify_shape(n.bytes, n.len, 96, 64), 0, "nvg payload validates");
	ok(strncmp(n.line, "pick P", 6) == 0 && strstr(n.line, "| sel: init ") &&
		   strstr(n.line, " P2 ") && strstr(n.line, " P1 ") && strstr(n.line, "| stored fit "),
	   "nvg line: %s", n.line);
	ed = payload_rel(d.bytes, d.len);
	en = payload_rel(n.bytes, n.len);
	ok(en < ed, "nvg payload error %.4f below dual-svid's %.4f", en, ed);
	/* stored SEL error in the result = the dequantized payload's (f32 sums: 1e-5) */
	near(n.sel_err, en, 1e-5 * en + 1e-6, "reported sel error matches the payload's");
	/* H is the FIT Gram too: the fit error, from hf less its ridge, is the same */
	near(n.fit_err, en, 1e-5 * en + 1e-6, "reported fit error matches the payload's");

	o.threads = 3;
	is_int(nv_encode(&W, hc, &H32, &o, &n2), 0, "nvg again with 3 row workers");
	ok(n2.len == n.len && !memcmp(n2.bytes, n.bytes, n.len) && !strcmp(n2.line, n.line),
	   "same inputs give the same bytes and line (1 vs 3 row workers)");
	o.threads = 1;
	o.paths = 1;
	is_int(nv_encode(&W, hc, &H32, &o, &n3), 0, "nvg forced to one path");
	ok(n3.paths == 1 && strstr(n3.line, "| sel: P1 only | stored fit ") && !strstr(n3.line, "init"),
	   "forced P1 line: %s", n3.line);
	o.paths = 0;
	o.sweeps = 3;
	is_int(nv_encode(&W, hc, &H32, &o, &n2b), 0, "nvg with 3 refinement sweeps");
	ok(n2b.len == n.len && memcmp(n2b.bytes, n.bytes, n.len), "3 sweeps give other bytes than 2");
	o.sweeps = NV_SWEEPS_DEFAULT;
	nv_enc_result_free(&n2b);
	is_int(nv_encode(&W, hc, &H32, &o, &n2b), 0, "nvg with the default sweeps set");
	ok(n2b.len == n.len && !memcmp(n2b.bytes, n.bytes, n.len), "the default is 2 sweeps");
	nv_enc_result_free(&d), nv_enc_result_free(&n), nv_enc_result_free(&n2),
		nv_enc_result_free(&n3), nv_enc_result_free(&n2b);
}

/* a SEL Gram read for each use: H32 copied, the reads counted, the
 * reader failing from read fail_at on (0: never) or reading a narrower one */
typedef struct {
	int loads, fail_at, narrow;
} sel_reader;

static int sel_read(void *arg, nv_mat32 *out)
{
	sel_reader *sr = arg;
	size_t n = sr->narrow ? 32 : H32.r;

	sr->loads++;
	if (sr->fail_at && sr->loads >= sr->fail_at) {
		nv_seterr("the test's reader fails at read %d", sr->loads);
		return -1;
	}
	*out = (nv_mat32){ n, n, malloc(n * n * sizeof(float)), NULL };
	for (size_t i = 0; i < n; i++)
		memcpy(out->d + i * n, H32.d + i * H32.c, n * sizeof(float));
	return 0;
}

/*
 * the SEL Gram read for each use (nv_metric_init_load, o.sel_load): errors
 * those on the held Gram to rounding, the Gram held only between a measure
 * and its release, W·H never; the encoders' bytes and lines the same as with the Gram held, the
 * Gram read once for W·H and once per measuring (the init's note, the pick,
 * the stored errors); a reader's failure and a Gram of another width are
 * errors with their reason
 */
static void test_sel_load(const nv_hctx *hc)
{
	nv_enc_opts o;
	nv_enc_result a, b;
	nv_metric held, mt;
	sel_reader sr = { 0, 0, 0 };
	nv_bm md;
	double e1, e2;

	nv_build_dual_svid(&W, 8, 2, &md);
	nv_metric_init32(&held, &W, &H32);
	is_int(nv_metric_init_load(&mt, &W, sel_read, &sr), 0, "metric_init_load");
	ok(sr.loads == 1 && mt.held && !mt.held->d, "init reads the Gram once, for W·H, and lets it go");
	nv_rel(&held, &md, &e1);
	nv_rel(&mt, &md, &e2);
	/* W·(H·B) for (W·H)·B: the sums in another order, 1e-13 of an error of 0.1–1 */
	ok(fabs(e1 - e2) <= 1e-13 && sr.loads == 2 && mt.held->d && !mt.wh.d,
	   "the error read afresh is the held one's (%.3g apart), W·H not kept", fabs(e1 - e2));
	nv_metric_release(&mt);
	ok(!mt.held->d, "released: nothing held");
	nv_metric_free(&mt);
	nv_metric_free(&held);
	nv_bm_free(&md);

	nv_enc_opts_default(&o);
	o.bpw = 3.0;
	is_int(nv_encode(&W, hc, &H32, &o, &a), 0, "nvg with the SEL Gram held");
	o.sel_load = sel_read;
	o.sel_arg = &sr;
	sr.loads = 0;
	is_int(nv_encode(&W, hc, NULL, &o, &b), 0, "nvg with the SEL Gram read for each use");
	ok(a.len == b.len && !memcmp(a.bytes, b.bytes, a.len) && !strcmp(a.line, b.line),
	   "the same bytes and line");
	is_int(sr.loads, 4, "read four times: W·H, the init's note, the pick, the stored errors "
			    "(no early choice measured: the one-path candidate trails on fit)");
	nv_enc_result_free(&b);
	o.pick_lead = -1.0;
	sr.loads = 0;
	nv_encode(&W, hc, NULL, &o, &b);
	ok(sr.loads == 4 && a.len == b.len && !memcmp(a.bytes, b.bytes, a.len),
	   "and so without the early choice: four times (%d), the same bytes", sr.loads);
	o.pick_lead = NV_PICK_LEAD_DEFAULT;
	nv_enc_result_free(&a), nv_enc_result_free(&b);
	sr = (sel_reader){ 0, 3, 0 };
	is_int(nv_encode(&W, hc, NULL, &o, &b), -1, "a reader failing at the pick: -1");
	ok(strstr(nv_err(), "fails at read 3") != NULL, "with the reader's reason: %s", nv_err());
	sr = (sel_reader){ 0, 0, 1 };
	is_int(nv_encode(&W, hc, NULL, &o, &b), -1, "a narrower SEL Gram: -1");
	ok(strstr(nv_err(), "64 columns but the Gram is 32x32") != NULL, "with its reason: %s",
	   nv_err());
	o.method = NV_METHOD_DUAL_SVID;
	sr = (sel_reader){ 0, 0, 0 };
	nv_encode(&W, NULL, &H32, &o, &a);
	is_int(nv_encode(&W, NULL, NULL, &o, &b), 0, "dual-svid with the SEL Gram read when measured");
	ok(!strcmp(a.line, b.line) && strstr(b.line, " sel ") && sr.loads == 2,
	   "dual-svid: the same line (%s), read for W·H and the measure", b.line);
	nv_enc_result_free(&a), nv_enc_result_free(&b);
}

/* one model's packed bytes */
static int packed(const nv_bm *md, uint8_t **b, size_t *len)
{
	return nv_pack(md, b, len, NULL);
}

/*
 * nv_refine_pc: two calls of one sweep with one pc = one call of two sweeps,
 * byte for byte; and the driver's pick_after: the chosen candidate is the
 * one with the lower SEL error after pick_after sweeps of both, and it ends
 * with the bytes of that path count's own full encode (so with the full
 * pick's bytes whenever the early pick agrees with it)
 */
static void test_pick_after(nv_tctx *c, const nv_hctx *hc)
{
	nv_bm init, a, b;
	nv_pchol pa[2] = {{0}, {0}}, pb[2] = {{0}, {0}};
	uint8_t *ba = NULL, *bb = NULL;
	size_t la = 0, lb = 0;

	nv_build_nvg_init(c, 16, 2, &init);
	nv_bm_copy(&a, &init);
	nv_bm_copy(&b, &init);
	nv_refine_pc(&a, c, 2, pa);
	nv_refine_pc(&b, c, 1, pb);
	nv_refine_pc(&b, c, 1, pb);
	ok(packed(&a, &ba, &la) == 0 && packed(&b, &bb, &lb) == 0 && la == lb &&
		   !memcmp(ba, bb, la),
	   "refine_pc: 1 + 1 sweeps with one pc give the bytes of 2 sweeps");
	free(bb);
	nv_pchol_free(&pb[0]), nv_pchol_free(&pb[1]);
	nv_bm_free(&b);
	{
		nv_hbk k = {{{0}}};
		double cur = NAN, after1;
		nv_bm_copy(&b, &init);
		nv_refine_kept(&b, c, 1, pb, &k, &cur);
		after1 = cur;
		nv_refine_kept(&b, c, 1, pb, &k, &cur);
		ok(packed(&b, &bb, &lb) == 0 && la == lb && !memcmp(ba, bb, la) && isfinite(after1) &&
			   cur <= after1,
		   "refine_kept: 1 + 1 sweeps with the products and fit error carried: the bytes of "
		   "2 sweeps, the error %.6g then %.6g", after1, cur);
		nv_hbk_free(&k);
	}
	free(ba), free(bb);
	nv_pchol_free(&pa[0]), nv_pchol_free(&pa[1]), nv_pchol_free(&pb[0]), nv_pchol_free(&pb[1]);
	nv_bm_free(&a), nv_bm_free(&b), nv_bm_free(&init);

	for (int after = 1; after <= 2; after++) {
		nv_enc_opts o;
		nv_enc_result full, early, own;
		char t2[16], t1[16];
		double e1, e2;

		nv_enc_opts_default(&o);
		o.bpw = 3.0;
		o.sweeps = 3;
		o.pick_lead = -1.0; /* the full refinement */
		nv_encode(&W, hc, &H32, &o, &full);
		o.pick_after = after;
		is_int(nv_encode(&W, hc, &H32, &o, &early), 0, "pick after %d of 3 sweeps", after);
		snprintf(t2, sizeof t2, " P2@%d ", after);
		snprintf(t1, sizeof t1, " P1@%d ", after);
		ok(strstr(early.line, t2) && strstr(early.line, t1),
		   "its line notes both candidates after %d sweeps: %s", after, early.line);
		e2 = strtod(strstr(early.line, "P2@") + 5, NULL);
		e1 = strtod(strstr(early.line, "P1@") + 5, NULL);
		ok(early.paths == (e1 < e2 ? 1 : 2), "it keeps the lower (P1 %.4f, P2 %.4f): P%d", e1,
		   e2, early.paths);
		o.pick_after = 0;
		o.paths = early.paths;
		nv_encode(&W, hc, &H32, &o, &own);
		ok(own.len == early.len && !memcmp(own.bytes, early.bytes, own.len),
		   "and ends with the bytes of P%d's own encode of 3 sweeps", early.paths);
		ok(early.paths != full.paths ||
			   (full.len == early.len && !memcmp(full.bytes, early.bytes, full.len)),
		   "the bytes of the full pick when the picks agree (P%d, P%d)", early.paths,
		   full.paths);
		nv_enc_result_free(&full), nv_enc_result_free(&early), nv_enc_result_free(&own);
	}
}

/* a budget where synth_wide's one-path candidate leads after the first sweep */
#define PICK_LEAD_BPW 0.8

/* the SEL errors a line notes after one sweep: 0 when it notes none */
static int noted_at1(const char *line, double *e2, double *e1)
{
	const char *p2 = strstr(line, " P2@1 "), *p1 = strstr(line, " P1@1 ");

	if (!p2 || !p1)
		return 0;
	*e2 = strtod(p2 + 6, NULL);
	*e1 = strtod(p1 + 6, NULL);
	return 1;
}

static int same_payload(const nv_enc_result *a, const nv_enc_result *b)
{
	return a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

/*
 * a wide layer (96 × 256, synth_shape's) where the one-path candidate leads
 * after the first sweep at a low budget, as it does on SmolLM2's down_proj
 * and k_proj; w, h32 and hc
 */
static int synth_wide(nv_mat *w, nv_mat32 *h32, nv_hctx *hc)
{
	nv_mat h = {0};
	int rc = synth_shape(96, 256, 7, w, &h) < 0 || synth_f32(&h, h32) < 0 ||
			 nv_hctx_build(h.d, h.r, 0.03, hc) < 0
		 ? -1 : 0;

	nv_mat_free(&h);
	return rc;
}

/*
 * the driver's pick_lead on the wide layer at a budget where the one-path
 * candidate leads after the first sweep (by d, read from pick_after 1's
 * line): a lead asked below d chooses it then, noting both candidates after
 * one sweep, with pick_after 1's bytes and line; a lead above d and off
 * (< 0) refine both through, with the full refinement's bytes and line
 */
static void test_pick_lead(double bpw)
{
	nv_mat w = {0};
	nv_mat32 h32 = {0};
	nv_hctx hc = {0};
	nv_enc_opts o;
	nv_enc_result off, after1, below, above, remade;
	double e1 = 0.0, e2 = 0.0, d;
	int noted;

	if (synth_wide(&w, &h32, &hc) < 0) {
		ok(0, "setup of the wide layer: %s", nv_err());
		return;
	}
	nv_enc_opts_default(&o);
	o.bpw = bpw;
	o.sweeps = 3;
	o.pick_lead = -1.0;
	nv_encode(&w, &hc, &h32, &o, &off);
	o.pick_after = 1;
	nv_encode(&w, &hc, &h32, &o, &after1);
	noted = noted_at1(after1.line, &e2, &e1);
	ok(noted && e1 < e2, "bpw %.2f: the one-path candidate leads after a sweep: %s", bpw,
	   after1.line);
	d = 1.0 - e1 / e2;
	o.pick_after = 0;
	o.pick_lead = 0.5 * d;
	is_int(nv_encode(&w, &hc, &h32, &o, &below), 0, "pick_lead %.4f, below its lead %.4f",
	       o.pick_lead, d);
	ok(below.paths == 1 && same_payload(&below, &after1) && !strcmp(below.line, after1.line),
	   "it keeps P1 after a sweep, with pick_after 1's bytes and line: %s", below.line);
	o.pick_lead = fmin(0.5, 2.0 * d);
	nv_encode(&w, &hc, &h32, &o, &above);
	ok(same_payload(&above, &off) && !strcmp(above.line, off.line) &&
		   !strstr(above.line, "@1"),
	   "pick_lead %.4f, above it: both refined through, the bytes and line of off: %s",
	   o.pick_lead, above.line);
	ok(off.paths != 1 || same_payload(&off, &below),
	   "and where the full refinement keeps P1 too, the early choice's bytes are its");
	/* nothing held, as for a large tensor: the idle candidate's H·B products
	 * go while the other refines, and are made again when it goes on */
	o.hold_max = 0;
	nv_encode(&w, &hc, &h32, &o, &remade);
	ok(same_payload(&remade, &off) && !strcmp(remade.line, off.line),
	   "and nothing held (the idle candidate's products made again): the bytes and line of off");
	nv_enc_result_free(&off), nv_enc_result_free(&after1);
	nv_enc_result_free(&below), nv_enc_result_free(&above), nv_enc_result_free(&remade);
	nv_mat_free(&w);
	free(h32.d);
	nv_hctx_free(&hc);
}

/* model md with path 0's signs negated in its even rows of S_V and the
 * first half of its rank, a pattern no scale undoes: a sign move far worse
 * than md, as a refinement try that is not kept */
static void negate_half(nv_bm *md)
{
	for (size_t j = 0; j < md->n; j += 2)
		for (size_t k = 0; k < md->r / 2; k++)
			md->p[0].sv.d[j * md->r + k] = (int8_t)-md->p[0].sv.d[j * md->r + k];
}

/* nv_als_bar on md from fresh factors (NaN bar: nv_als_ke's run) */
static int als_bar_run(nv_bm *md, const nv_tctx *c, int sweeps, double bar, double *e)
{
	nv_pchol pc[2] = {{0}, {0}};
	int rc = nv_als_bar(md, c, sweeps, pc, NULL, e, bar);

	nv_pchol_free(&pc[0]), nv_pchol_free(&pc[1]);
	return rc;
}

/*
 * nv_als_bar on a try far above the bar (the dual-SVID model after three
 * ALS sweeps, fit error e0, its signs then partly negated and its scales
 * fitted to them by eight more, as a column search that lost): three sweeps
 * asked, the first leaves it above e0 by more than two of its gains, and it
 * ends there, with the model and error of one sweep (nv_als_ke's bits) and
 * one als.abort; every sweep run leaves it above e0 as well (the try would
 * not have been kept).  With the bar above the try's error (a try that can
 * be kept) or NaN (none) it runs all three sweeps, nv_als_ke's bits
 */
static void test_als_bar(nv_tctx *c)
{
	nv_bm m0, one, bar, all, high;
	double e0, ef, e1, eb, ea, eh;
	nv_prof prof;

	nv_build_dual_svid(&W, 16, 2, &m0);
	als_bar_run(&m0, c, 3, NAN, &e0);
	negate_half(&m0);
	als_bar_run(&m0, c, 8, NAN, &ef); /* its scales fitted: what sweeps gain now is little */
	nv_bm_copy(&one, &m0), nv_bm_copy(&bar, &m0), nv_bm_copy(&all, &m0), nv_bm_copy(&high, &m0);
	nv_prof_init(&prof);
	c->prof = &prof;
	als_bar_run(&one, c, 1, NAN, &e1);
	ok(prof_count(&prof, "als.abort") == 0, "without a bar no run ends early");
	is_int(als_bar_run(&bar, c, 3, e0, &eb), 0, "a try far above the bar");
	ok(prof_count(&prof, "als.abort") == 1 && prof_count(&prof, "als.l") == 2 &&
		   same_model(&bar, &one) && eb == e1 && eb > e0,
	   "ends after its first sweep: one sweep's model and error %.6g, above the bar %.6g", eb,
	   e0);
	als_bar_run(&all, c, 3, NAN, &ea);
	ok(ea > e0 && ea < eb, "all three sweeps: %.6g, still above the bar", ea);
	als_bar_run(&high, c, 3, 2.0 * e1, &eh);
	ok(prof_count(&prof, "als.abort") == 1 && same_model(&high, &all) && eh == ea,
	   "a bar above the try's error, or none: every sweep run");
	c->prof = NULL;
	nv_prof_free(&prof);
	nv_bm_free(&m0), nv_bm_free(&one), nv_bm_free(&bar), nv_bm_free(&all), nv_bm_free(&high);
}

/* gptq_v on both paths of init against the column-by-column reference:
 * *same &= the same signs, *gmax the largest relative gap of a column scale */
static void gptq_against_ref(const nv_tctx *c, const nv_hctx *hc, const nv_bm *init, size_t n,
			     int *same, double *gmax)
{
	nv_bm q, ref;

	for (size_t pi = 0; pi < 2; pi++) {
		nv_bm_copy(&q, init);
		nv_bm_copy(&ref, init);
		nv_gptq_v(&q, c, pi, NULL);
		ref_gptq_v(&ref, hc, pi);
		for (size_t i = 0; i < n * 16; i++)
			*same &= q.p[pi].sv.d[i] == ref.p[pi].sv.d[i];
		for (size_t j = 0; j < n; j++)
			*gmax = fmax(*gmax, fabs(q.p[pi].g[j] - ref.p[pi].g[j]) /
						    fabs(ref.p[pi].g[j]));
		nv_bm_free(&q);
		nv_bm_free(&ref);
	}
}

/* gptq_v over several 128-column blocks (n = 300): the trailing updates */
static void test_gptq_blocks(void)
{
	nv_mat w0 = W, x, h;
	nv_hctx hc;
	nv_tctx c;
	nv_bm init;
	tap_rng rng = {99};
	size_t m = 40, n = 300;
	int same = 1;
	double gmax = 0;

	nv_mat_zeros(&W, m, n);
	nv_mat_zeros(&x, n, 2 * n);
	for (size_t i = 0; i < m * n; i++)
		W.d[i] = rng_normal(&rng);
	for (size_t i = 0; i < n * 2 * n; i++)
		x.d[i] = rng_normal(&rng) * (1.0 + (double)(i / (2 * n) % 7));
	nv_syrk_new(1.0 / (double)(2 * n), &x, 0, &h);
	for (size_t i = 0; i < n * n; i++)
		h.d[i] = (float)h.d[i]; /* a Gram's values */
	if (!ok(nv_hctx_build(h.d, n, 0.01, &hc) == 0 && nv_tctx_init(&c, &W, &hc, NULL, 1) == 0,
		"gptq blocks: the context of a 300-wide Gram"))
		return;
	nv_build_nvg_init(&c, 16, 2, &init);
	gptq_against_ref(&c, &hc, &init, n, &same, &gmax);
	ok(same, "gptq_v over 3 blocks (n = 300) picks the reference's signs, both paths");
	/* blocked trsm/gemm against column-by-column feedback: rounding only */
	ok(gmax < 1e-9, "and its column scales to 1e-9 relative (%.2g)", gmax);
	/* the path's M (m × r) made 7 rows at a time, never whole: the same */
	same = 1;
	gmax = 0;
	c.row_block = 7;
	gptq_against_ref(&c, &hc, &init, n, &same, &gmax);
	c.row_block = NV_ROW_BLOCK_DEFAULT;
	ok(same && gmax < 1e-9, "and with M made 7 of its 40 rows at a time: the same signs, "
	   "scales to 1e-9 (%.2g)", gmax);
	{
		nv_metric sel;
		double lr, d;
		nv_metric_init(&sel, &W, &h);
		nv_herr(&sel, &init, &lr);
		d = direct_err(&init, &h);
		ok(fabs(lr - d) <= 1e-9 * d, "raw-Gram error from the factors = direct (%.12g, %.12g)",
		   lr, d);
		nv_metric_free(&sel);
	}
	nv_bm_free(&init);
	nv_tctx_free(&c);
	nv_hctx_free(&hc);
	nv_mat_free(&x);
	nv_mat_free(&h);
	nv_mat_free(&W);
	W = w0;
}

/* nv_herr's terms written whole: ⟨A_p, X_p⟩ with X_p = (W H) B_p, or W (H
 * B_p) where W·H is not kept, and ⟨A_pᵀA_q, B_pᵀ H B_q⟩, in its order */
static double herr_whole(const nv_metric *mt, const nv_bm *md)
{
	double e = mt->whw;

	for (size_t p = 0; p < md->np; p++) {
		nv_mat a, b, hb, x;
		nv_path_hsl(md, p, &a);
		nv_path_gs(md, p, &b);
		nv_gemm_new(mt->h, 0, &b, 0, &hb);
		if (mt->wh.d)
			nv_gemm_new(&mt->wh, 0, &b, 0, &x);
		else
			nv_gemm_new(mt->w, 0, &hb, 0, &x);
		e -= 2.0 * nv_dot_all(&a, &x);
		nv_mat_free(&x);
		for (size_t q = 0; q < md->np; q++) {
			nv_mat aq, bq, hbq, aa, bhb;
			nv_path_hsl(md, q, &aq);
			nv_path_gs(md, q, &bq);
			nv_gemm_new(mt->h, 0, &bq, 0, &hbq);
			nv_gemm_new(&a, 1, &aq, 0, &aa);
			nv_gemm_new(&b, 1, &hbq, 0, &bhb);
			e += nv_dot_all(&aa, &bhb);
			nv_mat_free(&aq), nv_mat_free(&bq), nv_mat_free(&hbq);
			nv_mat_free(&aa), nv_mat_free(&bhb);
		}
		nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&hb);
	}
	return e;
}

/*
 * nv_herr takes ⟨A_p, X_p⟩ NV_ROW_BLOCK_DEFAULT rows at a time: on 2500 rows
 * (three blocks, the last short), one path and two, with W·H kept and not,
 * its error has the bits of the terms written whole (one thread: OpenBLAS's
 * row partition is then the same in both) and is the direct formula's to
 * 1e-9
 */
static void test_herr_blocks(void)
{
	size_t m = 2500, n = 24, r = 6;
	nv_mat w, x, h, wh = {0};
	nv_metric mt;
	nv_bm md;
	tap_rng rng = {7};
	int threads = nv_get_threads();

	nv_set_threads(1);
	nv_mat_zeros(&w, m, n);
	nv_mat_zeros(&x, n, 3 * n);
	for (size_t i = 0; i < m * n; i++)
		w.d[i] = rng_normal(&rng);
	for (size_t i = 0; i < n * 3 * n; i++)
		x.d[i] = rng_normal(&rng);
	nv_syrk_new(1.0 / (double)(3 * n), &x, 0, &h);
	nv_build_dual_svid(&w, r, 2, &md);
	nv_metric_init(&mt, &w, &h);
	for (size_t np = 1; np <= 2; np++)
		for (int kept = 1; kept >= 0; kept--) {
			double e = NAN, ref, d;
			nv_mat rec;
			md.np = np;
			if (!kept) {
				wh = mt.wh;
				mt.wh = (nv_mat){0};
			}
			nv_herr(&mt, &md, &e);
			ref = herr_whole(&mt, &md);
			nv_bm_recon(&md, -1, &rec);
			for (size_t i = 0; i < m * n; i++)
				rec.d[i] = w.d[i] - rec.d[i];
			nv_herr_direct(&rec, &h, &d);
			nv_mat_free(&rec);
			ok(memcmp(&e, &ref, sizeof e) == 0 && fabs(e - d) <= 1e-9 * d,
			   "nv_herr on %zu rows, %zu path(s), W·H %s: the whole terms' bits (%.17g, %.17g), "
			   "direct %.12g", m, np, kept ? "kept" : "not kept", e, ref, d);
			if (!kept)
				mt.wh = wh;
		}
	md.np = 2;
	nv_bm_free(&md);
	nv_metric_free(&mt);
	nv_mat_free(&w);
	nv_mat_free(&x);
	nv_mat_free(&h);
	nv_set_threads(threads);
}

/* the per-head row gauge: block parsing, the invE factors, the undo on bytes */
static void test_gauge(void)
{
	size_t *st, nb;
	nv_mat w, h;
	double d[10], e[3] = {0, 0, 0}, want[3], med;
	int fine = 1;

	is_int(nv_parse_head_blocks("2x3,1x4", 10, &st, &nb), 0, "head blocks 2x3,1x4 over 10 rows");
	ok(nb == 3 && st[0] == 0 && st[1] == 3 && st[2] == 6 && st[3] == 10, "boundaries 0 3 6 10");
	free(st);
	is_int(nv_parse_head_blocks("2x3", 10, &st, &nb), -1, "blocks short of the rows are refused");
	is_int(nv_parse_head_blocks("4x3", 10, &st, &nb), -1, "blocks beyond the rows are refused");
	is_int(nv_parse_head_blocks("2x", 10, &st, &nb), -1, "a malformed block is refused");

	nv_mat_zeros(&w, 10, 8);
	nv_mat_eye(&h, 8);
	for (size_t i = 0; i < 80; i++)
		w.d[i] = (double)(i % 9) - 4.0 + (i / 8 >= 6 ? 30.0 : 0.0);
	nv_parse_head_blocks("2x3,1x4", 10, &st, &nb);
	is_int(nv_row_gauge(&w, &h, st, nb, 0, d), 0, "row gauge with H = I");
	for (size_t i = 0; i < 80; i++)
		e[i / 8 < 3 ? 0 : i / 8 < 6 ? 1 : 2] += w.d[i] * w.d[i];
	/* the median of three energies is the middle one */
	med = fmax(fmin(e[0], e[1]), fmin(fmax(e[0], e[1]), e[2]));
	for (int j = 0; j < 3; j++)
		want[j] = sqrt(fmin(fmax(med / e[j], 1.0 / 32), 32.0));
	for (size_t i = 0; i < 10; i++)
		fine &= fabs(d[i] - want[i < 3 ? 0 : i < 6 ? 1 : 2]) < 1e-15;
	ok(fine, "d = √clamp(median/energy) per block (%.4f %.4f %.4f)", d[0], d[3], d[6]);
	{
		nv_bm md;
		uint8_t *b;
		size_t len;
		float *before = malloc(80 * sizeof(float)), *after = malloc(80 * sizeof(float));
		nv_build_dual_svid(&w, 8, 1, &md);
		nv_pack(&md, &b, &len, NULL);
		blr_dequantize(b, len, before);
		is_int(blr_gauge_undo(b, len, d, 10), 0, "undo on the payload");
		blr_dequantize(b, len, after);
		fine = 1;
		/* h is re-rounded to f16 after the division: 2⁻¹⁰ relative */
		for (size_t i = 0; i < 80; i++)
			fine &= fabs(after[i] - before[i] / d[i / 8]) <= 1e-3 * fabs(before[i] / d[i / 8]) + 1e-6;
		ok(fine, "the undo divides each row by its factor");
		is_int(blr_gauge_undo(b, len, d, 9), -1, "factors of the wrong length are refused");
		free(b), free(before), free(after);
		nv_bm_free(&md);
	}
	free(st);
	nv_mat_free(&w), nv_mat_free(&h);
}

/* a fixed rank instead of a budget; P=1 of an auto choice gets P=2's bits */
static void test_fixed_rank(const nv_hctx *hc)
{
	nv_enc_opts o;
	nv_enc_result r;
	size_t r1;
	blr_clip clip;

	nv_enc_opts_default(&o);
	o.rank = 16;
	o.paths = 2;
	is_int(nv_encode(&W, hc, &H32, &o, &r), 0, "nvg at a fixed rank 16, P=2");
	is_int(r.r, 16, "the rank is the one asked");
	nv_enc_result_free(&r);
	o.paths = 0;
	is_int(nv_encode(&W, hc, &H32, &o, &r), 0, "nvg at a fixed rank 16, P auto");
	blr_rank(96, 64, blr_bits(96, 64, 16, 2) / (96.0 * 64.0), 1, 1.0, &r1, &clip);
	ok(r.paths == 2 ? r.r == 16 : r.r == r1, "P%d r%zu (P1 would be r%zu)", r.paths, r.r, r1);
	nv_enc_result_free(&r);
	o.rank = 12;
	is_int(nv_encode(&W, hc, &H32, &o, &r), -1, "a rank that is not a multiple of 8 is refused");
	o.rank = 72;
	is_int(nv_encode(&W, hc, &H32, &o, &r), -1, "a rank above the cap (64) is refused");
	ok(strstr(nv_err(), "[8, 64]") != NULL, "reason: %s", nv_err());
	o.method = NV_METHOD_DUAL_SVID;
	is_int(nv_encode(&W, NULL, NULL, &o, &r), -1, "dual-svid refuses it too");
	o.rank = 24;
	is_int(nv_encode(&W, NULL, NULL, &o, &r), 0, "dual-svid at a fixed rank 24");
	ok(r.r == 24 && r.paths == 2, "P%d r%zu", r.paths, r.r);
	nv_enc_result_free(&r);
}

static void test_refusal(void)
{
	nv_bm md;
	uint8_t *b = NULL;
	size_t len;

	nv_build_dual_svid(&W, 8, 1, &md);
	md.p[0].h[3] = 1e9; /* after rebalancing, ℓ·rms(h)·rms(g) overflows f16 */
	is_int(nv_pack(&md, &b, &len, NULL), 1, "pack refuses scales beyond f16");
	ok(strstr(nv_err(), "f16") != NULL, "the refusal names the f16 limit: %s", nv_err());
	md.p[0].h[3] = NAN;
	is_int(nv_pack(&md, &b, &len, NULL), 1, "pack refuses a non-finite scale");
	nv_bm_free(&md);
}

/*
 * W·hf is not kept for a W as tall as wide (here 96 × 64): every product
 * takes W·(hf·B) or hf·(Wᵀ·M).  The same steps with W·hf kept differ only
 * in the order of f64 products (a few ulps each); through three ALS sweeps,
 * whose small systems are well conditioned here, and one flip_u pass, the
 * scales agree to 1e-8 of their size and the signs exactly
 */
static void test_wh_dropped(const nv_tctx *c)
{
	nv_tctx keep = *c;
	nv_bm a, b;
	double worst = 0.0;
	int signs = 1;

	ok(c->fit.wh.d == NULL, "W·hf not kept for a 96x64 W");
	keep.fit.wh = (nv_mat){ 0 };
	if (nv_gemm32b_new(&W, &c->hc->hf, &keep.fit.wh) < 0) {
		ok(0, "W·hf: %s", nv_err());
		return;
	}
	nv_build_dual_svid(&W, 16, 2, &a);
	nv_bm_copy(&b, &a);
	nv_als(&a, c, 3);
	nv_als(&b, &keep, 3);
	nv_flip_u(&a, c, 0, NULL);
	nv_flip_u(&b, &keep, 0, NULL);
	nv_als(&a, c, 1);
	nv_als(&b, &keep, 1);
	for (size_t p = 0; p < 2; p++) {
		signs &= !memcmp(a.p[p].su.d, b.p[p].su.d, a.m * a.r) &&
			 !memcmp(a.p[p].sv.d, b.p[p].sv.d, a.n * a.r);
		for (size_t i = 0; i < a.m; i++)
			worst = fmax(worst, fabs(a.p[p].h[i] - b.p[p].h[i]) / fabs(b.p[p].h[i]));
		for (size_t j = 0; j < a.n; j++)
			worst = fmax(worst, fabs(a.p[p].g[j] - b.p[p].g[j]) / fabs(b.p[p].g[j]));
		for (size_t k = 0; k < a.r; k++)
			worst = fmax(worst, fabs(a.p[p].l[k] - b.p[p].l[k]) / fabs(b.p[p].l[k]));
	}
	ok(signs && worst <= 1e-8,
	   "ALS and flip_u without W·hf: the signs of the kept product's, scales within %.2g", worst);
	nv_bm_free(&a);
	nv_bm_free(&b);
	nv_mat_free(&keep.fit.wh);
}

/* the largest relative difference of two models' scales, and whether their
 * signs agree exactly */
static double scales_apart(const nv_bm *a, const nv_bm *b, int *signs)
{
	double worst = 0.0;

	*signs = a->np == b->np;
	for (size_t p = 0; p < a->np && *signs; p++) {
		*signs &= !memcmp(a->p[p].su.d, b->p[p].su.d, a->m * a->r) &&
			  !memcmp(a->p[p].sv.d, b->p[p].sv.d, a->n * a->r);
		for (size_t i = 0; i < a->m; i++)
			worst = fmax(worst, fabs(a->p[p].h[i] - b->p[p].h[i]) / fabs(b->p[p].h[i]));
		for (size_t j = 0; j < a->n; j++)
			worst = fmax(worst, fabs(a->p[p].g[j] - b->p[p].g[j]) / fabs(b->p[p].g[j]));
		for (size_t k = 0; k < a->r; k++)
			worst = fmax(worst, fabs(a->p[p].l[k] - b->p[p].l[k]) /
						    fmax(fabs(b->p[p].l[k]), 1e-300));
	}
	return worst;
}

/*
 * --als-prec f32 (nv_tctx_als32) against f64, with W·hf kept (wide: wh set
 * by hand, as above) and not: w32 is the f32 rounding of W·hf or of W; from
 * one dual-svid start, three ALS sweeps, a flip_u pass and one sweep more
 * give the same signs here (no sign is that close to its flip), and each
 * sweep's fit error (nv_herr, f64) within 1e-5 of f64's, never rising.  The
 * scales themselves move more (some 0.5% here: the g system of this ridge
 * of 1e-3 is ill conditioned, and its objective flat along what moves), so
 * the objective is the measure, as it is the encoder's
 */
static void als32_case(const nv_tctx *c, int with_wh)
{
	nv_tctx t = *c;
	const nv_mat *src;
	nv_bm a, b;
	double ea, eb, last = INFINITY, gap = 0.0, worst;
	int signs, same = 1, falls = 1;

	t.w32 = (nv_mat32){ 0 };
	t.fit.wh = (nv_mat){ 0 };
	if ((with_wh && nv_gemm32b_new(&W, &c->hc->hf, &t.fit.wh) < 0) || nv_tctx_als32(&t) < 0) {
		ok(0, "als32 setup: %s", nv_err());
		return;
	}
	src = with_wh ? &t.fit.wh : &W;
	for (size_t i = 0; i < W.r * W.c; i++)
		same &= t.w32.d[i] == (float)src->d[i];
	ok(t.als32 && t.w32.r == W.r && t.w32.c == W.c && same, "als32 (%s): w32 is %s in f32",
	   with_wh ? "W·hf kept" : "W·hf not kept", with_wh ? "W·hf" : "W");
	nv_build_dual_svid(&W, 16, 2, &a);
	nv_bm_copy(&b, &a);
	for (int s = 0; s < 4; s++) {
		if (s == 3) {
			nv_flip_u(&a, &t, 0, NULL);
			nv_flip_u(&b, c, 0, NULL);
		}
		nv_als(&a, &t, 1);
		nv_als(&b, c, 1);
		nv_herr(&t.fit, &a, &ea);
		nv_herr(&c->fit, &b, &eb);
		gap = fmax(gap, fabs(ea - eb) / eb);
		falls &= s == 3 || ea <= last * (1 + 1e-12);
		last = ea;
	}
	worst = scales_apart(&a, &b, &signs);
	ok(signs, "als32 (%s): the signs of f64's (scales %.2g apart)",
	   with_wh ? "W·hf kept" : "W·hf not kept", worst);
	ok(gap <= 1e-5 && gap > 0.0 && falls,
	   "als32 (%s): each sweep's fit error within %.2g of f64's (not the same bits), falling",
	   with_wh ? "W·hf kept" : "W·hf not kept", gap);
	nv_bm_free(&a);
	nv_bm_free(&b);
	nv_mat32_free(&t.w32);
	nv_mat_free(&t.fit.wh);
}

static void test_als32(const nv_tctx *c)
{
	als32_case(c, 0);
	als32_case(c, 1);
}

/*
 * The steps whose m × r pieces are taken c->row_block rows at a time (the
 * h step, flip_u, the ℓ and g steps) against the whole rows at once: blocks
 * of 5 rows (not dividing 64, so the last block is short) and of 1.  Only
 * the order of f64 sums over rows may differ, so the signs agree and the
 * scales within 1e-10 of their size through an init, a flip_u pass and two
 * refinement sweeps (the small systems here are well conditioned)
 */
static void test_row_blocks(const nv_tctx *c)
{
	static const size_t sizes[] = {5, 1};

	for (size_t t = 0; t < 2; t++) {
		nv_tctx whole = *c, blocked = *c;
		nv_bm a, b;
		double worst;
		int signs, rc;
		whole.row_block = (size_t)1 << 30;
		blocked.row_block = sizes[t];
		rc = nv_build_nvg_init(&whole, 16, 2, &a);
		rc |= nv_build_nvg_init(&blocked, 16, 2, &b);
		if (rc < 0) {
			ok(0, "row blocks of %zu: %s", sizes[t], nv_err());
			return;
		}
		worst = scales_apart(&b, &a, &signs);
		ok(signs && worst <= 1e-10, "init in row blocks of %zu: the same signs, scales within %.2g",
		   sizes[t], worst);
		nv_flip_u(&a, &whole, 0, NULL);
		nv_flip_u(&b, &blocked, 0, NULL);
		nv_flip_u(&a, &whole, 1, NULL);
		nv_flip_u(&b, &blocked, 1, NULL);
		nv_refine(&a, &whole, 2);
		nv_refine(&b, &blocked, 2);
		worst = scales_apart(&b, &a, &signs);
		ok(signs && worst <= 1e-10,
		   "flip_u and refine in row blocks of %zu: the same signs, scales within %.2g", sizes[t],
		   worst);
		nv_bm_free(&a);
		nv_bm_free(&b);
	}
}

/* the init in two halves gives its bytes; nv_sgn_scaled_to writes what
 * nv_sgn_scaled makes, at any row stride */
static void test_init_halves(const nv_tctx *c)
{
	nv_bm a, b;
	nv_mat o;
	double buf[7 * 5];
	int same;

	nv_build_nvg_init(c, 16, 2, &a);
	if (nv_build_nvg_start(c, 16, &b) < 0 || nv_build_nvg_finish(c, 2, &b) < 0) {
		ok(0, "init halves: %s", nv_err());
		nv_bm_free(&a);
		return;
	}
	same = a.np == b.np;
	for (size_t p = 0; p < a.np && same; p++)
		same = !memcmp(a.p[p].h, b.p[p].h, a.m * sizeof(double)) &&
		       !memcmp(a.p[p].g, b.p[p].g, a.n * sizeof(double)) &&
		       !memcmp(a.p[p].l, b.p[p].l, a.r * sizeof(double)) &&
		       !memcmp(a.p[p].su.d, b.p[p].su.d, a.m * a.r) &&
		       !memcmp(a.p[p].sv.d, b.p[p].sv.d, a.n * a.r);
	ok(same, "nv_build_nvg_start then _finish: the bytes of nv_build_nvg_init");
	nv_sgn_scaled(&a.p[0].su, a.p[0].h, a.p[0].l, &o);
	{
		int8_t sg[7 * 3];
		nv_sgn top = {7, 3, sg};
		/* three of each row's 16 signs, as a 7 × 3 matrix of their own */
		for (size_t i = 0; i < 7; i++)
			memcpy(top.d + i * 3, a.p[0].su.d + i * a.r, 3);
		for (size_t i = 0; i < 7 * 5; i++)
			buf[i] = -7.0;
		nv_sgn_scaled_to(&top, a.p[0].h, a.p[0].l, buf, 5);
		same = 1;
		for (size_t i = 0; i < 7; i++)
			for (size_t k = 0; k < 5; k++)
				same &= k < 3 ? buf[i * 5 + k] == (double)top.d[i * 3 + k] *
								   (a.p[0].h[i] * a.p[0].l[k])
					      : buf[i * 5 + k] == -7.0;
		ok(same, "nv_sgn_scaled_to at stride 5: each value h_i·s_ik·l_k, the stride's rest untouched");
	}
	same = 1;
	for (size_t i = 0; i < 16; i++)
		same &= o.d[i] == (double)a.p[0].su.d[i] * (a.p[0].h[0] * a.p[0].l[i]);
	ok(same, "nv_sgn_scaled: row 0 is h_0·s_0k·l_k");
	nv_mat_free(&o);
	nv_bm_free(&a);
	nv_bm_free(&b);
}

/* the default options at 3 bpw with the given paths (0: auto) */
static void opts_at(nv_enc_opts *o, int paths)
{
	nv_enc_opts_default(o);
	o->bpw = 3.0;
	o->paths = paths;
}

/* two encodes with the same bytes and report line */
static int same_result(const nv_enc_result *a, const nv_enc_result *b)
{
	return a->len == b->len && !memcmp(a->bytes, b->bytes, a->len) && !strcmp(a->line, b->line);
}

/*
 * nv_enc_opts.spend_l: a context that this encode alone reads has its l
 * (the tall latents' factor) freed once the candidates' paths are made;
 * the bytes and line are those of an encode that keeps it, for both
 * candidates, one path and two; a context that is not the one encoded
 * keeps its l
 */
static void test_spend_l(const nv_hctx *keep)
{
	static const int paths[] = {0, 1, 2};

	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		nv_enc_opts o;
		nv_enc_result a, b;
		nv_hctx hs, other;
		int built = nv_hctx_build(H.d, 64, 0.03, &hs) == 0 &&
			    nv_hctx_build(H.d, 64, 0.03, &other) == 0;
		opts_at(&o, paths[i]);
		is_int(built && nv_encode(&W, keep, &H32, &o, &a) == 0, 1, "paths %d: l kept", paths[i]);
		o.spend_l = &hs;
		is_int(nv_encode(&W, &hs, &H32, &o, &b), 0, "paths %d: l spent", paths[i]);
		ok(keep->l.d && hs.l.d == NULL && same_result(&a, &b),
		   "paths %d: the context's l freed, the bytes and line of l kept", paths[i]);
		o.spend_l = &other;
		nv_enc_result_free(&b);
		is_int(nv_encode(&W, keep, &H32, &o, &b), 0, "paths %d: another context named", paths[i]);
		ok(other.l.d != NULL && !memcmp(a.bytes, b.bytes, a.len),
		   "paths %d: a context not encoded keeps its l", paths[i]);
		nv_enc_result_free(&a), nv_enc_result_free(&b);
		nv_hctx_free(&hs), nv_hctx_free(&other);
	}
}

/*
 * nv_enc_opts.hold_max: an encode that holds W's m × n products (the tall
 * latents' t·L, W's latents beside the ITQ's inputs) gives the bytes and
 * line of one that makes them again, for both candidates, one path and two,
 * in fewer counted flops; nv_hold_mn: the bound in bytes, without overflow
 */
static void hold_at(const nv_hctx *hc, int paths)
{
	nv_enc_opts o;
	nv_enc_result a, b;
	uint64_t fa, fb;

	opts_at(&o, paths);
	o.hold_max = 0;
	nv_flops_reset();
	is_int(nv_encode(&W, hc, &H32, &o, &a), 0, "paths %d: nothing held", paths);
	fa = nv_flops();
	o.hold_max = NV_HOLD_MAX_DEFAULT;
	nv_flops_reset();
	is_int(nv_encode(&W, hc, &H32, &o, &b), 0, "paths %d: W's products held", paths);
	fb = nv_flops();
	ok(same_result(&a, &b) && fb < fa,
	   "paths %d: held, the bytes and line of made again, in %.4g of its flops", paths,
	   (double)fb / (double)fa);
	nv_enc_result_free(&a), nv_enc_result_free(&b);
}

static void test_hold(const nv_hctx *hc)
{
	hold_at(hc, 0);
	hold_at(hc, 1);
	hold_at(hc, 2);
	ok(nv_hold_mn(1024, 1024, (size_t)8 << 20) && !nv_hold_mn(1025, 1024, (size_t)8 << 20) &&
		   nv_hold_mn(0, 5, 0) && nv_hold_mn(5, 0, 0) && !nv_hold_mn(1, 1, 7) &&
		   !nv_hold_mn(SIZE_MAX, 2, SIZE_MAX),
	   "nv_hold_mn: 1024 × 1024 f64 in 8 MiB, not 1025; empty ones always; no overflow");
}

int main(void)
{
	nv_hctx hc, hc3;
	nv_tctx c;

	nv_set_threads(1);
	if (synth(&W, &H) < 0 || synth_f32(&H, &H32) < 0 || nv_hctx_build(H.d, 64, 1e-3, &hc) < 0 ||
	    nv_hctx_build(H.d, 64, 0.03, &hc3) < 0 || nv_tctx_init(&c, &W, &hc, NULL, 2) < 0) {
		ok(0, "setup: %s", nv_err());
		return done_testing();
	}
	test_als_monotone(&c);
	test_g_step(&c);
	test_als_err(&c);
	test_als_kept_factors(&c);
	test_als_tol(&c);
	test_als_kept_hb(&c);
	test_g_every(&c);
	test_hbk(&c);
	test_refine_kept(&c);
	test_als_bar(&c);
	test_wh_dropped(&c);
	test_row_blocks(&c);
	test_als32(&c);
	test_init_halves(&c);
	test_stages(&c, &hc);
	test_drivers(&hc3);
	test_sel_load(&hc3);
	test_pick_after(&c, &hc3);
	test_pick_lead(PICK_LEAD_BPW);
	test_spend_l(&hc3);
	test_hold(&hc3);
	test_gptq_blocks();
	test_herr_blocks();
	test_gauge();
	test_fixed_rank(&hc3);
	test_refusal();
	nv_tctx_free(&c);
	nv_hctx_free(&hc);
	nv_hctx_free(&hc3);
	nv_mat_free(&W);
	nv_mat_free(&H);
	nv_mat32_free(&H32);
	return done_testing();
}
