/* encin.c - the inputs of one encode, read and checked (see encin.h) */
#include "encin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "mem.h"
#include "fileio.h"
#include "names.h"
#include "nvgg.h"
#include "plan.h"

/* "what 'subject': reason" */
static int fail(const char *what, const char *subject)
{
	nv_preerr("%s '%s'", what, subject);
	return -1;
}

/* the tensor -t of the model -m: its shape (checked against --shape) and,
 * for a k or v projection of a grouped-query model, the kv budget factor */
int nv_encin_model(nv_encin_spec *o, cmf_file *cf)
{
	const cmf_tensor *t;
	size_t layer;
	const char *sh;

	if (cmf_open(o->model, cf) < 0)
		return fail("cannot open model", o->model);
	if (!(t = cmf_find(cf, o->tname))) {
		nv_seterr("no tensor '%s'", o->tname);
		return fail("cannot find tensor in", o->model);
	}
	if (o->m && (t->rows != o->m || t->cols != o->n)) {
		nv_seterr("the tensor is %zux%zu", t->rows, t->cols);
		nv_preerr("invalid --shape '%zux%zu'", o->m, o->n);
		return -1;
	}
	o->m = t->rows;
	o->n = t->cols;
	if (o->m < 8 || o->n < 8) {
		nv_seterr("%zux%zu: min(m,n) < 8 is not encodable", o->m, o->n);
		return fail("cannot encode tensor", o->tname);
	}
	if (nv_body_linear(o->tname, &layer, &sh) && (!strcmp(sh, "k") || !strcmp(sh, "v")) &&
	    cf->has_arch && cf->arch.kv_heads < cf->arch.heads)
		o->kv = 1;
	return 0;
}

/* the budget from --plan: the tensor's rule, its layer's, else --bpw */
int nv_encin_plan(nv_encin_spec *o)
{
	plan pl;
	size_t layer = (size_t)-1;
	double b;

	if (plan_load(o->plan, &pl) < 0)
		return fail("cannot read plan", o->plan);
	nv_layer_of(o->tname, &layer);
	if (plan_keeps(&pl, o->tname, layer)) {
		plan_free(&pl);
		nv_seterr("the plan keeps it in its source dtype");
		return fail("nothing to encode for", o->tname);
	}
	b = plan_bpw_for(&pl, o->tname, layer, o->have_bpw ? o->bpw : NAN);
	plan_free(&pl);
	if (isnan(b)) {
		nv_seterr("no rule of '%s' covers it and no --bpw was given", o->plan);
		return fail("no budget for", o->tname);
	}
	o->bpw = b;
	return 0;
}

void nv_encin_free(nv_encin *in)
{
	nv_mat_free(&in->w);
	nv_mat_free(&in->hfit);
	nv_mat32_free(&in->hsel);
	nv_mat_free(&in->wsrc);
	if (in->have_hc)
		nv_hctx_free(&in->hc);
	free(in->gauge);
}

/* an NVGG (or with cross an NVGC) whose width must be n: as f64 into g, or
 * as f32 into g32 (an NVGG, as its file holds it), or with neither only its
 * header and the CRC of its values (nvgg_read_crc) */
static int load_moment(const char *path, int cross, size_t n, nv_mat *g, nv_mat32 *g32,
		       uint32_t *crc, uint64_t *count)
{
	nvgg gg;
	int rc = g ? nvgg_read_f64(path, cross, &gg, crc)
		   : g32 ? nvgg_read_f32(path, cross, &gg, crc) : nvgg_read_crc(path, &gg, crc);

	if (rc < 0)
		return fail(cross ? "cannot read cross Gram" : "cannot read Gram", path);
	if (gg.n != n) {
		nv_seterr("%u wide, but W has %zu columns", gg.n, n);
		nvgg_free(&gg);
		return fail(cross ? "cross Gram does not fit W" : "Gram does not fit W", path);
	}
	if (count)
		*count = gg.count;
	if (g) {
		*g = (nv_mat){ n, n, gg.d };
		gg.d = NULL;
	}
	if (g32) {
		*g32 = (nv_mat32){ n, n, gg.g, NULL };
		gg.g = NULL;
	}
	nvgg_free(&gg);
	return 0;
}

static int load_gram(const char *path, size_t n, nv_mat *g, uint32_t *crc, uint64_t *count)
{
	return load_moment(path, 0, n, g, NULL, crc, count);
}

/* a moment of the positions another one counted: the same count */
static int same_count(const char *path, uint64_t got, uint64_t want, const char *other)
{
	if (got == want)
		return 0;
	nv_seterr("it counts %llu positions, %s %llu", (unsigned long long)got, other,
		  (unsigned long long)want);
	return fail("moment does not fit", path);
}

/*
 * w ← M = W (Cᵀ + λI)(G + λI)⁻¹, λ = damp·tr(G)/n.  Undamped, M = W Cᵀ G⁻¹
 * minimises E‖M x_q − W x_src‖²; the damping keeps M = W where the streams
 * agree (C = G).  Solved as Mᵀ = (G + λI)⁻¹ (C + λI) Wᵀ.
 */
static int transport_target(const nv_encin_spec *o, nv_encin *in)
{
	size_t n = o->n;
	nv_mat c = { 0 }, x = { 0 };
	double tr = 0, lam;
	int rc = -1;
	uint64_t count;

	if (load_moment(o->cross, 1, n, &c, NULL, NULL, &count) < 0 ||
	    same_count(o->cross, count, in->fit_count, "the FIT Gram") < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		tr += in->hfit.d[i * n + i];
	lam = o->cross_damp * tr / (double)n;
	if (nv_mat_zeros(&x, n, o->m) < 0)
		goto out;
	nv_gemm(1.0, &c, 0, &in->w, 1, 0.0, &x); /* X (n × m) = C Wᵀ */
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < o->m; k++)
			x.d[i * o->m + k] += lam * in->w.d[k * n + i];
	if (nv_posv_many(&in->hfit, lam, &x) < 0) {
		fail("cannot solve for the transport target of", o->cross);
		goto out;
	}
	in->wsrc = in->w;
	if (nv_mat_zeros(&in->w, o->m, n) < 0)
		goto out;
	for (size_t k = 0; k < o->m; k++)
		for (size_t i = 0; i < n; i++)
			in->w.d[k * n + i] = x.d[i * o->m + k];
	rc = 0;
out:
	nv_mat_free(&c);
	nv_mat_free(&x);
	return rc;
}

/* a moment's first read: validated whole, values too, then let go; what a
 * later read must find again is kept in src */
static int moment_note(nv_moment_src *src, const char *path, int cross, size_t n)
{
	nv_mat32 t = { 0 };

	*src = (nv_moment_src){ path, cross, n, 0, 0 };
	if (load_moment(path, cross, n, NULL, &t, &src->crc, &src->count) < 0)
		return -1;
	nv_mat32_free(&t);
	return 0;
}

/* a later read of src, as f64 into g or as f32 into g32 */
static int moment_again(const nv_moment_src *src, nv_mat *g, nv_mat32 *g32)
{
	uint32_t crc;
	uint64_t count;

	if (load_moment(src->path, src->cross, src->n, g, g32, &crc, &count) < 0)
		return -1;
	if (crc == src->crc && count == src->count)
		return 0;
	if (g)
		nv_mat_free(g);
	if (g32)
		nv_mat32_free(g32);
	if (count != src->count)
		nv_seterr("it changed since the encode began (count %llu, first %llu)",
			  (unsigned long long)count, (unsigned long long)src->count);
	else
		nv_seterr("its values changed since the encode began (CRC %08x, first %08x)", crc,
			  src->crc);
	return fail("cannot read moment again", src->path);
}

int nv_encin_sel_load(void *arg, nv_mat32 *out)
{
	return moment_again(arg, NULL, out);
}

/* the SEL cross-moment and source Gram, of the SEL Gram's positions */
static int load_sel_moments(const nv_encin_spec *o, nv_encin *in)
{
	if (moment_note(&in->csel, o->cross_sel, 1, o->n) < 0 ||
	    same_count(o->cross_sel, in->csel.count, in->sel_count, "the SEL Gram") < 0 ||
	    moment_note(&in->ssel, o->src_sel, 0, o->n) < 0 ||
	    same_count(o->src_sel, in->ssel.count, in->sel_count, "the SEL Gram") < 0)
		return -1;
	return 0;
}

/* tr(A·M·Bᵀ) (ta 0) or tr(A·Mᵀ·Bᵀ) (ta 1) for M the moment src, read for this
 * product and let go */
static int moment_trace(const nv_moment_src *src, const nv_mat *a, int ta, const nv_mat *b,
			double *out)
{
	nv_mat mt = { 0 }, p = { 0 };

	if (moment_again(src, &mt, NULL) < 0 || nv_mat_zeros(&p, a->r, mt.c) < 0) {
		nv_mat_free(&mt);
		return -1;
	}
	nv_gemm(1.0, a, 0, &mt, ta, 0.0, &p);
	nv_mat_free(&mt);
	*out = nv_dot_all(&p, b);
	nv_mat_free(&p);
	return 0;
}

/* tr(Ŵ G Ŵᵀ) on the SEL Gram: the one held, or read for this product */
static int sel_quad(const nv_encin *in, const nv_mat *wh, double *out)
{
	nv_mat32 g = { 0 };
	nv_mat p = { 0 };
	int rc;

	if (!in->hsel.d && moment_again(&in->sel_src, NULL, &g) < 0)
		return -1;
	rc = nv_gemm32b_new(wh, in->hsel.d ? &in->hsel : &g, &p);
	nv_mat32_free(&g);
	if (rc < 0)
		return -1;
	*out = nv_dot_all(&p, wh);
	nv_mat_free(&p);
	return 0;
}

int nv_encin_transport_err(const nv_encin *in, const uint8_t *bytes, size_t len, double *out)
{
	const nv_mat *w = in->wsrc.d ? &in->wsrc : &in->w;
	size_t m = w->r, n = w->c;
	nv_mat wh = { 0 };
	float *f = nv_malloc(m * n, sizeof(float));
	double den, quad, cross, num;
	int rc = -1;

	if (!f || blr_dequantize(bytes, len, f) < 0 || nv_mat_zeros(&wh, m, n) < 0)
		goto out;
	for (size_t i = 0; i < m * n; i++)
		wh.d[i] = f[i];
	free(f);
	f = NULL;
	/* W S Wᵀ, Ŵ G Ŵᵀ, W Cᵀ Ŵᵀ: one n × n moment held at a time */
	if (moment_trace(&in->ssel, w, 0, w, &den) < 0 || sel_quad(in, &wh, &quad) < 0 ||
	    moment_trace(&in->csel, w, 1, &wh, &cross) < 0)
		goto out;
	num = quad + den - 2 * cross;
	if (!(den > 0) || !isfinite(num)) {
		nv_seterr("E‖W x_src‖² on SEL is %g", den);
		goto out;
	}
	*out = num / den;
	rc = 0;
out:
	free(f);
	nv_mat_free(&wh);
	return rc;
}

/* the tensor -t from a model file (the -m model or --target-from) */
static float *model_w(const nv_encin_spec *o, const cmf_file *cf)
{
	cmf_file other;
	const cmf_tensor *t;
	float *f = NULL;

	if (!o->target_from)
		return cmf_tensor_f32_alloc(cmf_find(cf, o->tname));
	if (cmf_open(o->target_from, &other) < 0)
		return NULL;
	t = cmf_find(&other, o->tname);
	if (!t)
		nv_seterr("no tensor '%s'", o->tname);
	else if (t->rows != o->m || t->cols != o->n)
		nv_seterr("tensor '%s' is %zux%zu, not %zux%zu", o->tname, t->rows, t->cols, o->m,
			  o->n);
	else
		f = cmf_tensor_f32_alloc(t);
	cmf_close(&other);
	return f;
}

static int load_w(const nv_encin_spec *o, const cmf_file *cf, nv_mat *w)
{
	const char *path = o->target ? o->target : o->target_from ? o->target_from
					      : o->model ? o->model : o->w;
	float *f = o->target || !o->model ? nv_read_raw_f32(path, o->m, o->n) : model_w(o, cf);

	if (!f || nv_mat_zeros(w, o->m, o->n) < 0) {
		free(f);
		return fail("cannot read matrix", path);
	}
	for (size_t i = 0; i < o->m * o->n; i++)
		w->d[i] = f[i];
	free(f);
	return 0;
}

/* the FIT context: read (checked against W and --fit) or built from --fit */
static int load_hctx(const nv_encin_spec *o, nv_encin *in, nv_prof *prof)
{
	double t = nv_now();

	if (o->hctx) {
		/* uc's rows read again where the refinement wants them */
		if (nv_hctx_read_lazy(o->hctx, !o->no_l, &in->hc) < 0)
			return fail("cannot read context", o->hctx);
		in->have_hc = 1;
		if (in->hc.n != o->n) {
			nv_seterr("%zu wide, but W has %zu columns", in->hc.n, o->n);
			return fail("context does not fit W", o->hctx);
		}
		if (in->hc.gram_crc != in->fit_crc) {
			nv_seterr("built from another Gram than '%s'", o->fit);
			return fail("context does not fit the FIT Gram", o->hctx);
		}
	} else {
		if (nv_hctx_build(in->hfit.d, o->n, o->rho, &in->hc) < 0)
			return fail("cannot build context from", o->fit);
		in->have_hc = 1;
		if (o->no_l)
			nv_mat_free(&in->hc.l);
	}
	nv_prof_add(prof, "hctx", nv_now() - t, 0);
	return 0;
}

/* scale head blocks of W's rows by the invE gauge; remembered for the undo */
static int apply_gauge(const nv_encin_spec *o, nv_encin *in)
{
	size_t *starts, nb, m = in->w.r;
	double lo = INFINITY, hi = 0;

	if (nv_parse_head_blocks(o->blocks, m, &starts, &nb) < 0)
		return fail("invalid --head-blocks", o->blocks);
	in->gauge = malloc(m * sizeof(double));
	if (!in->gauge || nv_row_gauge(&in->w, &in->hfit, starts, nb, o->shuffle, in->gauge) < 0) {
		free(starts);
		return fail("cannot compute the row gauge for", o->blocks);
	}
	free(starts);
	for (size_t i = 0; i < m; i++) {
		lo = fmin(lo, in->gauge[i]);
		hi = fmax(hi, in->gauge[i]);
		for (size_t j = 0; j < in->w.c; j++)
			in->w.d[i * in->w.c + j] *= in->gauge[i];
	}
	in->gauge_blocks = nb;
	in->gauge_lo = lo;
	in->gauge_hi = hi;
	return 0;
}

int nv_encin_load(const nv_encin_spec *o, const cmf_file *cf, nv_encin *in, nv_prof *prof)
{
	memset(in, 0, sizeof(*in));
	if (load_w(o, cf, &in->w) < 0)
		return -1;
	/* a context read from a file needs of the FIT Gram only its CRC, to
	 * match it; the transport target, the gauge and a context built here
	 * need its values */
	if (o->fit && load_gram(o->fit, o->n, o->nvg && o->hctx && !o->cross && !o->gauge ? NULL :
				&in->hfit, &in->fit_crc, &in->fit_count) < 0)
		return -1;
	if (o->cross && transport_target(o, in) < 0)
		return -1;
	if (o->gauge && apply_gauge(o, in) < 0)
		return -1;
	/* the raw FIT Gram's last reader is the context; the encoder's stored
	 * fit error comes from hf and its ridge.  It goes before the SEL Gram
	 * comes, so that no two n × n Grams are ever held at once */
	if (o->nvg && load_hctx(o, in, prof) < 0)
		return -1;
	if (o->nvg)
		nv_mat_free(&in->hfit);
	/* held, or validated now and read again whenever it is used */
	if (o->sel && !o->sel_later &&
	    load_moment(o->sel, 0, o->n, NULL, &in->hsel, NULL, &in->sel_count) < 0)
		return -1;
	if (o->sel && o->sel_later) {
		if (moment_note(&in->sel_src, o->sel, 0, o->n) < 0)
			return -1;
		in->sel_count = in->sel_src.count;
	}
	if (o->cross_sel && load_sel_moments(o, in) < 0)
		return -1;
	return 0;
}
