/*
 * normcal.h - the final RMSNorm's weight fitted to the source's logits
 * (calibration of the output's scale; blr-tune --final-norm).
 *
 * With the final hidden states of both models on the same calibration
 * positions, only the final norm's weight w (d) of the converted model
 * changes; its head E and every payload stay as they are:
 *
 *   n_t  = x_t / sqrt(mean(x_t²) + eps)          (d)  converted, unit weight
 *   z_t  = (w ⊙ n_t) · Eᵀ                         (vocab) its logits
 *   z°_t = (w° ⊙ n°_t) · E°ᵀ                      the source's logits
 *   KL(w) = mean_t Σ_v p_tv (log p_tv − log q_tv),  p = softmax z°, q = softmax z
 *   ∂KL/∂w_i = mean_t n_ti · [(q_t − p_t) · E]_i
 *
 * w = w_start ⊙ exp(s): Adam on s (scale-free steps, a weight's sign kept)
 * over mini-batches of FIT rows in a fixed-seed order.  Every eval_every
 * steps, and at the end, w is rounded to the dtype it is stored in and its
 * KL over the SEL rows is measured; the step with the lowest SEL KL is kept,
 * the start (step 0) included, so the result is never worse on SEL than
 * the start.  Same inputs and thread count, same bytes.
 *
 * The source's logits do not move: nc_fit keeps those of the SEL rows and
 * then of the first FIT rows, as many as cache_bytes holds (vocab·4 + 9
 * bytes a row), from their first computation, which takes a third of the
 * work of every later step and evaluation that reads them; kept or not,
 * the same bytes where the BLAS gives a row of a product the same bits
 * wherever it lies (nc_fit's note on chunk_source), else the same weights
 * to f32 rounding.
 */
#ifndef NV_NORMCAL_H
#define NV_NORMCAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	size_t d, vocab;
	const float *E;  /* (vocab × d) the converted model's head */
	const float *Es; /* (vocab × d) the source's head (may be E) */
	const float *n;  /* (rows × d) converted final states, rms-normalized, unit weight */
	const float *ns; /* (rows × d) source final states, rms-normalized, times w° */
	size_t fit, sel; /* rows: the first fit are FIT, the next sel are SEL */
} nc_data;

typedef struct {
	size_t steps;      /* Adam steps (0: only measure the start) */
	size_t batch;      /* FIT rows a step */
	size_t eval_every; /* SEL evaluations every this many steps, and at the end */
	double lr;         /* Adam's step on s = log(w / w_start) */
	uint64_t seed;     /* the order of the FIT rows */
	float (*round)(float); /* the stored dtype's rounding, NULL for f32 */
	int cosine;        /* the rate decays by nv_lr_at's cosine */
	size_t cache_bytes; /* the source's logits kept, at most (0: none kept) */
} nc_opts;

typedef struct {
	double fit_before, fit_after; /* mean KL over the FIT rows */
	double sel_before, sel_after; /* mean KL over the SEL rows (sel_after ≤ sel_before) */
	size_t best_step;             /* 0: the start was kept */
	double flops;                 /* sgemm flops issued */
	size_t kept, rows;            /* rows whose source logits were kept, of FIT + SEL */
} nc_result;

/*
 * the mean KL over rows idx[0..n) (or rows r0..r0+n−1 when idx is NULL) at
 * weights w (d); with grad (d), also its mean gradient with respect to w.
 * A non-finite logit or KL is an error naming the row.
 */
int nc_kl(const nc_data *D, const float *w, size_t r0, const size_t *idx, size_t n, double *kl,
	  double *grad, double *flops);

/*
 * the summed KL over rows r0..r0+n−1 at weights w into *kl, and gz (n × d)
 * = each row's (q_t − p_t)·E: the gradient of its KL with respect to the
 * normalized state's product w ⊙ n_t, where a backward through the model
 * starts (blr-tune --model).  flops accumulates.
 */
int nc_kl_back(const nc_data *D, const float *w, size_t r0, size_t n, double *kl, float *gz,
	       double *flops);

/* fit w (d) from w_start (d) as above; r gets the figures */
int nc_fit(const nc_data *D, const float *w_start, const nc_opts *o, float *w, nc_result *r);

#endif
