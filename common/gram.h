/*
 * gram.h - calibration Grams: f64 accumulation of activation rows through
 * dsyrk, the FIT/SEL split, and the capture of a layer's four leads from
 * the model's own forward (DESIGN.md, "The forward engine"; NVGG in nvgg.h).
 *
 * A Gram accumulates G += Xᵀ X (upper triangle, f64) over row blocks
 * X (T × n) and ends as the mean (1/count)·Σ x xᵀ, symmetric, stored f32.
 */
#ifndef NV_GRAM_H
#define NV_GRAM_H

#include <stddef.h>
#include <stdint.h>

#include "forward.h"
#include "nvgg.h"
#include "state.h"

typedef struct {
	size_t n;
	uint64_t count;
	double *g;   /* (n × n), upper triangle accumulated */
	double *buf; /* (GR_BLOCK × n) rows converted to f64 */
	double *buf2; /* (GR_BLOCK × n) the source stream's rows (cross only) */
	int cross;    /* a cross-moment: g is the whole (n × n) Σ x_q x_srcᵀ */
} gr_acc;

#define GR_BLOCK 256

int gr_init(gr_acc *a, size_t n);
void gr_free(gr_acc *a);

/* add rows x (T × n); a non-finite value is an error naming its row and channel */
int gr_add(gr_acc *a, const float *x, size_t T);

/* a cross-moment accumulator (NVGC): C += X_qᵀ X_src through dgemm, f64 */
int gr_init_cross(gr_acc *a, size_t n);

/* add the row pairs xq, xs (T × n each), the same positions of two streams */
int gr_add_cross(gr_acc *a, const float *xq, const float *xs, size_t T);

/* the mean Gram, or the mean cross-moment (needs count ≥ 1) */
int gr_finish(const gr_acc *a, nvgg *out);

/*
 * filter mode: raw f32 rows of width n from the files in order ("-" =
 * stdin).  With split, the first fit rows go to acc[0] and the next sel
 * rows to acc[1] (rows after them are not read); without, every row goes
 * to acc[0].  Each file must hold whole rows.
 */
int gr_filter(const char *const *files, size_t nfiles, size_t n, int split, size_t fit,
	      size_t sel, gr_acc acc[2]);

/* the leads, in the order of gr_capture's accumulators */
enum { GR_Q, GR_O, GR_GATE, GR_DOWN, GR_NLEAD };
extern const char *const gr_lead_name[GR_NLEAD];

typedef struct {
	const uint32_t *tok;  /* the token stream */
	size_t ntok;
	size_t fit, sel;      /* tokens of each part (sel 0: one part) */
	size_t window;        /* tokens per window */
	int layer;
	const char *state_in;  /* S_L, or NULL: from the embeddings */
	const char *state_out; /* S_{L+1}, or NULL */
	const char *cross_in;  /* S_L^src (the source stream), or NULL: see gr_capture_cross */
	const fw_override *ov; /* patches of layer L */
	size_t nov;
	int grams;             /* accumulate the leads' Grams */
	/* called after each window (may be NULL) */
	void (*progress)(void *ctx, size_t win_done, size_t nwin, size_t rows_done, size_t rows);
	void *ctx;
} gr_capture_opts;

/*
 * run layer L over the calibration windows, from S_L or from the
 * embeddings through layers 0..L−1; accumulate acc[lead][part] (widths d,
 * qdim, d, ff, initialised by gr_capture) and write S_{L+1}
 */
int gr_capture(fw_model *m, const gr_capture_opts *o, gr_acc acc[GR_NLEAD][2],
	       double *flops);

/*
 * gr_capture that also runs the float layer L over the source stream's
 * states o->cross_in (S_L^src; needs o->state_in, no patches) and
 * accumulates each lead's cross-moment E[x_q x_srcᵀ] into xacc[lead][part]
 */
int gr_capture_cross(fw_model *m, const gr_capture_opts *o, gr_acc acc[GR_NLEAD][2],
		     gr_acc xacc[GR_NLEAD][2], double *flops);

/* the state header for a run (layer: the layer the states enter) */
int gr_state_header(const fw_model *m, const gr_capture_opts *o, uint32_t layer,
		    st_header *h);

#endif
