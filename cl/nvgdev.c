/* nvgdev.c - the --device modes of nvg-encode (see nvgdev.h) */
#include "nvgdev.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "mem.h"
#include "nvg_cl.h"
#include "parse.h"

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

/* the CPU encoder for one tensor */
static void cpu_one(const nvdev_tensor *t, const nv_hctx *hc, const nv_mat32 *hsel,
		    const nv_enc_opts *eo, nvdev_result *r)
{
	nv_enc_opts o = *eo;
	double s = nv_now();
	int rc;

	o.bpw = t->bpw;
	o.kv = t->kv;
	rc = nv_encode(t->w, hc, hsel, &o, &r->res);

	r->secs = nv_now() - s;
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
		snprintf(r->err, sizeof(r->err), "%s", cr->err);
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

/* the context on the device; its packed uc and f32 hf go there full,
 * widened on the host for the upload only */
static nvcl_hctx *upload_ctx(nvdev *d, const nv_hctx *hc, const nv_mat32 *hsel)
{
	nv_mat ucf = {0}, hff = {0};
	nvcl_hctx *dh = NULL;

	if (nv_hctx_uc_full(hc, &ucf) == 0 && nv_mat32_widen(&hc->hf, &hff) == 0) {
		nvcl_hin in = { hc->n, hff.d, hc->l.d, hc->sqd, hc->perm, ucf.d,
				nv_hctx_ridge(hc), hsel->d };
		dh = nvcl_hctx_upload(&d->c, &in);
	}
	nv_mat_free(&ucf);
	nv_mat_free(&hff);
	return dh;
}

/* the device encoder for every tensor, jobs in flight */
static int device_all(nvdev *d, const nvdev_tensor *t, size_t k, const nv_hctx *hc,
		      const nv_mat32 *hsel, const nv_enc_opts *eo, nvdev_result *out)
{
	nvcl_job *jobs = nv_calloc(k, sizeof(*jobs));
	nvcl_result *cr = nv_calloc(k, sizeof(*cr));
	float **wf = nv_calloc(k, sizeof(*wf));
	nvcl_hctx *dh = NULL;
	int rc = -1;

	if (!jobs || !cr || !wf)
		goto out;
	for (size_t i = 0; i < k; i++) {
		size_t mn = t[i].w->r * t[i].w->c;
		wf[i] = nv_malloc(mn, sizeof(float));
		if (!wf[i])
			goto out;
		for (size_t x = 0; x < mn; x++)
			wf[i][x] = (float)t[i].w->d[x];
		jobs[i] = (nvcl_job){ t[i].name, wf[i], t[i].w->r, t[i].w->c, t[i].bpw, t[i].kv,
				      eo->paths, eo->sweeps, eo->try_sweeps };
	}
	dh = upload_ctx(d, hc, hsel);
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

void nvdev_trim_context(const nvdev *d, const nvdev_tensor *t, size_t k, nv_hctx *hc)
{
	if (!hc || d->ch.use_cl)
		return;
	for (size_t i = 0; i < k; i++)
		if (t[i].w->r > t[i].w->c)
			return;
	nv_mat_free(&hc->l);
}

int nvdev_encode(nvdev *d, const nvdev_tensor *t, size_t k, const nv_hctx *hc,
		 const nv_mat32 *hsel, const nv_enc_opts *eo, nvdev_result *out)
{
	nvdev_result *gpu = NULL;
	int failed = 0;

	memset(out, 0, k * sizeof(*out));
	if (d->ch.use_cl) {
		gpu = d->ch.use_cpu ? nv_calloc(k, sizeof(*gpu)) : out;
		if (!gpu || device_all(d, t, k, hc, hsel, eo, gpu) < 0) {
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
		cpu_one(&t[i], hc, hsel, eo, &out[i]);
		if (gpu)
			compare(t[i].name, &gpu[i], &out[i]);
	}
	if (gpu != out)
		free(gpu);
	for (size_t i = 0; i < k; i++)
		failed |= out[i].st < 0;
	return failed ? -1 : 0;
}

/* spec i: first's inputs with its own source, shape and budget */
static int more_spec(const nv_encin_spec *first, const char *src, const char *shape,
		     nv_encin_spec *s, cmf_file *cf)
{
	*s = *first;
	s->fit = s->sel = s->hctx = s->gauge = s->blocks = NULL;
	s->nvg = 0;
	s->kv = 0;
	if (first->model) {
		s->tname = src;
		s->m = s->n = 0;
	} else {
		s->w = src;
	}
	if (shape && nv_parse_shape(shape, &s->m, &s->n) < 0) {
		nv_preerr("invalid --shape '%s'", shape);
		return -1;
	}
	if (first->model && nv_encin_model(s, cf) < 0)
		return -1;
	if (s->n != first->n) {
		nv_seterr("%zu columns, but the shared input is %zu wide", s->n, first->n);
		nv_preerr("cannot encode with the others '%s'", src);
		return -1;
	}
	if (first->plan && nv_encin_plan(s) < 0)
		return -1;
	return 0;
}

int nvdev_load_more(const nv_encin_spec *first, const char *const *src,
		    const char *const *shape, size_t k, nv_encin_spec *spec, nv_encin *in)
{
	for (size_t i = 1; i < k; i++) {
		cmf_file cf;
		int rc;

		memset(&cf, 0, sizeof(cf));
		memset(&in[i], 0, sizeof(in[i]));
		rc = more_spec(first, src[i], shape[i], &spec[i], &cf);
		if (rc == 0)
			rc = nv_encin_load(&spec[i], &cf, &in[i], NULL);
		if (first->model)
			cmf_close(&cf);
		if (rc < 0)
			return -1;
	}
	return 0;
}
