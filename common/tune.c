/* tune.c - block reconstruction of one layer's BLR scales (tune.h) */
#include "tune.h"

#include "block.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"
#include "rng.h"
#include "state.h"
#include "tparam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the projection a name is, in layer l; -1 with reason */
static int slot_of(int l, const char *name)
{
	char buf[160];

	for (int i = 0; i < FW_NMAT; i++)
		if (fw_tensor_name(buf, sizeof buf, l, i) == 0 && !strcmp(buf, name))
			return i;
	nv_seterr("'%s' is not a projection of layer %d", name, l);
	return -1;
}

/* signs and scales of the payload, which must be m × n of its slot, open for the whole run */
static int tensor_init(tp_tensor *t, int l, const tn_input *in)
{
	int which;

	memset(t, 0, sizeof *t);
	if ((which = slot_of(l, in->name)) < 0 || tp_init(t, which, in->payload, in->len) < 0)
		return -1;
	return tp_open(t);
}

/* what a run holds: the layer, its block, the tuned tensors, the windows' rows */
typedef struct {
	const fw_model *m;
	fw_layer ly;
	bk_cache c;
	tp_tensor *t;
	size_t nt;
	fw_layer nly;         /* ahead: the source's block l + 1, its cache, its input's gradient */
	bk_cache nc;
	float *dz;
	int ahead;
	float *dy;            /* (window × d) */
	size_t *row0, *fit;   /* each window's first row; the FIT windows' indices */
	size_t nfit;
	const float *x, *ysrc;
	const double *rw;     /* each row's weight, NULL: 1 */
	const fw_window *w;
	size_t nw;
	double flops, last_norm; /* last_norm: of the last SEL measurement */
	tn_result *r;
} tn_run;

static double row_weight(const tn_run *u, size_t row)
{
	return u->rw ? u->rw[row] : 1.0;
}

/* the measured output on T rows of x: the block's, or after the next block's (ahead) */
static const float *measured(tn_run *u, const bk_factor *const *fac, const float *x, size_t T)
{
	if (bk_forward(u->m, &u->ly, fac, &u->c, x, T) < 0)
		return NULL;
	if (!u->ahead)
		return u->c.y;
	return bk_forward(u->m, &u->nly, NULL, &u->nc, u->c.y, T) < 0 ? NULL : u->nc.y;
}

/* the flops of one measured forward of T rows */
static double measured_flops(const tn_run *u, const bk_factor *const *fac, size_t T)
{
	return bk_flops(u->m, fac, T) + (u->ahead ? bk_flops(u->m, NULL, T) : 0.0);
}

/*
 * Σ ρ_t‖y − y_src‖² over the windows of one part (sel 0 FIT, 1 SEL), per
 * position; with norm, also √(Σ‖y‖² / Σ‖y_src‖²): whether the block's
 * outputs shrink against the source's; with keep (rows × d), the block's
 * own outputs of the part's rows into it
 */
static int part_loss(tn_run *u, int sel, double *out, double *norm, float *keep)
{
	size_t d = u->m->d, count = 0;
	double sum = 0, yy = 0, ss = 0;

	for (size_t i = 0; i < u->nw; i++) {
		size_t T = u->w[i].len - 1;
		const float *ys = u->ysrc + u->row0[i] * d, *y;

		if (u->w[i].sel != sel)
			continue;
		if (!(y = measured(u, NULL, u->x + u->row0[i] * d, T)))
			return -1;
		if (keep)
			memcpy(keep + u->row0[i] * d, u->c.y, T * d * sizeof(float));
		for (size_t t = 0; t < T; t++) {
			double e = 0;
			for (size_t k = t * d; k < (t + 1) * d; k++) {
				e += ((double)y[k] - ys[k]) * ((double)y[k] - ys[k]);
				yy += (double)y[k] * y[k];
				ss += (double)ys[k] * ys[k];
			}
			sum += row_weight(u, u->row0[i] + t) * e;
		}
		count += T;
	}
	if (count == 0 || !isfinite(sum)) {
		nv_seterr("the %s loss is %s", sel ? "SEL" : "FIT", count ? "not finite" : "empty");
		return -1;
	}
	*out = sum / (double)count;
	if (norm)
		*norm = ss > 0 ? sqrt(yy / ss) : 0;
	return 0;
}

/* the layer's tuned projections as their candidate payloads store them */
static int load_stored(tn_run *u)
{
	for (size_t i = 0; i < u->nt; i++)
		if (blr_dequantize(u->t[i].bytes, u->t[i].len, u->ly.w[u->t[i].which]) < 0)
			return -1;
	return 0;
}

/*
 * one step's gradient over a batch of FIT windows, into every tensor's gr:
 * the tuned projections in factored form at their current scales, the
 * others as the layer holds them
 */
static int batch_grad(tn_run *u, const size_t *win, size_t nb)
{
	size_t d = u->m->d, count = 0;
	const bk_factor *fac[FW_NMAT] = { 0 };
	float *dw[FW_NMAT] = { 0 }, *none[FW_NMAT] = { 0 };
	tp_tensor *all[FW_NMAT];

	for (size_t i = 0; i < u->nt; i++)
		all[i] = &u->t[i];
	tp_factor_many(all, u->nt);
	for (size_t i = 0; i < u->nt; i++)
		fac[u->t[i].which] = &u->t[i].fac;
	for (size_t b = 0; b < nb; b++)
		count += u->w[win[b]].len - 1;
	for (size_t b = 0; b < nb; b++) {
		size_t wi = win[b], T = u->w[wi].len - 1;
		const float *ys = u->ysrc + u->row0[wi] * d, *y;

		if (!(y = measured(u, fac, u->x + u->row0[wi] * d, T)))
			return -1;
		/* ∂/∂y of the batch's mean over positions of ρ_t‖y − y_src‖² */
		for (size_t t = 0; t < T; t++) {
			double f = 2.0 * row_weight(u, u->row0[wi] + t) / (double)count;
			for (size_t k = t * d; k < (t + 1) * d; k++)
				u->dy[k] = (float)(f * ((double)y[k] - ys[k]));
		}
		/* ahead: back through the next block (its weights fixed) to the tuned block's output */
		if (u->ahead)
			bk_backward(u->m, &u->nly, NULL, &u->nc, u->dy, none, u->dz);
		bk_backward(u->m, &u->ly, fac, &u->c, u->ahead ? u->dz : u->dy, dw, NULL);
		u->flops += 3.0 * measured_flops(u, fac, T);
	}
	tp_chain_many(all, u->nt);
	return 0;
}

static void run_free(tn_run *u)
{
	for (size_t i = 0; i < u->nt; i++)
		tp_free(&u->t[i]);
	free(u->t);
	free(u->dy);
	free(u->dz);
	free(u->row0);
	free(u->fit);
	bk_free(&u->c);
	fw_layer_free(&u->ly);
	if (u->ahead) {
		bk_free(&u->nc);
		fw_layer_free(&u->nly);
	}
}

/* the layer with the start payloads, the tensors, the windows' rows */
static int run_init(tn_run *u, int l, const tn_input *in, size_t nin, size_t tmax)
{
	const fw_model *m = u->m;
	fw_override ov[FW_NMAT];

	if (nin == 0 || nin > FW_NMAT) {
		nv_seterr("%zu payloads to tune: 1 to %d a layer", nin, FW_NMAT);
		return -1;
	}
	for (size_t i = 0; i < nin; i++)
		ov[i] = (fw_override){ in[i].name, in[i].payload, in[i].len };
	if (u->ahead && l + 1 >= m->a.layers) {
		nv_seterr("layer %d is the last: no block after it to measure the loss with", l);
		return -1;
	}
	if (fw_layer_load(m, l, ov, nin, &u->ly) < 0 || bk_init(&u->c, m, tmax) < 0 ||
	    !(u->t = nv_calloc(nin, sizeof *u->t)) || !(u->dy = nv_malloc(tmax, m->d * sizeof(float))))
		return -1;
	if (u->ahead && (fw_layer_load(m, l + 1, NULL, 0, &u->nly) < 0 ||
			 bk_init(&u->nc, m, tmax) < 0 || !(u->dz = nv_malloc(tmax, m->d * sizeof(float)))))
		return -1;
	for (; u->nt < nin; u->nt++)
		if (tensor_init(&u->t[u->nt], l, &in[u->nt]) < 0) {
			tp_free(&u->t[u->nt]);
			return -1;
		}
	u->row0 = nv_malloc(u->nw, sizeof(size_t));
	u->fit = nv_malloc(u->nw, sizeof(size_t));
	if (!u->row0 || !u->fit)
		return -1;
	for (size_t i = 0, r = 0; i < u->nw; r += u->w[i].len - 1, i++) {
		u->row0[i] = r;
		if (!u->w[i].sel)
			u->fit[u->nfit++] = i;
	}
	return 0;
}

/* tp_loop's: the gradient of a batch, the SEL loss of the stored bytes, the best kept */
static int loop_grad(void *ctx, const size_t *win, size_t nb)
{
	return batch_grad(ctx, win, nb);
}

static int loop_sel(void *ctx, double *loss)
{
	tn_run *u = ctx;

	return load_stored(u) < 0 ? -1 : part_loss(u, 1, loss, &u->last_norm, NULL);
}

static void loop_kept(void *ctx)
{
	tn_run *u = ctx;

	u->r->norm_after = u->last_norm;
}

int tn_row_weights(const float *ysrc, size_t rows, size_t d, tn_loss loss, double **w)
{
	double *v = nv_malloc(rows ? rows : 1, sizeof(double)), mean = 0;

	if (!v)
		return -1;
	for (size_t r = 0; r < rows && loss == TN_LOSS_MSE; r++)
		v[r] = 1.0;
	for (size_t r = 0; r < rows && loss != TN_LOSS_MSE; r++) {
		double ms = 0;

		for (size_t k = 0; k < d; k++)
			ms += (double)ysrc[r * d + k] * ysrc[r * d + k];
		ms /= (double)d;
		if (!(ms > 0) || !isfinite(ms)) {
			nv_seterr("the source output at row %zu has mean square %g: no weight", r, ms);
			free(v);
			return -1;
		}
		v[r] = 1.0 / ms;
		mean += v[r] / (double)rows;
	}
	for (size_t r = 0; r < rows && loss != TN_LOSS_MSE; r++)
		v[r] /= mean;
	*w = v;
	return 0;
}

int tn_tune(const fw_model *m, int l, const tn_input *in, size_t nin, const tn_data *dt,
	    const tn_opts *o, uint8_t **out, tn_result *r)
{
	tn_run u = { .m = m, .x = dt->x, .ysrc = dt->ysrc, .rw = dt->rw, .w = dt->w, .nw = dt->nw,
		     .ahead = dt->ahead != 0, .r = r };
	size_t tmax = fw_windows_tmax(dt->w, dt->nw), k = 0;
	double sel_kept;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (o->batch == 0 || o->batch > 64 || o->eval_every == 0) {
		nv_seterr("a batch of 1 to 64 windows and an evaluation period are needed");
		return -1;
	}
	if (run_init(&u, l, in, nin, tmax) < 0)
		goto out;
	if (u.nfit == 0 || u.nfit == u.nw) {
		nv_seterr("the tuning needs FIT and SEL windows");
		goto out;
	}
	if (tp_snapshot(u.t, u.nt, out) < 0)
		goto out;
	k = u.nt;
	if (part_loss(&u, 0, &r->fit_before, NULL, NULL) < 0 ||
	    part_loss(&u, 1, &r->sel_before, &r->norm_before, NULL) < 0)
		goto out;
	r->norm_after = r->norm_before; /* the start, unless a step is kept */
	tp_loop lp = { &u, loop_grad, loop_sel, loop_kept, NULL };
	r->sel_after = r->sel_before;
	if (tp_steps(u.t, u.nt, u.fit, u.nfit, o, &lp, out, &r->sel_after, &r->best_step) < 0)
		goto out;
	tp_reload(u.t, u.nt, out);
	if (load_stored(&u) < 0 || part_loss(&u, 0, &r->fit_after, NULL, dt->next) < 0 ||
	    (dt->next && part_loss(&u, 1, &sel_kept, NULL, dt->next) < 0))
		goto out;
	/* the SEL rows of dt->next come from the bytes whose loss was kept: the same loss */
	if (dt->next && sel_kept != r->sel_after) {
		nv_seterr("the stored payloads give SEL loss %.17g, the kept step %.17g", sel_kept,
			  r->sel_after);
		goto out;
	}
	rc = 0;
out:
	r->flops = u.flops;
	if (rc < 0)
		tp_snapshot_free(out, k);
	run_free(&u);
	return rc;
}

/* x (rows × d): the state's rows, or the windows' embeddings */
static int rows_in(const fw_model *m, const char *state, const st_header *want,
		   const uint32_t *tok, const fw_window *w, size_t nw, float *x)
{
	st_reader r;
	int rc;

	if (!state) {
		for (size_t i = 0, off = 0; i < nw; off += w[i].len - 1, i++)
			if (fw_embed(m, tok + w[i].start, w[i].len - 1, x + off * m->d) < 0)
				return -1;
		return 0;
	}
	if (st_open(&r, state) < 0)
		return -1;
	rc = st_check(&r.h, want) < 0 || st_rows(&r, 0, want->rows, x) < 0 ? -1 : 0;
	st_close(&r);
	return rc;
}

int tn_rows(const fw_model *m, const char *state, int l, const uint32_t *tok, size_t ntok,
	    size_t fit, size_t sel, size_t window, float **x, fw_window **w, size_t *nw,
	    size_t *rows)
{
	st_header want;

	*x = NULL;
	if (!(*w = fw_windows(fit, sel, window, nw, rows)))
		return -1;
	if (!state && l != 0) {
		nv_seterr("layer %d needs the states entering it", l);
		goto fail;
	}
	for (size_t i = 0; i < fit + sel; i++)
		if (tok[i] >= m->vocab) {
			nv_seterr("token id %u at position %zu is beyond the vocabulary (0..%zu)",
				  tok[i], i, m->vocab - 1);
			goto fail;
		}
	want = st_header_of((uint32_t)l, m->d, window, tok, ntok, fit, sel, *rows);
	if (!(*x = nv_malloc(*rows ? *rows : 1, m->d * sizeof(float))) ||
	    rows_in(m, state, &want, tok, *w, *nw, *x) < 0)
		goto fail;
	return 0;
fail:
	if (state)
		nv_preerr("state file '%s'", state);
	free(*x);
	free(*w);
	*x = NULL;
	*w = NULL;
	return -1;
}

int tn_block_out(const fw_model *m, int l, const float *x, const fw_window *w, size_t nw,
		 float *y)
{
	fw_layer ly;
	fw_scratch s;
	size_t tmax = fw_windows_tmax(w, nw), off = 0;
	int rc = 0;

	if (fw_layer_load(m, l, NULL, 0, &ly) < 0)
		return -1;
	if (fw_scratch_init(&s, m, tmax) < 0) {
		fw_layer_free(&ly);
		return -1;
	}
	for (size_t i = 0; i < nw && rc == 0; off += w[i].len - 1, i++) {
		size_t T = w[i].len - 1;

		memcpy(y + off * m->d, x + off * m->d, T * m->d * sizeof(float));
		rc = fw_layer_run(m, &ly, &s, y + off * m->d, T, NULL);
	}
	fw_scratch_free(&s);
	fw_layer_free(&ly);
	return rc;
}
