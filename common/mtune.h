/*
 * mtune.h - model reconstruction: the continuous scales of every BLR path
 * of a whole converted model tuned together, signs fixed, so that its
 * next-token distributions follow the source model's (blr-tune --model;
 * DESIGN.md, "Following the source").
 *
 * The loss is the mean over the FIT positions of KL(source ‖ model), the
 * source's distribution from its final states (normalized, times its final
 * norm's weight) through its head; the model's from its own final norm and
 * head, which stay as they are, as do every tensor that is not a payload.
 * A step runs a batch of FIT windows forward through every layer, keeping
 * each layer's input, then back from the head's gradient (normcal.h's
 * nc_kl_back) through the final norm and every block in turn (block.h,
 * with the input's gradient), the tuned projections multiplied in factored
 * form through their rank at their current scales (block.h's bk_factor,
 * tparam.h), never built as f32 matrices.  Only one layer's signs and
 * factors are in memory at a time, and the model's other tensors are
 * converted per visit, so the memory is one layer plus the batch's states
 * at every layer — save for the last layers that fit in D->keep bytes,
 * which keep the block's intermediates from the forward to the backward
 * instead of running it again.
 *
 * As in tune.h: Adam on the log-multipliers, a fixed-seed order of the FIT
 * windows; every eval_every steps and after the last the scales are stored
 * as f16 and the payloads' mean KL over the SEL windows chooses, the start
 * counting as step 0, so the tuned model is never worse on SEL than the
 * untuned one.  Same inputs and thread count, same bytes.
 */
#ifndef NV_MTUNE_H
#define NV_MTUNE_H

#include <stddef.h>
#include <stdint.h>

#include "forward.h"
#include "tune.h"

typedef struct {
	const uint32_t *tok;  /* the calibration tokens the windows cut */
	const fw_window *w;   /* FIT windows first, then SEL */
	size_t nw;
	const float *ns;      /* (Σ (len − 1) × d) the source's final states, normalized, × w° */
	const float *E, *Es;  /* (vocab × d) the model's head and the source's (may be E) */
	/* NULL, or called with each SEL measurement (the start as step 0): the step, its mean KL */
	void (*progress)(size_t step, double sel);
	/*
	 * bytes that layers may keep from a step's forward for its backward:
	 * the last layers that fit keep their weights and the batch's
	 * intermediates, the others are loaded and run again (0: all are).
	 * The bytes written do not depend on it.
	 */
	size_t keep;
} mt_data;

typedef struct {
	double fit_before, fit_after; /* mean KL(source ‖ model) per position, on as many of the
				       * first FIT windows as there are SEL windows */
	double sel_before, sel_after; /* the same on SEL (sel_after ≤ sel_before) */
	size_t best_step;
	double flops;
} mt_result;

/*
 * tune the payloads in[0..nin) (projections of any layers of m, each named
 * once) against the source's distributions in D; out[i] gets fresh payload
 * bytes for in[i]
 */
int mt_tune(fw_model *m, const tn_input *in, size_t nin, const mt_data *D, const tn_opts *o,
	    uint8_t **out, mt_result *r);

/*
 * the checks of mt_tune on its payloads alone (each a projection of m,
 * named once, a valid payload of the projection's shape): cheap, before
 * the source is run
 */
int mt_check(fw_model *m, const tn_input *in, size_t nin);

/*
 * the mean KL over the windows win[0..nb) of D at the payloads' own scales,
 * and its gradient with respect to every scale's log-multiplier: g[i]
 * (paths × (m + n + r), path by path, h | g | ℓ) for in[i] (the gradient
 * mt_tune steps on, for its tests)
 */
int mt_gradient(fw_model *m, const tn_input *in, size_t nin, const mt_data *D, const size_t *win,
		size_t nb, double *kl, double **g);

#endif
