/*
 * tune.h - block reconstruction: the continuous scales of every BLR path of
 * one layer tuned together, signs fixed, so that the converted block on the
 * converted stream's states follows the source block on the source's
 * (blr-tune --layer; DESIGN.md, "Following the source").
 *
 * The gradient of the loss with respect to the layer's Ŵ (block.h) reaches
 * the scales as tparam.h says (every scale v = v_start·exp(s)), and Adam
 * steps on s over batches of FIT windows in a fixed-seed order, the loss
 * the mean over positions of ρ_t·‖block_q(x_q) − y_src‖², ρ_t the
 * position's weight (tn_row_weights).  Every eval_every steps and after the
 * last, the scales are stored as f16 in payloads of the same bytes otherwise, and
 * those payloads' loss over the SEL windows chooses: the start counts as
 * step 0, so a tuned layer is never worse on SEL than the untuned one.
 * Same inputs and thread count, same bytes.
 */
#ifndef NV_TUNE_H
#define NV_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "forward.h"
#include "tparam.h"

typedef struct {
	const char *name;       /* a projection of the layer */
	const uint8_t *payload; /* its BLR bytes (borrowed) */
	size_t len;
} tn_input;

typedef tp_sched tn_opts;

/*
 * the loss's weight of a position: 1 (TN_LOSS_MSE), or the inverse of the
 * source output's mean square there (TN_LOSS_NORMED), which is what the
 * next RMSNorm passes on of an error, so that the few positions that carry
 * a massive activation (SmolLM2: the first of every window from layer 12
 * on, 180 times the median norm) do not decide the loss alone
 */
typedef enum { TN_LOSS_MSE, TN_LOSS_NORMED } tn_loss;

/*
 * *w (rows) fresh: each row's weight for loss, scaled to a mean of 1 over
 * the rows; a source row of zero or non-finite mean square is an error
 */
int tn_row_weights(const float *ysrc, size_t rows, size_t d, tn_loss loss, double **w);

typedef struct {
	double fit_before, fit_after; /* mean ρ_t‖y − y_src‖² per position, FIT windows */
	double sel_before, sel_after; /* the same on SEL (sel_after ≤ sel_before) */
	double norm_before, norm_after; /* √(Σ‖y‖² / Σ‖y_src‖²) on SEL: < 1 when the outputs shrink */
	size_t best_step;
	double flops;
} tn_result;

/*
 * what the loss of layer l compares, over windows w[0..nw) of rows (FIT
 * windows first): x (rows × d) the converted stream's states entering the
 * layer; ahead 0: the tuned block's output against ysrc, the source block's
 * output on the source stream's states; ahead 1: that output passed on
 * through the source's block l + 1 (its own weights, fixed), against ysrc =
 * the source's blocks l and l + 1 on the source stream's states, so that
 * the loss sees what the next block makes of an error (the attention of
 * every later position to a massive activation's, say); rw (rows) the
 * positions' weights (tn_row_weights of ysrc; NULL: all 1)
 */
typedef struct {
	const float *x, *ysrc;
	const double *rw;
	const fw_window *w;
	size_t nw;
	int ahead;
	float *next; /* (rows × d) the tuned block's own outputs as stored, every window
		      * (fw_layer_run's bits: the states after the layer); NULL: not asked */
} tn_data;

/*
 * tune the payloads in[0..nin) of layer l of m on dt; out[i] gets fresh
 * payload bytes for in[i].  ahead 1 needs a layer after l.
 */
int tn_tune(const fw_model *m, int l, const tn_input *in, size_t nin, const tn_data *dt,
	    const tn_opts *o, uint8_t **out, tn_result *r);

/*
 * the rows of the calibration windows entering layer l: from a state file
 * (checked against the tokens, windows, width and layer: state.h), or with
 * state NULL the embeddings (layer 0 only).  *x (rows × d) and *w (nw
 * windows) are fresh.
 */
int tn_rows(const fw_model *m, const char *state, int l, const uint32_t *tok, size_t ntok,
	    size_t fit, size_t sel, size_t window, float **x, fw_window **w, size_t *nw,
	    size_t *rows);

/* y (rows × d) = the float block l of m on x, window by window */
int tn_block_out(const fw_model *m, int l, const float *x, const fw_window *w, size_t nw,
		 float *y);

#endif
