/* nvgdev.c - the --device modes of nvg-encode (see nvgdev.h) */
#include "nvgdev.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "mem.h"
#include "nvg_cl.h"

int nvdev_open(nvdev *d, const nvdev_opts *o, const nv_enc_opts *eo)
{
	int device_only = o->mode == NVCL_OPENCL || o->mode == NVCL_BOTH;

	memset(d, 0, sizeof(*d));
	d->o = *o;
	if (d->o.jobs < 1)
		d->o.jobs = 1;
	if (device_only && eo->method != NV_METHOD_NVG) {
		nv_seterr("the device path encodes nvg only (dual-svid runs with --device cpu)");
		return -1;
	}
	if (device_only && eo->rank != 0) {
		nv_seterr("the device path takes the rank from the budget, not a fixed rank");
		return -1;
	}
	if (o->mode == NVCL_AUTO && (eo->method != NV_METHOD_NVG || eo->rank != 0)) {
		d->ch.use_cpu = 1;
		return 0;
	}
	return nvcl_resolve(o->mode, o->plat, o->dev, &d->c, &d->ch);
}

void nvdev_close(nvdev *d)
{
	nvcl_close(&d->c);
}

void nvdev_result_free(nvdev_result *r)
{
	nv_enc_result_free(&r->res);
}

/* the CPU encoder for tensor i */
static void cpu_one(const nv_mat *w, const nv_hctx *hc, const nv_mat *hfit, const nv_mat *hsel,
		    const nv_enc_opts *eo, nvdev_result *r)
{
	double t = nv_now();
	int rc = nv_encode(w, hc, hfit, hsel, eo, &r->res);

	r->secs = nv_now() - t;
	strcpy(r->where, "cpu");
	r->st = rc == 0 ? 0 : rc == 1 ? 1 : -1;
	if (rc != 0)
		snprintf(r->err, sizeof(r->err), "%s", nv_err());
}

/* a device result as the CPU encoder's result type */
static void from_device(const nvcl_job *job, nvcl_result *cr, nvdev_result *r)
{
	nv_enc_result *e = &r->res;
	size_t rank;

	memset(e, 0, sizeof(*e));
	r->secs = cr->secs;
	r->flops = cr->flops;
	strcpy(r->where, "gpu");
	snprintf(r->prof, sizeof(r->prof), "%s", cr->prof);
	r->st = cr->status == NVCL_OK ? 0 : cr->status == NVCL_REFUSED ? 1 : -1;
	if (r->st < 0) {
		snprintf(r->err, sizeof(r->err), "%s", cr->err);
		return;
	}
	if (r->st == 1) {
		snprintf(r->err, sizeof(r->err), "a scale is not finite or beyond f16");
		return;
	}
	e->bytes = cr->bytes;
	cr->bytes = NULL;
	e->len = cr->len;
	e->m = job->m;
	e->n = job->n;
	e->r = cr->rank;
	e->paths = cr->paths;
	blr_rank(job->m, job->n, job->bpw, (size_t)cr->paths, job->kv, &rank, &e->clip);
	e->bits = blr_bits(job->m, job->n, cr->rank, (size_t)cr->paths);
	e->fit_err = cr->fit;
	e->sel_err = cr->sel;
	e->frob = NAN;
	snprintf(e->line, sizeof(e->line), "%s", cr->line);
}

/* the device encoder for every tensor, jobs in flight */
static int device_all(nvdev *d, const nv_mat *const *w, const char *const *name, size_t k,
		      const nv_hctx *hc, const nv_mat *hfit, const nv_mat *hsel,
		      const nv_enc_opts *eo, nvdev_result *out)
{
	nvcl_hin in = { hc->n, hc->hf.d, hc->l.d, hc->sqd, hc->perm, hc->uc.d, hfit->d, hsel->d };
	nvcl_job *jobs = nv_calloc(k, sizeof(*jobs));
	nvcl_result *cr = nv_calloc(k, sizeof(*cr));
	float **wf = nv_calloc(k, sizeof(*wf));
	nvcl_hctx *dh = NULL;
	int rc = -1;

	if (!jobs || !cr || !wf)
		goto out;
	for (size_t i = 0; i < k; i++) {
		size_t mn = w[i]->r * w[i]->c;
		wf[i] = nv_malloc(mn, sizeof(float));
		if (!wf[i])
			goto out;
		for (size_t x = 0; x < mn; x++)
			wf[i][x] = (float)w[i]->d[x];
		jobs[i] = (nvcl_job){ name[i], wf[i], w[i]->r, w[i]->c, eo->bpw, eo->kv, eo->paths };
	}
	dh = nvcl_hctx_upload(&d->c, &in);
	if (!dh)
		goto out;
	nvcl_encode_many(&d->c, dh, jobs, k, d->o.jobs, d->o.profile, cr, NULL, NULL);
	for (size_t i = 0; i < k; i++)
		from_device(&jobs[i], &cr[i], &out[i]);
	rc = 0;
out:
	for (size_t i = 0; i < k && cr; i++)
		nvcl_result_free(&cr[i]);
	for (size_t i = 0; i < k && wf; i++)
		free(wf[i]);
	nvcl_hctx_free(dh);
	free(jobs), free(cr), free(wf);
	return rc;
}

/* both: the CPU payload is kept, the device one compared by its SEL error */
static void compare(const char *name, nvdev_result *gpu, nvdev_result *cpu)
{
	if (gpu->st == 0 && cpu->st == 0) {
		double c = cpu->res.sel_err, g = gpu->res.sel_err;
		snprintf(cpu->cmp, sizeof(cpu->cmp), "[cmp] %s sel cpu %.4f gpu %.4f rel %+.3f%%",
			 name, c, g, (g - c) / c * 100.0);
	} else if (gpu->st != 0 && cpu->st == 0) {
		snprintf(cpu->cmp, sizeof(cpu->cmp), "[cmp] %s sel cpu %.4f gpu %s", name,
			 cpu->res.sel_err, gpu->st == 1 ? "refused" : "failed");
	}
	if (gpu->st < 0 && cpu->st == 0) {
		cpu->st = -1;
		snprintf(cpu->err, sizeof(cpu->err), "on the device: %s", gpu->err);
	}
	nvdev_result_free(gpu);
}

int nvdev_encode(nvdev *d, const nv_mat *const *w, const char *const *name, size_t k,
		 const nv_hctx *hc, const nv_mat *hfit, const nv_mat *hsel,
		 const nv_enc_opts *eo, nvdev_result *out)
{
	nvdev_result *gpu = NULL;
	int failed = 0;

	memset(out, 0, k * sizeof(*out));
	if (d->ch.use_cl) {
		gpu = d->ch.use_cpu ? nv_calloc(k, sizeof(*gpu)) : out;
		if (!gpu || device_all(d, w, name, k, hc, hfit, hsel, eo, gpu) < 0) {
			for (size_t i = 0; i < k; i++) {
				out[i].st = -1;
				snprintf(out[i].err, sizeof(out[i].err), "%s", nv_err());
			}
			if (gpu != out)
				free(gpu);
			return -1;
		}
	}
	for (size_t i = 0; i < k && d->ch.use_cpu; i++) {
		cpu_one(w[i], hc, hfit, hsel, eo, &out[i]);
		if (gpu)
			compare(name[i], &gpu[i], &out[i]);
	}
	if (gpu != out)
		free(gpu);
	for (size_t i = 0; i < k; i++)
		failed |= out[i].st < 0;
	return failed ? -1 : 0;
}
