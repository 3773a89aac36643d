/*
 * tinymodel.h - a random tiny qwen2-style model held in memory for the
 * forward and block unit tests: two layers, d 16, ff 24, four heads over two
 * kv heads of width 4, q/k/v biases, an untied head, weights in F32, F16 and
 * BF16; and the reference's f32 copy of every weight as the engine sees it.
 */
#ifndef NV_TEST_TINYMODEL_H
#define NV_TEST_TINYMODEL_H

#include "cmf.h"
#include "f16.h"
#include "forward.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a model held in memory: tensors point into owned buffers */
typedef struct {
	cmf_file f;
	size_t cap;
} mem_model;

static void __attribute__((unused)) add_tensor(mem_model *mm, const char *name, cmf_dtype dt, size_t rows, size_t cols,
		       const void *data, int ndim)
{
	cmf_tensor *t;
	size_t es = cmf_dtype_size(dt);

	if (mm->f.ntensors == mm->cap) {
		mm->cap = mm->cap ? 2 * mm->cap : 64;
		mm->f.t = realloc(mm->f.t, mm->cap * sizeof *mm->f.t);
	}
	t = &mm->f.t[mm->f.ntensors++];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	t->dtype = dt;
	t->ndim = (size_t)ndim;
	t->shape[0] = ndim == 1 ? cols : rows;
	t->shape[1] = cols;
	t->rows = ndim == 1 ? 1 : rows;
	t->cols = cols;
	t->nbytes = rows * cols * es;
	t->data = malloc(t->nbytes);
	memcpy((void *)t->data, data, t->nbytes);
}

static void __attribute__((unused)) free_model(mem_model *mm)
{
	for (size_t i = 0; i < mm->f.ntensors; i++) {
		free(mm->f.t[i].name);
		free((void *)mm->f.t[i].data);
	}
	free(mm->f.t);
}

/* f32 values rounded to the dtype, and the dtype's bytes */
static void *encode_as(cmf_dtype dt, float *v, size_t n)
{
	uint8_t *b = malloc(n * 4);

	for (size_t i = 0; i < n; i++) {
		if (dt == CMF_F32) {
			memcpy(b + 4 * i, &v[i], 4);
			continue;
		}
		uint16_t h = dt == CMF_F16 ? nv_f32_to_f16(v[i]) : nv_f32_to_bf16(v[i]);

		v[i] = dt == CMF_F16 ? nv_f16_to_f32(h) : nv_bf16_to_f32(h);
		b[2 * i] = (uint8_t)h;
		b[2 * i + 1] = (uint8_t)(h >> 8);
	}
	return b;
}

/* the reference's copy of the weights (f32 values as the engine will see them) */
typedef struct {
	float *emb, *head, *fnorm;
	float *w[8][FW_NMAT], *b[8][FW_NMAT], *an[8], *fn[8];
	float *qn[8], *kn[8];     /* the heads' norms (qk_norm) */
} ref_w;

static float *rnd_tensor(mem_model *mm, tap_rng *r, const char *name, cmf_dtype dt, size_t rows,
			 size_t cols, int ndim, double scale, double mean)
{
	float *v = malloc(rows * cols * sizeof *v);
	void *b;

	for (size_t i = 0; i < rows * cols; i++)
		v[i] = (float)(mean + scale * rng_normal(r));
	b = encode_as(dt, v, rows * cols);
	add_tensor(mm, name, dt, rows, cols, b, ndim);
	free(b);
	return v;
}

static const cmf_arch tiny = {
	.arch = "qwen2", .hidden = 16, .intermediate = 24, .layers = 2, .heads = 4, .kv_heads = 2,
	.head_dim = 4, .rms_eps = 1e-6, .rope_theta = 1e6, .vocab = 37, .tied = 0, .bos = 1,
	.eos = 2, .qkv_bias = 1,
};

/* the biases, and the heads' norms, that the arch a says layer l has */
static void tiny_extras(mem_model *mm, ref_w *rw, tap_rng *r, const cmf_arch *a, int l,
			const size_t *rows)
{
	static const char *const bn[FW_NMAT] = { "self_attn.q_proj", "self_attn.k_proj",
		"self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
		"mlp.down_proj" };
	char name[160];

	for (int i = 0; i < FW_NMAT; i++) {
		rw->b[l][i] = NULL;
		if (!(i < FW_O ? a->qkv_bias : i == FW_O ? a->o_bias : a->mlp_bias))
			continue;
		snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, bn[i]);
		rw->b[l][i] = rnd_tensor(mm, r, name, CMF_F32, 1, rows[i], 1, 0.3, 0);
	}
	rw->qn[l] = rw->kn[l] = NULL;
	if (a->qk_norm) {
		snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", l);
		rw->qn[l] = rnd_tensor(mm, r, name, CMF_BF16, 1, 4, 1, 0.2, 1.0);
		snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", l);
		rw->kn[l] = rnd_tensor(mm, r, name, CMF_F32, 1, 4, 1, 0.2, 1.0);
	}
}

/* the tiny model with the features of a (geometry as tiny's) */
static void __attribute__((unused)) build_tiny_as(mem_model *mm, ref_w *rw, tap_rng *r,
						  const cmf_arch *a)
{
	size_t d = 16, ff = 24, qd = 16, kvd = 8;
	size_t rows[FW_NMAT] = { qd, kvd, kvd, d, ff, ff, d };
	size_t cols[FW_NMAT] = { d, d, d, qd, d, d, ff };
	char name[160];

	memset(mm, 0, sizeof *mm);
	rw->emb = rnd_tensor(mm, r, "model.embed_tokens.weight", CMF_F32, 37, d, 2, 1.0, 0);
	for (int l = 0; l < a->layers; l++) {
		for (int i = 0; i < FW_NMAT; i++) {
			cmf_dtype dt = i % 3 == 0 ? CMF_F32 : i % 3 == 1 ? CMF_F16 : CMF_BF16;

			fw_tensor_name(name, sizeof name, l, i);
			rw->w[l][i] = rnd_tensor(mm, r, name, dt, rows[i], cols[i], 2,
						 1.0 / sqrt((double)cols[i]), 0);
		}
		tiny_extras(mm, rw, r, a, l, rows);
		snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
		rw->an[l] = rnd_tensor(mm, r, name, CMF_F32, 1, d, 1, 0.1, 1.0);
		snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
		rw->fn[l] = rnd_tensor(mm, r, name, CMF_F16, 1, d, 1, 0.1, 1.0);
	}
	rw->fnorm = rnd_tensor(mm, r, "model.norm.weight", CMF_F32, 1, d, 1, 0.1, 1.0);
	rw->head = rnd_tensor(mm, r, "lm_head.weight", CMF_BF16, 37, d, 2, 0.25, 0);
	mm->f.arch = *a;
	mm->f.has_arch = 1;
}

static void __attribute__((unused)) build_tiny(mem_model *mm, ref_w *rw, tap_rng *r)
{
	build_tiny_as(mm, rw, r, &tiny);
}

/* y = W x (+ b), W (m × n) */
static void __attribute__((unused)) ref_mv(const float *W, const float *b, const double *x, double *y, size_t m, size_t n)
{
	for (size_t i = 0; i < m; i++) {
		double s = b ? b[i] : 0;

		for (size_t j = 0; j < n; j++)
			s += (double)W[i * n + j] * x[j];
		y[i] = s;
	}
}

/* the reference's weights, freed */
static void __attribute__((unused)) free_ref(ref_w *rw)
{
	for (int l = 0; l < 2; l++) {
		for (int i = 0; i < FW_NMAT; i++)
			free(rw->w[l][i]);
		for (int i = 0; i < FW_NMAT; i++)
			free(rw->b[l][i]);
		free(rw->qn[l]);
		free(rw->kn[l]);
		free(rw->an[l]);
		free(rw->fn[l]);
	}
	free(rw->emb);
	free(rw->head);
	free(rw->fnorm);
}

#endif
