/*
 * test-forward.c - the forward engine against a naive f64 reference
 * written here (per position, per head, no BLAS), on a random tiny
 * qwen2-style model (biases, GQA, untied head, F16 and BF16 weights), and
 * the engine's refusals.
 *
 * With arguments it is a helper for tests/t0401: "logits MODEL.bin IDS.u32
 * OUT.f32" loads a llama2.c checkpoint directly (q/k rows permuted from
 * the interleaved RoPE convention to rotate-half) and writes the logits
 * of one window, so that the shell test can compare them with numpy.
 */
#include "blr.h"
#include "cmf.h"
#include "err.h"
#include "f16.h"
#include "fileio.h"
#include "forward.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"
#include "tap.h"
#include "tinymodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ref_norm(const double *x, const float *w, double *y, size_t n, double eps)
{
	double ss = 0;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	ss = 1.0 / sqrt(ss / (double)n + eps);
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] * ss * w[i];
}

static void ref_rope(double *v, size_t nh, size_t hd, size_t pos, double theta)
{
	for (size_t h = 0; h < nh; h++)
		for (size_t j = 0; j < hd / 2; j++) {
			double ang = (double)pos * pow(theta, -2.0 * (double)j / (double)hd);
			double *p = v + h * hd, a = p[j], b = p[j + hd / 2];

			p[j] = a * cos(ang) - b * sin(ang);
			p[j + hd / 2] = a * sin(ang) + b * cos(ang);
		}
}

/* the naive forward of T tokens: logits (T × V), position by position with a cache */
static void ref_forward(const cmf_arch *a, const ref_w *rw, const uint32_t *tok, size_t T,
			double *logits)
{
	size_t d = (size_t)a->hidden, ff = (size_t)a->intermediate, hd = (size_t)a->head_dim;
	size_t nh = (size_t)a->heads, nkv = (size_t)a->kv_heads, qd = nh * hd, kvd = nkv * hd;
	double *K = calloc((size_t)a->layers * T * kvd, sizeof *K);
	double *Vc = calloc((size_t)a->layers * T * kvd, sizeof *Vc);
	double x[64], xn[64], q[64], o[64], y[64], g[64], u[64], sc[512];

	for (size_t t = 0; t < T; t++) {
		for (size_t i = 0; i < d; i++)
			x[i] = rw->emb[tok[t] * d + i];
		for (int l = 0; l < a->layers; l++) {
			double *k = K + ((size_t)l * T + t) * kvd, *v = Vc + ((size_t)l * T + t) * kvd;

			ref_norm(x, rw->an[l], xn, d, a->rms_eps);
			ref_mv(rw->w[l][FW_Q], rw->b[l][0], xn, q, qd, d);
			ref_mv(rw->w[l][FW_K], rw->b[l][1], xn, k, kvd, d);
			ref_mv(rw->w[l][FW_V], rw->b[l][2], xn, v, kvd, d);
			ref_rope(q, nh, hd, t, a->rope_theta);
			ref_rope(k, nkv, hd, t, a->rope_theta);
			for (size_t h = 0; h < nh; h++) {
				size_t gk = h / (nh / nkv);
				double mx = -1e300, s = 0;

				size_t p0 = a->window && l >= a->window_from && t >= (size_t)a->window ?
						    t + 1 - (size_t)a->window : 0;

				for (size_t p = p0; p <= t; p++) {
					const double *kp = K + ((size_t)l * T + p) * kvd + gk * hd;

					sc[p] = 0;
					for (size_t i = 0; i < hd; i++)
						sc[p] += q[h * hd + i] * kp[i] / sqrt((double)hd);
					mx = sc[p] > mx ? sc[p] : mx;
				}
				for (size_t p = p0; p <= t; p++)
					s += (sc[p] = exp(sc[p] - mx));
				for (size_t i = 0; i < hd; i++) {
					o[h * hd + i] = 0;
					for (size_t p = p0; p <= t; p++)
						o[h * hd + i] += sc[p] / s *
								 Vc[((size_t)l * T + p) * kvd + gk * hd + i];
				}
			}
			ref_mv(rw->w[l][FW_O], NULL, o, y, d, qd);
			for (size_t i = 0; i < d; i++)
				x[i] += y[i];
			ref_norm(x, rw->fn[l], xn, d, a->rms_eps);
			ref_mv(rw->w[l][FW_GATE], NULL, xn, g, ff, d);
			ref_mv(rw->w[l][FW_UP], NULL, xn, u, ff, d);
			for (size_t i = 0; i < ff; i++)
				g[i] = g[i] / (1 + exp(-g[i])) * u[i];
			ref_mv(rw->w[l][FW_DOWN], NULL, g, y, d, ff);
			for (size_t i = 0; i < d; i++)
				x[i] += y[i];
		}
		ref_norm(x, rw->fnorm, xn, d, a->rms_eps);
		ref_mv(rw->head, NULL, xn, logits + t * (size_t)a->vocab, (size_t)a->vocab, d);
	}
	free(K);
	free(Vc);
}

static double max_abs_diff(const float *a, const double *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
	return m;
}

/* a random one-path BLR payload (m × n, rank 8) and its dequantized weights */
static uint8_t *rnd_payload(tap_rng *r, size_t m, size_t n, size_t *len, float *w)
{
	size_t rk = 8;
	uint16_t *h = malloc(m * 2), *g = malloc(n * 2), *l = malloc(rk * 2);
	int8_t *su = malloc(m * rk), *sv = malloc(n * rk);
	uint8_t *p;
	blr_path_in in;

	for (size_t i = 0; i < m; i++)
		h[i] = nv_f32_to_f16((float)(0.5 + rng_unif(r)));
	for (size_t i = 0; i < n; i++)
		g[i] = nv_f32_to_f16((float)(0.5 + rng_unif(r)));
	for (size_t i = 0; i < rk; i++)
		l[i] = nv_f32_to_f16((float)(0.05 * (1 + rng_unif(r))));
	for (size_t i = 0; i < m * rk; i++)
		su[i] = rng_u64(r) & 1 ? 1 : -1;
	for (size_t i = 0; i < n * rk; i++)
		sv[i] = rng_u64(r) & 1 ? 1 : -1;
	in = (blr_path_in){ h, g, l, su, sv };
	*len = blr_payload_size(m, n, rk, 1);
	p = malloc(*len);
	if (blr_build(m, n, rk, 1, &in, p) < 0 || blr_dequantize(p, *len, w) < 0)
		abort();
	free(h);
	free(g);
	free(l);
	free(su);
	free(sv);
	return p;
}

static int run_layers(fw_model *m, fw_scratch *s, const uint32_t *tok, size_t T, float *x,
		      float *logits)
{
	if (fw_embed(m, tok, T, x) < 0)
		return -1;
	for (int l = 0; l < m->a.layers; l++) {
		fw_layer ly;

		if (fw_layer_load(m, l, NULL, 0, &ly) < 0 || fw_layer_run(m, &ly, s, x, T, NULL) < 0)
			return -1;
		fw_layer_free(&ly);
	}
	return fw_logits(m, s, x, T, logits);
}

/* the four leads against the identities that define them */
static void check_leads(fw_model *m, fw_scratch *s, const ref_w *rw, const uint32_t *tok,
			size_t T)
{
	size_t d = m->d, ff = m->ff, qd = m->qdim;
	float *x = malloc(T * d * 4), *x0 = malloc(T * d * 4);
	double e_q = 0, e_mid = 0, e_gate = 0;
	fw_layer ly;
	fw_leads ld;

	fw_embed(m, tok, T, x);
	memcpy(x0, x, T * d * 4);
	fw_layer_load(m, 0, NULL, 0, &ly);
	fw_layer_run(m, &ly, s, x, T, &ld);
	for (size_t t = 0; t < T; t++) {
		double xi[64], a[64], mid[64], o[64], dn[64], y[64], gn[64];

		for (size_t i = 0; i < d; i++)
			xi[i] = x0[t * d + i];
		ref_norm(xi, rw->an[0], a, d, m->a.rms_eps);
		for (size_t i = 0; i < qd; i++)
			o[i] = ld.o[t * qd + i];
		ref_mv(rw->w[0][FW_O], NULL, o, y, d, qd);
		for (size_t i = 0; i < ff; i++)
			dn[i] = ld.down[t * ff + i];
		ref_mv(rw->w[0][FW_DOWN], NULL, dn, mid, d, ff);
		for (size_t i = 0; i < d; i++) {
			e_q = fmax(e_q, fabs(ld.q[t * d + i] - a[i]));
			/* x_out − down·Wdᵀ = x_in + o·Woᵀ */
			mid[i] = x[t * d + i] - mid[i];
			e_mid = fmax(e_mid, fabs(mid[i] - (xi[i] + y[i])));
		}
		ref_norm(mid, rw->fn[0], gn, d, m->a.rms_eps);
		for (size_t i = 0; i < d; i++)
			e_gate = fmax(e_gate, fabs(ld.gate[t * d + i] - gn[i]));
	}
	/* f32 activations of magnitude ~1 through sums of ≤ 24 terms: 1e-5 */
	ok(e_q < 1e-5, "lead q is the attention-norm output (|err| %.2g)", e_q);
	ok(e_mid < 1e-5, "leads o and down reproduce the residual updates (|err| %.2g)", e_mid);
	ok(e_gate < 1e-5, "lead gate is the FFN-norm output (|err| %.2g)", e_gate);
	fw_layer_free(&ly);
	free(x);
	free(x0);
}

/* fw_layer_leads: fw_layer_run's four leads to the bit, x left at the
 * attention's residual (the FFN norm of it is the gate lead, bit for bit) */
static void check_leads_only(fw_model *m, fw_scratch *s, const uint32_t *tok, size_t T)
{
	size_t d = m->d, ff = m->ff, qd = m->qdim;
	size_t sz[4] = { T * d, T * qd, T * d, T * ff };
	float *x = malloc(T * d * 4), *x2 = malloc(T * d * 4), *gn = malloc(T * d * 4);
	float *kept[4];
	fw_layer ly;
	fw_leads ld, ld2;
	int same = 1;

	fw_embed(m, tok, T, x);
	memcpy(x2, x, T * d * 4);
	fw_layer_load(m, 1, NULL, 0, &ly);
	ok(fw_layer_leads(m, &ly, s, x2, T, &ld) == 0, "leads without the layer's output");
	const float *got[4] = { ld.q, ld.o, ld.gate, ld.down };
	for (int i = 0; i < 4; i++) {
		kept[i] = malloc(sz[i] * 4);
		memcpy(kept[i], got[i], sz[i] * 4);
	}
	fw_rmsnorm(x2, ly.ffn_norm, gn, T, d, m->a.rms_eps);
	fw_layer_run(m, &ly, s, x, T, &ld2);
	const float *want[4] = { ld2.q, ld2.o, ld2.gate, ld2.down };
	for (int i = 0; i < 4; i++) {
		same &= memcmp(kept[i], want[i], sz[i] * 4) == 0;
		free(kept[i]);
	}
	ok(same, "fw_layer_leads' four leads are fw_layer_run's bits");
	ok(memcmp(gn, ld2.gate, T * d * 4) == 0,
	   "fw_layer_leads leaves x at the attention's residual (its FFN norm is the gate lead)");
	ok(fw_layer_leads(m, &ly, s, x2, s->tmax + 1, &ld) < 0,
	   "fw_layer_leads refuses a window beyond the scratch");
	fw_layer_free(&ly);
	free(x);
	free(x2);
	free(gn);
}

static void check_overrides(fw_model *m, fw_scratch *s, ref_w *rw, tap_rng *r,
			    const uint32_t *tok, size_t T)
{
	size_t len, len2, V = m->vocab;
	float *wq = malloc(16 * 16 * 4), *w8 = malloc(8 * 16 * 4), *saved = rw->w[1][FW_Q];
	uint8_t *p = rnd_payload(r, 16, 16, &len, wq), *p8 = rnd_payload(r, 8, 16, &len2, w8);
	float *x = malloc(T * m->d * 4), *lg = malloc(T * V * 4);
	double *ref = malloc(T * V * sizeof *ref);
	fw_override ov[2] = { { "model.layers.1.self_attn.q_proj.weight", p, len },
			      { "model.layers.1.self_attn.q_proj.weight", p, len } };
	fw_layer ly;

	fw_embed(m, tok, T, x);
	for (int l = 0; l < 2; l++) {
		fw_layer_load(m, l, l ? ov : NULL, l ? 1 : 0, &ly);
		fw_layer_run(m, &ly, s, x, T, NULL);
		fw_layer_free(&ly);
	}
	fw_logits(m, s, x, T, lg);
	rw->w[1][FW_Q] = wq;
	ref_forward(&m->a, rw, tok, T, ref);
	rw->w[1][FW_Q] = saved;
	ok(max_abs_diff(lg, ref, T * V) < 1e-4, "a BLR patch replaces its tensor (|err| %.2g)",
	   max_abs_diff(lg, ref, T * V));

	ok(fw_layer_load(m, 1, ov, 2, &ly) < 0 && strstr(nv_err(), "given twice"),
	   "a tensor patched twice is refused: %s", nv_err());
	ok(fw_layer_load(m, 0, ov, 1, &ly) < 0 && strstr(nv_err(), "not a projection of layer 0"),
	   "a patch outside the layer is refused: %s", nv_err());
	ov[0].payload = p8;
	ov[0].len = len2;
	ok(fw_layer_load(m, 1, ov, 1, &ly) < 0 && strstr(nv_err(), "16 × 16"),
	   "a patch of another shape is refused: %s", nv_err());
	ov[0].name = "model.layers.1.input_layernorm.weight";
	ok(fw_layer_load(m, 1, ov, 1, &ly) < 0 && strstr(nv_err(), "not a projection"),
	   "a patch of a norm is refused: %s", nv_err());
	ok(fw_layer_load(m, 2, NULL, 0, &ly) < 0 && strstr(nv_err(), "beyond the model's layers 0..1"),
	   "layer 2 of 2 is refused: %s", nv_err());
	free(wq);
	free(w8);
	free(p);
	free(p8);
	free(x);
	free(lg);
	free(ref);
}

static void check_refusals(mem_model *mm)
{
	fw_model m;
	uint32_t bad = 37;
	float x[16];

	ok(fw_open(&m, &mm->f) == 0 && fw_embed(&m, &bad, 1, x) < 0 &&
	   strstr(nv_err(), "token id 37 at position 0 is beyond the vocabulary (0..36)"),
	   "a token id beyond the vocabulary is refused: %s", nv_err());
	fw_close(&m);
	strcpy(mm->f.arch.arch, "gpt2");
	ok(fw_open(&m, &mm->f) < 0 && strstr(nv_err(), "'gpt2' is not run"),
	   "an unknown architecture is refused by name: %s", nv_err());
	strcpy(mm->f.arch.arch, "qwen2");
	mm->f.arch.tied = 1;
	mm->f.t[0].cols = 15;
	ok(fw_open(&m, &mm->f) < 0 && strstr(nv_err(), "model.embed_tokens.weight"),
	   "a tensor of the wrong shape is refused: %s", nv_err());
	mm->f.t[0].cols = 16;
	mm->f.arch.tied = 0;
	free(mm->f.t[1].name);
	mm->f.t[1].name = strdup("renamed");
	ok(fw_open(&m, &mm->f) < 0 && strstr(nv_err(), "no tensor 'model.layers.0."),
	   "a missing tensor is named: %s", nv_err());
}

static void check_windows(void)
{
	size_t n, rows;
	fw_window *w = fw_windows(10, 5, 4, &n, &rows);

	/* FIT [0,4) [4,8) [8,10); SEL [10,14), and [14,15) is dropped */
	ok(w && n == 4 && rows == 3 + 3 + 1 + 3, "windows of 10 + 5 tokens by 4: %zu, %zu rows", n,
	   rows);
	ok(w && w[2].start == 8 && w[2].len == 2 && !w[2].sel && w[3].start == 10 && w[3].sel,
	   "the FIT tail window and the SEL window");
	free(w);
	ok(fw_windows(10, 0, 1, &n, &rows) == NULL, "a window of 1 token is refused");
}

/* logsumexp and KL against their definitions in f64 on random rows */
static void check_kl(void)
{
	tap_rng r = { 5 };
	float p[50], q[50];
	double zp = 0, zq = 0, kl = 0, lse;
	size_t am, want = 0;

	for (int i = 0; i < 50; i++) {
		p[i] = (float)(3 * rng_normal(&r));
		q[i] = (float)(p[i] + 0.3 * rng_normal(&r));
		want = p[i] > p[want] ? (size_t)i : want;
		zp += exp(p[i]);
		zq += exp(q[i]);
	}
	for (int i = 0; i < 50; i++)
		kl += exp(p[i]) / zp * (log(exp(p[i]) / zp) - log(exp(q[i]) / zq));
	lse = fw_logsumexp(p, 50, &am);
	/* f64 sums of 50 terms: 1e-12 */
	ok(fabs(lse - log(zp)) < 1e-12 && am == want, "logsumexp and argmax");
	ok(fabs(fw_kl(p, lse, q, fw_logsumexp(q, 50, NULL), 50) - kl) < 1e-12,
	   "KL(p||q) as defined (%.6g)", kl);
	ok(fw_kl(p, lse, p, lse, 50) == 0, "KL(p||p) is 0");
}

/* the helper: a llama2.c checkpoint straight into memory, logits of one window */
/*
 * fw_final_states runs the layers layer-major over every window; the head
 * on its states must give each window's own fw_window_logits (the same
 * sgemm calls on the same rows: agreement to 1e-6, f32 rounding of the
 * logits' magnitude ~1), and fw_head_f32 must hold the head's rows
 */
static void check_final_states(fw_model *m, fw_scratch *s, const uint32_t *tok)
{
	size_t nw, rows, V = m->vocab, off = 0;
	fw_window *w = fw_windows(7, 4, 4, &nw, &rows);
	float *x = malloc(rows * m->d * 4), *lg = malloc(4 * V * 4), *lw = malloc(4 * V * 4);
	float *xw = malloc(4 * m->d * 4), *E = fw_head_f32(m);
	double err = 0;

	ok(w && nw == 3 && rows == 8, "windows 4+3 | 4 of the 11 tokens: %zu windows, %zu rows", nw,
	   rows);
	ok(fw_final_states(m, tok, w, nw, x) == 0, "final states of every window: %s", nv_err());
	for (size_t i = 0; i < nw; i++) {
		size_t T = w[i].len - 1;

		fw_logits(m, s, x + off * m->d, T, lg);
		fw_window_logits(m, s, tok + w[i].start, T, xw, lw);
		for (size_t k = 0; k < T * V; k++)
			err = fmax(err, fabs((double)lg[k] - lw[k]));
		off += T;
	}
	ok(err <= 1e-6, "their logits are each window's own (|err| %.2g)", err);
	ok(E && fw_logits(m, s, x, 1, lg) == 0, "the head as f32");
	fw_rmsnorm(x, m->final_w, xw, 1, m->d, m->a.rms_eps);
	err = 0;
	for (size_t v = 0; E && v < V; v++) {
		double z = 0;

		for (size_t i = 0; i < m->d; i++)
			z += (double)xw[i] * E[v * m->d + i];
		err = fmax(err, fabs(z - lg[v]));
	}
	ok(err <= 1e-5, "its rows give the logits (|err| %.2g)", err);
	free(w);
	free(x);
	free(lg);
	free(lw);
	free(xw);
	free(E);
}

static int helper(const char *bin, const char *ids, const char *out)
{
	nv_map mp;
	int32_t h[7];
	mem_model mm = { 0 };
	fw_model m;
	fw_scratch s;
	uint8_t *ib;
	size_t il;

	if (nv_map_file(bin, &mp) < 0 || nv_read_file(ids, &ib, &il) < 0)
		return fprintf(stderr, "%s\n", nv_err()), 1;
	for (int i = 0; i < 7; i++)
		h[i] = (int32_t)le_u32(mp.data + 4 * i);
	size_t d = (size_t)h[0], ff = (size_t)h[1], L = (size_t)h[2], nh = (size_t)h[3];
	size_t nkv = (size_t)h[4], V = (size_t)abs(h[5]), hd = d / nh, kvd = nkv * hd;
	const float *w = (const float *)(mp.data + 28);
	const float *emb = w, *ra = emb + V * d, *wq = ra + L * d, *wk = wq + L * d * d;
	const float *wv = wk + L * kvd * d, *wo = wv + L * kvd * d, *rf = wo + L * d * d;
	const float *w1 = rf + L * d, *w2 = w1 + L * ff * d, *w3 = w2 + L * d * ff;
	const float *fin = w3 + L * ff * d;
	float *perm = malloc(d * d * 4);
	char name[160];

	add_tensor(&mm, "model.embed_tokens.weight", CMF_F32, V, d, emb, 2);
	for (size_t l = 0; l < L; l++) {
		const float *src[FW_NMAT] = { wq + l * d * d, wk + l * kvd * d, wv + l * kvd * d,
					      wo + l * d * d, w1 + l * ff * d, w3 + l * ff * d,
					      w2 + l * d * ff };
		size_t rows[FW_NMAT] = { d, kvd, kvd, d, ff, ff, d };
		size_t cols[FW_NMAT] = { d, d, d, d, d, d, ff };

		for (int i = 0; i < FW_NMAT; i++) {
			const float *p = src[i];

			/* interleaved pairs (2j, 2j+1) of a head → rotate-half (j, j + hd/2) */
			if (i == FW_Q || i == FW_K) {
				for (size_t r = 0; r < rows[i]; r++) {
					size_t hh = r / hd, k = r % hd, half = hd / 2;
					size_t from = hh * hd + (k < half ? 2 * k : 2 * (k - half) + 1);

					memcpy(perm + r * d, p + from * d, d * 4);
				}
				p = perm;
			}
			fw_tensor_name(name, sizeof name, (int)l, i);
			add_tensor(&mm, name, CMF_F32, rows[i], cols[i], p, 2);
		}
		snprintf(name, sizeof name, "model.layers.%zu.input_layernorm.weight", l);
		add_tensor(&mm, name, CMF_F32, 1, d, ra + l * d, 1);
		snprintf(name, sizeof name, "model.layers.%zu.post_attention_layernorm.weight", l);
		add_tensor(&mm, name, CMF_F32, 1, d, rf + l * d, 1);
	}
	add_tensor(&mm, "model.norm.weight", CMF_F32, 1, d, fin, 1);
	mm.f.arch = (cmf_arch){ .arch = "llama", .hidden = (int)d, .intermediate = (int)ff,
				.layers = (int)L, .heads = (int)nh, .kv_heads = (int)nkv,
				.head_dim = (int)hd, .rms_eps = 1e-5, .rope_theta = 10000.0,
				.vocab = (int)V, .tied = 1, .bos = 1, .eos = 2 };
	mm.f.has_arch = 1;
	size_t T = il / 4;
	float *x = malloc(T * d * 4), *lg = malloc(T * V * 4);
	FILE *f;

	if (fw_open(&m, &mm.f) < 0 || fw_scratch_init(&s, &m, T) < 0 ||
	    fw_window_logits(&m, &s, (const uint32_t *)ib, T, x, lg) < 0)
		return fprintf(stderr, "%s\n", nv_err()), 1;
	f = fopen(out, "wb");
	if (!f || fwrite(lg, 4, T * V, f) != T * V || fclose(f) != 0)
		return 1;
	fw_scratch_free(&s);
	fw_close(&m);
	free_model(&mm);
	free(perm);
	free(x);
	free(lg);
	free(ib);
	nv_map_free(&mp);
	return 0;
}

/*
 * a window of three blocks of FW_ATT_ROWS query rows, without and with a
 * sliding window (the blocks' own column skip): the f64 reference's
 * logits, and the same bits at one and at two threads
 */
static void check_long(fw_model *m, const ref_w *rw, tap_rng *r)
{
	enum { TL = 2 * FW_ATT_ROWS + 44, V = 37 };
	static const int win[] = { 0, 100, FW_ATT_ROWS };
	uint32_t *tok = malloc(TL * sizeof *tok);
	float *x = malloc(TL * 16 * 4), *lg = malloc(TL * V * 4), *lg2 = malloc(TL * V * 4);
	double *ref = malloc(TL * V * sizeof *ref);
	int old = nv_get_threads();
	fw_scratch s;

	for (size_t i = 0; i < TL; i++)
		tok[i] = (uint32_t)(rng_u64(r) % V);
	for (size_t w = 0; w < sizeof win / sizeof *win; w++) {
		m->a.window = win[w];
		m->a.window_from = 1;
		nv_set_threads(1);
		ok(fw_scratch_init(&s, m, TL) == 0 && fw_window_logits(m, &s, tok, TL, x, lg) == 0,
		   "%d positions, window %d from layer 1: forward", TL, win[w]);
		fw_scratch_free(&s);
		nv_set_threads(2);
		ok(fw_scratch_init(&s, m, TL) == 0 && fw_window_logits(m, &s, tok, TL, x, lg2) == 0 &&
		   !memcmp(lg, lg2, TL * V * 4), "the same bits at two threads");
		fw_scratch_free(&s);
		ref_forward(&m->a, rw, tok, TL, ref);
		/* softmax sums of up to 300 terms in f32: 1e-4 still */
		ok(max_abs_diff(lg, ref, TL * V) < 1e-4, "the f64 reference's logits (|err| %.2g)",
		   max_abs_diff(lg, ref, TL * V));
	}
	nv_set_threads(old);
	m->a.window = 0;
	free(tok);
	free(x);
	free(lg);
	free(lg2);
	free(ref);
}

int main(int argc, char **argv)
{
	tap_rng r = { 42 };
	mem_model mm;
	ref_w rw;
	fw_model m;
	fw_scratch s;
	uint32_t tok[11];
	size_t T = 11, V = 37;
	float *x, *lg, *lg2;
	double *ref;

	if (argc == 5 && strcmp(argv[1], "logits") == 0)
		return helper(argv[2], argv[3], argv[4]);
	x = malloc(T * 16 * 4);
	lg = malloc(T * V * 4);
	lg2 = malloc(T * V * 4);
	ref = malloc(T * V * sizeof *ref);
	build_tiny(&mm, &rw, &r);
	for (size_t i = 0; i < T; i++)
		tok[i] = (uint32_t)(rng_u64(&r) % V);
	ok(fw_open(&m, &mm.f) == 0, "open the tiny qwen2 model: %s", nv_err());
	ok(fw_scratch_init(&s, &m, T) == 0, "scratch for 11 positions");
	ok(fw_window_logits(&m, &s, tok, T, x, lg) == 0, "forward of 11 tokens");
	ref_forward(&m.a, &rw, tok, T, ref);
	/* f32 products of ≤ 24 terms of magnitude ~1, two layers: agreement to 1e-4 */
	ok(max_abs_diff(lg, ref, T * V) < 1e-4, "logits match the f64 reference (|err| %.2g)",
	   max_abs_diff(lg, ref, T * V));
	ok(run_layers(&m, &s, tok, T, x, lg2) == 0 && memcmp(lg, lg2, T * V * 4) == 0,
	   "the layer-at-a-time calls give the same bits");
	ok(run_layers(&m, &s, tok, 5, x, lg2) == 0 && max_abs_diff(lg2, ref, 5 * V) < 1e-4,
	   "a shorter window gives the prefix's logits (causal)");
	check_leads(&m, &s, &rw, tok, T);
	check_leads_only(&m, &s, tok, T);
	check_overrides(&m, &s, &rw, &r, tok, T);
	check_final_states(&m, &s, tok);
	check_long(&m, &rw, &r);
	ok(fw_layer_run(&m, NULL, &s, x, T + 1, NULL) < 0, "a window beyond the scratch is refused");
	fw_scratch_free(&s);
	fw_close(&m);
	check_refusals(&mm);
	check_windows();
	check_kl();
	free_model(&mm);
	free_ref(&rw);
	free(x);
	free(lg);
	free(lg2);
	free(ref);
	return done_testing();
}
