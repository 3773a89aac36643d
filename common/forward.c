/* forward.c - the Llama-family forward over token windows (see forward.h) */
#include "forward.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "linalg.h"
#include "mem.h"
#include "par.h"
#include "vmath.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *const mat_part[FW_NMAT] = {
	"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
	"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
};

int fw_tensor_name(char *buf, size_t cap, int layer, int which)
{
	int n = snprintf(buf, cap, "model.layers.%d.%s.weight", layer, mat_part[which]);

	if (n < 0 || (size_t)n >= cap) {
		nv_seterr("tensor name too long");
		return -1;
	}
	return 0;
}

/* the tensor called name with the shape rows × cols (cols only for 1-d when rows = 0) */
static const cmf_tensor *need(const cmf_file *f, const char *name, size_t rows, size_t cols)
{
	const cmf_tensor *t = cmf_find(f, name);

	if (!t) {
		nv_seterr("no tensor '%s'", name);
		return NULL;
	}
	if (rows == 0 ? (t->ndim != 1 || t->shape[0] != cols)
		      : (t->rows != rows || t->cols != cols || (!t->blr && t->ndim != 2))) {
		nv_seterr("tensor '%s' is %zu × %zu, want %zu × %zu", name, t->rows, t->cols,
			  rows ? rows : 1, cols);
		return NULL;
	}
	if (rows == 0 && t->blr) {
		nv_seterr("tensor '%s' is a BLR payload, want a vector", name);
		return NULL;
	}
	return t;
}

static int arch_check(fw_model *m)
{
	const cmf_arch *a = &m->a;

	if (strcmp(a->arch, "llama") && strcmp(a->arch, "qwen2") && strcmp(a->arch, "qwen3") &&
	    strcmp(a->arch, "mistral")) {
		nv_seterr("architecture '%s' is not run by the forward (llama, qwen2, qwen3, mistral)",
			  a->arch);
		return -1;
	}
	if (a->hidden < 1 || a->intermediate < 1 || a->layers < 1 || a->heads < 1 ||
	    a->kv_heads < 1 || a->head_dim < 2 || a->head_dim % 2 || a->vocab < 1 ||
	    a->heads % a->kv_heads || !(a->rms_eps > 0) || !(a->rope_theta > 0)) {
		nv_seterr("cmf.arch has an unusable geometry (hidden %d, heads %d, kv heads %d, "
			  "head dim %d, layers %d, vocab %d)", a->hidden, a->heads, a->kv_heads,
			  a->head_dim, a->layers, a->vocab);
		return -1;
	}
	m->d = (size_t)a->hidden;
	m->ff = (size_t)a->intermediate;
	m->hd = (size_t)a->head_dim;
	m->nh = (size_t)a->heads;
	m->nkv = (size_t)a->kv_heads;
	m->vocab = (size_t)a->vocab;
	m->qdim = m->nh * m->hd;
	m->kvdim = m->nkv * m->hd;
	return 0;
}

size_t fw_rows(const fw_model *m, int which)
{
	size_t rows[FW_NMAT] = { m->qdim, m->kvdim, m->kvdim, m->d, m->ff, m->ff, m->d };

	return rows[which];
}

size_t fw_cols(const fw_model *m, int which)
{
	size_t cols[FW_NMAT] = { m->d, m->d, m->d, m->qdim, m->d, m->d, m->ff };

	return cols[which];
}

static int find_layer(fw_model *m, int l)
{
	fw_layer_src *s = &m->layer[l];
	char name[160];

	for (int i = 0; i < FW_NMAT; i++) {
		fw_tensor_name(name, sizeof name, l, i);
		if (!(s->w[i] = need(m->f, name, fw_rows(m, i), fw_cols(m, i))))
			return -1;
	}
	for (int i = 0; i < FW_NMAT; i++) {
		int has = i < FW_O ? m->a.qkv_bias : i == FW_O ? m->a.o_bias : m->a.mlp_bias;

		snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, mat_part[i]);
		s->bias[i] = NULL;
		if (has && !(s->bias[i] = need(m->f, name, 0, fw_rows(m, i))))
			return -1;
	}
	s->q_norm = s->k_norm = NULL;
	if (m->a.qk_norm) {
		snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", l);
		if (!(s->q_norm = need(m->f, name, 0, m->hd)))
			return -1;
		snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", l);
		if (!(s->k_norm = need(m->f, name, 0, m->hd)))
			return -1;
	}
	snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
	if (!(s->attn_norm = need(m->f, name, 0, m->d)))
		return -1;
	snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
	if (!(s->ffn_norm = need(m->f, name, 0, m->d)))
		return -1;
	return 0;
}

/* rows [r0, r0+nr) of a dense tensor as f32 (nr × cols) */
static int rows_f32(const cmf_tensor *t, size_t r0, size_t nr, float *out)
{
	size_t n = nr * t->cols, off = r0 * t->cols;

	if (t->blr) {
		nv_seterr("tensor '%s' is a BLR payload", t->name);
		return -1;
	}
	switch (t->dtype) {
	case CMF_F32:
		memcpy(out, t->data + off * 4, n * 4);
		break;
	case CMF_F16:
	case CMF_BF16:
		for (size_t i = 0; i < n; i++) {
			const uint8_t *p = t->data + (off + i) * 2;
			uint16_t h = (uint16_t)(p[0] | p[1] << 8);

			out[i] = t->dtype == CMF_F16 ? nv_f16_to_f32(h) : nv_bf16_to_f32(h);
		}
		break;
	default:
		nv_seterr("tensor '%s' has dtype %s, not a float", t->name, cmf_dtype_name(t->dtype));
		return -1;
	}
	return 0;
}

static float *vec_f32(const cmf_tensor *t)
{
	float *v = nv_malloc(t->cols, sizeof *v);

	if (v && rows_f32(t, 0, 1, v) < 0) {
		free(v);
		return NULL;
	}
	return v;
}

int fw_open(fw_model *m, const cmf_file *f)
{
	memset(m, 0, sizeof *m);
	m->f = f;
	if (!f->has_arch) {
		nv_seterr("no valid cmf.arch metadata");
		return -1;
	}
	m->a = f->arch;
	if (arch_check(m) < 0)
		return -1;
	if (!(m->layer = nv_calloc((size_t)m->a.layers, sizeof *m->layer)))
		return -1;
	for (int l = 0; l < m->a.layers; l++)
		if (find_layer(m, l) < 0)
			goto fail;
	if (!(m->embed = need(f, "model.embed_tokens.weight", m->vocab, m->d)) ||
	    !(m->final_norm = need(f, "model.norm.weight", 0, m->d)))
		goto fail;
	m->head = m->a.tied ? m->embed : need(f, "lm_head.weight", m->vocab, m->d);
	if (!m->head || m->embed->blr)
		goto fail_blr;
	if (!(m->final_w = vec_f32(m->final_norm)))
		goto fail;
	if (m->head->blr) {
		if (!(m->head_all = cmf_tensor_f32_alloc(m->head)))
			goto fail;
	} else if (!(m->head_blk = nv_malloc((size_t)FW_HEAD_ROWS, m->d * sizeof(float)))) {
		goto fail;
	}
	return 0;
fail_blr:
	if (m->head)
		nv_seterr("the token embeddings are a BLR payload (the forward needs rows)");
fail:
	fw_close(m);
	return -1;
}

void fw_close(fw_model *m)
{
	free(m->layer);
	free(m->final_w);
	free(m->head_blk);
	free(m->head_all);
	memset(m, 0, sizeof *m);
}

void fw_layer_free(fw_layer *ly)
{
	for (int i = 0; i < FW_NMAT; i++)
		free(ly->w[i]);
	for (int i = 0; i < FW_NMAT; i++)
		free(ly->bias[i]);
	free(ly->q_norm);
	free(ly->k_norm);
	free(ly->attn_norm);
	free(ly->ffn_norm);
	memset(ly, 0, sizeof *ly);
}

/* which projection of layer l an override names, or -1 with reason */
static int override_slot(int l, const fw_override *o)
{
	char name[160];

	for (int i = 0; i < FW_NMAT; i++) {
		fw_tensor_name(name, sizeof name, l, i);
		if (strcmp(name, o->name) == 0)
			return i;
	}
	nv_seterr("patch '%s' is not a projection of layer %d", o->name, l);
	return -1;
}

static float *override_f32(const fw_override *o, const cmf_tensor *t)
{
	float *w;

	if (!o->payload) /* the caller fills it */
		return nv_malloc(t->rows, t->cols * sizeof(float));
	if (blr_verify_shape(o->payload, o->len, t->rows, t->cols) < 0) {
		nv_preerr("patch '%s' (want %zu × %zu)", o->name, t->rows, t->cols);
		return NULL;
	}
	if (!(w = nv_malloc(t->rows, t->cols * sizeof *w)))
		return NULL;
	if (blr_dequantize(o->payload, o->len, w) < 0) {
		nv_preerr("patch '%s'", o->name);
		free(w);
		return NULL;
	}
	return w;
}

static int load_overrides(const fw_model *m, int l, const fw_override *ov, size_t nov,
			  fw_layer *out)
{
	for (size_t j = 0; j < nov; j++) {
		int i = override_slot(l, &ov[j]);

		if (i < 0)
			return -1;
		if (out->w[i]) {
			nv_seterr("patch '%s' given twice", ov[j].name);
			return -1;
		}
		if (!(out->w[i] = override_f32(&ov[j], m->layer[l].w[i])))
			return -1;
	}
	return 0;
}

int fw_layer_load(const fw_model *m, int l, const fw_override *ov, size_t nov, fw_layer *out)
{
	const fw_layer_src *s;

	memset(out, 0, sizeof *out);
	if (l < 0 || l >= m->a.layers) {
		nv_seterr("layer %d is beyond the model's layers 0..%d", l, m->a.layers - 1);
		return -1;
	}
	s = &m->layer[l];
	out->index = l;
	if (load_overrides(m, l, ov, nov, out) < 0)
		goto fail;
	for (int i = 0; i < FW_NMAT; i++)
		if (!out->w[i] && !(out->w[i] = cmf_tensor_f32_alloc(s->w[i])))
			goto fail;
	for (int i = 0; i < FW_NMAT; i++)
		if (s->bias[i] && !(out->bias[i] = vec_f32(s->bias[i])))
			goto fail;
	if (s->q_norm && (!(out->q_norm = vec_f32(s->q_norm)) || !(out->k_norm = vec_f32(s->k_norm))))
		goto fail;
	if (!(out->attn_norm = vec_f32(s->attn_norm)) || !(out->ffn_norm = vec_f32(s->ffn_norm)))
		goto fail;
	return 0;
fail:
	fw_layer_free(out);
	return -1;
}

/* the first inverse frequency of the pairs of hd, and llama3's rescaling of one */
static double rope_base(const cmf_arch *a, size_t j, size_t hd)
{
	return 1.0 / pow(a->rope_theta, (double)(2 * j) / (double)hd);
}

static double rope_llama3(const cmf_rope *r, double inv)
{
	double old = r->orig_max_pos, wavelen = 2 * M_PI / inv, smooth;

	if (wavelen < old / r->high_freq)
		return inv;
	if (wavelen > old / r->low_freq)
		return inv / r->factor;
	smooth = (old / wavelen - r->low_freq) / (r->high_freq - r->low_freq);
	return (1 - smooth) * inv / r->factor + smooth * inv;
}

/* yarn: interpolated below the correction range, extrapolated above, a ramp between */
static void rope_yarn(const cmf_arch *a, size_t hd, double *inv)
{
	const cmf_rope *r = &a->rope;
	double ctx = r->orig_max_pos > 0 ? r->orig_max_pos : a->max_pos;
	double lb = 2 * log(a->rope_theta), dim = (double)hd;
	double lo = floor(dim * log(ctx / (r->beta_fast * 2 * M_PI)) / lb);
	double hi = ceil(dim * log(ctx / (r->beta_slow * 2 * M_PI)) / lb);

	lo = lo > 0 ? lo : 0;
	hi = hi < dim - 1 ? hi : dim - 1;
	if (lo == hi)
		hi += 0.001;
	for (size_t j = 0; j < hd / 2; j++) {
		double ramp = ((double)j - lo) / (hi - lo), e = inv[j];

		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		inv[j] = e / r->factor * ramp + e * (1 - ramp);
	}
}

void fw_rope_freqs(const cmf_arch *a, size_t hd, double *inv, double *scale)
{
	const cmf_rope *r = &a->rope;

	*scale = 1.0;
	for (size_t j = 0; j < hd / 2; j++) {
		inv[j] = rope_base(a, j, hd);
		if (r->type == CMF_ROPE_LINEAR)
			inv[j] /= r->factor;
		else if (r->type == CMF_ROPE_LLAMA3)
			inv[j] = rope_llama3(r, inv[j]);
	}
	if (r->type == CMF_ROPE_YARN) {
		rope_yarn(a, hd, inv);
		*scale = r->attn_factor;
	}
}

/* cos and sin of pair j at position p: of the angle p · inv_j, in f64, times the scale */
static int rope_tables(fw_scratch *s, const fw_model *m, size_t tmax)
{
	size_t half = m->hd / 2;
	double *inv = nv_malloc(half, sizeof *inv), scale;

	if (!inv) {
		fw_scratch_free(s);
		return -1;
	}
	fw_rope_freqs(&m->a, m->hd, inv, &scale);
	for (size_t p = 0; p < tmax; p++)
		for (size_t j = 0; j < half; j++) {
			double ang = (double)p * inv[j];

			s->cos_t[p * half + j] = (float)(cos(ang) * scale);
			s->sin_t[p * half + j] = (float)(sin(ang) * scale);
		}
	free(inv);
	return 0;
}

size_t fw_threads(void)
{
	int n = nv_get_threads();

	return n < 1 ? 1 : n > NV_PAR_MAX ? NV_PAR_MAX : (size_t)n;
}

int fw_scratch_init(fw_scratch *s, const fw_model *m, size_t tmax)
{
	size_t half = m->hd / 2;

	memset(s, 0, sizeof *s);
	s->tmax = tmax;
	s->a = nv_malloc(tmax, m->d * sizeof(float));        /* (T × d) */
	s->q = nv_malloc(tmax, m->qdim * sizeof(float));     /* (T × qdim) */
	s->k = nv_malloc(tmax, m->kvdim * sizeof(float));    /* (T × kvdim) */
	s->v = nv_malloc(tmax, m->kvdim * sizeof(float));    /* (T × kvdim) */
	s->o = nv_malloc(tmax, m->qdim * sizeof(float));     /* (T × qdim) */
	s->f = nv_malloc(tmax, m->d * sizeof(float));        /* (T × d) */
	s->g = nv_malloc(tmax, m->ff * sizeof(float));       /* (T × ff) */
	s->u = nv_malloc(tmax, (m->ff > m->d ? m->ff : m->d) * sizeof(float)); /* (T × max) */
	s->nthr = fw_threads();
	/* each thread's block of scores (FW_ATT_ROWS × T) */
	s->s = nv_malloc(s->nthr * FW_ATT_ROWS, tmax * sizeof(float));
	s->cos_t = nv_malloc(tmax, half * sizeof(float));    /* (T × hd/2) */
	s->sin_t = nv_malloc(tmax, half * sizeof(float));
	if (!s->a || !s->q || !s->k || !s->v || !s->o || !s->f || !s->g || !s->u || !s->s ||
	    !s->cos_t || !s->sin_t) {
		fw_scratch_free(s);
		return -1;
	}
	return rope_tables(s, m, tmax);
}

void fw_scratch_free(fw_scratch *s)
{
	free(s->a);
	free(s->q);
	free(s->k);
	free(s->v);
	free(s->o);
	free(s->f);
	free(s->g);
	free(s->u);
	free(s->s);
	free(s->cos_t);
	free(s->sin_t);
	memset(s, 0, sizeof *s);
}

int fw_embed(const fw_model *m, const uint32_t *tok, size_t T, float *x)
{
	for (size_t t = 0; t < T; t++) {
		if (tok[t] >= m->vocab) {
			nv_seterr("token id %u at position %zu is beyond the vocabulary (0..%zu)",
				  tok[t], t, m->vocab - 1);
			return -1;
		}
		if (rows_f32(m->embed, tok[t], 1, x + t * m->d) < 0)
			return -1;
	}
	return 0;
}

/* Y (T × out) = X (T × in) · Wᵀ, W (out × in) */
static void matmul(fw_scratch *s, const float *X, const float *W, float *Y, size_t T,
		   size_t out, size_t in)
{
	nv_sgemm(0, 1, T, out, in, 1.0f, X, in, W, in, 0.0f, Y, out);
	s->flops += 2.0 * (double)T * (double)out * (double)in;
}

static void rows_part(void *ctx, size_t lo, size_t hi)
{
	const fw_rowjob *j = ctx;

	for (size_t t = lo; t < hi; t++)
		j->row(j, t);
}

void fw_each_row(const fw_rowjob *j, size_t T)
{
	nv_par_range(T, fw_threads(), j->n ? (FW_PAR_GRAIN + j->n - 1) / j->n : 1, rows_part,
		     (void *)j);
}

static void norm_row(const fw_rowjob *j, size_t t)
{
	const float *xr = j->x + t * j->n;
	double ss = 0;

	for (size_t i = 0; i < j->n; i++)
		ss += (double)xr[i] * xr[i];
	float r = (float)(1.0 / sqrt(ss / (double)j->n + j->eps));
	for (size_t i = 0; i < j->n; i++)
		j->y[t * j->n + i] = j->w ? xr[i] * r * j->w[i] : xr[i] * r;
}

void fw_rmsnorm(const float *x, const float *w, float *y, size_t T, size_t n, double eps)
{
	fw_each_row(&(fw_rowjob){ .row = norm_row, .x = x, .w = w, .y = y, .n = n, .eps = eps }, T);
}

typedef struct {
	int act;
	const float *g, *u;
	float *y;
} fw_act_job;

static void act_part(void *ctx, size_t lo, size_t hi)
{
	const fw_act_job *j = ctx;

	if (j->act == CMF_ACT_SILU) {
		nv_silu_mul(j->g + lo, j->u + lo, j->y + lo, hi - lo);
		return;
	}
	for (size_t i = lo; i < hi; i++)
		j->y[i] = fw_act(j->act, j->g[i]) * j->u[i];
}

void fw_act_mul(int act, const float *g, const float *u, float *y, size_t n)
{
	fw_act_job j = { act, g, u, y };

	nv_par_range(n, fw_threads(), FW_PAR_GRAIN, act_part, &j);
}

static void add_bias(float *y, const float *b, size_t T, size_t n)
{
	if (!b)
		return;
	for (size_t t = 0; t < T; t++)
		for (size_t i = 0; i < n; i++)
			y[t * n + i] += b[i];
}

void fw_rope(const fw_scratch *s, float *y, size_t T, size_t nh, size_t hd, int inverse)
{
	size_t half = hd / 2;

	for (size_t t = 0; t < T; t++)
		for (size_t h = 0; h < nh; h++) {
			float *v = y + t * nh * hd + h * hd;
			const float *c = s->cos_t + t * half, *sn = s->sin_t + t * half;

			for (size_t j = 0; j < half; j++) {
				float a = v[j], b = v[j + half], si = inverse ? -sn[j] : sn[j];

				v[j] = a * c[j] - b * si;
				v[j + half] = b * c[j] + a * si;
			}
		}
}

size_t fw_window_of(const fw_model *m, int l)
{
	return m->a.window > 0 && l >= m->a.window_from ? (size_t)m->a.window : 0;
}

typedef struct {
	const fw_model *m;
	const float *q, *k, *v;
	float *o, *keep;
	float *work;            /* FW_ATT_ROWS × T scores a thread */
	size_t T, window, nblk;
	float scale;
} fw_att_job;

/*
 * row t of the block S (rows × n, row stride ld; columns c0..c0+n−1 of the
 * window): the softmax over the columns max(c0, t−window+1)..t, zero elsewhere
 */
static void att_softmax(float *S, size_t ld, size_t rows, size_t n, size_t r0, size_t c0,
			size_t window)
{
	for (size_t i = 0; i < rows; i++) {
		size_t t = r0 + i, lo = window && t + 1 >= window + c0 ? t + 1 - window - c0 : 0;
		float *r = S + i * ld;
		size_t hi = t - c0; /* inclusive */

		nv_softmax_f(r + lo, hi + 1 - lo);
		memset(r, 0, lo * sizeof *r);
		memset(r + hi + 1, 0, (n - hi - 1) * sizeof *r);
	}
}

void fw_att_block(size_t T, size_t window, size_t b, size_t *r0, size_t *r1, size_t *c0)
{
	*r0 = b * FW_ATT_ROWS;
	*r1 = *r0 + FW_ATT_ROWS < T ? *r0 + FW_ATT_ROWS : T;
	*c0 = window && *r0 >= window ? *r0 + 1 - window : 0;
}

/*
 * item it (row block b of head h, largest blocks first): the block's query
 * rows see the columns c0..r1−1 only, so S and S·v skip what the mask zeroes
 */
static void att_item(void *ctx, size_t it, size_t thread)
{
	const fw_att_job *j = ctx;
	const fw_model *m = j->m;
	size_t b = j->nblk - 1 - it / m->nh, h = it % m->nh, g = h / (m->nh / m->nkv);
	size_t r0, r1, c0, hd = m->hd, T = j->T;

	fw_att_block(T, j->window, b, &r0, &r1, &c0);
	size_t rows = r1 - r0, n = r1 - c0, ld = j->keep ? T : n;
	float *S = j->keep ? j->keep + h * T * T + r0 * T + c0 : j->work + thread * FW_ATT_ROWS * T;

	/* S (rows × n) = q_h[r0:r1] · k_g[c0:r1]ᵀ · scale */
	nv_sgemm(0, 1, rows, n, hd, j->scale, j->q + r0 * m->qdim + h * hd, m->qdim,
		 j->k + c0 * m->kvdim + g * hd, m->kvdim, 0.0f, S, ld);
	att_softmax(S, ld, rows, n, r0, c0, j->window);
	/* o_h[r0:r1] (rows × hd) = S · v_g[c0:r1] */
	nv_sgemm(0, 0, rows, hd, n, 1.0f, S, ld, j->v + c0 * m->kvdim + g * hd, m->kvdim, 0.0f,
		 j->o + r0 * m->qdim + h * hd, m->qdim);
	for (size_t i = 0; j->keep && i < rows; i++) { /* the kept rows' masked columns */
		memset(S + i * T - c0, 0, c0 * sizeof(float));
		memset(S + i * T + n, 0, (T - r1) * sizeof(float));
	}
}

void fw_attend(const fw_model *m, const float *q, const float *k, const float *v, float *o,
	       size_t T, size_t window, float *work, size_t nthr, float *keep)
{
	fw_att_job j = { .m = m, .q = q, .k = k, .v = v, .o = o, .keep = keep, .work = work,
			 .T = T, .window = window, .nblk = (T + FW_ATT_ROWS - 1) / FW_ATT_ROWS,
			 .scale = (float)(1.0 / sqrt((double)m->hd)) };
	size_t nt = fw_threads();

	nv_serial();
	nv_par_items(j.nblk * m->nh, nt > nthr ? nthr : nt, att_item, &j);
	nv_unserial();
}

double fw_attend_flops(const fw_model *m, size_t T, size_t window)
{
	double sum = 0;

	for (size_t b = 0; b * FW_ATT_ROWS < T; b++) {
		size_t r0, r1, c0;

		fw_att_block(T, window, b, &r0, &r1, &c0);
		sum += 4.0 * (double)m->nh * (double)(r1 - r0) * (double)(r1 - c0) * (double)m->hd;
	}
	return sum;
}

/* o (T × qdim) of the scratch's q, k, v */
static void attention(const fw_model *m, fw_scratch *s, size_t T, size_t window)
{
	fw_attend(m, s->q, s->k, s->v, s->o, T, window, s->s, s->nthr, NULL);
	s->flops += fw_attend_flops(m, T, window);
}

static void add_into(float *x, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* the layer up to down_proj's input, into s->g; x ← x + the attention's
 * output */
static int layer_to_down(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x, size_t T)
{
	size_t d = m->d, ff = m->ff;

	if (T > s->tmax || T == 0) {
		nv_seterr("window of %zu positions, scratch holds 1..%zu", T, s->tmax);
		return -1;
	}
	fw_rmsnorm(x, ly->attn_norm, s->a, T, d, m->a.rms_eps);
	matmul(s, s->a, ly->w[FW_Q], s->q, T, m->qdim, d);
	matmul(s, s->a, ly->w[FW_K], s->k, T, m->kvdim, d);
	matmul(s, s->a, ly->w[FW_V], s->v, T, m->kvdim, d);
	add_bias(s->q, ly->bias[FW_Q], T, m->qdim);
	add_bias(s->k, ly->bias[FW_K], T, m->kvdim);
	add_bias(s->v, ly->bias[FW_V], T, m->kvdim);
	if (ly->q_norm) { /* each head's rows of hd, in place */
		fw_rmsnorm(s->q, ly->q_norm, s->q, T * m->nh, m->hd, m->a.rms_eps);
		fw_rmsnorm(s->k, ly->k_norm, s->k, T * m->nkv, m->hd, m->a.rms_eps);
	}
	fw_rope(s, s->q, T, m->nh, m->hd, 0);
	fw_rope(s, s->k, T, m->nkv, m->hd, 0);
	attention(m, s, T, fw_window_of(m, ly->index));
	matmul(s, s->o, ly->w[FW_O], s->u, T, d, m->qdim);
	add_bias(s->u, ly->bias[FW_O], T, d);
	add_into(x, s->u, T * d);

	fw_rmsnorm(x, ly->ffn_norm, s->f, T, d, m->a.rms_eps);
	matmul(s, s->f, ly->w[FW_GATE], s->g, T, ff, d);
	matmul(s, s->f, ly->w[FW_UP], s->u, T, ff, d);
	add_bias(s->g, ly->bias[FW_GATE], T, ff);
	add_bias(s->u, ly->bias[FW_UP], T, ff);
	/* act(g)·u into g: the input of down_proj */
	fw_act_mul(m->a.act, s->g, s->u, s->g, T * ff);
	return 0;
}

static void leads_of(const fw_scratch *s, fw_leads *leads)
{
	if (leads) {
		leads->q = s->a;
		leads->o = s->o;
		leads->gate = s->f;
		leads->down = s->g;
	}
}

int fw_layer_run(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x, size_t T,
		 fw_leads *leads)
{
	size_t d = m->d;

	if (layer_to_down(m, ly, s, x, T) < 0)
		return -1;
	matmul(s, s->g, ly->w[FW_DOWN], s->u, T, d, m->ff);
	add_bias(s->u, ly->bias[FW_DOWN], T, d);
	add_into(x, s->u, T * d);
	leads_of(s, leads);
	return 0;
}

int fw_layer_leads(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x, size_t T,
		   fw_leads *leads)
{
	if (layer_to_down(m, ly, s, x, T) < 0)
		return -1;
	leads_of(s, leads);
	return 0;
}

int fw_logits(fw_model *m, fw_scratch *s, const float *x, size_t T, float *logits)
{
	size_t d = m->d, V = m->vocab;

	if (T > s->tmax) {
		nv_seterr("window of %zu positions, scratch holds %zu", T, s->tmax);
		return -1;
	}
	fw_rmsnorm(x, m->final_w, s->a, T, d, m->a.rms_eps);
	for (size_t r0 = 0; r0 < V; r0 += FW_HEAD_ROWS) {
		size_t nr = V - r0 < FW_HEAD_ROWS ? V - r0 : FW_HEAD_ROWS;
		const float *E = m->head_all ? m->head_all + r0 * d : m->head_blk;

		if (!m->head_all && rows_f32(m->head, r0, nr, m->head_blk) < 0)
			return -1;
		/* logits[:, r0:r0+nr] (T × nr) = a (T × d) · E_blkᵀ */
		nv_sgemm(0, 1, T, nr, d, 1.0f, s->a, d, E, d, 0.0f, logits + r0, V);
		s->flops += 2.0 * (double)T * (double)nr * (double)d;
	}
	return 0;
}

double fw_logsumexp(const float *row, size_t n, size_t *argmax)
{
	size_t am = 0;

	for (size_t i = 1; i < n; i++)
		if (row[i] > row[am])
			am = i;
	if (argmax)
		*argmax = am;
	return row[am] + log(nv_sum_exp(row, n, row[am]));
}

double fw_kl(const float *p, double lse_p, const float *q, double lse_q, size_t n)
{
	double kl = nv_kl_row(p, lse_p, q, lse_q, n);

	return kl > 0 ? kl : 0;
}

/* a hidden state that is not finite stops the forward, naming the layer that made it */
static int check_finite(const float *x, size_t n, int layer)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i])) {
			nv_seterr("layer %d makes a non-finite hidden state (%g): the model's weights "
				  "are broken", layer, (double)x[i]);
			return -1;
		}
	return 0;
}

/* the logits (T × vocab) of final states x (T × d), each checked finite */
static int head_finite(fw_model *m, fw_scratch *s, const float *x, size_t T, float *logits)
{
	if (fw_logits(m, s, x, T, logits) < 0)
		return -1;
	for (size_t i = 0; i < T * m->vocab; i++)
		if (!isfinite(logits[i])) {
			nv_seterr("the head makes a non-finite logit (%g): the model's weights are "
				  "broken", (double)logits[i]);
			return -1;
		}
	return 0;
}

int fw_window_logits(fw_model *m, fw_scratch *s, const uint32_t *tok, size_t T, float *x,
		     float *logits)
{
	if (fw_embed(m, tok, T, x) < 0)
		return -1;
	for (int l = 0; l < m->a.layers; l++) {
		fw_layer ly;
		int rc;

		if (fw_layer_load(m, l, NULL, 0, &ly) < 0)
			return -1;
		rc = fw_layer_run(m, &ly, s, x, T, NULL);
		fw_layer_free(&ly);
		if (rc < 0 || check_finite(x, T * m->d, l) < 0)
			return -1;
	}
	return head_finite(m, s, x, T, logits);
}

/* progress of a layer-major pass: steps done of nsteps, rows a step */
typedef struct {
	void (*fn)(void *ctx, size_t done, size_t nsteps, size_t rows, size_t total);
	void *ctx;
	size_t done, nsteps, rows;
} fw_progress;

static void step_done(fw_progress *p)
{
	if (p && p->fn) {
		p->done++;
		p->fn(p->ctx, p->done, p->nsteps, p->done * p->rows, p->nsteps * p->rows);
	}
}

/*
 * layers l0 … of every window's fed positions, x (their states entering l0)
 * into the final states, layer-major: each layer converted to f32 once and
 * run on every window, its output checked finite (naming the layer that
 * broke)
 */
static int layers_from(fw_model *m, int l0, const fw_window *w, size_t nw, float *x,
		       fw_progress *p)
{
	fw_scratch s;
	size_t tmax = fw_windows_tmax(w, nw), off = 0;
	int rc = 0;

	if (fw_scratch_init(&s, m, tmax) < 0)
		return -1;
	for (int l = l0; l < m->a.layers && rc == 0; l++) {
		fw_layer ly;

		if ((rc = fw_layer_load(m, l, NULL, 0, &ly)) < 0)
			break;
		off = 0;
		for (size_t i = 0; i < nw && rc == 0; i++) {
			rc = fw_layer_run(m, &ly, &s, x + off * m->d, w[i].len - 1, NULL);
			off += w[i].len - 1;
		}
		fw_layer_free(&ly);
		if (rc == 0)
			rc = check_finite(x, off * m->d, l);
		step_done(p);
	}
	m->flops_done += s.flops;
	fw_scratch_free(&s);
	return rc;
}

/* the final states of every window's fed positions into x, from the embeddings */
static int final_states(fw_model *m, const uint32_t *tok, const fw_window *w, size_t nw,
			float *x, fw_progress *p)
{
	size_t off = 0;

	for (size_t i = 0; i < nw; i++) {
		if (fw_embed(m, tok + w[i].start, w[i].len - 1, x + off * m->d) < 0)
			return -1;
		off += w[i].len - 1;
	}
	return layers_from(m, 0, w, nw, x, p);
}

int fw_final_states(fw_model *m, const uint32_t *tok, const fw_window *w, size_t nw, float *x)
{
	return final_states(m, tok, w, nw, x, NULL);
}

int fw_final_states_from(fw_model *m, int l0, const fw_window *w, size_t nw, float *x)
{
	if (l0 < 0 || l0 > m->a.layers) {
		nv_seterr("layer %d is not one of the model's %d", l0, m->a.layers);
		return -1;
	}
	return layers_from(m, l0, w, nw, x, NULL);
}

float *fw_head_f32(const fw_model *m)
{
	float *E = nv_malloc(m->vocab, m->d * sizeof(float));

	if (!E)
		return NULL;
	if (m->head_all)
		memcpy(E, m->head_all, m->vocab * m->d * sizeof(float));
	else if (rows_f32(m->head, 0, m->vocab, E) < 0) {
		free(E);
		return NULL;
	}
	return E;
}

fw_window *fw_windows(size_t fit, size_t sel, size_t w, size_t *nwin, size_t *rows)
{
	size_t n = 0, r = 0, cap = (fit + w - 1) / w + (sel + w - 1) / w + 1;
	fw_window *v;

	if (w < 2) {
		nv_seterr("window of %zu tokens, want at least 2", w);
		return NULL;
	}
	if (!(v = nv_calloc(cap, sizeof *v)))
		return NULL;
	for (int part = 0; part < 2; part++) {
		size_t a = part ? fit : 0, b = part ? fit + sel : fit;

		for (size_t s = a; s < b; s += w) {
			size_t len = b - s < w ? b - s : w;

			if (len < 2)
				continue;
			v[n++] = (fw_window){ s, len, part };
			r += len - 1;
		}
	}
	*nwin = n;
	*rows = r;
	return v;
}

size_t fw_windows_tmax(const fw_window *w, size_t nw)
{
	size_t tmax = 0;

	for (size_t i = 0; i < nw; i++)
		tmax = w[i].len - 1 > tmax ? w[i].len - 1 : tmax;
	return tmax;
}

typedef struct {
	fw_model *m;
	fw_scratch s;
	float *x, *logits; /* (window × d), (window × vocab) */
} fw_runner;

static int runner_init(fw_runner *r, fw_model *m, size_t window)
{
	memset(r, 0, sizeof *r);
	r->m = m;
	if (fw_scratch_init(&r->s, m, window) < 0 ||
	    !(r->x = nv_malloc(window, m->d * sizeof(float))) ||
	    !(r->logits = nv_malloc(window, m->vocab * sizeof(float))))
		return -1;
	return 0;
}

static void runner_free(fw_runner *r)
{
	fw_scratch_free(&r->s);
	free(r->x);
	free(r->logits);
}

/* one position's scores, and the first non-finite logit of its rows */
typedef struct {
	double nll, base_nll, kl;
	int top1, bad;
	float bad_value;
} fw_score;

typedef struct {
	const fw_runner *a, *b;
	const uint32_t *tok;
	fw_score *sc;
} fw_score_job;

/* the first non-finite entry of row (n), 1 and its value when there is one */
static int row_bad(const float *row, size_t n, float *value)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(row[i])) {
			*value = row[i];
			return 1;
		}
	return 0;
}

static void score_position(void *ctx, size_t t, size_t thread)
{
	const fw_score_job *j = ctx;
	fw_score *o = &j->sc[t];

	(void)thread;
	size_t V = j->a->m->vocab, am, bm;
	const float *la = j->a->logits + t * V, *lb = j->b ? j->b->logits + t * V : NULL;

	memset(o, 0, sizeof *o);
	if (row_bad(la, V, &o->bad_value) || (lb && row_bad(lb, V, &o->bad_value))) {
		o->bad = 1;
		return;
	}
	double lse = fw_logsumexp(la, V, &am);

	o->nll = lse - la[j->tok[t + 1]];
	if (lb) {
		double lseb = fw_logsumexp(lb, V, &bm);

		o->base_nll = lseb - lb[j->tok[t + 1]];
		o->kl = fw_kl(lb, lseb, la, lse, V);
		o->top1 = am == bm;
	}
}

/*
 * the scores of one window: T = len − 1 positions predicting tok[1..len),
 * each position on any thread, summed in the positions' order (the same
 * bits at any thread count); a non-finite logit is an error
 */
static int score_window(const fw_runner *a, const fw_runner *b, const uint32_t *tok, size_t T,
			fw_score *sc, fw_eval_result *r)
{
	fw_score_job j = { .a = a, .b = b, .tok = tok, .sc = sc };

	nv_par_items(T, fw_threads(), score_position, &j);
	for (size_t t = 0; t < T; t++) {
		if (sc[t].bad) {
			nv_seterr("the head makes a non-finite logit (%g): the model's weights are "
				  "broken", (double)sc[t].bad_value);
			return -1;
		}
		r->nll += sc[t].nll;
		r->base_nll += sc[t].base_nll;
		r->kl += sc[t].kl;
		r->top1 += sc[t].top1;
	}
	r->predicted += T;
	return 0;
}

/*
 * every window's final states layer-major (each layer converted once, not
 * once a window: a BLR layer's dequantization costs as much as its
 * products), then the head and the scores window by window
 */
static int eval_windows(fw_runner *a, fw_runner *b, const uint32_t *tok, const fw_window *w,
			size_t nw, size_t rows, fw_eval_result *r, fw_progress *p)
{
	float *xa = nv_malloc(rows, a->m->d * sizeof(float));
	float *xb = b ? nv_malloc(rows, b->m->d * sizeof(float)) : NULL;
	fw_score *sc = nv_malloc(a->s.tmax, sizeof *sc);
	size_t off = 0;
	int rc = -1;

	if (!xa || (b && !xb) || !sc || final_states(a->m, tok, w, nw, xa, p) < 0)
		goto out;
	if (b && final_states(b->m, tok, w, nw, xb, p) < 0) {
		nv_preerr("base model");
		goto out;
	}
	for (size_t i = 0; i < nw; off += w[i].len - 1, i++) {
		size_t T = w[i].len - 1;

		if (fw_logits(a->m, &a->s, xa + off * a->m->d, T, a->logits) < 0 ||
		    (b && fw_logits(b->m, &b->s, xb + off * b->m->d, T, b->logits) < 0) ||
		    score_window(a, b, tok + w[i].start, T, sc, r) < 0)
			goto out;
	}
	step_done(p);
	rc = 0;
out:
	free(sc);
	free(xa);
	free(xb);
	return rc;
}

int fw_eval(fw_model *m, fw_model *base, const uint32_t *tok, size_t n, size_t window,
	    fw_eval_result *r, void (*progress)(void *, size_t, size_t, size_t, size_t), void *ctx)
{
	fw_runner a, b;
	fw_window *w;
	size_t nw, rows, tmax;
	fw_progress p = { progress, ctx, 0, 0, 0 };
	int rc = -1;

	memset(r, 0, sizeof *r);
	for (size_t i = 0; i < n; i++)
		if (tok[i] >= m->vocab) {
			nv_seterr("token id %u at position %zu is beyond the vocabulary (0..%zu)",
				  tok[i], i, m->vocab - 1);
			return -1;
		}
	if (base && base->vocab != m->vocab) {
		nv_seterr("the base model's vocabulary has %zu tokens, the model's %zu", base->vocab,
			  m->vocab);
		return -1;
	}
	if (!(w = fw_windows(n, 0, window, &nw, &rows)))
		return -1;
	if (nw == 0) {
		nv_seterr("%zu tokens make no window of at least 2", n);
		free(w);
		return -1;
	}
	p.nsteps = (size_t)m->a.layers + (base ? (size_t)base->a.layers : 0) + 1;
	p.rows = rows;
	m->flops_done = 0;
	if (base)
		base->flops_done = 0;
	memset(&b, 0, sizeof b);
	/* scratch for the longest window, not for --window: 100000 would ask 4·W² bytes */
	tmax = fw_windows_tmax(w, nw);
	if (runner_init(&a, m, tmax) == 0 && (!base || runner_init(&b, base, tmax) == 0) &&
	    eval_windows(&a, base ? &b : NULL, tok, w, nw, rows, r, &p) == 0)
		rc = 0;
	r->tokens = n;
	r->flops = m->flops_done + a.s.flops + (base ? base->flops_done + b.s.flops : 0);
	if (r->predicted) {
		r->nll /= (double)r->predicted;
		r->base_nll /= (double)r->predicted;
		r->kl /= (double)r->predicted;
		r->top1 /= (double)r->predicted;
	}
	runner_free(&a);
	runner_free(&b);
	free(w);
	return rc;
}

int fw_generate(fw_model *m, const uint32_t *tok, size_t n, size_t steps, size_t window,
		uint32_t **out, size_t *nout)
{
	fw_runner a;
	size_t cap = n + steps, k = n;
	uint32_t *o;
	int rc = -1;

	*out = NULL;
	*nout = 0;
	if (n == 0 || n > window) {
		nv_seterr("a prompt of %zu tokens, want 1..%zu (the window)", n, window);
		return -1;
	}
	if (!(o = nv_malloc(cap, sizeof *o)))
		return -1;
	memcpy(o, tok, n * sizeof *o);
	if (runner_init(&a, m, cap < window ? cap : window) < 0)
		goto out;
	while (k < cap && k < window) {
		size_t am;

		if (fw_window_logits(m, &a.s, o, k, a.x, a.logits) < 0)
			goto out;
		fw_logsumexp(a.logits + (k - 1) * m->vocab, m->vocab, &am);
		o[k++] = (uint32_t)am;
		if ((int)am == m->a.bos || (int)am == m->a.eos)
			break;
	}
	rc = 0;
	*out = o;
	*nout = k;
out:
	runner_free(&a);
	if (rc < 0)
		free(o);
	return rc;
}
