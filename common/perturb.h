/*
 * perturb.h - what one payload alone does to the model's output.  For each
 * payload of layer l, the mean KL(source ‖ source with that payload in
 * place of its projection) over the positions of some windows, both models
 * run from the source's own states entering l through the source's later
 * layers and its head (blr-tune --perturb; convert.mk's sweep with
 * SWEEP_ERROR=kl: plan curves measured where the model is judged, not in
 * the tensor or the block).
 *
 * The windows are run together: memory (nin + 1) planes of rows × d
 * floats, one layer of weights at a time.  Same inputs and thread count,
 * same numbers.
 */
#ifndef NV_PERTURB_H
#define NV_PERTURB_H

#include <stddef.h>

#include "forward.h"
#include "tune.h"

/*
 * kl[i] for each of in[0..nin) (projections of layer l of m, names may
 * repeat: each payload is put in alone), over the windows w[0..nw), whose
 * rows x (Σ (len − 1) × d) enter layer l in the source model; E is m's head
 * as f32 (vocab × d).  flops accumulates the products' flops.  A payload of
 * another layer or shape is an error naming it.
 */
int pt_kl(const fw_model *m, int l, const tn_input *in, size_t nin, const float *x,
	  const fw_window *w, size_t nw, const float *E, double *kl, double *flops);

#endif
