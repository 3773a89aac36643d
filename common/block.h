/*
 * block.h - one Llama block run forward with its intermediates kept, and
 * the backward pass from the gradient of its output to the gradients of
 * its seven projection matrices (blr-tune's block reconstruction).
 *
 * The forward is forward.h's fw_layer_run, step for step (the same
 * fw_rmsnorm, fw_rope and fw_attend, the same sgemm calls), for a
 * window of T positions:
 *
 *   a  = rmsnorm(x)·w_attn                 q, k, v = a·Wqᵀ, a·Wkᵀ, a·Wvᵀ (+b)
 *   q_h, k_h = rmsnorm(q_h)·w_qn, …   (qwen3)   RoPE(q, k)
 *   P_h = softmax(q_h k_gᵀ/√hd + mask)     o_h = P_h v_g
 *   x1 = x + o·Woᵀ (+b)                     f  = rmsnorm(x1)·w_ffn
 *   g, u = f·Wgᵀ, f·Wuᵀ (+b)                m  = act(g) ⊙ u
 *   y  = x1 + m·Wdᵀ (+b)
 *
 * and the backward, from dy (T × d):
 *
 *   dWd += dyᵀ m      dm = dy Wd      dg = dm ⊙ u ⊙ act'(g)     du = dm ⊙ act(g)
 *   dWg += dgᵀ f      dWu += duᵀ f    df = dg Wg + du Wu
 *   dx1 = dy + rmsnorm'(x1; w_ffn)ᵀ df
 *   dWo += dx1ᵀ o     do = dx1 Wo
 *   dP_h = do_h v_gᵀ  dv_g += P_hᵀ do_h
 *   dS_h = P_h ⊙ (dP_h − rowsum(dP_h ⊙ P_h)) / √hd
 *   dq_h = dS_h k_g   dk_g += dS_hᵀ q_h   (then RoPE's transpose on dq, dk,
 *                                          and the heads' norms' on qwen3)
 *   dWq += dqᵀ a      dWk += dkᵀ a        dWv += dvᵀ a
 *
 *   with dx: da = dq Wq + dk Wk + dv Wv,  dx = dx1 + rmsnorm'(x; w_attn)ᵀ da
 *
 * Nothing flows into the norms' weights or the biases.  The gradient of
 * the input x is only made when asked for (blr-tune --model chains the
 * blocks of a whole model; --layer takes x as data).  Everything is f32,
 * every product an nv_sgemm (the same bits at any thread count).
 */
#ifndef NV_BLOCK_H
#define NV_BLOCK_H

#include <stddef.h>

#include "forward.h"

/*
 * a projection in factored form, W = Σ_p A_p diag(ℓ_p) B_pᵀ with
 * A_p = diag(h_p) S_U,p (m × r) and B_p = diag(g_p) S_V,p (n × r) (blr(5)),
 * the paths' factors side by side: A = [A_1 A_2] (m × k), B = [B_1 B_2]
 * (n × k), L = diag(ℓ_1, ℓ_2), k = paths·r, so that W = A L Bᵀ.  The block
 * multiplies by it through its rank, never building W, and its backward
 * gives the gradient's factors instead of dW (T positions):
 *
 *   forward   Z = X B (kept)          Y = Z (A L)ᵀ
 *   backward  P += dYᵀ Z  (= dW B)     F = dY A
 *             Q += Xᵀ F   (= dWᵀ A)    dX = F (B L)ᵀ
 *
 * 2T·k(m + n) forward and twice that backward, against 2T·m·n and twice
 * that with W dense, and no W to build from the scales.
 */
typedef struct {
	size_t k;
	const float *a, *al;  /* (m × k) A, A L */
	const float *b, *bl;  /* (n × k) B, B L */
	float *pg, *qg;       /* (m × k), (n × k): the backward adds P, Q */
} bk_factor;

typedef struct {
	size_t tmax, T;
	const float *x;        /* the input of the last forward (borrowed) */
	fw_scratch s;          /* RoPE tables */
	float *a, *q, *k, *v;  /* (T × d), (T × qdim), (T × kvdim) ×2; q, k after RoPE */
	float *qr, *kr;        /* (T × qdim), (T × kvdim): q, k before the heads' norms (qwen3) */
	float *p;              /* (nh × T × T) attention probabilities */
	float *o, *x1, *f;     /* (T × qdim), (T × d), (T × d) */
	float *g, *u, *m;      /* (T × ff) gate, up, silu(gate)·up */
	float *y;              /* (T × d) the block's output */
	/* backward scratch */
	float *dm, *dg, *du, *df, *dx1, *dout, *dq, *dk, *dv;
	float *dkh, *dvh;      /* (T × qdim) each head's share of dk, dv */
	float *z[FW_NMAT];     /* (T × k) Z of each factored projection */
	size_t zk[FW_NMAT];    /* the k z[i] holds */
	float *fs;             /* (tmax × 2·max(d, qdim, ff)) the backward's F (blr(5): a path's
				* rank is at most min(m, n), so k ≤ 2·min(m, n)) */
	int shares;            /* the RoPE tables and backward scratch are another cache's */
} bk_cache;

int bk_init(bk_cache *c, const fw_model *m, size_t tmax);
void bk_free(bk_cache *c);

/*
 * c gets forward intermediates of its own (a … y, bk_forward_bytes of
 * them) and shares the RoPE tables and the backward's scratch of full (from
 * bk_init, freed after c): the caches of several layers kept from a
 * forward for their backward (blr-tune --end-to-end)
 */
int bk_init_sharing(bk_cache *c, const fw_model *m, const bk_cache *full);
size_t bk_forward_bytes(const fw_model *m, size_t tmax);

/*
 * the block of layer ly on x (T × d), intermediates into c, output c->y;
 * with fac (NULL, or FW_NMAT entries), projection i is fac[i] where that is
 * not NULL (ly->w[i] is then not read), else ly->w[i].  -1 with reason
 * (T beyond the cache, no memory for Z).
 */
int bk_forward(const fw_model *m, const fw_layer *ly, const bk_factor *const *fac, bk_cache *c,
	       const float *x, size_t T);

/* the flops of that forward on T positions (its backward's are twice as many) */
double bk_flops(const fw_model *m, const bk_factor *const *fac, size_t T);

/*
 * after bk_forward with the same fac (its input still in place): for the
 * output gradient dy (T × d) = ∂L/∂y, dw[i] (out × in of projection i) +=
 * ∂L/∂W_i (none when dw[i] is NULL), or for a factored projection fac[i]'s
 * P and Q (dw[i] is then not read); when dx is not NULL, dx (T × d) = ∂L/∂x
 * (dx may be dy)
 */
void bk_backward(const fw_model *m, const fw_layer *ly, const bk_factor *const *fac, bk_cache *c,
		 const float *dy, float *dw[FW_NMAT], float *dx);

/*
 * dx (T × n) += the transpose of y = rmsnorm(x)·w at x applied to dy: the
 * gradient of x for the gradient dy of y
 */
void bk_rmsnorm_back(const float *x, const float *w, const float *dy, float *dx, size_t T,
		     size_t n, double eps);

#endif
