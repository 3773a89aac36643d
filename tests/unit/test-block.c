/*
 * test-block.c - the block forward with intermediates and its backward
 * (block.h) on the tiny qwen2-style model and on two variants that carry
 * every feature of the forward (biases on all seven projections, the heads'
 * norms, gelu and its tanh form, a sliding window, yarn and llama3 RoPE):
 * the forward is fw_layer_run's, bit for bit, and agrees with a naive f64
 * block written here; the gradient of ½‖y − t‖² with respect to every
 * projection and to the block's input agrees with central differences of
 * that f64 block.  A projection in factored form (bk_factor, of one or
 * two paths) gives the dense W's output, input gradient and, as P and Q,
 * dW's products with its factors, where W is built from the factors here.
 */
#include "block.h"
#include "err.h"
#include "forward.h"
#include "linalg.h"
#include "tap.h"
#include "tinymodel.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 9, D = 16, FF = 24, QD = 16, KD = 8, NH = 4, NKV = 2, HD = 4 };

/* the variant under test */
static const cmf_arch *A;

/* yarn, gelu, every bias, the heads' norms, a window of 3 */
static const cmf_arch full = {
	.arch = "qwen3", .hidden = 16, .intermediate = 24, .layers = 2, .heads = 4, .kv_heads = 2,
	.head_dim = 4, .rms_eps = 1e-6, .rope_theta = 1e4, .vocab = 37, .bos = 1, .eos = 2,
	.qkv_bias = 1, .o_bias = 1, .mlp_bias = 1, .qk_norm = 1, .act = CMF_ACT_GELU,
	.window = 3, .max_pos = 64,
	.rope = { .type = CMF_ROPE_YARN, .factor = 4, .beta_fast = 32, .beta_slow = 1,
		  .attn_factor = 1.2, .orig_max_pos = 16 },
};

/* llama3 RoPE, gelu's tanh form, MLP biases */
static const cmf_arch l3 = {
	.arch = "llama", .hidden = 16, .intermediate = 24, .layers = 2, .heads = 4, .kv_heads = 2,
	.head_dim = 4, .rms_eps = 1e-6, .rope_theta = 1e4, .vocab = 37, .bos = 1, .eos = 2,
	.mlp_bias = 1, .act = CMF_ACT_GELU_TANH,
	.rope = { .type = CMF_ROPE_LLAMA3, .factor = 8, .low_freq = 1, .high_freq = 4,
		  .orig_max_pos = 8 },
};

static void norm(const double *x, const float *w, double *y, size_t n)
{
	double ss = 0;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] / sqrt(ss / (double)n + 1e-6) * w[i];
}

/* the frequencies are fw_rope_freqs' (tested against numpy in t0310); the rotation is here */
static void rope(double *v, size_t nh, size_t pos)
{
	double inv[HD / 2], sc;

	fw_rope_freqs(A, HD, inv, &sc);
	for (size_t h = 0; h < nh; h++)
		for (size_t j = 0; j < HD / 2; j++) {
			double ang = (double)pos * inv[j];
			double a = v[h * HD + j], b = v[h * HD + j + HD / 2];

			v[h * HD + j] = sc * (a * cos(ang) - b * sin(ang));
			v[h * HD + j + HD / 2] = sc * (b * cos(ang) + a * sin(ang));
		}
}

static double act(double g)
{
	if (A->act == CMF_ACT_GELU)
		return 0.5 * g * (1 + erf(g / sqrt(2.0)));
	if (A->act == CMF_ACT_GELU_TANH)
		return 0.5 * g * (1 + tanh(sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
	return g / (1 + exp(-g));
}

/* q or k of one position: the heads' norms (qk_norm), then RoPE */
static void heads(double *v, const float *w, size_t nh, size_t pos)
{
	for (size_t h = 0; w && h < nh; h++) {
		double y[HD];

		norm(v + h * HD, w, y, HD);
		memcpy(v + h * HD, y, sizeof y);
	}
	rope(v, nh, pos);
}

/* o of position t: each head over the keys it sees (causal, in the window) */
static void attend(double q[][QD], double k[][KD], double v[][KD], size_t t, double *o)
{
	size_t j0 = A->window && t >= (size_t)A->window ? t - (size_t)A->window + 1 : 0;

	for (size_t h = 0; h < NH; h++) {
		size_t gk = h / (NH / NKV);
		double s[T], mx = -INFINITY, sum = 0;

		for (size_t j = j0; j <= t; j++) {
			s[j] = 0;
			for (size_t e = 0; e < HD; e++)
				s[j] += q[t][h * HD + e] * k[j][gk * HD + e] / sqrt((double)HD);
			mx = fmax(mx, s[j]);
		}
		for (size_t j = j0; j <= t; j++)
			sum += exp(s[j] - mx);
		for (size_t e = 0; e < HD; e++)
			o[h * HD + e] = 0;
		for (size_t j = j0; j <= t; j++)
			for (size_t e = 0; e < HD; e++)
				o[h * HD + e] += exp(s[j] - mx) / sum * v[j][gk * HD + e];
	}
}

/* the block of layer 0 in f64, position by position; w[i] the projections to use */
static void ref_block(const ref_w *rw, float *const w[FW_NMAT], const double *x, double *y)
{
	static double q[T][QD], k[T][KD], v[T][KD];

	for (size_t t = 0; t < T; t++) {
		double a[D];

		norm(x + t * D, rw->an[0], a, D);
		ref_mv(w[FW_Q], rw->b[0][FW_Q], a, q[t], QD, D);
		ref_mv(w[FW_K], rw->b[0][FW_K], a, k[t], KD, D);
		ref_mv(w[FW_V], rw->b[0][FW_V], a, v[t], KD, D);
		heads(q[t], rw->qn[0], NH, t);
		heads(k[t], rw->kn[0], NKV, t);
	}
	for (size_t t = 0; t < T; t++) {
		double o[QD], x1[D], f[D], g[FF], u[FF], md[D];

		attend(q, k, v, t, o);
		ref_mv(w[FW_O], rw->b[0][FW_O], o, x1, D, QD);
		for (size_t i = 0; i < D; i++)
			x1[i] += x[t * D + i];
		norm(x1, rw->fn[0], f, D);
		ref_mv(w[FW_GATE], rw->b[0][FW_GATE], f, g, FF, D);
		ref_mv(w[FW_UP], rw->b[0][FW_UP], f, u, FF, D);
		for (size_t i = 0; i < FF; i++)
			g[i] = act(g[i]) * u[i];
		ref_mv(w[FW_DOWN], rw->b[0][FW_DOWN], g, md, D, FF);
		for (size_t i = 0; i < D; i++)
			y[t * D + i] = x1[i] + md[i];
	}
}

static double ref_loss(const ref_w *rw, float *const w[FW_NMAT], const double *x, const float *tgt)
{
	double y[T * D], l = 0;

	ref_block(rw, w, x, y);
	for (size_t i = 0; i < T * D; i++)
		l += 0.5 * (y[i] - tgt[i]) * (y[i] - tgt[i]);
	return l;
}

/* ∂L/∂x, and that asking for it changes no projection's gradient */
static void check_input_gradient(fw_model *m, const fw_layer *ly, bk_cache *c, const ref_w *rw,
				 const float *xf, const float *tgt, float *const dw0[FW_NMAT])
{
	size_t rows[FW_NMAT] = { QD, KD, KD, D, FF, FF, D }, cols[FW_NMAT] = { D, D, D, QD, D, D, FF };
	float *dw[FW_NMAT], dy[T * D];
	double x[T * D], worst = 0, big = 0;
	int same = 1;

	for (size_t i = 0; i < T * D; i++)
		x[i] = xf[i];
	bk_forward(m, ly, NULL, c, xf, T);
	for (size_t i = 0; i < T * D; i++)
		dy[i] = c->y[i] - tgt[i];
	for (int i = 0; i < FW_NMAT; i++)
		dw[i] = calloc(rows[i] * cols[i], sizeof(float));
	bk_backward(m, ly, NULL, c, dy, dw, dy); /* dx into dy itself */
	for (int i = 0; i < FW_NMAT; i++) {
		same &= !memcmp(dw[i], dw0[i], rows[i] * cols[i] * sizeof(float));
		free(dw[i]);
	}
	ok(same, "%s: the projections' gradients are the same with dx asked for", A->arch);
	/* central differences of the f64 block in x, step 1e-3 (as for W below) */
	for (size_t e = 0; e < T * D; e++) {
		double keep = x[e], lu, ld;

		x[e] = keep + 1e-3;
		lu = ref_loss(rw, ly->w, x, tgt);
		x[e] = keep - 1e-3;
		ld = ref_loss(rw, ly->w, x, tgt);
		x[e] = keep;
		worst = fmax(worst, fabs((lu - ld) / 2e-3 - dy[e]));
		big = fmax(big, fabs((lu - ld) / 2e-3));
	}
	ok(worst <= 1e-4 * big, "%s: ∂L/∂x is the central differences' (|err| %.2g of %.2g)",
	   A->arch, worst, big);
}

static void check_gradient(fw_model *m, const fw_layer *ly, bk_cache *c, const ref_w *rw,
			   const float *xf, const float *tgt, tap_rng *r)
{
	static const char *const name[FW_NMAT] = { "q", "k", "v", "o", "gate", "up", "down" };
	size_t rows[FW_NMAT] = { QD, KD, KD, D, FF, FF, D }, cols[FW_NMAT] = { D, D, D, QD, D, D, FF };
	float *dw[FW_NMAT], *w[FW_NMAT], dy[T * D];
	double x[T * D];

	for (size_t i = 0; i < T * D; i++)
		x[i] = xf[i];
	bk_forward(m, ly, NULL, c, xf, T);
	for (size_t i = 0; i < T * D; i++)
		dy[i] = c->y[i] - tgt[i];
	for (int i = 0; i < FW_NMAT; i++) {
		dw[i] = calloc(rows[i] * cols[i], sizeof(float));
		w[i] = ly->w[i];
	}
	bk_backward(m, ly, NULL, c, dy, dw, NULL);
	check_input_gradient(m, ly, c, rw, xf, tgt, dw);
	for (int i = 0; i < FW_NMAT; i++) {
		double worst = 0, big = 0;

		/* every entry: central differences of the f64 block, step 1e-3 (truncation
		 * O(h²) ≈ 1e-6 of the gradient; the f32 analytic side ≈ 1e-6 relative) */
		for (size_t e = 0; e < rows[i] * cols[i]; e++) {
			float keep = w[i][e], up, dn;
			double lu, ld, fd;

			w[i][e] = up = keep + 1e-3f;
			lu = ref_loss(rw, w, x, tgt);
			w[i][e] = dn = keep - 1e-3f;
			ld = ref_loss(rw, w, x, tgt);
			w[i][e] = keep;
			fd = (lu - ld) / ((double)up - dn);
			worst = fmax(worst, fabs(fd - dw[i][e]));
			big = fmax(big, fabs(fd));
		}
		ok(worst <= 1e-4 * big, "%s: ∂L/∂W_%s is the central differences' (|err| %.2g of %.2g)",
		   A->arch, name[i], worst, big);
		free(dw[i]);
	}
	(void)r;
}

/* one projection's random factors: np paths of rank R side by side; W (out × in) built from them in f64 */
enum { R = 3 };

typedef struct {
	bk_factor f;
	size_t k;
	float a[FF * 2 * R], al[FF * 2 * R], b[FF * 2 * R], bl[FF * 2 * R], l[2 * R];
	float pg[FF * 2 * R], qg[FF * 2 * R];
	float *w;
} fac_t;

static void fac_make(fac_t *x, size_t np, size_t out, size_t in, tap_rng *r)
{
	size_t k = np * R;

	memset(x, 0, sizeof *x);
	x->k = k;
	x->w = calloc(out * in, sizeof(float));
	for (size_t c = 0; c < k; c++)
		x->l[c] = (float)(0.5 + rng_unif(r));
	for (size_t i = 0; i < out * k; i++) {
		x->a[i] = (float)(0.3 * rng_normal(r));
		x->al[i] = x->a[i] * x->l[i % k];
	}
	for (size_t j = 0; j < in * k; j++) {
		x->b[j] = (float)(0.3 * rng_normal(r));
		x->bl[j] = x->b[j] * x->l[j % k];
	}
	x->f = (bk_factor){ k, x->a, x->al, x->b, x->bl, x->pg, x->qg };
	for (size_t i = 0; i < out; i++)
		for (size_t j = 0; j < in; j++) {
			double v = 0;

			for (size_t c = 0; c < k; c++)
				v += (double)x->a[i * k + c] * x->l[c] * x->b[j * k + c];
			x->w[i * in + j] = (float)v;
		}
}

/*
 * every projection factored (q, o, up of two paths, the others one): the
 * output, dx and P = dW·B, Q = dWᵀ·A agree with the dense block on the W the
 * factors make, to f32's rounding of sums of ≤ 24 terms (1e-5 relative)
 */
static void check_factored(fw_model *m, const fw_layer *ly, bk_cache *c, const float *x,
			   const float *tgt, tap_rng *r)
{
	size_t rows[FW_NMAT] = { QD, KD, KD, D, FF, FF, D }, cols[FW_NMAT] = { D, D, D, QD, D, D, FF };
	static fac_t fx[FW_NMAT];
	const bk_factor *fac[FW_NMAT];
	fw_layer dense = *ly, none = *ly;
	float y[T * D], dy[T * D], dxd[T * D], dxf[T * D], *dw[FW_NMAT];
	double err = 0, big = 0, perr = 0, pbig = 0;

	for (int i = 0; i < FW_NMAT; i++) {
		fac_make(&fx[i], i == FW_Q || i == FW_O || i == FW_UP ? 2 : 1, rows[i], cols[i], r);
		fac[i] = &fx[i].f;
		dense.w[i] = fx[i].w;
		none.w[i] = NULL; /* a factored projection's W is not read */
		dw[i] = calloc(rows[i] * cols[i], sizeof(float));
	}
	bk_forward(m, &dense, NULL, c, x, T);
	memcpy(y, c->y, sizeof y);
	for (size_t i = 0; i < T * D; i++)
		dy[i] = c->y[i] - tgt[i];
	bk_backward(m, &dense, NULL, c, dy, dw, dxd);
	ok(bk_forward(m, &none, fac, c, x, T) == 0, "%s: forward with every projection factored",
	   A->arch);
	for (size_t i = 0; i < T * D; i++) {
		err = fmax(err, fabs(c->y[i] - y[i]));
		big = fmax(big, fabs(y[i]));
	}
	ok(err <= 1e-5 * big, "%s: its output is the dense W's (|err| %.2g of %.2g)", A->arch, err,
	   big);
	bk_backward(m, &none, fac, c, dy, (float *[FW_NMAT]){ 0 }, dxf);
	err = big = 0;
	for (size_t i = 0; i < T * D; i++) {
		err = fmax(err, fabs(dxf[i] - dxd[i]));
		big = fmax(big, fabs(dxd[i]));
	}
	ok(err <= 1e-5 * big, "%s: so is ∂L/∂x (|err| %.2g of %.2g)", A->arch, err, big);
	for (int i = 0; i < FW_NMAT; i++) {
		const fac_t *f = &fx[i];

		for (size_t k = 0; k < f->k; k++) {
			for (size_t o = 0; o < rows[i]; o++) { /* P = dW·B */
				double v = 0;

				for (size_t j = 0; j < cols[i]; j++)
					v += (double)dw[i][o * cols[i] + j] * f->b[j * f->k + k];
				perr = fmax(perr, fabs(v - f->pg[o * f->k + k]));
				pbig = fmax(pbig, fabs(v));
			}
			for (size_t j = 0; j < cols[i]; j++) { /* Q = dWᵀ·A */
				double v = 0;

				for (size_t o = 0; o < rows[i]; o++)
					v += (double)dw[i][o * cols[i] + j] * f->a[o * f->k + k];
				perr = fmax(perr, fabs(v - f->qg[j * f->k + k]));
				pbig = fmax(pbig, fabs(v));
			}
		}
		free(dw[i]);
		free(fx[i].w);
	}
	ok(perr <= 1e-5 * pbig, "%s: P and Q are dW·B and dWᵀ·A (|err| %.2g of %.2g)", A->arch,
	   perr, pbig);
}

/* ½‖bk_forward(x) − tgt‖² in f64 sums (the f32 block) */
static double block_loss(fw_model *m, const fw_layer *ly, bk_cache *c, const float *x,
			 const float *tgt, size_t n)
{
	double l = 0;

	bk_forward(m, ly, NULL, c, x, n);
	for (size_t i = 0; i < n * D; i++)
		l += 0.5 * ((double)c->y[i] - tgt[i]) * ((double)c->y[i] - tgt[i]);
	return l;
}

/*
 * TL positions: three blocks of FW_ATT_ROWS query rows (the window's own
 * skip with a's window): the forward is fw_layer_run's bit for bit, its
 * gradient's bits are the same at one and at two threads, and its
 * directional derivatives in x and in W_q, W_v agree with central
 * differences of the f32 block
 */
enum { TL = 2 * FW_ATT_ROWS + 44 };

static void check_long(fw_model *m, const fw_layer *ly, tap_rng *r)
{
	size_t n = TL * D, rows[FW_NMAT] = { QD, KD, KD, D, FF, FF, D };
	size_t cols[FW_NMAT] = { D, D, D, QD, D, D, FF };
	float *x = malloc(n * 4), *x2 = malloc(n * 4), *tgt = malloc(n * 4), *u = malloc(n * 4);
	float *dy = malloc(n * 4), *dx[2] = { malloc(n * 4), malloc(n * 4) }, *dw[2][FW_NMAT];
	int old = nv_get_threads(), same = 1;
	fw_scratch s;
	bk_cache c;

	for (size_t i = 0; i < n; i++) {
		x[i] = (float)rng_normal(r);
		tgt[i] = x[i] + (float)rng_normal(r);
		u[i] = (float)rng_normal(r);
	}
	ok(fw_scratch_init(&s, m, TL) == 0 && bk_init(&c, m, TL) == 0, "%s: caches for %d positions",
	   A->arch, TL);
	memcpy(x2, x, n * 4);
	fw_layer_run(m, ly, &s, x2, TL, NULL);
	bk_forward(m, ly, NULL, &c, x, TL);
	ok(!memcmp(x2, c.y, n * 4), "%s, %d positions: the output is fw_layer_run's, bit for bit",
	   A->arch, TL);
	for (int t = 0; t < 2; t++) {
		nv_set_threads(t + 1);
		bk_forward(m, ly, NULL, &c, x, TL);
		for (size_t i = 0; i < n; i++)
			dy[i] = c.y[i] - tgt[i];
		for (int i = 0; i < FW_NMAT; i++)
			dw[t][i] = calloc(rows[i] * cols[i], sizeof(float));
		bk_backward(m, ly, NULL, &c, dy, dw[t], dx[t]);
	}
	nv_set_threads(old);
	same &= !memcmp(dx[0], dx[1], n * 4);
	for (int i = 0; i < FW_NMAT; i++)
		same &= !memcmp(dw[0][i], dw[1][i], rows[i] * cols[i] * 4);
	ok(same, "%s, %d positions: the gradients' bits are the same at one and two threads", A->arch,
	   TL);
	/* along u: step 1e-2 in x, truncation O(h²) ≈ 1e-4 relative; the f32
	 * loss's rounding (≈ 1e-7 of ~1e3) over 2h adds ≈ 1e-2 absolute.  W_q
	 * goes through the heads' norms (qwen3), curved enough that 1e-2 leaves
	 * 4% of truncation (measured: 5.5, 0.55, 0.03 at 1e-2, 3e-3, 1e-3): 1e-3 */
	double ana = 0, fd, lu, ld;

	for (size_t i = 0; i < n; i++) {
		ana += (double)dx[0][i] * u[i];
		x2[i] = x[i] + 1e-2f * u[i];
	}
	lu = block_loss(m, ly, &c, x2, tgt, TL);
	for (size_t i = 0; i < n; i++)
		x2[i] = x[i] - 1e-2f * u[i];
	ld = block_loss(m, ly, &c, x2, tgt, TL);
	fd = (lu - ld) / 2e-2;
	ok(fabs(fd - ana) <= 1e-3 * fabs(ana), "%s, %d positions: ⟨∂L/∂x, u⟩ %.6g, differences %.6g",
	   A->arch, TL, ana, fd);
	for (int i = FW_Q; i <= FW_V; i += FW_V - FW_Q) {
		float *w = ly->w[i], *keep = malloc(rows[i] * cols[i] * 4);

		ana = 0;
		memcpy(keep, w, rows[i] * cols[i] * 4);
		for (size_t e = 0; e < rows[i] * cols[i]; e++) {
			ana += (double)dw[0][i][e] * u[e];
			w[e] = keep[e] + 1e-3f * u[e];
		}
		lu = block_loss(m, ly, &c, x, tgt, TL);
		for (size_t e = 0; e < rows[i] * cols[i]; e++)
			w[e] = keep[e] - 1e-3f * u[e];
		ld = block_loss(m, ly, &c, x, tgt, TL);
		memcpy(w, keep, rows[i] * cols[i] * 4);
		fd = (lu - ld) / 2e-3;
		ok(fabs(fd - ana) <= 1e-3 * fabs(ana),
		   "%s, %d positions: ⟨∂L/∂W_%s, u⟩ %.6g, differences %.6g", A->arch, TL,
		   i == FW_Q ? "q" : "v", ana, fd);
		free(keep);
	}
	for (int t = 0; t < 2; t++) {
		for (int i = 0; i < FW_NMAT; i++)
			free(dw[t][i]);
		free(dx[t]);
	}
	bk_free(&c);
	fw_scratch_free(&s);
	free(x);
	free(x2);
	free(tgt);
	free(u);
	free(dy);
}

/* every check on the tiny model with the features of a */
static void variant(const cmf_arch *a, tap_rng *r)
{
	mem_model mm;
	ref_w rw;
	fw_model m;
	fw_layer ly;
	fw_scratch s;
	bk_cache c;
	float x[T * D], x2[T * D], tgt[T * D];
	double y[T * D], xd[T * D], err = 0;

	A = a;
	build_tiny_as(&mm, &rw, r, a);
	for (size_t i = 0; i < T * D; i++) {
		x[i] = (float)rng_normal(r);
		tgt[i] = x[i] + (float)rng_normal(r);
		xd[i] = x[i];
	}
	ok(fw_open(&m, &mm.f) == 0 && fw_layer_load(&m, 0, NULL, 0, &ly) == 0 &&
	   fw_scratch_init(&s, &m, T) == 0 && bk_init(&c, &m, T) == 0, "%s: the tiny model, layer 0",
	   a->arch);
	ok(bk_forward(&m, &ly, NULL, &c, x, T) == 0, "%s: forward of %d positions", a->arch, T);
	memcpy(x2, x, sizeof x);
	fw_layer_run(&m, &ly, &s, x2, T, NULL);
	ok(!memcmp(x2, c.y, sizeof x2), "%s: the output is fw_layer_run's, bit for bit", a->arch);
	ref_block(&rw, rw.w[0], xd, y);
	for (size_t i = 0; i < T * D; i++)
		err = fmax(err, fabs(y[i] - c.y[i]));
	/* f32 sums of ≤ 24 terms of magnitude ~1 through two residual branches: 1e-5 */
	ok(err <= 1e-5, "%s: and the naive f64 block's (|err| %.2g)", a->arch, err);
	ok(bk_forward(&m, &ly, NULL, &c, x, T + 1) < 0, "%s: a window beyond the cache is refused: %s",
	   a->arch, nv_err());
	check_gradient(&m, &ly, &c, &rw, x, tgt, r);
	check_factored(&m, &ly, &c, x, tgt, r);
	check_long(&m, &ly, r);
	bk_free(&c);
	fw_scratch_free(&s);
	fw_layer_free(&ly);
	fw_close(&m);
	free_model(&mm);
	free_ref(&rw);
}

/*
 * the loss's position weights: all 1 for mse; for normed the inverse of each
 * source row's mean square, scaled to a mean of 1 (so a row eight times
 * another gets a 64th of its weight); a row of zero or NaN refused
 */
static void check_row_weights(tap_rng *r)
{
	enum { ROWS = 9, W = 6 };
	float y[ROWS * W];
	double *w = NULL, mean = 0, dev = 0, ms0 = 0;
	int rc;

	for (size_t i = 0; i < ROWS * W; i++)
		y[i] = (float)rng_normal(r);
	for (size_t k = 0; k < W; k++)
		y[4 * W + k] = 8.0f * y[3 * W + k]; /* row 4: eight times row 3, exactly */
	ok(tn_row_weights(y, ROWS, W, TN_LOSS_MSE, &w) == 0, "mse: row weights");
	for (size_t i = 0; i < ROWS; i++)
		dev = fmax(dev, fabs(w[i] - 1.0));
	ok(dev == 0.0, "mse: every weight exactly 1");
	free(w);
	ok(tn_row_weights(y, ROWS, W, TN_LOSS_NORMED, &w) == 0, "normed: row weights");
	dev = 0;
	for (size_t i = 0; i < ROWS; i++) {
		double ms = 0;

		for (size_t k = 0; k < W; k++)
			ms += (double)y[i * W + k] * y[i * W + k] / W;
		if (i == 0)
			ms0 = ms * w[0];
		dev = fmax(dev, fabs(ms * w[i] - ms0) / ms0);
		mean += w[i] / ROWS;
	}
	/* f64 sums of 6 and 9 terms: parts in 1e15; 1e-12 leaves room */
	ok(dev <= 1e-12, "normed: weight × mean square the same on every row (%.2g)", dev);
	ok(fabs(mean - 1.0) <= 1e-12, "normed: mean weight 1 (%.17g)", mean);
	ok(fabs(w[4] * 64.0 / w[3] - 1.0) <= 1e-12, "normed: a row eight times another, 1/64 its weight");
	free(w);
	w = NULL;
	memset(y + 2 * W, 0, W * sizeof(float));
	rc = tn_row_weights(y, ROWS, W, TN_LOSS_NORMED, &w);
	ok(rc < 0 && !w && strstr(nv_err(), "row 2"), "normed: a zero row refused: %s", nv_err());
	ok(tn_row_weights(y, ROWS, W, TN_LOSS_MSE, &w) == 0, "mse: a zero row has weight 1");
	free(w);
	w = NULL;
	y[2 * W] = NAN;
	rc = tn_row_weights(y, ROWS, W, TN_LOSS_NORMED, &w);
	ok(rc < 0 && !w, "normed: a NaN row refused: %s", nv_err());
}

int main(void)
{
	tap_rng r = { 7 }, rw = { 11 };

	check_row_weights(&rw);
	variant(&tiny, &r);
	variant(&full, &r);
	variant(&l3, &r);
	return done_testing();
}
