/*
 * nvg_cl.h - the nvg encoder in f32 on an OpenCL device (nvg-encode
 * --device opencl|auto|both): the same stages as the f64 CPU encoder (the
 * seed's nvg.rs) and the same payload, report line and refusals.
 *
 *   HCtx upload · wh = W·Hf · latents (whitened, metric L Lᵀ; eig on the
 *   host) · weighted ITQ (50 iterations, r×r polar on the host) · svid_path
 *   · als (exact ℓ, h, g block solves; r×r and n×n solves on the host) ·
 *   flip_u (one work-item a row) · gptq_v (act order, 128-column blocks, one
 *   work-group a block, in rank space) · refine · selection on SEL · pack
 *
 * Matrix products go through clBLAST; the small factorizations through
 * LAPACKE in f64.  One input context is uploaded once and shared by every
 * tensor that reads the input; nvcl_encode_many keeps several tensors in
 * flight, each on its own queue and host thread, and gives each tensor the
 * bytes it would get alone.
 */
#ifndef NV_NVG_CL_H
#define NV_NVG_CL_H

#include <stddef.h>
#include <stdint.h>

#include "clctx.h"

/* one input's context on the host (f64, row-major), as hctx-build makes it */
typedef struct {
	size_t n;
	const double *hf;     /* (n × n) damped Gram G + ρ·tr(G)/n·I */
	const double *l;      /* (n × n) lower Cholesky factor of hf */
	const double *sqd;    /* (n) √diag(hf) */
	const uint32_t *perm; /* (n) act order: diag(hf) descending */
	const double *uc;     /* (n × n) upper Cholesky factor of the permuted inverse */
	double ridge;         /* δ: hf = G + δ·I for the FIT Gram G (the report) */
	const float *hsel;    /* (n × n) SEL Gram, undamped (selection and report) */
} nvcl_hin;

typedef struct nvcl_hctx nvcl_hctx;

/* upload an input context to c's device; NULL with reason */
nvcl_hctx *nvcl_hctx_upload(nvcl_ctx *c, const nvcl_hin *in);
void nvcl_hctx_free(nvcl_hctx *h);

/* one tensor to encode */
typedef struct {
	const char *name; /* for messages */
	const float *w;   /* (m × n) target */
	size_t m, n;
	double bpw;       /* bits per weight asked for */
	double kv;        /* the kv multiplier (1 for most tensors) */
	int paths;        /* 0: choose on SEL between P=2 and P=1, else 1 or 2 */
	int sweeps;       /* refinement sweeps of each candidate */
	int try_sweeps;   /* ALS sweeps of each refinement try */
} nvcl_job;

enum { NVCL_OK = 0, NVCL_REFUSED = 1, NVCL_FAILED = -1 };

typedef struct {
	int status;       /* NVCL_OK, NVCL_REFUSED (the packer refused), NVCL_FAILED */
	uint8_t *bytes;   /* the payload (NVCL_OK), malloc'd */
	size_t len;
	int paths;
	size_t rank;
	double fit, sel;  /* relative H-errors of the stored payload */
	double secs;      /* wall time of the encode */
	double flops;     /* matrix-product flops run on the device */
	char line[512];   /* "pick P2 r544 | sel: init … P2 … P1 … | stored fit … sel …" */
	char prof[1024];  /* per-stage profile (when asked) */
	char err[512];    /* the reason (NVCL_FAILED, or the packer's for NVCL_REFUSED) */
} nvcl_result;

/* encode one tensor; profile: time each stage (waits for the device after each) */
int nvcl_encode(nvcl_ctx *c, const nvcl_hctx *hc, const nvcl_job *job, int profile,
		nvcl_result *res);

/*
 * encode k tensors, inflight of them at once (each on its own thread, and on
 * a GPU its own queue; elsewhere they share one); res[i] for jobs[i].  done
 * (may be NULL) is called under a lock as each tensor finishes.  Returns 0 when every tensor was encoded or refused,
 * -1 when one failed (its res says why).
 */
int nvcl_encode_many(nvcl_ctx *c, const nvcl_hctx *hc, const nvcl_job *jobs, size_t k,
		     size_t inflight, int profile, nvcl_result *res,
		     void (*done)(void *arg, size_t i, const nvcl_result *r), void *arg);

/* device bytes one tensor needs besides the shared context (for messages) */
size_t nvcl_tensor_bytes(size_t m, size_t n, size_t r);

void nvcl_result_free(nvcl_result *r);

#endif
