/*
 * tparam.h - the continuous scales of one BLR payload as parameters: what
 * the two scale tuners (tune.c, one block; mtune.c, the whole model) step.
 *
 * A path is Ŵ_p = diag(h) S_U diag(ℓ) S_Vᵀ diag(g) (blr(5)).  The block
 * multiplies by the payload in factored form (block.h's bk_factor, built
 * by tp_factor from the current scales), and its backward gives, for dW
 * the gradient of a loss with respect to Ŵ, P = dW·(diag(g) S_V) (m × r)
 * and Q = dWᵀ·(diag(h) S_U) (n × r), from which:
 *
 *   ∂/∂h_i = Σ_k S_U,ik ℓ_k P_ik    ∂/∂ℓ_k = Σ_i h_i S_U,ik P_ik
 *   ∂/∂g_j = Σ_k S_V,jk ℓ_k Q_jk
 *
 * Every scale v is parametrised as v_start·exp(s) (relative steps, no sign
 * change, a zeroed rank scale stays zero), and Adam steps on s.
 *
 * What a tensor holds between visits is its payload bytes and, per scale,
 * the start, the current value, s and Adam's two moments.  The signs as
 * ±1 floats, the factors, P and Q (4(m + n)·r floats a path) and the
 * backward's scratch exist only between tp_open and tp_close, so that a
 * whole model's tensors can be tuned one layer in memory at a time.
 */
#ifndef NV_TPARAM_H
#define NV_TPARAM_H

#include <stddef.h>
#include <stdint.h>

#include "block.h"

typedef struct {
	int which;                /* FW_Q … FW_DOWN */
	size_t m, n, r, np, nv;   /* nv = m + n + r scales a path: h | g | ℓ */
	uint8_t *bytes;           /* the candidate payload: the start's, scales rewritten */
	size_t len, off[2];       /* byte offsets of each path's h (g and ℓ follow) */
	float *v0[2], *v[2];      /* (nv) start and current scales */
	double *s[2], *am[2], *av[2], *gr[2]; /* (nv) log-multipliers, moments, gradient */
	/* between tp_open and tp_close */
	float *su[2], *sv[2];     /* (m × r), (n × r) ±1 */
	/* the paths side by side, k = np·r columns (block.h) */
	float *a, *al;            /* (m × k) diag(h) S_U, and times diag(ℓ) */
	float *b, *bl;            /* (n × k) diag(g) S_V, and times diag(ℓ) */
	float *pg, *qg;           /* (m × k), (n × k) P and Q */
	bk_factor fac;            /* the block's view of them */
} tp_tensor;

/* the scales of a payload (a copy of its bytes is kept) as projection which */
int tp_init(tp_tensor *t, int which, const uint8_t *payload, size_t len);
void tp_free(tp_tensor *t);

/* the signs and factors of a visit */
int tp_open(tp_tensor *t);
void tp_close(tp_tensor *t);

/*
 * the arrays of a closed visit, kept for the next visit of a tensor of the
 * same shape: a model's layers, visited in turn, then reuse one set of
 * pages for each kind of projection where every visit mapped and zeroed
 * fresh ones (a 7B model's arrays are above malloc's mmap threshold, and
 * the page faults took a quarter of an end-to-end step).  No value carries
 * over: a visit writes every entry before it reads it.
 */
typedef struct {
	size_t m, n, r, np;
	float *su[2], *sv[2], *a, *al, *b, *bl, *pg, *qg;
} tp_spare;

/* tp_open taking sp's arrays when their shape is t's (sp NULL: tp_open) */
int tp_open_from(tp_tensor *t, tp_spare *sp);
/* tp_close giving the arrays of an open t to sp, whose own are freed (sp NULL: tp_close) */
void tp_close_into(tp_tensor *t, tp_spare *sp);
void tp_spare_free(tp_spare *sp);

/* (open) the factors at the current scales, P and Q zeroed: the block's view of the tensor */
const bk_factor *tp_factor(tp_tensor *t);

/* (open) gr ← ∂L/∂s of every scale, from the P and Q the backward added up */
void tp_chain(tp_tensor *t);

/* tp_factor, or tp_chain, of each of n open tensors, each computed whole by
 * one of nv_get_threads() threads (the same bytes at any count) */
void tp_factor_many(tp_tensor *const *t, size_t n);
void tp_chain_many(tp_tensor *const *t, size_t n);

/* one Adam step (1-based) of rate lr on s from gr; the scales follow */
void tp_adam(tp_tensor *t, double lr, size_t step);

/* the current scales as f16 into bytes; -1 when one leaves f16's range (bytes then partly written) */
int tp_store(tp_tensor *t);

/* out[i] = a fresh copy of t[i]'s bytes (nt of them); on failure none is left */
int tp_snapshot(const tp_tensor *t, size_t nt, uint8_t **out);

/* t[i]'s bytes ← from[i] */
void tp_reload(tp_tensor *t, size_t nt, uint8_t *const *from);

/* frees out[0..nt) and sets them NULL */
void tp_snapshot_free(uint8_t **out, size_t nt);

/* the schedule of a tuning */
typedef struct {
	size_t steps, batch, eval_every; /* batch: FIT windows a step */
	double lr;
	uint64_t seed;
	int cosine;                      /* the rate decays by nv_lr_at's cosine */
} tp_sched;

/* what a tuner does for tp_steps */
typedef struct {
	void *ctx;
	/* every tensor's gr for the FIT windows win[0..nb) */
	int (*grad)(void *ctx, const size_t *win, size_t nb);
	/* the SEL loss of the tensors' stored bytes */
	int (*sel)(void *ctx, double *loss);
	/* NULL, or told that the step just measured is the best so far */
	void (*kept)(void *ctx);
	/* NULL, or told each SEL measurement (progress) */
	void (*measured)(void *ctx, size_t step, double sel);
} tp_loop;

/*
 * the steps of a tuning: Adam on every tensor over batches of the FIT
 * windows fit[0..nfit) in an order reshuffled (seed) at each pass; every
 * eval_every steps and after the last, the scales stored as f16 (a step
 * whose scales leave f16 is skipped) and measured on SEL.  *best holds the
 * start's SEL loss and gets the best; when a step is better, keep[i] gets
 * tensor i's bytes and *best_step the step.
 */
int tp_steps(tp_tensor *t, size_t nt, const size_t *fit, size_t nfit, const tp_sched *o,
	     const tp_loop *lp, uint8_t **keep, double *best, size_t *best_step);

#endif
