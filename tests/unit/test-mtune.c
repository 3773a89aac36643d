/*
 * test-mtune.c - model reconstruction (mtune.h) on the tiny two-layer
 * model: payloads of one and two paths replace six projections of both
 * layers; the KL that mt_gradient reports is the one an independent route
 * gives (forward.h's layer-major fw_final_states and normcal's nc_kl on a
 * model whose tensors hold the payloads' values), and its gradient with
 * respect to the log-multipliers of h, g and ℓ agrees with central
 * differences of that route, the model's tensors rebuilt from perturbed
 * factors; mt_tune keeps its promises (SEL never worse, same bytes twice,
 * no steps the inputs back) and refuses bad input, as mt_check does before.
 * Layers kept from the forward for the backward (D.keep) give the same
 * bits as layers run again, and save work.
 */
#include "adam.h"
#include "block.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "linalg.h"
#include "mtune.h"
#include "normcal.h"
#include "tparam.h"
#include "tap.h"
#include "tinymodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NT = 6, R = 8, WIN = 10, FITW = 2, SELW = 1, NTOK = (FITW + SELW) * WIN };

/* the tuned projections: the F32 ones of the tiny model (q, o, down) in both layers */
static const int layer_of[NT] = { 0, 0, 0, 1, 1, 1 }, slot_of[NT] = { FW_Q, FW_O, FW_DOWN,
								     FW_Q, FW_O, FW_DOWN };

typedef struct {
	mem_model src, conv;   /* the source; the converted model, six tensors the payloads' */
	ref_w rs, rc;
	fw_model ms, mc;
	uint8_t *pay[NT];
	size_t len[NT], m[NT], n[NT], np[NT];
	char name[NT][160];
	tn_input in[NT];
	uint32_t tok[NTOK];
	fw_window *w;
	size_t nw, rows;
	float *ns, *E;
	mt_data D;
} fixture;

/* a random payload of paths p for an m × n projection: W entries ~ 1/√n */
static uint8_t *random_payload(tap_rng *r, size_t m, size_t n, size_t p, size_t *len)
{
	uint16_t h[2][24], g[2][24], l[2][R];
	int8_t su[2][24 * R], sv[2][24 * R];
	blr_path_in in[2];
	uint8_t *out;

	for (size_t q = 0; q < p; q++) {
		for (size_t i = 0; i < m; i++)
			h[q][i] = nv_f32_to_f16((float)(0.4 * (0.7 + 0.6 * rng_unif(r))));
		for (size_t j = 0; j < n; j++)
			g[q][j] = nv_f32_to_f16((float)(0.4 * (0.7 + 0.6 * rng_unif(r))));
		for (size_t k = 0; k < R; k++)
			l[q][k] = nv_f32_to_f16((float)((0.5 + rng_unif(r)) / sqrt((double)(n * p))));
		for (size_t i = 0; i < m * R; i++)
			su[q][i] = rng_u64(r) & 1 ? 1 : -1;
		for (size_t i = 0; i < n * R; i++)
			sv[q][i] = rng_u64(r) & 1 ? 1 : -1;
		in[q] = (blr_path_in){ h[q], g[q], l[q], su[q], sv[q] };
	}
	*len = blr_payload_size(m, n, R, p);
	out = malloc(*len);
	if (blr_build(m, n, R, p, in, out) < 0)
		abort();
	return out;
}

static cmf_tensor *tensor(mem_model *mm, const char *name)
{
	for (size_t i = 0; i < mm->f.ntensors; i++)
		if (!strcmp(mm->f.t[i].name, name))
			return &mm->f.t[i];
	abort();
}

/*
 * tensor t of the converted model ← the payload's Ŵ = A·Bᵀ (f64), the
 * log-multiplier of scale k of path p moved by e (k: h | g | ℓ)
 */
static void put_weights(fixture *f, int t, size_t p, size_t k, double e)
{
	size_t m = f->m[t], n = f->n[t], pr = f->np[t] * R;
	float *a = malloc(m * pr * sizeof *a), *b = malloc(n * pr * sizeof *b);
	float *w = (float *)tensor(&f->conv, f->name[t])->data;
	double x = exp(e);

	blr_factors(f->pay[t], f->len[t], a, b);
	if (k < m)
		for (size_t c = p * R; c < (p + 1) * R; c++)
			a[k * pr + c] = (float)(a[k * pr + c] * x);
	else if (k < m + n)
		for (size_t c = p * R; c < (p + 1) * R; c++)
			b[(k - m) * pr + c] = (float)(b[(k - m) * pr + c] * x);
	else
		for (size_t i = 0; i < m; i++)
			a[i * pr + p * R + k - m - n] = (float)(a[i * pr + p * R + k - m - n] * x);
	for (size_t i = 0; i < m; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0;

			for (size_t c = 0; c < pr; c++)
				s += (double)a[i * pr + c] * b[j * pr + c];
			w[i * n + j] = (float)s;
		}
	free(a);
	free(b);
}

static void setup(fixture *f, tap_rng *r)
{
	tap_rng r1 = *r, r2 = *r;
	size_t d = 16, ff = 24, qd = 16;
	size_t rows[FW_NMAT] = { qd, 8, 8, d, ff, ff, d }, cols[FW_NMAT] = { d, d, d, qd, d, d, ff };

	memset(f, 0, sizeof *f);
	build_tiny(&f->src, &f->rs, &r1);
	build_tiny(&f->conv, &f->rc, &r2); /* the same draws: the same model */
	*r = r1;
	for (int t = 0; t < NT; t++) {
		f->m[t] = rows[slot_of[t]], f->n[t] = cols[slot_of[t]], f->np[t] = 1 + (t % 2);
		f->pay[t] = random_payload(r, f->m[t], f->n[t], f->np[t], &f->len[t]);
		fw_tensor_name(f->name[t], sizeof f->name[t], layer_of[t], slot_of[t]);
		f->in[t] = (tn_input){ f->name[t], f->pay[t], f->len[t] };
		put_weights(f, t, 0, 0, 0.0);
	}
	for (size_t i = 0; i < NTOK; i++)
		f->tok[i] = (uint32_t)(rng_u64(r) % 37);
	ok(fw_open(&f->ms, &f->src.f) == 0 && fw_open(&f->mc, &f->conv.f) == 0,
	   "the tiny source and its converted copy");
	f->w = fw_windows(FITW * WIN, SELW * WIN, WIN, &f->nw, &f->rows);
	f->ns = malloc(f->rows * d * sizeof(float));
	if (!f->w || fw_final_states(&f->ms, f->tok, f->w, f->nw, f->ns) < 0 ||
	    !(f->E = fw_head_f32(&f->ms)))
		abort();
	fw_rmsnorm(f->ns, f->ms.final_w, f->ns, f->rows, d, f->ms.a.rms_eps);
	f->D = (mt_data){ f->tok, f->w, f->nw, f->ns, f->E, f->E, NULL, 0 };
}

static void teardown(fixture *f)
{
	for (int t = 0; t < NT; t++)
		free(f->pay[t]);
	fw_close(&f->ms);
	fw_close(&f->mc);
	free_model(&f->src);
	free_model(&f->conv);
	free_ref(&f->rs);
	free_ref(&f->rc);
	free(f->w);
	free(f->ns);
	free(f->E);
}

/* the independent route: the converted model's mean KL over the FIT windows */
static double route_kl(fixture *f)
{
	size_t fit = FITW * (WIN - 1), d = 16;
	float x[FITW * (WIN - 1) * 16];
	double kl;
	nc_data D = { d, 37, f->E, f->E, x, f->ns, fit, 0 };

	if (fw_final_states(&f->mc, f->tok, f->w, FITW, x) < 0)
		abort();
	fw_rmsnorm(x, NULL, x, fit, d, f->mc.a.rms_eps);
	if (nc_kl(&D, f->mc.final_w, 0, NULL, fit, &kl, NULL, NULL) < 0)
		abort();
	return kl;
}

static void check_gradient(fixture *f)
{
	size_t win[FITW] = { 0, 1 };
	double *g[NT], kl, e = 1e-2;
	int t;

	for (t = 0; t < NT; t++)
		g[t] = calloc(f->np[t] * (f->m[t] + f->n[t] + R), sizeof(double));

	int rc = mt_gradient(&f->mc, f->in, NT, &f->D, win, FITW, &kl, g);

	ok(rc == 0, "mt_gradient: %s", rc ? nv_err() : "the KL and every scale's gradient");
	/* the same sums in another order (sgemm blocks, f32): 1e-5 of a KL of ~0.3 */
	ok(fabs(kl - route_kl(f)) <= 1e-5, "its KL %.7f is the independent route's %.7f", kl,
	   route_kl(f));
	for (t = 0; t < NT; t++) {
		size_t nv = f->m[t] + f->n[t] + R;
		double worst = 0, big = 0;

		for (size_t p = 0; p < f->np[t]; p++)
			for (size_t k = 0; k < nv; k++) {
				double up, dn, fd;

				put_weights(f, t, p, k, e);
				up = route_kl(f);
				put_weights(f, t, p, k, -e);
				dn = route_kl(f);
				fd = (up - dn) / (2 * e);
				worst = fmax(worst, fabs(fd - g[t][p * nv + k]));
				big = fmax(big, fabs(fd));
			}
		put_weights(f, t, 0, 0, 0.0);
		/*
		 * central differences at e = 1e-2 in log-scale: truncation O(e²) ≈ 1e-4 of
		 * the gradient; the route's f32 KL (≈1e-7) over 2e adds 1e-5; 2e-3 of the
		 * largest entry bounds both with room
		 */
		ok(big > 0 && worst <= 2e-3 * big,
		   "%s (%zu path%s): ∂KL/∂s of every h, g, ℓ is the central differences' "
		   "(|err| %.2g of %.2g)", f->name[t], f->np[t], f->np[t] > 1 ? "s" : "", worst, big);
		free(g[t]);
	}
}

/* the gradient at one thread and at two: the same bits (a layer's tensors are shared among the threads) */
static void check_threads(fixture *f)
{
	size_t win[FITW] = { 0, 1 };
	double *g[2][NT], kl[2];
	int rc = 0, same = 1;

	for (int k = 0; k < 2; k++) {
		nv_set_threads(k + 1);
		for (int t = 0; t < NT; t++)
			g[k][t] = calloc(f->np[t] * (f->m[t] + f->n[t] + R), sizeof(double));
		rc |= mt_gradient(&f->mc, f->in, NT, &f->D, win, FITW, &kl[k], g[k]);
	}
	nv_set_threads(1);
	for (int t = 0; t < NT; t++) {
		same = same && !memcmp(g[0][t], g[1][t], f->np[t] * (f->m[t] + f->n[t] + R) * sizeof(double));
		free(g[0][t]);
		free(g[1][t]);
	}
	ok(rc == 0 && same && kl[0] == kl[1], "one thread and two: the same KL and gradient bits");
}

static void check_tune(fixture *f)
{
	tn_opts o = { 12, 1, 3, 0.01, 5, 0 };
	uint8_t *a[NT] = { 0 }, *b[NT] = { 0 }, *z[NT] = { 0 };
	mt_result r, r2, r0;
	int same = 1, back = 1, moved = 0;

	int rc = mt_tune(&f->mc, f->in, NT, &f->D, &o, a, &r);

	ok(rc == 0, "mt_tune: %s", rc ? nv_err() : "12 steps");
	ok(r.sel_after <= r.sel_before, "SEL never worse: %.6f -> %.6f (step %zu)", r.sel_before,
	   r.sel_after, r.best_step);
	ok(r.best_step > 0 && r.fit_after < r.fit_before, "and the tiny model gains: FIT %.6f -> "
	   "%.6f", r.fit_before, r.fit_after);
	ok(mt_tune(&f->mc, f->in, NT, &f->D, &o, b, &r2) == 0, "a second run");
	o.steps = 0;
	ok(mt_tune(&f->mc, f->in, NT, &f->D, &o, z, &r0) == 0 && r0.best_step == 0,
	   "no steps: the start");
	/* before: FIT measured in one pass with SEL; after: alone, on the same bytes */
	ok(r0.fit_after == r0.fit_before, "the FIT KL run beside SEL is its own pass's to the bit: "
	   "%.17g, %.17g", r0.fit_before, r0.fit_after);
	for (int t = 0; t < NT; t++) {
		same &= !memcmp(a[t], b[t], f->len[t]);
		back &= !memcmp(z[t], f->pay[t], f->len[t]);
		moved |= memcmp(a[t], f->pay[t], f->len[t]) != 0;
		free(a[t]);
		free(b[t]);
		free(z[t]);
	}
	ok(same && moved, "same inputs, same bytes (and they moved)");
	ok(back, "no steps: the inputs' bytes back");
}

/* the gradient with D.keep bytes, in g (freshly allocated); its KL */
static double keep_gradient(fixture *f, size_t keep, double *g[NT])
{
	size_t win[FITW] = { 0, 1 };
	mt_data D = f->D;
	double kl = -1;

	D.keep = keep;
	for (int t = 0; t < NT; t++)
		g[t] = calloc(f->np[t] * (f->m[t] + f->n[t] + R), sizeof(double));
	if (mt_gradient(&f->mc, f->in, NT, &D, win, FITW, &kl, g) < 0)
		kl = -1;
	return kl;
}

/* kept layers (the last one, both) against none: the same gradient bits and tuned bytes */
static void check_keep(fixture *f)
{
	const fw_model *m = &f->mc;
	/* one layer's weights and FITW windows' intermediates, as mtune.h describes them */
	size_t one = m->d * (2 * m->qdim + 2 * m->kvdim + 3 * m->ff) * sizeof(float) +
		     FITW * bk_forward_bytes(m, WIN - 1);
	size_t keeps[2] = { one, 4 * one };
	double *g0[NT], *g1[NT], kl0 = keep_gradient(f, 0, g0);

	for (int k = 0; k < 2; k++) {
		double kl1 = keep_gradient(f, keeps[k], g1);
		int same = kl0 >= 0 && kl1 == kl0;

		for (int t = 0; t < NT; t++) {
			same &= !memcmp(g0[t], g1[t],
					f->np[t] * (f->m[t] + f->n[t] + R) * sizeof(double));
			free(g1[t]);
		}
		ok(same, "%s layer%s kept: the same KL and gradient bits", k ? "both" : "the last",
		   k ? "s" : "");
	}
	for (int t = 0; t < NT; t++)
		free(g0[t]);

	tn_opts o = { 6, 2, 3, 0.01, 5, 0 };
	uint8_t *a[NT] = { 0 }, *b[NT] = { 0 };
	mt_result ra, rb;
	mt_data D = f->D;
	int same;

	same = mt_tune(&f->mc, f->in, NT, &D, &o, a, &ra) == 0;
	D.keep = 4 * one;
	same &= mt_tune(&f->mc, f->in, NT, &D, &o, b, &rb) == 0;
	for (int t = 0; t < NT; t++) {
		same &= a[t] && b[t] && !memcmp(a[t], b[t], f->len[t]);
		free(a[t]);
		free(b[t]);
	}
	ok(same && rb.sel_after == ra.sel_after, "mt_tune with both layers kept: the same bytes");
	ok(rb.flops < ra.flops, "and less work: %.4g against %.4g flops", rb.flops, ra.flops);
}

/* a visit's arrays (in tparam.h's order) */
static void visit_of(tp_tensor *t, float *v[10])
{
	float *a[10] = { t->su[0], t->su[1], t->a, t->al, t->pg, t->sv[0], t->sv[1], t->b, t->bl,
			 t->qg };

	memcpy(v, a, sizeof a);
}

/* t's visit arrays and u's hold the same bits (m × n, R a path) */
static int same_visit(tp_tensor *t, tp_tensor *u)
{
	float *a[10], *b[10];
	size_t k = t->np * R;
	int same = t->np == u->np;

	visit_of(t, a), visit_of(u, b);
	for (int j = 0; same && j < 10; j++) {
		size_t rows = j < 5 ? t->m : t->n, cols = j % 5 < 2 ? R : k;
		if (j % 5 < 2 && (size_t)(j % 5) >= t->np)
			same = !a[j] && !b[j];
		else
			same = !memcmp(a[j], b[j], rows * cols * sizeof(float));
	}
	return same;
}

/*
 * tp_open_from: a spare of the tensor's shape is taken (its arrays, no
 * fresh ones), and the visit is a fresh open's bit for bit though the
 * arrays held another tensor's factors and gradients; a spare of another
 * shape is freed for fresh arrays; a tensor not open leaves a spare as it is
 */
static void check_spare(tap_rng *r)
{
	size_t len[3];
	uint8_t *p[3] = { random_payload(r, 16, 24, 2, &len[0]), random_payload(r, 16, 24, 2, &len[1]),
			  random_payload(r, 16, 24, 1, &len[2]) };
	tp_tensor a, b, fresh, c;
	tp_spare sp = { 0 };
	float *was;

	if (tp_init(&a, FW_DOWN, p[0], len[0]) < 0 || tp_init(&b, FW_DOWN, p[1], len[1]) < 0 ||
	    tp_init(&fresh, FW_DOWN, p[1], len[1]) < 0 || tp_init(&c, FW_DOWN, p[2], len[2]) < 0 ||
	    tp_open(&a) < 0)
		abort();
	tp_factor(&a);
	for (size_t i = 0; i < a.m * 2 * R; i++) /* a backward's P and Q */
		a.pg[i] = 1.0f + (float)i;
	for (size_t i = 0; i < a.n * 2 * R; i++)
		a.qg[i] = -2.0f;
	was = a.al;
	tp_close_into(&a, &sp);
	ok(!a.al && sp.al == was && sp.np == 2, "closed into a spare: its arrays kept");
	tp_close_into(&a, &sp);
	ok(sp.al == was, "a tensor not open leaves the spare as it is");
	ok(tp_open_from(&b, &sp) == 0 && b.al == was && !sp.al, "a spare of the shape is taken");
	tp_factor(&b);
	ok(tp_open(&fresh) == 0 && tp_factor(&fresh) && same_visit(&b, &fresh),
	   "and the visit is a fresh one's bit for bit");
	tp_close_into(&b, &sp);
	ok(tp_open_from(&c, &sp) == 0 && !sp.al && c.al && !c.su[1],
	   "a spare of another shape (two paths for one): freed, fresh arrays");
	tp_spare_free(&sp);
	tp_free(&a), tp_free(&b), tp_free(&fresh), tp_free(&c);
	for (int i = 0; i < 3; i++)
		free(p[i]);
}

/* nv_lr_at's cosine: lr at the first step, half at the middle, falling, 0 after the last */
static void check_lr_at(void)
{
	int falling = 1, flat = 1;

	for (size_t k = 1; k <= 10; k++) {
		falling &= nv_lr_at(0.01, 1, k + 1, 10) < nv_lr_at(0.01, 1, k, 10);
		flat &= nv_lr_at(0.01, 0, k, 10) == 0.01;
	}
	ok(nv_lr_at(0.01, 1, 1, 10) == 0.01 && fabs(nv_lr_at(0.01, 1, 6, 10) - 0.005) < 1e-17 &&
	   fabs(nv_lr_at(0.01, 1, 11, 10)) < 1e-17 && falling,
	   "nv_lr_at cosine: lr at step 1, lr/2 at 6 of 10, falling, 0 at 11");
	ok(flat, "nv_lr_at without decay: lr at every step");
}

/* mt_tune with a cosine rate: SEL never worse, the same bytes twice, other
 * bytes than the constant rate's; one step is the constant rate's step */
static void check_decay(fixture *f)
{
	tn_opts o = { 12, 1, 3, 0.01, 5, 1 }, c = o;
	uint8_t *a[NT] = { 0 }, *b[NT] = { 0 }, *k[NT] = { 0 }, *one[2][NT] = { { 0 } };
	mt_result r, r2, rk, r1[2];
	int same = 1, other = 0, first = 1, rc;

	rc = mt_tune(&f->mc, f->in, NT, &f->D, &o, a, &r);
	ok(rc == 0 && r.sel_after <= r.sel_before,
	   "mt_tune with a cosine rate: SEL never worse, %.6f -> %.6f (step %zu)", r.sel_before,
	   r.sel_after, r.best_step);
	rc = mt_tune(&f->mc, f->in, NT, &f->D, &o, b, &r2);
	c.cosine = 0;
	rc |= mt_tune(&f->mc, f->in, NT, &f->D, &c, k, &rk);
	c.steps = o.steps = 1;
	c.eval_every = o.eval_every = 1;
	rc |= mt_tune(&f->mc, f->in, NT, &f->D, &o, one[0], &r1[0]);
	rc |= mt_tune(&f->mc, f->in, NT, &f->D, &c, one[1], &r1[1]);
	for (int t = 0; t < NT; t++) {
		same &= !rc && !memcmp(a[t], b[t], f->len[t]);
		other |= !rc && memcmp(a[t], k[t], f->len[t]) != 0;
		first &= !rc && !memcmp(one[0][t], one[1][t], f->len[t]);
		free(a[t]);
		free(b[t]);
		free(k[t]);
		free(one[0][t]);
		free(one[1][t]);
	}
	ok(same && other, "the same bytes twice, not the constant rate's");
	ok(first && r1[0].best_step == 1,
	   "one step: the constant rate's bytes (the cosine starts at lr), and kept");
}

static void check_refusals(fixture *f)
{
	tn_opts o = { 2, 1, 1, 0.01, 5, 0 };
	tn_input bad[2] = { f->in[0], f->in[0] };
	uint8_t *out[2] = { 0 };
	mt_result r;
	int rc;

	ok(mt_check(&f->mc, f->in, NT) == 0, "mt_check passes the six payloads");
	rc = mt_check(&f->mc, bad, 2);
	ok(rc < 0 && strstr(nv_err(), "twice"), "mt_check refuses a projection given twice: %s",
	   nv_err());
	rc = mt_tune(&f->mc, bad, 2, &f->D, &o, out, &r);
	ok(rc < 0 && strstr(nv_err(), "twice"), "a projection given twice is refused: %s", nv_err());
	bad[0].name = "model.layers.2.self_attn.q_proj.weight";
	rc = mt_tune(&f->mc, bad, 1, &f->D, &o, out, &r);
	ok(rc < 0 && strstr(nv_err(), "not a projection"), "a tensor the model lacks is refused: %s",
	   nv_err());
	bad[0] = f->in[2]; /* down's payload (16 × 24) */
	bad[0].name = f->in[0].name;
	rc = mt_tune(&f->mc, bad, 1, &f->D, &o, out, &r);
	ok(rc < 0 && strstr(nv_err(), "16x24"), "a payload of another shape is refused: %s",
	   nv_err());
	ok(out[0] == NULL && out[1] == NULL, "and nothing is returned");
}

int main(void)
{
	tap_rng r = { 11 };
	fixture f;

	setup(&f, &r);
	check_gradient(&f);
	check_threads(&f);
	check_tune(&f);
	check_keep(&f);
	check_spare(&r);
	check_lr_at();
	check_decay(&f);
	check_refusals(&f);
	teardown(&f);
	return done_testing();
}
