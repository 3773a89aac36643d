/* block.c - a Llama block forward with its intermediates, and its backward (block.h) */
#include "block.h"

#include "err.h"
#include "linalg.h"
#include "mem.h"
#include "par.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the cache's arrays, the forward's intermediates first, and the columns of each */
typedef struct {
	float **p;
	size_t cols;
} bk_array;

#define BK_FORWARD 14 /* a … y: the intermediates a backward reads */
#define BK_ARRAYS 26

static void bk_arrays(bk_cache *c, const fw_model *m, size_t tmax, bk_array b[BK_ARRAYS])
{
	size_t d = m->d, ff = m->ff, qd = m->qdim, kd = m->kvdim;
	bk_array t[BK_ARRAYS] = {
		{ &c->a, d },     { &c->q, qd },   { &c->k, kd },   { &c->v, kd },   { &c->qr, qd },
		{ &c->kr, kd },   { &c->p, m->nh * tmax }, { &c->o, qd }, { &c->x1, d }, { &c->f, d },
		{ &c->g, ff },    { &c->u, ff },   { &c->m, ff },   { &c->y, d },
		/* the backward's scratch */
		{ &c->dm, ff },   { &c->dg, ff },  { &c->du, ff },  { &c->df, d },   { &c->dx1, d },
		{ &c->dout, qd }, { &c->dq, qd },  { &c->dk, kd },  { &c->dv, kd },  { &c->dkh, qd },
		{ &c->dvh, qd },
		{ &c->fs, 2 * (ff > qd ? (ff > d ? ff : d) : (qd > d ? qd : d)) }
	};

	memcpy(b, t, sizeof t);
}

void bk_free(bk_cache *c)
{
	bk_array b[BK_ARRAYS];

	/* a sharing cache's model is not needed: only the pointers are read */
	bk_arrays(c, &(fw_model){ 0 }, 0, b);
	for (size_t i = 0; i < BK_ARRAYS; i++) {
		if (i < BK_FORWARD || !c->shares)
			free(*b[i].p);
		*b[i].p = NULL;
	}
	for (int i = 0; i < FW_NMAT; i++) {
		free(c->z[i]);
		c->z[i] = NULL;
		c->zk[i] = 0;
	}
	if (!c->shares)
		fw_scratch_free(&c->s);
}

/* c's first n arrays allocated for windows of up to tmax positions */
static int bk_alloc(bk_cache *c, const fw_model *m, size_t tmax, size_t n)
{
	bk_array b[BK_ARRAYS];

	bk_arrays(c, m, tmax, b);
	for (size_t i = 0; i < n; i++)
		if (!(*b[i].p = nv_malloc(tmax, b[i].cols * sizeof(float)))) {
			bk_free(c);
			return -1;
		}
	return 0;
}

int bk_init(bk_cache *c, const fw_model *m, size_t tmax)
{
	memset(c, 0, sizeof *c);
	c->tmax = tmax;
	if (fw_scratch_init(&c->s, m, tmax) < 0)
		return -1;
	return bk_alloc(c, m, tmax, BK_ARRAYS);
}

int bk_init_sharing(bk_cache *c, const fw_model *m, const bk_cache *full)
{
	bk_array b[BK_ARRAYS];

	*c = *full; /* the RoPE tables and the backward's scratch borrowed */
	c->shares = 1;
	memset(c->z, 0, sizeof c->z);
	memset(c->zk, 0, sizeof c->zk);
	bk_arrays(c, m, c->tmax, b);
	for (size_t i = 0; i < BK_FORWARD; i++)
		*b[i].p = NULL;
	return bk_alloc(c, m, c->tmax, BK_FORWARD);
}

size_t bk_forward_bytes(const fw_model *m, size_t tmax)
{
	bk_cache c;
	bk_array b[BK_ARRAYS];
	size_t cols = 0;

	bk_arrays(&c, m, tmax, b);
	for (size_t i = 0; i < BK_FORWARD; i++)
		cols += b[i].cols;
	return tmax * cols * sizeof(float);
}

/* C (M × N) = alpha·op(A)·op(B) + beta·C, row-major with leading dimensions */
static void mm(int ta, int tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
	       const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	nv_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/* c's Z buffer of projection i for f's k, at the cache's tmax */
static int zbuf(bk_cache *c, int i, const bk_factor *f)
{
	if (c->zk[i] == f->k)
		return 0;
	free(c->z[i]);
	c->zk[i] = 0;
	if (!(c->z[i] = nv_malloc(c->tmax, f->k * sizeof(float))))
		return -1;
	c->zk[i] = f->k;
	return 0;
}

/* Y (T × out) = X (T × in)·W_iᵀ: W dense, or fac[i] through its rank (Z kept in c) */
static int proj(bk_cache *c, const bk_factor *const *fac, int i, const float *W, const float *X,
		size_t T, size_t out, size_t in, float *Y)
{
	const bk_factor *f = fac ? fac[i] : NULL;

	if (!f) {
		mm(0, 1, T, out, in, X, in, W, in, 0.0f, Y, out);
		return 0;
	}
	if (zbuf(c, i, f) < 0)
		return -1;
	mm(0, 0, T, f->k, in, X, in, f->b, f->k, 0.0f, c->z[i], f->k);
	mm(0, 1, T, out, f->k, c->z[i], f->k, f->al, f->k, 0.0f, Y, out);
	return 0;
}

/*
 * the backward of Y = X·W_iᵀ for dY: dW += dYᵀ X (dense, unless dW is NULL)
 * or fac[i]'s P and Q; with dX, dX = dY·W_i + beta·dX
 */
static void proj_back(const bk_cache *c, const bk_factor *const *fac, int i, const float *W,
		      float *dW, const float *X, const float *dY, size_t T, size_t out, size_t in,
		      float *dX, float beta)
{
	const bk_factor *f = fac ? fac[i] : NULL;

	if (!f) {
		if (dW)
			mm(1, 0, out, in, T, dY, out, X, in, 1.0f, dW, in);
		if (dX)
			mm(0, 0, T, in, out, dY, out, W, in, beta, dX, in);
		return;
	}
	mm(1, 0, out, f->k, T, dY, out, c->z[i], f->k, 1.0f, f->pg, f->k);
	mm(0, 0, T, f->k, out, dY, out, f->a, f->k, 0.0f, c->fs, f->k);
	mm(1, 0, in, f->k, T, X, in, c->fs, f->k, 1.0f, f->qg, f->k);
	if (dX)
		mm(0, 1, T, in, f->k, c->fs, f->k, f->bl, f->k, beta, dX, in);
}

static void add_bias(float *y, const float *b, size_t T, size_t n)
{
	for (size_t t = 0; b && t < T; t++)
		for (size_t i = 0; i < n; i++)
			y[t * n + i] += b[i];
}

/* the attention of every head: P_h kept, o_h = P_h v_g */
static void attend(const fw_model *m, bk_cache *c, size_t T, size_t window)
{
	fw_attend(m, c->q, c->k, c->v, c->o, T, window, NULL, c->s.nthr, c->p);
}

int bk_forward(const fw_model *m, const fw_layer *ly, const bk_factor *const *fac, bk_cache *c,
	       const float *x, size_t T)
{
	size_t d = m->d, ff = m->ff, qd = m->qdim, kd = m->kvdim;

	if (T == 0 || T > c->tmax) {
		nv_seterr("window of %zu positions, the block holds 1..%zu", T, c->tmax);
		return -1;
	}
	c->T = T;
	c->x = x;
	fw_rmsnorm(x, ly->attn_norm, c->a, T, d, m->a.rms_eps);
	if (proj(c, fac, FW_Q, ly->w[FW_Q], c->a, T, qd, d, c->q) < 0 ||
	    proj(c, fac, FW_K, ly->w[FW_K], c->a, T, kd, d, c->k) < 0 ||
	    proj(c, fac, FW_V, ly->w[FW_V], c->a, T, kd, d, c->v) < 0)
		return -1;
	add_bias(c->q, ly->bias[FW_Q], T, qd);
	add_bias(c->k, ly->bias[FW_K], T, kd);
	add_bias(c->v, ly->bias[FW_V], T, kd);
	if (ly->q_norm) { /* the heads' norms, their inputs kept for the backward */
		memcpy(c->qr, c->q, T * qd * sizeof(float));
		memcpy(c->kr, c->k, T * kd * sizeof(float));
		fw_rmsnorm(c->q, ly->q_norm, c->q, T * m->nh, m->hd, m->a.rms_eps);
		fw_rmsnorm(c->k, ly->k_norm, c->k, T * m->nkv, m->hd, m->a.rms_eps);
	}
	fw_rope(&c->s, c->q, T, m->nh, m->hd, 0);
	fw_rope(&c->s, c->k, T, m->nkv, m->hd, 0);
	attend(m, c, T, fw_window_of(m, ly->index));
	/* x1 = x + (o·Woᵀ + bo), the product first and then the sum, as fw_layer_run */
	if (proj(c, fac, FW_O, ly->w[FW_O], c->o, T, d, qd, c->x1) < 0)
		return -1;
	add_bias(c->x1, ly->bias[FW_O], T, d);
	for (size_t i = 0; i < T * d; i++)
		c->x1[i] = x[i] + c->x1[i];
	fw_rmsnorm(c->x1, ly->ffn_norm, c->f, T, d, m->a.rms_eps);
	if (proj(c, fac, FW_GATE, ly->w[FW_GATE], c->f, T, ff, d, c->g) < 0 ||
	    proj(c, fac, FW_UP, ly->w[FW_UP], c->f, T, ff, d, c->u) < 0)
		return -1;
	add_bias(c->g, ly->bias[FW_GATE], T, ff);
	add_bias(c->u, ly->bias[FW_UP], T, ff);
	fw_act_mul(m->a.act, c->g, c->u, c->m, T * ff);
	if (proj(c, fac, FW_DOWN, ly->w[FW_DOWN], c->m, T, d, ff, c->y) < 0)
		return -1;
	add_bias(c->y, ly->bias[FW_DOWN], T, d);
	for (size_t i = 0; i < T * d; i++)
		c->y[i] = c->x1[i] + c->y[i];
	return 0;
}

double bk_flops(const fw_model *m, const bk_factor *const *fac, size_t T)
{
	/* the causal attention's, without a sliding window's saving */
	double sum = fw_attend_flops(m, T, 0);

	for (int i = 0; i < FW_NMAT; i++) {
		const bk_factor *f = fac ? fac[i] : NULL;
		double k = f ? (double)f->k * (double)(fw_rows(m, i) + fw_cols(m, i)) :
			       (double)fw_rows(m, i) * (double)fw_cols(m, i);

		sum += 2.0 * (double)T * k;
	}
	return sum;
}

/*
 * dx (T × n) += rmsnorm's transpose at x with weight w applied to dy:
 * dx_i += r·w_i·dy_i − x_i·r³/n·Σ_j w_j dy_j x_j,  r = (mean(x²) + eps)^−½
 */
static void norm_back_row(const fw_rowjob *j, size_t t)
{
	size_t n = j->n;
	const float *xr = j->x + t * n, *gr = j->dy + t * n, *w = j->w;
	double ss = 0, dot = 0;

	for (size_t i = 0; i < n; i++) {
		ss += (double)xr[i] * xr[i];
		dot += (double)w[i] * gr[i] * xr[i];
	}
	double r = 1.0 / sqrt(ss / (double)n + j->eps), k = r * r * r * dot / (double)n;
	for (size_t i = 0; i < n; i++)
		j->y[t * n + i] += (float)(r * w[i] * gr[i] - xr[i] * k);
}

void bk_rmsnorm_back(const float *x, const float *w, const float *dy, float *dx, size_t T,
		     size_t n, double eps)
{
	fw_each_row(&(fw_rowjob){ .row = norm_back_row, .x = x, .w = w, .dy = dy, .y = dx, .n = n,
			      .eps = eps }, T);
}

/* dS = P ⊙ (dP − rowsum(dP ⊙ P)) · scale of a block's rows, in place in dp (P is 0 where masked) */
static void softmax_back(const float *P, size_t ldp, float *dp, size_t rows, size_t n, float scale)
{
	for (size_t i = 0; i < rows; i++) {
		const float *pr = P + i * ldp;
		float *dr = dp + i * n;
		double dot = 0;

		for (size_t j = 0; j < n; j++)
			dot += (double)dr[j] * pr[j];
		for (size_t j = 0; j < n; j++)
			dr[j] = (float)(pr[j] * (dr[j] - dot) * scale);
	}
}

typedef struct {
	const fw_model *m;
	bk_cache *c;
	size_t T, window;
	float scale;
} bk_att_job;

/*
 * head h's share, block by block as the forward made them: dq_h, and the
 * head's own dk_h, dv_h (T × hd at column h·hd of dkh, dvh)
 */
static void att_back_head(void *ctx, size_t h, size_t thread)
{
	const bk_att_job *j = ctx;
	const fw_model *m = j->m;
	const bk_cache *c = j->c;
	float *dp = c->s.s + thread * FW_ATT_ROWS * j->T; /* FW_ATT_ROWS × T of this thread */
	size_t hd = m->hd, qd = m->qdim, kd = m->kvdim, T = j->T, g = h / (m->nh / m->nkv);
	const float *dout = c->dout + h * hd, *q = c->q + h * hd;
	const float *k = c->k + g * hd, *v = c->v + g * hd;
	float *dkh = c->dkh + h * hd, *dvh = c->dvh + h * hd;

	for (size_t t = 0; t < T; t++) {
		memset(dkh + t * qd, 0, hd * sizeof(float));
		memset(dvh + t * qd, 0, hd * sizeof(float));
	}
	for (size_t b = 0; b * FW_ATT_ROWS < T; b++) {
		size_t r0, r1, c0;

		fw_att_block(T, j->window, b, &r0, &r1, &c0);
		size_t rows = r1 - r0, n = r1 - c0;
		const float *P = c->p + h * T * T + r0 * T + c0;

		/* dP (rows × n) = do_h · v_gᵀ;  dv_h[c0:r1] += Pᵀ · do_h */
		mm(0, 1, rows, n, hd, dout + r0 * qd, qd, v + c0 * kd, kd, 0.0f, dp, n);
		mm(1, 0, n, hd, rows, P, T, dout + r0 * qd, qd, 1.0f, dvh + c0 * qd, qd);
		softmax_back(P, T, dp, rows, n, j->scale);
		/* dq_h[r0:r1] = dS · k_g;  dk_h[c0:r1] += dSᵀ · q_h */
		mm(0, 0, rows, hd, n, dp, n, k + c0 * kd, kd, 0.0f, c->dq + r0 * qd + h * hd, qd);
		mm(1, 0, n, hd, rows, dp, n, q + r0 * qd, qd, 1.0f, dkh + c0 * qd, qd);
	}
}

/*
 * from do (T × qdim): dq (T × qdim), dk and dv (T × kvdim), RoPE undone on
 * dq and dk; the heads on up to the scratch's threads, a kv head's dk, dv
 * the sum of its heads' in head order (the same bits at any thread count)
 */
static void attend_back(const fw_model *m, bk_cache *c, size_t T, size_t window)
{
	bk_att_job j = { .m = m, .c = c, .T = T, .window = window,
			 .scale = (float)(1.0 / sqrt((double)m->hd)) };
	size_t hd = m->hd, rep = m->nh / m->nkv, qd = m->qdim, kd = m->kvdim;
	size_t nt = fw_threads();

	nv_serial();
	nv_par_items(m->nh, nt > c->s.nthr ? c->s.nthr : nt, att_back_head, &j);
	nv_unserial();
	for (size_t t = 0; t < T; t++)
		for (size_t g = 0; g < m->nkv; g++)
			for (size_t e = 0; e < hd; e++) {
				const float *kh = c->dkh + t * qd + g * rep * hd + e;
				const float *vh = c->dvh + t * qd + g * rep * hd + e;
				float sk = kh[0], sv = vh[0];

				for (size_t r = 1; r < rep; r++) {
					sk += kh[r * hd];
					sv += vh[r * hd];
				}
				c->dk[t * kd + g * hd + e] = sk;
				c->dv[t * kd + g * hd + e] = sv;
			}
	fw_rope(&c->s, c->dq, T, m->nh, hd, 1);
	fw_rope(&c->s, c->dk, T, m->nkv, hd, 1);
}

/* through the heads' norms (qwen3): dq, dk become the gradients of their inputs qr, kr */
static void qk_norm_back(const fw_model *m, const fw_layer *ly, bk_cache *c, size_t T)
{
	size_t nq = T * m->qdim, nk = T * m->kvdim;

	/* q's gradient into o's (free: dout is spent), then back through the norm */
	memcpy(c->dout, c->dq, nq * sizeof(float));
	memset(c->dq, 0, nq * sizeof(float));
	bk_rmsnorm_back(c->qr, ly->q_norm, c->dout, c->dq, T * m->nh, m->hd, m->a.rms_eps);
	memcpy(c->dout, c->dk, nk * sizeof(float));
	memset(c->dk, 0, nk * sizeof(float));
	bk_rmsnorm_back(c->kr, ly->k_norm, c->dout, c->dk, T * m->nkv, m->hd, m->a.rms_eps);
}

typedef struct {
	int act;
	bk_cache *c;
} bk_act_job;

/* dg = dm ⊙ u ⊙ act'(g), du = dm ⊙ act(g) over elements lo..hi */
static void act_back(void *ctx, size_t lo, size_t hi)
{
	const bk_act_job *j = ctx;
	bk_cache *c = j->c;

	if (j->act == CMF_ACT_SILU) {
		nv_silu_back(c->g + lo, c->u + lo, c->dm + lo, c->dg + lo, c->du + lo, hi - lo);
		return;
	}
	for (size_t i = lo; i < hi; i++) {
		float g = c->g[i];

		c->dg[i] = c->dm[i] * c->u[i] * fw_act_grad(j->act, g);
		c->du[i] = c->dm[i] * fw_act(j->act, g);
	}
}

/* the MLP's part: dWd, dWg, dWu, and dx1 = dy + the FFN norm's share */
static void mlp_back(const fw_model *m, const fw_layer *ly, const bk_factor *const *fac,
		     bk_cache *c, const float *dy, float *dw[FW_NMAT])
{
	size_t T = c->T, d = m->d, ff = m->ff;

	proj_back(c, fac, FW_DOWN, ly->w[FW_DOWN], dw[FW_DOWN], c->m, dy, T, d, ff, c->dm, 0.0f);
	nv_par_range(T * ff, fw_threads(), FW_PAR_GRAIN, act_back, &(bk_act_job){ m->a.act, c });
	proj_back(c, fac, FW_GATE, ly->w[FW_GATE], dw[FW_GATE], c->f, c->dg, T, ff, d, c->df, 0.0f);
	proj_back(c, fac, FW_UP, ly->w[FW_UP], dw[FW_UP], c->f, c->du, T, ff, d, c->df, 1.0f);
	memcpy(c->dx1, dy, T * d * sizeof(float));
	bk_rmsnorm_back(c->x1, ly->ffn_norm, c->df, c->dx1, T, d, m->a.rms_eps);
}

void bk_backward(const fw_model *m, const fw_layer *ly, const bk_factor *const *fac, bk_cache *c,
		 const float *dy, float *dw[FW_NMAT], float *dx)
{
	size_t T = c->T, d = m->d, qd = m->qdim, kd = m->kvdim;
	/* with dx, da (T × d, in df: spent) = dq Wq + dk Wk + dv Wv */
	float *da = dx ? c->df : NULL;

	mlp_back(m, ly, fac, c, dy, dw);
	proj_back(c, fac, FW_O, ly->w[FW_O], dw[FW_O], c->o, c->dx1, T, d, qd, c->dout, 0.0f);
	attend_back(m, c, T, fw_window_of(m, ly->index));
	if (ly->q_norm)
		qk_norm_back(m, ly, c, T);
	proj_back(c, fac, FW_Q, ly->w[FW_Q], dw[FW_Q], c->a, c->dq, T, qd, d, da, 0.0f);
	proj_back(c, fac, FW_K, ly->w[FW_K], dw[FW_K], c->a, c->dk, T, kd, d, da, 1.0f);
	proj_back(c, fac, FW_V, ly->w[FW_V], dw[FW_V], c->a, c->dv, T, kd, d, da, 1.0f);
	if (!dx)
		return;
	/* dx = dx1 + the attention norm's share */
	memcpy(dx, c->dx1, T * d * sizeof(float));
	bk_rmsnorm_back(c->x, ly->attn_norm, c->df, dx, T, d, m->a.rms_eps);
}
