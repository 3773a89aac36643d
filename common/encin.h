/*
 * encin.h - the inputs of one encode, as nvg-encode names them: the matrix
 * (raw f32, a CMF tensor, a transport target), the FIT and SEL Grams, the
 * FIT context (read and checked against the matrix and the FIT Gram, or
 * built), the budget from a plan, and the per-head row gauge.
 *
 * Failures set the reason as "what 'subject': reason" (err.h), the form a
 * tool prints after its name.
 */
#ifndef NV_ENCIN_H
#define NV_ENCIN_H

#include <stddef.h>
#include <stdint.h>

#include "cmf.h"
#include "hctx.h"
#include "linalg.h"
#include "nvg.h"

typedef struct {
	const char *w;           /* raw f32 matrix, or NULL */
	const char *target;      /* raw f32 transport target (replaces the matrix), or NULL */
	const char *model, *tname, *target_from; /* CMF source, tensor name, target model */
	const char *plan;        /* plan file, or NULL */
	const char *fit, *sel, *hctx; /* NVGG Grams, context file (NULL: built from fit) */
	const char *gauge, *blocks;   /* "invE" and the head blocks, or NULL */
	const char *cross;       /* NVGC E[x_q x_srcᵀ] on FIT: the transport target, or NULL */
	const char *cross_sel, *src_sel; /* NVGC on SEL and NVGG of x_src on SEL, or NULL */
	double cross_damp;       /* λ = cross_damp·tr(G)/n */
	unsigned long long shuffle;   /* gauge placebo seed, 0 none */
	size_t m, n;             /* the shape (from --shape, or the model) */
	double bpw, rho;
	int have_bpw, kv;        /* kv: the tensor is a GQA k/v projection */
	int nvg;                 /* the method needs the context */
	int no_l;                /* its Cholesky factor l is not needed: not kept */
	int sel_later;           /* the SEL Gram not held: read for each use (nv_encin_sel_load) */
} nv_encin_spec;

/* a moment file read again after its first read, which validated it whole:
 * each later read must find the same width, count and CRC-32 */
typedef struct {
	const char *path;        /* NULL: none */
	int cross;               /* an NVGC */
	size_t n;
	uint64_t count;
	uint32_t crc;
} nv_moment_src;

typedef struct {
	nv_mat w, hfit;          /* (m × n), (n × n); absent ones empty, and hfit freed once
				  * the context is made */
	nv_mat32 hsel;           /* (n × n) in f32, as its file holds it; or empty (sel_later) */
	nv_moment_src sel_src;   /* the SEL Gram's file, read again when not held */
	nv_hctx hc;
	int have_hc;
	uint32_t fit_crc;        /* CRC-32 of the FIT Gram's values */
	uint64_t fit_count;
	double *gauge;           /* (m) row gauge applied to w, or NULL */
	size_t gauge_blocks;
	double gauge_lo, gauge_hi;
	nv_mat wsrc;             /* (m × n) W itself when w is its transport target */
	nv_moment_src csel, ssel; /* the SEL cross-moment and source Gram, read once the
				   * payload is made (nv_encin_transport_err) */
	uint64_t sel_count;
} nv_encin;

/* open the model, find the tensor: shape (checked against a given one) and
 * the GQA k/v flag; cf stays open for nv_encin_load */
int nv_encin_model(nv_encin_spec *s, cmf_file *cf);

/* the budget from s->plan: tensor rule, layer rule, else s->bpw; a kept or
 * uncovered tensor is an error */
int nv_encin_plan(nv_encin_spec *s);

/* read and check everything; the "hctx" stage is timed into prof */
int nv_encin_load(const nv_encin_spec *s, const cmf_file *cf, nv_encin *in, nv_prof *prof);
void nv_encin_free(nv_encin *in);

/* the SEL Gram read again (arg: the nv_encin's sel_src), for
 * nv_enc_opts.sel_load: -1 with reason when it cannot be read or is no
 * longer the file first read */
int nv_encin_sel_load(void *arg, nv_mat32 *out);

/*
 * the transport objective on SEL of a payload (bytes, len) for W:
 * E‖Ŵx_q − W x_src‖² / E‖W x_src‖²
 *   = (tr(Ŵ G Ŵᵀ) − 2 tr(Ŵ C Wᵀ) + tr(W S Wᵀ)) / tr(W S Wᵀ)
 * with G, C, S the SEL Gram, cross-moment and source Gram, each read when
 * its product is made and let go after it
 */
int nv_encin_transport_err(const nv_encin *in, const uint8_t *bytes, size_t len, double *out);

#endif
