/*
 * nvgdev.h - nvg-encode's --device modes: the f64 CPU encoder (nvg.h), the
 * f32 device encoder (nvg_cl.h), or both with a comparison, for one or
 * several tensors that read the same input (one context, uploaded once,
 * --jobs tensors in flight on the device).
 *
 *   cpu     nv_encode() for each tensor
 *   opencl  the device for each tensor; no OpenCL device is an error
 *   auto    the device when an OpenCL GPU exists, else the CPU (with a note
 *           when there is no OpenCL platform at all)
 *   both    the device, then the CPU; the CPU payload is the one written,
 *           and a line "[cmp] NAME sel cpu X gpu Y rel ±Z%" compares the
 *           SEL errors of the two stored payloads
 *
 * The device path encodes nvg at the rank rule; dual-svid and a fixed rank
 * run on the CPU only (opencl/both refuse them, auto takes the CPU).
 */
#ifndef NV_NVGDEV_H
#define NV_NVGDEV_H

#include <stdio.h>

#include "clctx.h"
#include "encin.h"
#include "nvg.h"

typedef struct {
	nvcl_mode mode;
	long plat, dev; /* -1: NVG_CL_PLATFORM / NVG_CL_DEVICE, else the default */
	size_t jobs;    /* tensors in flight on the device (≥ 1) */
	int profile;    /* per-stage device profile (meaningful with jobs 1) */
} nvdev_opts;

typedef struct {
	nvcl_ctx c;
	nvcl_choice ch;
	nvdev_opts o;
} nvdev;

/* one tensor of a run */
typedef struct {
	const char *name; /* for messages and the [cmp] line */
	const nv_mat *w;  /* (m × n) */
	double bpw, kv;   /* its budget and kv multiplier */
} nvdev_tensor;

/* one tensor's outcome */
typedef struct {
	int st;             /* 0 encoded, 1 refused by the packer, -1 failed */
	nv_enc_result res;  /* st 0: the payload to write and its report line */
	double secs;        /* encode time (device, or CPU) */
	double flops;       /* the device's matrix-product flops (0 on the CPU) */
	char where[8];      /* "cpu" or "gpu": which encoder made res */
	char cmp[192];      /* both: the [cmp] line, else "" */
	char prof[1024];    /* the device profile line, or "" */
	char err[600];      /* st -1: why */
} nvdev_result;

/*
 * resolve the mode and open the device when one is used; method and rank
 * are checked against what the device path does.  -1 with reason; when the
 * kernels fail to build, d->c.build_log holds the compiler's log.  The note
 * (d->ch.note, may be "") is for the user.  nvdev_close in every case.
 */
int nvdev_open(nvdev *d, const nvdev_opts *o, const nv_enc_opts *eo);
void nvdev_close(nvdev *d);

/*
 * what no chosen encoder of the k tensors t[i] reads goes from hc before
 * the encode: the Cholesky factor l (n × n), which only the device and the
 * CPU latents of a matrix taller than wide read (nv_latents)
 */
void nvdev_trim_context(const nvdev *d, const nvdev_tensor *t, size_t k, nv_hctx *hc);

/*
 * encode k tensors t[i] (m_i × n) that share the context hc and the raw
 * SEL Gram hsel, with the options eo (its bpw and kv replaced by each
 * tensor's); out[i] for each.  Returns 0 when every tensor was encoded or
 * refused, -1 when one failed (its err says why).
 */
int nvdev_encode(nvdev *d, const nvdev_tensor *t, size_t k, const nv_hctx *hc,
		 const nv_mat32 *hsel, const nv_enc_opts *eo, nvdev_result *out);

/*
 * tensors 1..k-1 of a several-tensor run: spec[i] is first's with the source
 * src[i] (a raw file, or the tensor's name in first's model), the shape
 * shape[i] (NULL: first's, or the model's) and its own budget (plan) and kv
 * flag; the Grams, the context and the gauge stay first's.  in[i] gets W.
 * -1 with reason ("what 'subject': reason").
 */
int nvdev_load_more(const nv_encin_spec *first, const char *const *src,
		    const char *const *shape, size_t k, nv_encin_spec *spec, nv_encin *in);

void nvdev_result_free(nvdev_result *r);

#endif
