/*
 * nvg.h - the NVG encoder (f64, CPU) and what it shares with dual-SVID
 * (svid.h): the BLR model of one tensor, the H-metric errors, packing, the
 * per-stage profile, and the one-call driver nv_encode().
 *
 * One tensor W (m × n, row = output) becomes, for P = 1 or 2 paths,
 *
 *   Ŵ = Σ_p diag(h_p) · S_U,p · diag(ℓ_p) · S_V,pᵀ · diag(g_p)
 *
 * and the error of Ŵ in the metric of a Gram H (n × n) is tr(E·H·Eᵀ),
 * E = W − Ŵ; the relative error is √(tr(E H Eᵀ) / tr(W H Wᵀ)).
 *
 * The NVG stages (the seed's nvg.rs), in the order nv_encode() runs them:
 *   nv_latents       whitened rank-r latents (metric L·Lᵀ, L = chol(hf))
 *   nv_itq_weighted  H-weighted ITQ gauge, ≤ 50 iterations, products in f64
 *                    (f32: nv_itq_cfg; in f64 the signs after the first step
 *                    by nv_itq_signs32, the f64 product's), polar from AᵀA's
 *                    eigenpairs (SVD where ill-conditioned)
 *   nv_svid_path     signs + non-negative rank-1 magnitude fits (svid.h)
 *   nv_als           exact block least squares for ℓ, h, g (monotone)
 *   nv_flip_u        exact single-flip row search on S_U (monotone)
 *   nv_gptq_v        column-sequential search on S_V, act order, Schur
 *                    feedback through Uc in 128-column lazy blocks
 *   nv_refine        flip_u/gptq_v + 2 ALS sweeps (try_sweeps), kept only when the fit
 *                    error drops (two sweeps over paths)
 *   selection        P=2 at its rank against P=1 at the same bits, on SEL,
 *                    after every sweep, after the first pick_after, or after
 *                    the first where the one-path candidate leads by pick_lead
 *   nv_pack          rebalance, f16 rounding, refusal of unstorable scales
 *
 * Determinism: fixed iteration counts, fixed partitions; the same inputs,
 * the same OpenBLAS thread count and the same opts.threads give the same
 * bytes.  Several encodes may run at once in one process (no global state
 * but the process-wide flop counter of linalg.h and the thread-local error
 * reason).  Functions return 0 on success and -1 with the reason set (err.h);
 * nv_pack() and nv_encode() return 1 when the packer refuses.
 */
#ifndef NV_NVG_H
#define NV_NVG_H

#include <stddef.h>
#include <stdint.h>

#include "blr.h"
#include "hctx.h"
#include "linalg.h"
#include "rfp.h"
#include "prof.h"

/* ---- the model of one tensor ---- */

/* a sign matrix: ±1 (0 only before it is filled), a byte each, row-major.
 * A byte where a double would take eight: a model's signs, held in every
 * candidate and in each refinement try's copy, are the largest part of an
 * encode's memory after W; they become doubles only in a product (nv_sgn_scaled) */
typedef struct {
	size_t r, c; /* rows, cols */
	int8_t *d;   /* (r × c) owned */
} nv_sgn;

int nv_sgn_zeros(nv_sgn *s, size_t r, size_t c);
void nv_sgn_free(nv_sgn *s);
static inline int8_t *nv_sgn_row(const nv_sgn *s, size_t i)
{
	return s->d + i * s->c;
}
/* o = diag(rs)·S·diag(cs) in f64 (a fresh matrix); rs or cs may be NULL */
int nv_sgn_scaled(const nv_sgn *s, const double *rs, const double *cs, nv_mat *o);
/* the same values written in place: row i at o + i·ld (ld ≥ S's columns) */
void nv_sgn_scaled_to(const nv_sgn *s, const double *rs, const double *cs, double *o, size_t ld);

typedef struct {
	double *h; /* (m) row scales */
	nv_sgn su; /* (m × r) ±1 */
	double *l; /* (r) rank scales */
	nv_sgn sv; /* (n × r) ±1 */
	double *g; /* (n) column scales */
} nv_path;

typedef struct {
	size_t m, n, r, np; /* np paths in use (1 or 2) */
	nv_path p[2];
} nv_bm;

/* allocate path p (zeros) of an m × n rank-r model */
int nv_path_alloc(nv_path *q, size_t m, size_t n, size_t r);
void nv_path_free(nv_path *q);
int nv_bm_copy(nv_bm *dst, const nv_bm *src);
void nv_bm_free(nv_bm *md);

/* diag(h)·S_U·diag(ℓ) (m × r), diag(h)·S_U (m × r), diag(g)·S_V (n × r) */
int nv_path_hsl(const nv_bm *md, size_t p, nv_mat *o);
/* rows i0.. of path q's diag(h)·S_U·diag(ℓ) (without h: S_U·diag(ℓ)) written
 * to o, r wide: the rows of nv_path_hsl's matrix, one block of them */
void nv_path_hsl_rows(const nv_path *q, size_t r, size_t i0, size_t rows, int with_h, double *o);
/* k's lower triangle (r × r, the upper not touched) = MᵀM, M = hsl of path
 * q (m × r), summed over blocks of bs rows of M made in blk (bs × r) */
void nv_path_mtm(const nv_path *q, size_t m, size_t r, size_t bs, double *blk, nv_mat *k);
int nv_path_hs(const nv_bm *md, size_t p, nv_mat *o);
int nv_path_gs(const nv_bm *md, size_t p, nv_mat *o);
/* Σ_{p ≠ skip} Ŵ_p (m × n), fresh; skip = -1 for all paths */
int nv_bm_recon(const nv_bm *md, int skip, nv_mat *out);

/* ---- the H metric ---- */

/* an f32 Gram read afresh for each use (a file, say): 0 with out filled, or
 * -1 with reason; the same values each time */
typedef int (*nv_gram_load)(void *arg, nv_mat32 *out);

typedef struct {
	const nv_mat *w;     /* (m × n) */
	const nv_mat *h;     /* (n × n), or NULL when h32 or load */
	const nv_mat32 *h32; /* (n × n) the same held in f32 (a Gram as read), or NULL */
	nv_gram_load load;   /* or H read when wanted, into held until nv_metric_release */
	void *arg;
	nv_mat32 *held;
	nv_mat wh;           /* (m × n) W·H; empty with load (not kept) */
	double whw;          /* tr(W H Wᵀ) */
	int hb32;            /* H·B in f32 (nv_gemm32s_new) where H is held in f32 */
} nv_metric;

/* W·H is computed once here (m·n·n); every error after is low-rank */
int nv_metric_init(nv_metric *mt, const nv_mat *w, const nv_mat *h);
/* the same on an f32 H, its products in f64 (nv_gemm32a_new, nv_gemm32b_new) */
int nv_metric_init32(nv_metric *mt, const nv_mat *w, const nv_mat32 *h);
/* the same on an f32 H that load reads (n × n, n = W's columns, checked)
 * whenever it is wanted and nv_metric_release lets go: it is held only
 * while errors are measured, not between.  Nor is W·H kept: the errors'
 * cross terms are ⟨A_p, W·(H·B_p)⟩, equal to the held metric's to rounding */
int nv_metric_init_load(nv_metric *mt, const nv_mat *w, nv_gram_load load, void *arg);
/* H·B (fresh) on the metric's H, f64 or f32 (read first when not held); an f32
 * H's product in f64 arithmetic, or with hb32 in f32's (nv_gemm32s_new) */
int nv_metric_hb(const nv_metric *mt, const nv_mat *b, nv_mat *out);
/* what load read goes (nothing when H is the caller's) */
void nv_metric_release(const nv_metric *mt);
void nv_metric_free(nv_metric *mt);

/* tr(E H Eᵀ) of Ŵ = the model, from its factors:
 * tr(W H Wᵀ) − 2 Σ_p ⟨A_p, W H B_p⟩ + Σ_pq ⟨A_pᵀA_q, B_pᵀ H B_q⟩,
 * A_p = diag(h)S_U diag(ℓ), B_p = diag(g)S_V */
int nv_herr(const nv_metric *mt, const nv_bm *md, double *out);

/*
 * the products H·B_p (n × r) of one model on the FIT metric, B_p = gs(p)
 * (nv_path_gs), kept between the steps of a refinement that read them
 * (.d NULL: not known).  A change of path p's g or S_V voids hb[p]; S_U, h
 * and ℓ do not enter it.  Each is made by nv_metric_hb on B_p alone, as a
 * fresh one is, so a kept product gives the bits of a fresh one.
 */
typedef struct {
	nv_mat hb[2];
} nv_hbk;
void nv_hbk_void(nv_hbk *k, size_t p);
void nv_hbk_free(nv_hbk *k);
/* nv_herr on mt, the metric that k's products are of: reads k's products
 * and leaves every path's in k (nv_herr: with a k of its own) */
int nv_herr_k(const nv_metric *mt, const nv_bm *md, nv_hbk *k, double *out);
/* √(tr(E H Eᵀ) / tr(W H Wᵀ)) */
int nv_rel(const nv_metric *mt, const nv_bm *md, double *out);
/* the direct formula tr(E H Eᵀ) for an explicit E (m × n) */
int nv_herr_direct(const nv_mat *e, const nv_mat *h, double *out);
/* √(tr(E G Eᵀ) / tr(W G Wᵀ)) on a raw Gram G = H − δ·I from the pieces on
 * H: e = tr(E H Eᵀ), whw = tr(W H Wᵀ), e2 = ‖E‖²_F, w2 = ‖W‖²_F, δ the
 * ridge (nv_hctx_ridge); the stored fit error of the CPU and device
 * encoders, which keep only the damped Gram */
double nv_rel_unridged(double e, double whw, double e2, double w2, double ridge);
/* ‖W − Ŵ‖²_F and ‖W‖²_F of a model */
int nv_frob2(const nv_mat *w, const nv_bm *md, double *e2, double *w2);
/* nv_rel_unridged of a model, with mt the metric on H (the damped hf) */
int nv_rel_raw(const nv_metric *mt, double ridge, const nv_bm *md, double *out);

/* ---- one tensor's fitting context ---- */

/* the eigendecomposition behind rank-r latents of t (any r) */
typedef struct {
	int byrows;     /* 1: m ≤ n, vec holds left vectors (m × m); 0: right (n × n) */
	const nv_mat *l; /* L of the metric when !byrows (NULL: none): U_r = t·L·V_r·Σ_r⁻¹ is
			  * made from t again for each rank, unless tl holds t·L */
	nv_mat vec;     /* eigenvectors, columns in descending order */
	nv_mat tl;      /* (m × n) t·L as the Gram's blocks made it, when the metric asked
			  * to hold it (nv_lat_metric.hold; .d NULL: made again) */
	double *sig;    /* singular values of t·L, descending */
	size_t block;   /* t's rows per block of t·L when !byrows (the metric's) */
	size_t want;    /* set before the build: the pairs it keeps (0: the rank first asked) */
} nv_lat_basis;

typedef struct {
	const nv_mat *w;     /* (m × n) the matrix encoded */
	const nv_hctx *hc;   /* the input's context (hf, l, sqd, perm, uc) */
	nv_metric fit;       /* the damped metric hf; fit.wh = W·hf only when m < n */
	nv_prof *prof;       /* NULL: no profile */
	int threads;         /* workers of the row-parallel stages (≥ 1) */
	nv_lat_basis *wlat;  /* whitened basis of W, filled by the first init that needs it */
	int g_pcg;           /* the ALS g step by preconditioned CG after a sweep's direct solve */
	double itq_tol;      /* nv_itq_weighted's stop: the fraction of signs a step may change */
	int itq_f32;         /* the ITQ's products in f32 (nv_itq_cfg) */
	int try_sweeps;      /* ALS sweeps after each refinement try's sign moves (nv_refine) */
	int try_abort;       /* a try's sweeps end once it cannot be kept (nv_als_bar) */
	double als_tol;      /* nv_als's stop: a sweep's gain in fit error below this fraction */
	int g_every;         /* ALS's g step on sweeps 0, g_every, 2·g_every… of each run (≥ 1) */
	int als32;           /* the ALS's m·n·r and n²·r products in f32 (nv_tctx_als32) */
	nv_mat32 w32;        /* with als32: fit.wh (where kept) or W, rounded to f32 */
	size_t row_block;    /* W's rows per block where a step's f64 pieces would be m × r
			      * (NV_ROW_BLOCK_DEFAULT; the result does not depend on it
			      * beyond the order of f64 sums) */
	int hold;            /* W's m × n products held where they would be made again (the
			      * tall latents' t·L, W's latents for the ITQ): nv_hold_mn */
	nv_mat *l_spend;     /* hc's l when nothing after the paths reads it (nv_enc_opts.
			      * spend_l): freed once a second path is made, or else once
			      * the candidates are, so that no ALS is held beside it */
} nv_tctx;

int nv_tctx_init(nv_tctx *c, const nv_mat *w, const nv_hctx *hc, nv_prof *prof, int threads);
/* W's rows per block of a step's m-row pieces: c->row_block (at least 1), at most m */
size_t nv_row_block(const nv_tctx *c, size_t m);
/* the ALS's large products in f32 from now on (als32): the ℓ step's BᵀHB and
 * W·hf·B, the g step's (W·hf)ᵀ·M (or Wᵀ·M) and its system's n²·r syrk, each
 * from its operands rounded to f32 (W·hf or W held so in w32), summed in
 * f32 by fixed tiles and widened; -1 on exhaustion */
int nv_tctx_als32(nv_tctx *c);
void nv_tctx_free(nv_tctx *c);

/* ---- the stages ---- */

/* the metric of the latents: hf = L·Lᵀ; every field may be NULL */
typedef struct {
	const nv_mat32 *hf; /* (n × n) H; NULL (and l NULL): the identity */
	const nv_mat *l;  /* (n × n) chol(H), lower: what t taller than wide needs */
	const nv_mat *th; /* (m × n) t·H when the caller has it, else computed */
	size_t block;     /* t·L (t taller than wide) or t·H (by rows, not given as th)
			   * made this many rows at a time, never whole (0:
			   * NV_ROW_BLOCK_DEFAULT; the result depends on it only through
			   * the order of f64 sums) */
	int hold;         /* 1: t·L (t taller than wide) held by the basis for its
			   * latents, made once (m × n more memory, the same bits) */
} nv_lat_metric;

/* rank-r latents up (m × r), vp (n × r): up·vpᵀ is the best rank-r
 * approximation of t in the metric H = L·Lᵀ (identity when mt is NULL):
 * up = U_r Σ^{1/2}, vp = tᵀ U_r Σ^{-1/2}, U_r, Σ from the SVD of t·L.
 * When m ≤ n, U_r and Σ² are the eigenpairs of t·H·tᵀ and L is not used
 * (H is); when m > n, of Lᵀ·tᵀ·t·L, and L is needed (else -1) */
int nv_latents(const nv_mat *t, size_t r, const nv_lat_metric *mt, nv_prof *prof, nv_mat *up,
	       nv_mat *vp);
/* the same in two steps, so that latents of one t at several ranks share
 * one eigendecomposition: nv_lat_basis_build then nv_latents_from (t the same,
 * and the metric's L alive while the basis is used).  The basis keeps the top
 * rank pairs (0, or more than the Gram's order: all of them); latents of a
 * higher rank from it are refused */
int nv_lat_basis_build(const nv_mat *t, const nv_lat_metric *mt, size_t rank, nv_prof *prof,
		       nv_lat_basis *b);
int nv_latents_from(const nv_lat_basis *b, const nv_mat *t, size_t r, nv_prof *prof,
		    nv_mat *up, nv_mat *vp);
/* nv_latents of t = W − A·Bᵀ (A m × k, B n × k: a model's paths taken from
 * W) without t ever whole: its rows made a block at a time (mt->block) where
 * t·H or t·L needs them, tᵀ·U as Wᵀ·U − B·(Aᵀ·U).  mt->th must be NULL; by
 * rows (m ≤ n) the metric is H (or none), not L alone */
int nv_latents_minus(const nv_mat *w, const nv_mat *a, const nv_mat *b, size_t r,
		     const nv_lat_metric *mt, nv_prof *prof, nv_mat *up, nv_mat *vp);
void nv_lat_basis_free(nv_lat_basis *b);
/* the ITQ's settings (below): at most iters steps, the stop tol, block rows
 * of x per product (0: NV_ROW_BLOCK_DEFAULT), and with f32 its two products
 * a step in f32 (nv_sgemm) on x held in f32, the polar factor still f64 */
typedef struct {
	int iters;
	double tol;
	size_t block;
	int f32;
} nv_itq_cfg;
/*
 * the entries of xb·rot (xb rows × r, rows of unit norm; rot r × r
 * orthogonal) whose signs an ITQ step takes, into o: by sgemm on xb and rf
 * (rot rounded to f32), and again in f64 (a dot product, counted in *redo)
 * where an entry lies within the f32 product's error of 0, γ_(r+2) with
 * u = 2⁻²⁴: every sign is then the f64 product's.  xf: 2·rows·r floats
 */
void nv_itq_signs32(const nv_mat *xb, const nv_mat *rot, const float *rf, float *xf, double *o,
		    size_t *redo);
/* the orthogonal R bringing the row-normalised [up; vp]·R closest to the
 * hypercube with rows weighted by w²; returns up·R, vp·R.  At most iters
 * steps; from the second on, it stops after a step in which at most
 * tol × (m+n)·r signs of [up; vp]·R changed (tol 0: only where the next step
 * would give the same R, so the result is the one of iters steps).  *used
 * (when not NULL) gets the steps taken.  x·R and xᵀ·sgn(x·R) are made
 * block rows of x at a time, never whole; in f64 the result depends on
 * block only through the order of f64 sums.  In f32, x·R is exact to about
 * 2⁻²⁴ (x's rows are unit vectors, R orthogonal), so only entries that near
 * zero can take the other sign, and each block's xᵀ·sgn is summed in f64 */
int nv_itq_weighted(const nv_mat *up, const nv_mat *vp, const double *wu, const double *wv,
		    const nv_itq_cfg *cfg, nv_prof *prof, nv_mat *uo, nv_mat *vo, int *used);
/* nv_itq_weighted in two halves, for latents that can be made again: the
 * rotation R (r × r), up and vp freed once its inputs are formed from them
 * (so that they are not held through the steps); then nv_itq_apply_in on
 * latents made again gives nv_itq_weighted's latents, the same bits */
int nv_itq_rotation_spend(nv_mat *up, nv_mat *vp, const double *wu, const double *wv,
			  const nv_itq_cfg *cfg, nv_prof *prof, nv_mat *rot, int *used);
/* up ← up·R and vp ← vp·R in place, block rows at a time (0: the default) */
int nv_itq_apply_in(nv_mat *up, nv_mat *vp, const nv_mat *rot, size_t block, nv_prof *prof);
/* exact block least squares: ℓ (joint over paths), h (per row, joint over
 * paths), g (per path), `sweeps` times; never raises the fit error.  With
 * c->als_tol above 0 it stops early, at the ℓ step of the first sweep whose
 * fit error (read from the ℓ system's solution, no product of its own) is
 * within als_tol of the last sweep's: never more steps than `sweeps`.  With
 * c->g_pcg, a path's g step after its first in the call is solved by
 * conjugate gradients from the current g, preconditioned with the factor of
 * its last direct solve, to a relative excess of 1e-12 in its objective
 * (directly when that takes more than 30 steps).  With c->g_every above 1,
 * the g steps run on sweeps 0, g_every, 2·g_every… of the call only: the
 * sweeps between are ℓ and h steps */
int nv_als(nv_bm *md, const nv_tctx *c, int sweeps);
/* one ALS ℓ step (joint over paths); *err: the FIT error at the new ℓ as
 * nv_als's early stop reads it, tr(W hf Wᵀ) − λ·rhs (NaN where the system
 * was singular and ℓ kept) */
int nv_als_l(nv_bm *md, const nv_tctx *c, double *err);
/* one g step of nv_als on path p alone, solved directly: g_p the exact
 * minimiser of the fit error with every other scale and sign held */
int nv_als_g(nv_bm *md, const nv_tctx *c, size_t p);
/* nv_als with the paths' factors kept by the caller in pc (each {0} at
 * first, freed by the caller): a later call's first g steps start from
 * them, for a model that the calls between changed little */
int nv_als_pc(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2]);
/* nv_als_pc reading and leaving *md's products in k (NULL: none kept) */
int nv_als_k(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k);
/* nv_als_k with *err the fit error of the model it leaves, followed through
 * the sweeps without a product of its own: the ℓ step's (where it ends the
 * run), else the h step's from its row systems less each g step's fall
 * (E(g_old) − E(g_new) from the g system); the same as nv_herr's to
 * rounding.  NaN when there was no sweep, or a step failed */
int nv_als_ke(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k, double *err);
/* nv_als_ke for a refinement try that is kept only below the fit error bar
 * (NaN: none): after a sweep that leaves the error above bar by more than
 * that sweep's gain after its ℓ step times the sweeps left, the rest are
 * not run (profiled als.abort) and *err is the error there, above bar.  ALS
 * gains shrink from sweep to sweep (the next sweep's gain was at most 0.30
 * of that measure over 960 SmolLM2 tries, README), so such a try would not
 * have been kept: the refinement's bytes are those of every sweep run,
 * unless a sweep not run would have factored a g system afresh for the
 * tries after it (pc passes from try to try; on none of the encodes of the
 * README) */
int nv_als_bar(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k, double *err,
	       double bar);
/* row flips of S_U of path pi; *flips (may be NULL) counts them */
int nv_flip_u(nv_bm *md, const nv_tctx *c, size_t pi, uint64_t *flips);
/* the same reading path pi's H·B from k (made there when not known) */
int nv_flip_u_k(nv_bm *md, const nv_tctx *c, size_t pi, nv_hbk *k, uint64_t *flips);
/* column-sequential sign search on S_V of path pi; *flips may be NULL */
int nv_gptq_v(nv_bm *md, const nv_tctx *c, size_t pi, uint64_t *flips);
/* the discrete refinement, in place; with c->g_pcg its tries share the
 * paths' g-step factors (nv_als_pc), so sweeps run in one call differ from
 * single calls in a row by rounding */
int nv_refine(nv_bm *md, const nv_tctx *c, int sweeps);
/* the same with the factors pc (zeroed before the first call, freed by the
 * caller): calls in a row with one pc give the bytes of one call of their
 * summed sweeps (each call starts from the fit error of *md, as a sweep does) */
int nv_refine_pc(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2]);
/* the same carrying the model's H·B products k and its fit error *cur (on
 * c->fit, as the tries compare it; NaN before the first call, and after a
 * failed one) from one call to the next: calls in a row are the sweeps of
 * one call, to the bit, with nothing measured again between them.  The
 * caller frees k */
int nv_refine_kept(nv_bm *md, const nv_tctx *c, int sweeps, nv_pchol pc[2], nv_hbk *k,
		   double *cur);
/* whitened topology + ITQ + ALS; the second path on the residual */
int nv_build_nvg_init(const nv_tctx *c, size_t r, size_t np, nv_bm *md);
/* the same in two halves, which give its bytes: the start makes path 0 from
 * W (the one step that needs W's whitened basis, c->wlat), the finish its
 * ALS and, for np = 2, the second path.  Every candidate's start can run
 * before any finish, so that the basis is let go before the ALS runs.  On
 * failure either frees *md */
int nv_build_nvg_start(const nv_tctx *c, size_t r, nv_bm *md);
int nv_build_nvg_finish(const nv_tctx *c, size_t np, nv_bm *md);

/* rebalance by the RMS of h and g, round the scales to f16, zero dead ℓ,
 * pack (pack.c, the packer the device encoder shares: pack.h).  0: *bytes
 * (malloc'd, *len) and *stored (the model with the stored scales, may be
 * NULL); 1: refused (non-finite scale, ℓ beyond f16, |h| or |g| > 65000),
 * reason set; -1 error */
int nv_pack(const nv_bm *md, uint8_t **bytes, size_t *len, nv_bm *stored);

/* ---- the driver ---- */

typedef enum { NV_METHOD_NVG = 0, NV_METHOD_DUAL_SVID = 1 } nv_method;

typedef struct {
	double bpw;       /* requested bits per weight, (0, 16) */
	double kv;        /* budget multiplier (GQA k/v), else 1 */
	size_t rank;      /* 0: the rank rule from bpw; else this rank for P (auto: P=2) */
	int paths;        /* 0 auto, 1, 2 */
	int sweeps;       /* refinement sweeps of each candidate (nvg), 1 to NV_SWEEPS_MAX */
	int pick_after;   /* paths auto: choose after this many sweeps of both, then only the
			   * chosen one completes its sweeps; 0 (default) or ≥ sweeps: after all */
	double pick_lead; /* paths auto without pick_after: after the first sweep the one-path
			   * candidate completes its sweeps alone when its SEL error is below
			   * the two-path one's by this fraction of it; < 0: never early */
	int g_pcg;        /* 1 (default): the ALS g step by PCG (nv_als), 0: a factorization each sweep */
	double itq_tol;   /* ITQ stops after a step changing at most this fraction of signs (0: at a fixed point) */
	int itq_f32;      /* 1: the ITQ's products in f32 (0, the default: f64) */
	int hb_f32;       /* 1 (default): the FIT Gram's products with the paths (H·B) in f32
			   * (nv_gemm32s_new); 0: in f64, the bytes of before */
	double als_tol;   /* ALS stops at a sweep whose fit error gain is below this fraction (0: never early) */
	int als_f32;      /* 1: the ALS's large products in f32 (nv_tctx_als32); 0 (default): f64 */
	int try_sweeps;   /* ALS sweeps of each refinement try, 1 to NV_TRY_SWEEPS_MAX */
	int try_abort;    /* 1 (default): a try's sweeps end once it cannot be kept (nv_als_bar) */
	int g_every;      /* ALS's g step on every g_every-th sweep of a run, the first
			   * included; 1 (default) to NV_G_EVERY_MAX */
	nv_method method;
	nv_gram_load sel_load; /* without hsel: the SEL Gram read for each use (nv_metric_init_load) */
	void *sel_arg;
	int threads;      /* row-parallel workers; OpenBLAS threads: nv_set_threads() */
	nv_prof *prof;    /* NULL: no profile */
	size_t hold_max;  /* W's m × n products (f64) held rather than made again where one
			   * is at most this many bytes (NV_HOLD_MAX_DEFAULT; 0: never) */
	nv_hctx *spend_l; /* the encode's context when nothing else will read its l (the
			   * tall latents' factor, n × n): l is freed once the candidates'
			   * paths are made, so that the refinement is not held beside it */
} nv_enc_opts;

/* the refinement sweeps of an encode unless told otherwise, and the most */
#define NV_SWEEPS_DEFAULT 2
#define NV_SWEEPS_MAX 16
/* the ALS sweeps of a refinement try unless told otherwise (the seed's 3
 * until whole conversions judged 2 level with it: README), and the most */
#define NV_TRY_SWEEPS_DEFAULT 2
#define NV_TRY_SWEEPS_MAX 8
/* the most sweeps between two g steps (nv_enc_opts.g_every) */
#define NV_G_EVERY_MAX 8
/* the ITQ gauge's steps, the most (nv_itq_weighted, the device's the same) */
#define NV_ITQ_STEPS 50
/* the CPU encoder's ITQ stop and ALS's early stop unless told otherwise
 * (nv_enc_opts.itq_tol, .als_tol; 0 until whole conversions judged 0.001
 * level with it: README; 0 runs every step of the fixed counts, a device's) */
#define NV_ITQ_TOL_DEFAULT 0.001
#define NV_ALS_TOL_DEFAULT 0.001
/* the CPU encoder's early choice of one path (nv_enc_opts.pick_lead): the
 * lead, a fraction of the two-path candidate's SEL error, that the later
 * sweeps did not undo on 168 SmolLM2 encodes, with a margin (README) */
#define NV_PICK_LEAD_DEFAULT 0.005
/* nv_enc_opts.hold_max: products of W's size held up to 64 MiB each (m · n ≤
 * 8M: SmolLM2-135M's and -360M's tensors), made again above it, where #12's
 * bound on an encode's peak memory (3× its inputs, a 7B layer's) rules out one
 * more m × n */
#define NV_HOLD_MAX_DEFAULT ((size_t)64 << 20)
/* whether an m × n f64 matrix is at most max bytes (no overflow) */
int nv_hold_mn(size_t m, size_t n, size_t max);
/* nv_tctx.row_block: a tall W's m × r pieces held 1024 rows at a time */
#define NV_ROW_BLOCK_DEFAULT 1024

void nv_enc_opts_default(nv_enc_opts *o);

typedef struct {
	uint8_t *bytes;   /* the payload (malloc'd), NULL when refused */
	size_t len;
	size_t m, n, r;
	int paths;
	blr_clip clip;    /* of the rank the picked path count got */
	double bits;      /* budget bits, header excluded */
	double fit_err;   /* nvg: stored relative error on the raw FIT Gram; else NaN */
	double sel_err;   /* on the raw SEL Gram (dual-svid: when given); else NaN */
	double frob;      /* dual-svid: ‖W − Ŵ‖_F / ‖W‖_F; else NaN */
	char line[512];   /* the report line */
} nv_enc_result;

/* encode W (m × n).  nvg needs hc (the FIT context: its stored fit error
 * on the raw FIT Gram comes from hf and the ridge, so the raw Gram need not
 * be kept) and hsel (the raw mean SEL Gram, n × n, f32 as its file holds it:
 * half the bytes, the same values, its products in f64), or hsel NULL and
 * o->sel_load, which reads it whenever SEL errors are measured, so that it is
 * not held beside the refinement; dual-svid reads no Gram (NULL), and only
 * measures its stored payload on the SEL Gram when one is given.
 * 0 encoded, 1 refused by the packer ("blr refused", reason set), -1 error */
int nv_encode(const nv_mat *w, const nv_hctx *hc, const nv_mat32 *hsel, const nv_enc_opts *o,
	      nv_enc_result *res);
/* the same from an f32 W (m × n) */
int nv_encode_f32(const float *w, size_t m, size_t n, const nv_hctx *hc, const nv_mat32 *hsel,
		  const nv_enc_opts *o, nv_enc_result *res);
void nv_enc_result_free(nv_enc_result *res);

/* ---- the per-head row gauge (research knob) ---- */

/* "COUNTxDIM[,COUNTxDIM...]": consecutive row blocks that must cover m rows
 * exactly; *starts gets nb+1 boundaries (malloc'd) */
int nv_parse_head_blocks(const char *spec, size_t m, size_t **starts, size_t *nb);
/* d (m): per block j, √clamp(median energy / energy_j, 1/32, 32), energy_j =
 * Σ_{i in j} (W·H)_i·W_i; shuffle ≠ 0 permutes the block weights (placebo) */
int nv_row_gauge(const nv_mat *w, const nv_mat *h, const size_t *starts, size_t nb,
		 uint64_t shuffle, double *d);
/* the undo on the packed bytes is blr_gauge_undo (blr.h) */

#endif
