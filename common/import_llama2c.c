/* import_llama2c.c - llama2.c legacy checkpoints (7 × i32 header, f32 weights) into a model (see import.h) */
#include "import.h"
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	int32_t dim, hidden, layers, heads, kv_heads, vocab, seq_len;
	int shared;        /* classifier = token embeddings (vocab > 0 in the header) */
	size_t kv_dim, head_size;
} l2c_config;

static int l2c_header(const char *path, const uint8_t *b, size_t len, l2c_config *c)
{
	int32_t *f[] = { &c->dim, &c->hidden, &c->layers, &c->heads, &c->kv_heads, &c->vocab,
			 &c->seq_len };
	static const char *const names[] = { "dim", "hidden_dim", "n_layers", "n_heads",
					     "n_kv_heads", "vocab_size", "seq_len" };

	if (len < 28)
		return nv_seterr("'%s': %zu bytes is too short for the 28-byte header", path, len), -1;
	for (int i = 0; i < 7; i++) {
		*f[i] = (int32_t)le_u32(b + 4 * i);
		if (i == 5 ? *f[i] == 0 || *f[i] == INT32_MIN : *f[i] <= 0)
			return nv_seterr("'%s': header field %s = %d is out of range", path, names[i],
					 *f[i]), -1;
	}
	c->shared = c->vocab > 0;
	if (c->vocab < 0)
		c->vocab = -c->vocab;
	if (c->kv_heads > c->heads || c->heads % c->kv_heads != 0)
		return nv_seterr("'%s': header n_kv_heads = %d does not divide n_heads = %d", path,
				 c->kv_heads, c->heads), -1;
	if (c->dim % c->heads != 0 || (c->dim / c->heads) % 2 != 0)
		return nv_seterr("'%s': header dim = %d is not n_heads = %d times an even head size",
				 path, c->dim, c->heads), -1;
	c->head_size = (size_t)(c->dim / c->heads);
	c->kv_dim = c->head_size * (size_t)c->kv_heads;
	return 0;
}

/* a·b + c in size_t, -1 on overflow */
static int muladd(size_t a, size_t b, size_t c, size_t *out)
{
	size_t t;

	return nv_mul(a, b, &t) < 0 || nv_add(t, c, out) < 0 ? -1 : 0;
}

/* the f32 count the header promises, overflow-checked */
static int l2c_floats(const char *path, const l2c_config *c, size_t *n)
{
	size_t d = (size_t)c->dim, h = (size_t)c->hidden, L = (size_t)c->layers;
	size_t v = (size_t)c->vocab, kv = c->kv_dim, dd, kd, hd, per, t = 0;

	/* per layer: 2 norms, wq wo (d×d), wk wv (kv×d), w1 w2 w3 (h×d) */
	if (nv_mul(d, d, &dd) < 0 || nv_mul(kv, d, &kd) < 0 || nv_mul(h, d, &hd) < 0 ||
	    muladd(2, dd, 2 * d, &per) < 0 || muladd(2, kd, per, &per) < 0 ||
	    muladd(3, hd, per, &per) < 0 || muladd(L, per, 0, &t) < 0 ||
	    muladd(v, d, t, &t) < 0 || muladd(c->shared ? 0 : v, d, t, &t) < 0 ||
	    muladd((size_t)c->seq_len, c->head_size, t + d, &t) < 0 || muladd(t, 4, 28, n) < 0)
		return nv_preerr("'%s': header sizes", path), -1;
	return 0;
}

/* a lazy matrix of the checkpoint: rows × cols f32 at b, q/k rows un-permuted when written */
typedef struct {
	const uint8_t *b;
	size_t rows, cols, rope_heads;
} l2c_lazy;

static int l2c_f32(const void *p, float *w)
{
	const l2c_lazy *z = p;

	for (size_t i = 0; i < z->rows * z->cols; i++)
		w[i] = le_f32(z->b + 4 * i);
	/* the header check made every head size even: this cannot fail */
	if (z->rope_heads)
		return nv_unpermute_rope(w, z->rows, z->cols * sizeof(float), z->rope_heads);
	return 0;
}

static int add_mat(imp_model *m, const char *name, const uint8_t *b, size_t rows, size_t cols,
		   int dtype, size_t rope_heads)
{
	size_t shape[2] = { rows, cols };
	l2c_lazy *z = nv_malloc(1, sizeof(*z));

	if (!z)
		return -1;
	*z = (l2c_lazy){ b, rows, cols, rope_heads };
	return imp_model_add_lazy(m, name, dtype < 0 ? CMF_F32 : (cmf_dtype)dtype, rows == 1 ? 1 : 2,
				  rows == 1 ? shape + 1 : shape, l2c_f32, z);
}

typedef struct {
	const char *tail;  /* after model.layers.N. */
	size_t rows, cols; /* per layer */
	size_t offset;     /* bytes from the start of the file to layer 0 */
	size_t rope;       /* heads to un-permute, 0 for none */
} l2c_part;

static int l2c_tensors(const l2c_config *c, const uint8_t *b, int dtype, imp_model *m)
{
	size_t d = (size_t)c->dim, h = (size_t)c->hidden, L = (size_t)c->layers, v = (size_t)c->vocab;
	size_t kv = c->kv_dim, at = 28 + 4 * v * d;
	l2c_part p[9] = {
		{ "input_layernorm.weight", 1, d, 0, 0 },
		{ "self_attn.q_proj.weight", d, d, 0, (size_t)c->heads },
		{ "self_attn.k_proj.weight", kv, d, 0, (size_t)c->kv_heads },
		{ "self_attn.v_proj.weight", kv, d, 0, 0 },
		{ "self_attn.o_proj.weight", d, d, 0, 0 },
		{ "post_attention_layernorm.weight", 1, d, 0, 0 },
		{ "mlp.gate_proj.weight", h, d, 0, 0 },  /* w1 */
		{ "mlp.down_proj.weight", d, h, 0, 0 },  /* w2 */
		{ "mlp.up_proj.weight", h, d, 0, 0 },    /* w3 */
	};
	static const int emit_order[9] = { 0, 1, 2, 3, 4, 5, 6, 8, 7 };
	char name[96];

	/* the file's order: rms_att wq wk wv wo rms_ffn w1 w2 w3, each for all layers */
	for (int k = 0; k < 9; k++) {
		p[k].offset = at;
		at += 4 * L * p[k].rows * p[k].cols;
	}
	if (add_mat(m, "model.embed_tokens.weight", b + 28, v, d, dtype, 0) < 0)
		return -1;
	for (size_t l = 0; l < L; l++) {
		for (int e = 0; e < 9; e++) {
			const l2c_part *q = &p[emit_order[e]];

			snprintf(name, sizeof(name), "model.layers.%zu.%s", l, q->tail);
			if (add_mat(m, name, b + q->offset + 4 * l * q->rows * q->cols, q->rows, q->cols,
				    dtype, q->rope) < 0)
				return -1;
		}
	}
	if (add_mat(m, "model.norm.weight", b + at, 1, d, dtype, 0) < 0)
		return -1;
	at += 4 * d + 4 * (size_t)c->seq_len * c->head_size; /* freq_cis real and imaginary: skipped */
	if (!c->shared && add_mat(m, "lm_head.weight", b + at, v, d, dtype, 0) < 0)
		return -1;
	return 0;
}

static void l2c_arch(const l2c_config *c, cmf_arch *a)
{
	cmf_arch_init(a);
	strcpy(a->arch, "llama");
	a->hidden = c->dim;
	a->intermediate = c->hidden;
	a->layers = c->layers;
	a->heads = c->heads;
	a->kv_heads = c->kv_heads;
	a->head_dim = (int)c->head_size;
	a->rms_eps = 1e-5;      /* llama2.c run.c */
	a->rope_theta = 10000.0;
	a->vocab = c->vocab;
	a->tied = c->shared;
	a->max_pos = c->seq_len;
}

static int l2c_vocab(const char *vocab, const l2c_config *c, imp_model *m)
{
	nv_vocab v;

	if (nv_vocab_read_llama2c(vocab, (size_t)c->vocab, &v) < 0)
		return -1;
	m->arch.bos = v.bos;
	m->arch.eos = v.eos;
	m->tokenizer = nv_vocab_to_json(&v);
	nv_vocab_free(&v);
	return m->tokenizer ? 0 : -1;
}

static void map_free(void *p)
{
	if (p)
		nv_map_free(p);
	free(p);
}

int nv_import_llama2c(const char *path, const char *vocab, int dtype, imp_model *m)
{
	nv_map *map = nv_calloc(1, sizeof(*map));
	l2c_config c;
	size_t n;

	if (!map)
		return -1;
	/* the tensors read the mapping when the model is written: the model keeps it */
	m->keep = map;
	m->keep_free = map_free;
	if (nv_map_file(path, map) < 0)
		return -1;
	if (l2c_header(path, map->data, map->len, &c) < 0 || l2c_floats(path, &c, &n) < 0)
		return -1;
	if (n != map->len)
		return nv_seterr("'%s': size %zu bytes disagrees with its header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d: %zu bytes)",
				 path, map->len, c.dim, c.hidden, c.layers, c.heads, c.kv_heads,
				 c.shared ? c.vocab : -c.vocab, c.seq_len, n), -1;
	l2c_arch(&c, &m->arch);
	if (l2c_tensors(&c, map->data, dtype, m) < 0)
		return -1;
	return vocab ? l2c_vocab(vocab, &c, m) : 0;
}
