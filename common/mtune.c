/* mtune.c - model reconstruction of every payload's scales (mtune.h) */
#include "mtune.h"

#include "block.h"
#include "blr.h"
#include "err.h"
#include "mem.h"
#include "normcal.h"
#include "rng.h"
#include "tparam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* windows an evaluation runs through the layers together (one layer load per group) */
#define MT_GROUP 8

typedef struct {
	fw_model *m;
	const mt_data *D;
	tp_tensor *t;
	int *layer;           /* (nt) the layer of each tuned tensor */
	size_t nt, lmin, L;
	size_t *row0, *fit, nfit, tmax;
	size_t bt, cap;       /* rows of a batch's plane of X; rows of a group's */
	float *X;             /* ((L + 1) planes × bt × d) the batch's states entering each layer */
	float *dy, *hn, *gz;  /* (cap × d) */
	fw_scratch s;
	bk_cache c;
	size_t kfrom, kb;     /* layers kfrom..L−1 kept from a step's forward, kb windows each */
	fw_layer *kly;        /* (L) their weights, while held[l] */
	int *held;            /* (L) */
	bk_cache *kc;         /* ((L − kfrom) × kb) their windows' intermediates */
	tp_spare spare[FW_NMAT]; /* each kind of projection's arrays between visits */
	double flops, batch_kl; /* batch_kl: the last batch's mean KL */
} mt_run;

/* the layer and projection a tensor name is; -1 with reason */
static int locate(const fw_model *m, const char *name, int *layer, int *which)
{
	char buf[160];

	for (int l = 0; l < m->a.layers; l++)
		for (int i = 0; i < FW_NMAT; i++)
			if (fw_tensor_name(buf, sizeof buf, l, i) == 0 && !strcmp(buf, name)) {
				*layer = l, *which = i;
				return 0;
			}
	nv_seterr("'%s' is not a projection of the model", name);
	return -1;
}

/* every input a projection of its own, its payload of the projection's shape */
static int tensors_init(mt_run *u, const tn_input *in, size_t nin)
{
	const fw_model *m = u->m;

	u->lmin = (size_t)m->a.layers;
	if (!(u->t = nv_calloc(nin, sizeof *u->t)) || !(u->layer = nv_calloc(nin, sizeof(int))))
		return -1;
	for (; u->nt < nin; u->nt++) {
		tp_tensor *t = &u->t[u->nt];
		int l, w;

		if (locate(m, in[u->nt].name, &l, &w) < 0)
			goto fail;
		if (tp_init(t, w, in[u->nt].payload, in[u->nt].len) < 0) {
			nv_preerr("the payload of '%s'", in[u->nt].name);
			goto fail;
		}
		for (size_t j = 0; j < u->nt; j++)
			if (u->layer[j] == l && u->t[j].which == w) {
				nv_seterr("'%s' is given twice", in[u->nt].name);
				goto fail;
			}
		if (t->m != fw_rows(m, w) || t->n != fw_cols(m, w)) {
			nv_seterr("the payload of '%s' is %zux%zu, the model's tensor %zux%zu",
				  in[u->nt].name, t->m, t->n, fw_rows(m, w), fw_cols(m, w));
			goto fail;
		}
		u->layer[u->nt] = l;
		u->lmin = (size_t)l < u->lmin ? (size_t)l : u->lmin;
	}
	return 0;
fail:
	tp_free(&u->t[u->nt]);
	return -1;
}

static void spares_free(mt_run *u)
{
	for (int i = 0; i < FW_NMAT; i++)
		tp_spare_free(&u->spare[i]);
}

/* the weights held from a forward, given back */
static void release(mt_run *u)
{
	for (size_t l = 0; u->held && l < u->L; l++)
		if (u->held[l]) {
			fw_layer_free(&u->kly[l]);
			u->held[l] = 0;
		}
}

static void run_free(mt_run *u)
{
	release(u);
	for (size_t i = 0; u->kc && i < (u->L - u->kfrom) * u->kb; i++)
		bk_free(&u->kc[i]);
	free(u->kc);
	free(u->kly);
	free(u->held);
	for (size_t i = 0; i < u->nt; i++)
		tp_free(&u->t[i]);
	spares_free(u);
	free(u->t);
	free(u->layer);
	free(u->row0);
	free(u->fit);
	free(u->X);
	free(u->dy);
	free(u->hn);
	free(u->gz);
	fw_scratch_free(&u->s);
	bk_free(&u->c);
}

/*
 * what layer l keeps from a forward for its backward: the projections not
 * tuned in f32, and for each of batch windows the block's intermediates
 * with the tuned ones' Z
 */
static size_t keep_bytes(const mt_run *u, size_t l, size_t batch)
{
	size_t dense = 0, win = bk_forward_bytes(u->m, u->tmax);
	int tuned[FW_NMAT] = { 0 };

	for (size_t i = 0; i < u->nt; i++)
		if ((size_t)u->layer[i] == l) {
			tuned[u->t[i].which] = 1;
			win += u->t[i].np * u->t[i].r * u->tmax * sizeof(float);
		}
	for (int i = 0; i < FW_NMAT; i++)
		dense += tuned[i] ? 0 : fw_rows(u->m, i) * fw_cols(u->m, i) * sizeof(float);
	return dense + batch * win;
}

/* the last layers (≥ lmin) whose keep_bytes fit in D->keep together */
static int keep_init(mt_run *u, size_t batch)
{
	size_t used = 0, nk = 0, n;

	while (nk < u->L - u->lmin) {
		size_t b = keep_bytes(u, u->L - 1 - nk, batch);

		if (b > u->D->keep - used)
			break;
		used += b;
		nk++;
	}
	u->kfrom = u->L - nk;
	u->kb = batch;
	if (nk == 0)
		return 0;
	n = nk * batch;
	u->kly = nv_calloc(u->L, sizeof *u->kly);
	u->held = nv_calloc(u->L, sizeof *u->held);
	u->kc = nv_calloc(n, sizeof *u->kc);
	if (!u->kly || !u->held || !u->kc)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (bk_init_sharing(&u->kc[i], u->m, &u->c) < 0)
			return -1;
	return 0;
}

static int run_init(mt_run *u, const tn_input *in, size_t nin, size_t batch)
{
	const fw_model *m = u->m;
	size_t planes;

	u->L = (size_t)m->a.layers;
	u->tmax = fw_windows_tmax(u->D->w, u->D->nw);
	u->bt = batch * u->tmax;
	u->cap = (batch > MT_GROUP ? batch : MT_GROUP) * u->tmax;
	planes = (u->L + 1) * u->bt > u->cap ? (u->L + 1) * u->bt : u->cap;
	if (tensors_init(u, in, nin) < 0 || fw_scratch_init(&u->s, m, u->tmax) < 0 ||
	    bk_init(&u->c, m, u->tmax) < 0 || keep_init(u, batch) < 0)
		return -1;
	u->X = nv_malloc(planes, m->d * sizeof(float));
	u->dy = nv_malloc(u->cap, m->d * sizeof(float));
	u->hn = nv_malloc(u->cap, m->d * sizeof(float));
	u->gz = nv_malloc(u->cap, m->d * sizeof(float));
	u->row0 = nv_malloc(u->D->nw, sizeof(size_t));
	u->fit = nv_malloc(u->D->nw, sizeof(size_t));
	if (!u->X || !u->dy || !u->hn || !u->gz || !u->row0 || !u->fit)
		return -1;
	for (size_t i = 0, r = 0; i < u->D->nw; r += u->D->w[i].len - 1, i++) {
		u->row0[i] = r;
		if (!u->D->w[i].sel)
			u->fit[u->nfit++] = i;
	}
	return 0;
}

static void close_tensors(mt_run *u, size_t l)
{
	for (size_t i = 0; i < u->nt; i++)
		if ((size_t)u->layer[i] == l)
			tp_close_into(&u->t[i], &u->spare[u->t[i].which]);
}

/* layer l's tuned tensors into lt (at most FW_NMAT); their count */
static size_t layer_tensors(mt_run *u, size_t l, tp_tensor *lt[FW_NMAT])
{
	size_t n = 0;

	for (size_t i = 0; i < u->nt && n < FW_NMAT; i++)
		if ((size_t)u->layer[i] == l)
			lt[n++] = &u->t[i];
	return n;
}

/* layer l's tuned tensors opened, their factors at the current scales in fac (else NULL) */
static int open_factors(mt_run *u, size_t l, const bk_factor *fac[FW_NMAT])
{
	tp_tensor *lt[FW_NMAT] = { 0 };
	size_t n = layer_tensors(u, l, lt);

	memset(fac, 0, FW_NMAT * sizeof *fac);
	for (size_t i = 0; i < n; i++)
		if (tp_open_from(lt[i], &u->spare[lt[i]->which]) < 0) {
			close_tensors(u, l);
			return -1;
		}
	tp_factor_many(lt, n);
	for (size_t i = 0; i < n; i++)
		fac[lt[i]->which] = &lt[i]->fac;
	return 0;
}

/*
 * layer l of the model, its tuned projections dequantized from their stored
 * bytes (stored), or left out of ly and opened, their factors at the
 * current scales in fac (which is otherwise all NULL)
 */
static int layer_load(mt_run *u, size_t l, int stored, fw_layer *ly,
		      const bk_factor *fac[FW_NMAT])
{
	fw_override ov[FW_NMAT];
	size_t nov = 0;
	char name[FW_NMAT][160];

	memset(fac, 0, FW_NMAT * sizeof *fac);
	/* the tuned projections are not converted from the model: they are filled below */
	for (size_t i = 0; i < u->nt; i++)
		if ((size_t)u->layer[i] == l) {
			fw_tensor_name(name[nov], sizeof name[nov], (int)l, u->t[i].which);
			ov[nov] = (fw_override){ name[nov], NULL, 0 };
			nov++;
		}
	if (fw_layer_load(u->m, (int)l, ov, nov, ly) < 0)
		return -1;
	for (size_t i = 0; i < u->nt; i++) {
		tp_tensor *t = &u->t[i];

		if ((size_t)u->layer[i] != l)
			continue;
		if (stored && blr_dequantize(t->bytes, t->len, ly->w[t->which]) < 0) {
			fw_layer_free(ly);
			return -1;
		}
		if (!stored) { /* multiplied in factored form: no matrix */
			free(ly->w[t->which]);
			ly->w[t->which] = NULL;
		}
	}
	if (!stored && open_factors(u, l, fac) < 0) {
		fw_layer_free(ly);
		return -1;
	}
	return 0;
}

/* positions of window i */
static size_t wlen(const mt_run *u, size_t i)
{
	return u->D->w[i].len - 1;
}

/*
 * the windows of the batch through layer l, factored by fac: with hold,
 * its intermediates into its kept caches, else through the run's own;
 * the output into out (the states at in kept as a kept cache's input)
 */
static int block_run(mt_run *u, size_t l, const fw_layer *ly, const bk_factor *const *fac,
		     int hold, const size_t *win, size_t nb, const float *in, float *out)
{
	size_t d = u->m->d;

	for (size_t b = 0, off = 0; b < nb; off += wlen(u, win[b]), b++) {
		bk_cache *c = hold ? &u->kc[(l - u->kfrom) * u->kb + b] : &u->c;
		size_t T = wlen(u, win[b]);

		if (bk_forward(u->m, ly, fac, c, in + off * d, T) < 0)
			return -1;
		memcpy(out + off * d, c->y, T * d * sizeof(float));
		u->flops += bk_flops(u->m, fac, T);
	}
	return 0;
}

/*
 * windows win[0..nb) through every layer.  With keep (a step: the tuned
 * projections factored at their current scales), plane l of X holds the
 * states entering layer l and plane L the final ones, and the layers from
 * kfrom on are held with their intermediates.  Without (an evaluation of
 * the stored bytes: fw_layer_run, as cmf-eval runs them), plane 0 is run
 * in place.  The final states' plane is returned.
 */
static float *forward(mt_run *u, const size_t *win, size_t nb, int keep)
{
	size_t d = u->m->d, plane = u->bt * d;

	release(u);
	if (!keep) /* no visit: the dense weights take the spares' room */
		spares_free(u);
	for (size_t b = 0, off = 0; b < nb; off += wlen(u, win[b]), b++)
		if (fw_embed(u->m, u->D->tok + u->D->w[win[b]].start, wlen(u, win[b]),
			     u->X + off * d) < 0)
			return NULL;
	for (size_t l = 0; l < u->L; l++) {
		float *in = u->X + (keep ? l * plane : 0), *out = in + (keep ? plane : 0);
		int hold = keep && l >= u->kfrom, rc = 0;
		fw_layer local, *ly = hold ? &u->kly[l] : &local;
		const bk_factor *fac[FW_NMAT];

		if (layer_load(u, l, !keep, ly, fac) < 0)
			return NULL;
		if (keep)
			rc = block_run(u, l, ly, fac, hold, win, nb, in, out);
		for (size_t b = 0, off = 0; !keep && b < nb && rc == 0; off += wlen(u, win[b]), b++)
			rc = fw_layer_run(u->m, ly, &u->s, out + off * d, wlen(u, win[b]), NULL);
		close_tensors(u, l);
		if (hold)
			u->held[l] = 1;
		else
			fw_layer_free(ly);
		if (rc < 0)
			return NULL;
	}
	return u->X + (keep ? u->L * plane : 0);
}

/* the head's data for window i with final states h (T × d): hn the converted ones normalized */
static nc_data head_data(mt_run *u, size_t i, const float *h)
{
	size_t d = u->m->d, T = wlen(u, i);

	fw_rmsnorm(h, NULL, u->hn, T, d, u->m->a.rms_eps);
	return (nc_data){ d, u->m->vocab, u->D->E, u->D->Es, u->hn, u->D->ns + u->row0[i] * d,
			  T, 0 };
}

/* the windows win[0..nb) through the stored payloads: each one's KL times
 * its positions added to sum[its kind], the positions to count[its kind] */
static int group_kl(mt_run *u, const size_t *win, size_t nb, double sum[2], size_t count[2])
{
	float *h = forward(u, win, nb, 0);

	if (!h)
		return -1;
	for (size_t b = 0, off = 0; b < nb; off += wlen(u, win[b]), b++) {
		nc_data D = head_data(u, win[b], h + off * u->m->d);
		int s = u->D->w[win[b]].sel != 0;
		double kl;

		if (nc_kl(&D, u->m->final_w, 0, NULL, D.fit, &kl, NULL, &u->flops) < 0)
			return -1;
		sum[s] += kl * (double)D.fit;
		count[s] += D.fit;
	}
	return 0;
}

/*
 * the mean KL per position with the stored payloads over the SEL windows
 * (out[1]), and over as many of the first FIT windows as there are SEL ones
 * (out[0]: a FIT figure that costs no more than the SEL one, whatever FIT
 * is), each where want[its kind].  Both wanted, they share the forwards (a
 * dequantization of every payload a group of windows, not a group of each
 * kind), and each is the figure of a pass of its own: a window's KL does not
 * depend on the windows run beside it, and each kind is summed in order
 */
static int part_kl(mt_run *u, const int want[2], double out[2])
{
	size_t win[MT_GROUP], nb = 0, count[2] = { 0, 0 }, taken[2] = { 0, 0 };
	size_t cap = u->D->nw - u->nfit;
	double sum[2] = { 0, 0 };

	for (size_t i = 0; i <= u->D->nw; i++) {
		int s = i < u->D->nw && u->D->w[i].sel != 0;

		if (i < u->D->nw && want[s] && taken[s] < cap)
			win[nb++] = i, taken[s]++;
		if (nb == 0 || (nb < MT_GROUP && i < u->D->nw))
			continue;
		if (group_kl(u, win, nb, sum, count) < 0)
			return -1;
		nb = 0;
	}
	for (int s = 0; s < 2; s++) {
		if (!want[s])
			continue;
		if (count[s] == 0 || !isfinite(sum[s])) {
			nv_seterr("the %s KL is %s", s ? "SEL" : "FIT", count[s] ? "not finite" : "empty");
			return -1;
		}
		out[s] = sum[s] / (double)count[s];
	}
	return 0;
}

/* dy of each window of the batch: the head's gradient of the batch's mean KL through the final norm */
static int head_back(mt_run *u, const size_t *win, size_t nb, const float *h)
{
	size_t d = u->m->d, count = 0;

	for (size_t b = 0; b < nb; b++)
		count += wlen(u, win[b]);
	memset(u->dy, 0, count * d * sizeof(float));
	u->batch_kl = 0;
	for (size_t b = 0, off = 0; b < nb; off += wlen(u, win[b]), b++) {
		nc_data D = head_data(u, win[b], h + off * d);
		double kl;

		if (nc_kl_back(&D, u->m->final_w, 0, D.fit, &kl, u->gz, &u->flops) < 0)
			return -1;
		u->batch_kl += kl / (double)count;
		for (size_t k = 0; k < D.fit * d; k++)
			u->gz[k] /= (float)count;
		bk_rmsnorm_back(h + off * d, u->m->final_w, u->gz, u->dy + off * d, D.fit, d,
				u->m->a.rms_eps);
	}
	return 0;
}

/*
 * back through layer l: its tuned tensors' scale gradients, dy becomes the
 * gradient of its input.  A layer not held is loaded and run forward again.
 */
static int layer_back(mt_run *u, size_t l, const size_t *win, size_t nb)
{
	const fw_model *m = u->m;
	size_t d = m->d, plane = u->bt * d;
	int held = u->held && u->held[l], rc = 0;
	fw_layer local, *ly = held ? &u->kly[l] : &local;
	const bk_factor *fac[FW_NMAT];
	float *dw[FW_NMAT] = { 0 };

	if (held ? open_factors(u, l, fac) < 0 : layer_load(u, l, 0, ly, fac) < 0)
		return -1;
	for (size_t b = 0, off = 0; b < nb && rc == 0; off += wlen(u, win[b]), b++) {
		size_t T = wlen(u, win[b]);
		bk_cache *c = held ? &u->kc[(l - u->kfrom) * u->kb + b] : &u->c;

		if (!held && (rc = bk_forward(m, ly, fac, c, u->X + l * plane + off * d, T)) < 0)
			break;
		bk_backward(m, ly, fac, c, u->dy + off * d, dw, l > u->lmin ? u->dy + off * d : NULL);
		u->flops += (held ? 2 : 3) * bk_flops(m, fac, T);
	}
	if (rc == 0) {
		tp_tensor *lt[FW_NMAT] = { 0 };
		size_t n = layer_tensors(u, l, lt);

		tp_chain_many(lt, n);
	}
	close_tensors(u, l);
	fw_layer_free(ly);
	if (held)
		u->held[l] = 0;
	return rc;
}

/* one step's gradient over a batch of FIT windows, into every tensor's gr */
static int batch_grad(mt_run *u, const size_t *win, size_t nb)
{
	float *h = forward(u, win, nb, 1);

	if (!h || head_back(u, win, nb, h) < 0)
		return -1;
	for (size_t l = u->L; l-- > u->lmin;)
		if (layer_back(u, l, win, nb) < 0)
			return -1;
	return 0;
}

/* tp_loop's: the gradient of a batch, the SEL KL of the stored bytes */
static int loop_grad(void *ctx, const size_t *win, size_t nb)
{
	return batch_grad(ctx, win, nb);
}

static int loop_sel(void *ctx, double *loss)
{
	const int sel[2] = { 0, 1 };
	double v[2];

	if (part_kl(ctx, sel, v) < 0)
		return -1;
	*loss = v[1];
	return 0;
}

static void loop_measured(void *ctx, size_t step, double sel)
{
	mt_run *u = ctx;

	if (u->D->progress)
		u->D->progress(step, sel);
}

int mt_tune(fw_model *m, const tn_input *in, size_t nin, const mt_data *D, const tn_opts *o,
	    uint8_t **out, mt_result *r)
{
	mt_run u = { .m = m, .D = D };
	size_t k = 0;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (nin == 0 || o->batch == 0 || o->batch > 64 || o->eval_every == 0) {
		nv_seterr("payloads, a batch of 1 to 64 windows and an evaluation period are needed");
		return -1;
	}
	if (run_init(&u, in, nin, o->batch) < 0)
		goto out;
	if (u.nfit == 0 || u.nfit == D->nw) {
		nv_seterr("the tuning needs FIT and SEL windows");
		goto out;
	}
	if (tp_snapshot(u.t, u.nt, out) < 0)
		goto out;
	k = u.nt;
	tp_loop lp = { &u, loop_grad, loop_sel, NULL, loop_measured };
	const int both[2] = { 1, 1 }, fit[2] = { 1, 0 };
	double v[2];
	if (part_kl(&u, both, v) < 0) /* the start: FIT and SEL in one pass */
		goto out;
	r->fit_before = v[0], r->sel_before = v[1];
	r->sel_after = r->sel_before;
	loop_measured(&u, 0, r->sel_before);
	if (tp_steps(u.t, u.nt, u.fit, u.nfit, o, &lp, out, &r->sel_after, &r->best_step) < 0)
		goto out;
	tp_reload(u.t, u.nt, out);
	if (part_kl(&u, fit, v) < 0)
		goto out;
	r->fit_after = v[0];
	rc = 0;
out:
	r->flops = u.flops + u.s.flops;
	if (rc < 0)
		tp_snapshot_free(out, k);
	run_free(&u);
	return rc;
}

int mt_check(fw_model *m, const tn_input *in, size_t nin)
{
	mt_run u = { .m = m };
	int rc = tensors_init(&u, in, nin);

	for (size_t i = 0; i < u.nt; i++)
		tp_free(&u.t[i]);
	free(u.t);
	free(u.layer);
	return rc;
}

int mt_gradient(fw_model *m, const tn_input *in, size_t nin, const mt_data *D, const size_t *win,
		size_t nb, double *kl, double **g)
{
	mt_run u = { .m = m, .D = D };
	int rc = -1;

	if (nb == 0 || nb > 64) {
		nv_seterr("a batch of 1 to 64 windows is needed");
		return -1;
	}
	if (run_init(&u, in, nin, nb) == 0 && batch_grad(&u, win, nb) == 0) {
		for (size_t i = 0; i < nin; i++)
			for (size_t p = 0; p < u.t[i].np; p++)
				memcpy(g[i] + p * u.t[i].nv, u.t[i].gr[p], u.t[i].nv * sizeof(double));
		*kl = u.batch_kl;
		rc = 0;
	}
	run_free(&u);
	return rc;
}
