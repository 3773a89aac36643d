/* tune.c - block reconstruction of one layer's BLR scales (tune.h) */
#include "tune.h"

#include "adam.h"
#include "block.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"
#include "rng.h"
#include "state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* one tuned projection: its payload, signs, start scales and Adam state */
typedef struct {
	int which;                /* FW_Q … FW_DOWN */
	size_t m, n, r, np, nv;   /* nv = m + n + r scales a path: h | g | ℓ */
	uint8_t *bytes;           /* the candidate payload: the start's, scales rewritten */
	size_t len, off[2];       /* byte offsets of each path's h (g and ℓ follow) */
	float *su[2], *sv[2];     /* (m × r), (n × r) ±1 */
	float *v0[2], *v[2];      /* (nv) start and current scales */
	double *s[2], *am[2], *av[2], *gr[2]; /* (nv) log-multipliers, moments, gradient */
	float *dw;                /* (m × n) ∂L/∂Ŵ */
	float *a, *b, *pq;        /* (m × r), (n × r), (max(m,n) × r) scratch */
} tn_tensor;

static void tensor_free(tn_tensor *t)
{
	for (int p = 0; p < 2; p++) {
		free(t->su[p]);
		free(t->sv[p]);
		free(t->v0[p]);
		free(t->v[p]);
		free(t->s[p]);
		free(t->am[p]);
		free(t->av[p]);
		free(t->gr[p]);
	}
	free(t->bytes);
	free(t->dw);
	free(t->a);
	free(t->b);
	free(t->pq);
}

static int tensor_alloc(tn_tensor *t)
{
	size_t big = t->m > t->n ? t->m : t->n;

	t->dw = nv_malloc(t->m, t->n * sizeof(float));
	t->a = nv_malloc(t->m, t->r * sizeof(float));
	t->b = nv_malloc(t->n, t->r * sizeof(float));
	t->pq = nv_malloc(big, t->r * sizeof(float));
	if (!t->dw || !t->a || !t->b || !t->pq)
		return -1;
	for (size_t p = 0; p < t->np; p++) {
		t->su[p] = nv_malloc(t->m, t->r * sizeof(float));
		t->sv[p] = nv_malloc(t->n, t->r * sizeof(float));
		t->v0[p] = nv_malloc(t->nv, sizeof(float));
		t->v[p] = nv_malloc(t->nv, sizeof(float));
		t->s[p] = nv_calloc(t->nv, sizeof(double));
		t->am[p] = nv_calloc(t->nv, sizeof(double));
		t->av[p] = nv_calloc(t->nv, sizeof(double));
		t->gr[p] = nv_calloc(t->nv, sizeof(double));
		if (!t->su[p] || !t->sv[p] || !t->v0[p] || !t->v[p] || !t->s[p] || !t->am[p] ||
		    !t->av[p] || !t->gr[p])
			return -1;
	}
	return 0;
}

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

/* signs and scales of the payload, which must be m × n of its slot */
static int tensor_init(tn_tensor *t, int l, const tn_input *in)
{
	blr_header hd;
	blr_view v[2];

	memset(t, 0, sizeof *t);
	if ((t->which = slot_of(l, in->name)) < 0 || blr_parse(in->payload, in->len, &hd, v) < 0)
		return -1;
	t->m = hd.m, t->n = hd.n, t->r = hd.r, t->np = hd.paths, t->nv = t->m + t->n + t->r;
	if (tensor_alloc(t) < 0 || !(t->bytes = nv_malloc(in->len, 1)))
		return -1;
	memcpy(t->bytes, in->payload, in->len);
	t->len = in->len;
	for (size_t p = 0; p < t->np; p++) {
		const uint8_t *sc[3] = { v[p].h, v[p].g, v[p].l };
		size_t cnt[3] = { t->m, t->n, t->r }, k = 0;

		t->off[p] = (size_t)(v[p].h - in->payload);
		for (int part = 0; part < 3; part++)
			for (size_t i = 0; i < cnt[part]; i++, k++)
				t->v0[p][k] = t->v[p][k] = nv_f16_to_f32(le_u16(sc[part] + 2 * i));
		for (size_t i = 0; i < t->m; i++)
			for (size_t j = 0; j < t->r; j++)
				t->su[p][i * t->r + j] = (float)blr_sign(v[p].su, i, j, t->r);
		for (size_t i = 0; i < t->n; i++)
			for (size_t j = 0; j < t->r; j++)
				t->sv[p][i * t->r + j] = (float)blr_sign(v[p].sv, i, j, t->r);
	}
	return 0;
}

/* a (m × r) = diag(h) S_U diag(ℓ) with withl, else diag(h) S_U; b (n × r) = diag(g) S_V */
static void factors(tn_tensor *t, size_t p, int withl)
{
	const float *h = t->v[p], *g = h + t->m, *lv = g + t->n;

	for (size_t i = 0; i < t->m; i++)
		for (size_t k = 0; k < t->r; k++)
			t->a[i * t->r + k] = h[i] * t->su[p][i * t->r + k] * (withl ? lv[k] : 1.0f);
	for (size_t j = 0; j < t->n; j++)
		for (size_t k = 0; k < t->r; k++)
			t->b[j * t->r + k] = g[j] * t->sv[p][j * t->r + k];
}

/* w (m × n) = Σ_p diag(h) S_U diag(ℓ) S_Vᵀ diag(g), from the current scales */
static void rebuild(tn_tensor *t, float *w, double *flops)
{
	for (size_t p = 0; p < t->np; p++) {
		factors(t, p, 1);
		nv_sgemm(0, 1, t->m, t->n, t->r, 1.0f, t->a, t->r, t->b, t->r, p ? 1.0f : 0.0f, w,
			 t->n);
		*flops += 2.0 * (double)t->m * (double)t->n * (double)t->r;
	}
}

/* the scales' gradients from dw (see tune.h), as ∂/∂s = ∂/∂v · v */
static void chain(tn_tensor *t, double *flops)
{
	size_t m = t->m, n = t->n, r = t->r;

	for (size_t p = 0; p < t->np; p++) {
		const float *h = t->v[p], *g = h + m, *lv = g + n;
		double *gh = t->gr[p], *gg = gh + m, *gl = gg + n;

		memset(gh, 0, t->nv * sizeof(double));
		factors(t, p, 0);
		/* P (m × r) = dW · diag(g) S_V */
		nv_sgemm(0, 0, m, r, n, 1.0f, t->dw, n, t->b, r, 0.0f, t->pq, r);
		for (size_t i = 0; i < m; i++)
			for (size_t k = 0; k < r; k++) {
				double su = t->su[p][i * r + k], pk = t->pq[i * r + k];

				gh[i] += su * lv[k] * pk;
				gl[k] += h[i] * su * pk;
			}
		/* Q (n × r) = dWᵀ · diag(h) S_U */
		nv_sgemm(1, 0, n, r, m, 1.0f, t->dw, n, t->a, r, 0.0f, t->pq, r);
		for (size_t j = 0; j < n; j++)
			for (size_t k = 0; k < r; k++)
				gg[j] += t->sv[p][j * r + k] * lv[k] * t->pq[j * r + k];
		for (size_t i = 0; i < t->nv; i++)
			gh[i] *= t->v[p][i];
		*flops += 4.0 * (double)m * (double)n * (double)r;
	}
}

/* one Adam step on the log-multipliers; the scales follow */
static void adam(tn_tensor *t, double lr, size_t step)
{
	for (size_t p = 0; p < t->np; p++) {
		nv_adam(t->s[p], t->am[p], t->av[p], t->gr[p], t->nv, lr, step);
		for (size_t i = 0; i < t->nv; i++)
			t->v[p][i] = (float)((double)t->v0[p][i] * exp(t->s[p][i]));
	}
}

/* the current scales as f16 into the candidate bytes; -1 when one leaves f16's range */
static int store(tn_tensor *t)
{
	for (size_t p = 0; p < t->np; p++)
		for (size_t i = 0; i < t->nv; i++) {
			uint16_t h = nv_f32_to_f16(t->v[p][i]);

			if (!isfinite(nv_f16_to_f32(h)))
				return -1;
			put_u16(t->bytes + t->off[p] + 2 * i, h);
		}
	return 0;
}

/* what a run holds: the layer, its block, the tuned tensors, the windows' rows */
typedef struct {
	const fw_model *m;
	fw_layer ly;
	bk_cache c;
	tn_tensor *t;
	size_t nt;
	float *dwx[FW_NMAT];  /* gradients of the projections that are not tuned */
	float *dy;            /* (window × d) */
	size_t *row0, *fit;   /* each window's first row; the FIT windows' indices */
	size_t nfit;
	const float *x, *ysrc;
	const fw_window *w;
	size_t nw;
	double flops;
} tn_run;

/*
 * Σ ‖y − y_src‖² over the windows of one part (sel 0 FIT, 1 SEL), per
 * position; with norm, also √(Σ‖y‖² / Σ‖y_src‖²): whether the block's
 * outputs shrink against the source's
 */
static int part_loss(tn_run *u, int sel, double *out, double *norm)
{
	size_t d = u->m->d, count = 0;
	double sum = 0, yy = 0, ss = 0;

	for (size_t i = 0; i < u->nw; i++) {
		size_t T = u->w[i].len - 1;
		const float *ys = u->ysrc + u->row0[i] * d;

		if (u->w[i].sel != sel)
			continue;
		if (bk_forward(u->m, &u->ly, &u->c, u->x + u->row0[i] * d, T) < 0)
			return -1;
		for (size_t k = 0; k < T * d; k++) {
			sum += ((double)u->c.y[k] - ys[k]) * ((double)u->c.y[k] - ys[k]);
			yy += (double)u->c.y[k] * u->c.y[k];
			ss += (double)ys[k] * ys[k];
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

/* one step's gradient over a batch of FIT windows, into every tensor's dw */
static int batch_grad(tn_run *u, const size_t *win, size_t nb)
{
	size_t d = u->m->d, count = 0;
	float *dw[FW_NMAT];

	memcpy(dw, u->dwx, sizeof dw);
	for (size_t i = 0; i < u->nt; i++) {
		dw[u->t[i].which] = u->t[i].dw;
		rebuild(&u->t[i], u->ly.w[u->t[i].which], &u->flops);
		memset(u->t[i].dw, 0, u->t[i].m * u->t[i].n * sizeof(float));
	}
	for (size_t b = 0; b < nb; b++)
		count += u->w[win[b]].len - 1;
	for (size_t b = 0; b < nb; b++) {
		size_t wi = win[b], T = u->w[wi].len - 1;
		const float *ys = u->ysrc + u->row0[wi] * d;

		if (bk_forward(u->m, &u->ly, &u->c, u->x + u->row0[wi] * d, T) < 0)
			return -1;
		/* ∂/∂y of the batch's mean over positions of ‖y − y_src‖² */
		for (size_t k = 0; k < T * d; k++)
			u->dy[k] = (float)(2.0 * ((double)u->c.y[k] - ys[k]) / (double)count);
		bk_backward(u->m, &u->ly, &u->c, u->dy, dw);
		u->flops += 6.0 * (double)T * (double)u->m->d *
			    (double)(u->m->qdim + 2 * u->m->kvdim + u->m->d + 3 * u->m->ff);
	}
	for (size_t i = 0; i < u->nt; i++)
		chain(&u->t[i], &u->flops);
	return 0;
}

static void run_free(tn_run *u)
{
	for (size_t i = 0; i < u->nt; i++)
		tensor_free(&u->t[i]);
	free(u->t);
	for (int i = 0; i < FW_NMAT; i++)
		free(u->dwx[i]);
	free(u->dy);
	free(u->row0);
	free(u->fit);
	bk_free(&u->c);
	fw_layer_free(&u->ly);
}

/* the layer with the start payloads, the tensors, the windows' rows */
static int run_init(tn_run *u, int l, const tn_input *in, size_t nin, size_t tmax)
{
	const fw_model *m = u->m;
	size_t rows[FW_NMAT] = { m->qdim, m->kvdim, m->kvdim, m->d, m->ff, m->ff, m->d };
	size_t cols[FW_NMAT] = { m->d, m->d, m->d, m->qdim, m->d, m->d, m->ff };
	fw_override ov[FW_NMAT];

	if (nin == 0 || nin > FW_NMAT) {
		nv_seterr("%zu payloads to tune: 1 to %d a layer", nin, FW_NMAT);
		return -1;
	}
	for (size_t i = 0; i < nin; i++)
		ov[i] = (fw_override){ in[i].name, in[i].payload, in[i].len };
	if (fw_layer_load(m, l, ov, nin, &u->ly) < 0 || bk_init(&u->c, m, tmax) < 0 ||
	    !(u->t = nv_calloc(nin, sizeof *u->t)) || !(u->dy = nv_malloc(tmax, m->d * sizeof(float))))
		return -1;
	for (; u->nt < nin; u->nt++)
		if (tensor_init(&u->t[u->nt], l, &in[u->nt]) < 0) {
			tensor_free(&u->t[u->nt]);
			return -1;
		}
	for (int i = 0; i < FW_NMAT; i++)
		if (!(u->dwx[i] = nv_malloc(rows[i], cols[i] * sizeof(float))))
			return -1;
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

/* the candidate payloads as they are now, kept when better on SEL */
static int evaluate(tn_run *u, double *best, uint8_t **keep, size_t step, tn_result *r)
{
	double sel, norm;

	for (size_t i = 0; i < u->nt; i++)
		if (store(&u->t[i]) < 0)
			return 0; /* a scale beyond f16: this step cannot be stored */
	if (load_stored(u) < 0 || part_loss(u, 1, &sel, &norm) < 0)
		return -1;
	if (sel < *best) {
		*best = sel;
		r->norm_after = norm;
		r->best_step = step;
		for (size_t i = 0; i < u->nt; i++)
			memcpy(keep[i], u->t[i].bytes, u->t[i].len);
	}
	return 0;
}

static int steps(tn_run *u, const tn_opts *o, uint8_t **keep, tn_result *r)
{
	size_t nb = o->batch < u->nfit ? o->batch : u->nfit, per = u->nfit / nb;
	size_t *perm = nv_malloc(u->nfit, sizeof(size_t)), win[64];
	uint64_t st = o->seed;
	double best = r->sel_before;
	int rc = 0;

	if (!perm)
		return -1;
	for (size_t k = 1; k <= o->steps && rc == 0; k++) {
		size_t at = (k - 1) % per;

		if (at == 0)
			nv_shuffle(perm, u->nfit, &st);
		for (size_t b = 0; b < nb; b++)
			win[b] = u->fit[perm[at * nb + b]];
		if ((rc = batch_grad(u, win, nb)) < 0)
			break;
		for (size_t i = 0; i < u->nt; i++)
			adam(&u->t[i], o->lr, k);
		if (k % o->eval_every == 0 || k == o->steps)
			rc = evaluate(u, &best, keep, k, r);
	}
	r->sel_after = best;
	free(perm);
	return rc;
}

int tn_tune(const fw_model *m, int l, const tn_input *in, size_t nin, const float *x,
	    const float *ysrc, const fw_window *w, size_t nw, const tn_opts *o, uint8_t **out,
	    tn_result *r)
{
	tn_run u = { .m = m, .x = x, .ysrc = ysrc, .w = w, .nw = nw };
	size_t tmax = fw_windows_tmax(w, nw), k = 0;
	int rc = -1;

	memset(r, 0, sizeof *r);
	if (o->batch == 0 || o->batch > 64 || o->eval_every == 0) {
		nv_seterr("a batch of 1 to 64 windows and an evaluation period are needed");
		return -1;
	}
	if (run_init(&u, l, in, nin, tmax) < 0)
		goto out;
	if (u.nfit == 0 || u.nfit == nw) {
		nv_seterr("the tuning needs FIT and SEL windows");
		goto out;
	}
	for (; k < nin; k++)
		if (!(out[k] = nv_malloc(in[k].len, 1)))
			goto out;
		else
			memcpy(out[k], in[k].payload, in[k].len);
	if (part_loss(&u, 0, &r->fit_before, NULL) < 0 ||
	    part_loss(&u, 1, &r->sel_before, &r->norm_before) < 0)
		goto out;
	r->norm_after = r->norm_before; /* the start, unless a step is kept */
	if (steps(&u, o, out, r) < 0)
		goto out;
	for (size_t i = 0; i < u.nt; i++)
		memcpy(u.t[i].bytes, out[i], u.t[i].len);
	if (load_stored(&u) < 0 || part_loss(&u, 0, &r->fit_after, NULL) < 0)
		goto out;
	rc = 0;
out:
	r->flops = u.flops;
	if (rc < 0)
		while (k-- > 0) {
			free(out[k]);
			out[k] = NULL;
		}
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
	want = (st_header){ .layer = (uint32_t)l, .width = (uint32_t)m->d,
			    .window = (uint32_t)window, .crc = st_token_crc(tok, ntok),
			    .tokens = ntok, .fit = fit, .sel = sel, .rows = *rows };
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
