/* import.c - import dispatch, the model written, its canonical order and its checks against the arch (see import.h) */
#include "import.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "mem.h"
#include "names.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* index of the first non-finite value of n, or n */
static size_t first_nonfinite(const float *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(w[i]))
			return i;
	return n;
}

static int lazy_values(const nv_itensor *t, float *w, size_t n)
{
	size_t bad;

	if (t->f32(t->ctx, w) < 0)
		return -1;
	if ((bad = first_nonfinite(w, n)) < n)
		return nv_seterr("element %zu is %s", bad, isnan(w[bad]) ? "nan" : "infinite"), -1;
	return 0;
}

/* the writer's fill of a lazy tensor: its f32 values, then the dtype's little-endian bytes */
static int lazy_fill(void *p, void *out)
{
	const nv_itensor *t = p;
	size_t n = t->nbytes / cmf_dtype_size(t->dtype);
	uint8_t *b = out;
	float *w;
	int rc;

	if (t->dtype == CMF_F32) {
		/* out is malloc'd scratch, aligned for floats */
		if (lazy_values(t, out, n) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			put_f32(b + 4 * i, ((float *)out)[i]);
		return 0;
	}
	if (!(w = nv_malloc(n ? n : 1, sizeof(float))))
		return -1;
	if (lazy_values(t, w, n) < 0) {
		free(w);
		return -1;
	}
	rc = cmf_put_half(t->name, t->dtype, w, n, b);
	free(w);
	return rc;
}


int nv_from_parse(const char *s)
{
	if (strcmp(s, "safetensors") == 0)
		return NV_FROM_SAFETENSORS;
	if (strcmp(s, "gguf") == 0)
		return NV_FROM_GGUF;
	if (strcmp(s, "llama2c") == 0)
		return NV_FROM_LLAMA2C;
	return -1;
}

/* the source kind from the first bytes: "GGUF", a safetensors header, else llama2.c */
static int sniff(const char *path)
{
	size_t n = strlen(path);
	uint8_t b[9];
	FILE *f;

	struct stat st;

	if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
		return NV_FROM_SAFETENSORS;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return NV_FROM_SAFETENSORS; /* a Hugging Face model directory */
	if (!(f = fopen(path, "rb")))
		return nv_seterr("cannot open '%s'", path), -1;
	n = fread(b, 1, sizeof(b), f);
	fclose(f);
	if (n >= 4 && memcmp(b, "GGUF", 4) == 0)
		return NV_FROM_GGUF;
	if (n == 9 && b[8] == '{' && le_u64(b) < (1u << 30))
		return NV_FROM_SAFETENSORS;
	return NV_FROM_LLAMA2C;
}

/* a --vocab file: NV_FROM_GGUF, NV_FROM_SAFETENSORS (a tokenizer.json) or NV_FROM_LLAMA2C; -1 unreadable */
static int vocab_kind(const char *path)
{
	uint8_t b[64];
	size_t n, i = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		return nv_seterr("cannot open '%s'", path), -1;
	n = fread(b, 1, sizeof(b), f);
	fclose(f);
	if (n >= 4 && memcmp(b, "GGUF", 4) == 0)
		return NV_FROM_GGUF;
	while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
		i++;
	return i < n && b[i] == '{' ? NV_FROM_SAFETENSORS : NV_FROM_LLAMA2C;
}

/* the tokenizer of a GGUF or tokenizer.json (kind) in place of the one m has */
static int vocab_replace(const char *path, int kind, imp_model *m)
{
	nv_vocab v;
	char *json;

	if ((kind == NV_FROM_GGUF ? nv_gguf_vocab(path, &v) : nv_hf_vocab(path, &m->arch, &v)) < 0)
		return nv_preerr("--vocab"), -1;
	if (v.n > (size_t)m->arch.vocab) {
		nv_seterr("--vocab: '%s' has %zu tokens, more than the model's vocab_size %d", path,
			  v.n, m->arch.vocab);
		return nv_vocab_free(&v), -1;
	}
	/* bos/eos from the model's config when the GGUF names none (nv_hf_vocab has done so) */
	if (kind == NV_FROM_GGUF)
		nv_vocab_default_ids(&v, m->arch.bos, m->arch.eos);
	json = nv_vocab_to_json(&v);
	m->arch.bos = v.bos;
	m->arch.eos = v.eos;
	nv_vocab_free(&v);
	if (!json)
		return -1;
	free(m->tokenizer);
	m->tokenizer = json;
	return 0;
}

static const char *basename_of(const char *path)
{
	const char *base = strrchr(path, '/');

	return base ? base + 1 : path;
}

static char *provenance(const char *kind, const char *path, const char *vocab)
{
	cJSON *o = cJSON_CreateObject(), *imp = cJSON_AddObjectToObject(o, "import");
	char *s;

	cJSON_AddStringToObject(imp, "from", kind);
	cJSON_AddStringToObject(imp, "file", basename_of(path));
	if (vocab)
		cJSON_AddStringToObject(imp, "vocab", basename_of(vocab));
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory");
	return s;
}

int nv_import(size_t nsrc, char *const *src, const nv_import_opts *o, imp_model *m)
{
	static const char *const kinds[] = { "", "safetensors", "gguf", "llama2c" };
	int from = o->from, vk = 0;
	int rc;

	imp_model_init(m);
	if (nsrc == 0)
		return nv_seterr("no source file"), -1;
	if (from == NV_FROM_AUTO && (from = sniff(src[0])) < 0)
		return -1;
	if (from != NV_FROM_SAFETENSORS && nsrc != 1)
		return nv_seterr("%s takes one source file, %zu given", kinds[from], nsrc), -1;
	if (o->vocab && (vk = vocab_kind(o->vocab)) < 0)
		return -1;
	if (vk == NV_FROM_LLAMA2C && from != NV_FROM_LLAMA2C)
		return nv_seterr("--vocab '%s' is neither a GGUF nor a tokenizer.json (a llama2.c "
				 "tokenizer is for llama2c sources; '%s' is %s)", o->vocab, src[0],
				 kinds[from]), -1;
	if (from == NV_FROM_GGUF)
		rc = nv_import_gguf(src[0], o->dtype, m);
	else if (from == NV_FROM_LLAMA2C)
		rc = nv_import_llama2c(src[0], vk == NV_FROM_LLAMA2C ? o->vocab : NULL, o->dtype, m);
	else
		rc = nv_import_safetensors(nsrc, src, o->dtype, m);
	if (rc == 0 && vk > 0 && vk != NV_FROM_LLAMA2C)
		rc = vocab_replace(o->vocab, vk, m);
	imp_model_sort(m);
	if (rc == 0)
		rc = imp_model_check(m);
	if (rc == 0 && !(m->provenance = provenance(kinds[from], src[0], o->vocab)))
		rc = -1;
	if (rc < 0)
		imp_model_free(m);
	return rc;
}

int imp_model_write(const imp_model *m, const char *path)
{
	cmf_writer *w = cmf_writer_new();
	int rc = -1;

	if (!w)
		return -1;
	for (size_t i = 0; i < m->n; i++) {
		nv_itensor *t = &m->t[i];

		if (t->f32 ? cmf_writer_add_lazy(w, t->name, t->dtype, t->ndim, t->shape, lazy_fill, t) < 0
			   : cmf_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, 0) < 0)
			goto out;
	}
	if (cmf_writer_set_arch(w, &m->arch) < 0 ||
	    (m->tokenizer && cmf_writer_set_meta(w, "cmf.tokenizer", m->tokenizer) < 0) ||
	    (m->provenance && cmf_writer_set_meta(w, "cmf.provenance", m->provenance) < 0))
		goto out;
	rc = cmf_writer_commit(w, path);
out:
	cmf_writer_free(w);
	return rc;
}

/* ---------------------------------------------------------------- canonical order */

static const char *const layer_tails[] = {
	"input_layernorm.weight",   "self_attn.q_proj.weight", "self_attn.q_proj.bias",
	"self_attn.k_proj.weight",  "self_attn.k_proj.bias",   "self_attn.v_proj.weight",
	"self_attn.v_proj.bias",    "self_attn.o_proj.weight", "post_attention_layernorm.weight",
	"mlp.gate_proj.weight",     "mlp.up_proj.weight",      "mlp.down_proj.weight",
};

/* (group, layer, position) of a name: embeddings, layers in order, final norm, head, the rest */
static void order_key(const char *name, size_t key[3])
{
	size_t l, nt = sizeof(layer_tails) / sizeof(layer_tails[0]);

	key[1] = key[2] = 0;
	if (strcmp(name, "model.embed_tokens.weight") == 0) {
		key[0] = 0;
	} else if (nv_layer_of(name, &l)) {
		const char *tail = strchr(name + strlen("model.layers."), '.') + 1;

		key[0] = 1;
		key[1] = l;
		key[2] = nt;
		for (size_t i = 0; i < nt; i++)
			if (strcmp(tail, layer_tails[i]) == 0)
				key[2] = i;
	} else if (strcmp(name, "model.norm.weight") == 0) {
		key[0] = 2;
	} else if (strcmp(name, "lm_head.weight") == 0) {
		key[0] = 3;
	} else {
		key[0] = 4;
	}
}

static int tensor_order(const void *a, const void *b)
{
	const nv_itensor *x = a, *y = b;
	size_t kx[3], ky[3];

	order_key(x->name, kx);
	order_key(y->name, ky);
	for (int i = 0; i < 3; i++)
		if (kx[i] != ky[i])
			return kx[i] < ky[i] ? -1 : 1;
	return strcmp(x->name, y->name);
}

void imp_model_sort(imp_model *m)
{
	if (m->n > 1)
		qsort(m->t, m->n, sizeof(*m->t), tensor_order);
}

/* ---------------------------------------------------------------- shapes against the arch */

/* a layer's tensors: the name after "model.layers.L.", the shape, and when the arch has it */
enum { HAS_ALL, HAS_QKV_BIAS, HAS_O_BIAS, HAS_MLP_BIAS, HAS_QK_NORM };

typedef struct {
	const char *tail;
	size_t rows, cols; /* rows 0: 1-d of cols */
	int has;
} layer_tensor;

static size_t layer_tensors(const cmf_arch *a, layer_tensor *t)
{
	size_t h = (size_t)a->hidden, hd = (size_t)a->head_dim, q = (size_t)a->heads * hd;
	size_t kv = (size_t)a->kv_heads * hd, f = (size_t)a->intermediate;
	const layer_tensor all[] = {
		{ "input_layernorm.weight", 0, h, HAS_ALL },
		{ "post_attention_layernorm.weight", 0, h, HAS_ALL },
		{ "self_attn.q_proj.weight", q, h, HAS_ALL },
		{ "self_attn.k_proj.weight", kv, h, HAS_ALL },
		{ "self_attn.v_proj.weight", kv, h, HAS_ALL },
		{ "self_attn.o_proj.weight", h, q, HAS_ALL },
		{ "mlp.gate_proj.weight", f, h, HAS_ALL },
		{ "mlp.up_proj.weight", f, h, HAS_ALL },
		{ "mlp.down_proj.weight", h, f, HAS_ALL },
		{ "self_attn.q_proj.bias", 0, q, HAS_QKV_BIAS },
		{ "self_attn.k_proj.bias", 0, kv, HAS_QKV_BIAS },
		{ "self_attn.v_proj.bias", 0, kv, HAS_QKV_BIAS },
		{ "self_attn.o_proj.bias", 0, h, HAS_O_BIAS },
		{ "mlp.gate_proj.bias", 0, f, HAS_MLP_BIAS },
		{ "mlp.up_proj.bias", 0, f, HAS_MLP_BIAS },
		{ "mlp.down_proj.bias", 0, h, HAS_MLP_BIAS },
		{ "self_attn.q_norm.weight", 0, hd, HAS_QK_NORM },
		{ "self_attn.k_norm.weight", 0, hd, HAS_QK_NORM },
	};
	const int has[] = { 1, a->qkv_bias, a->o_bias, a->mlp_bias, a->qk_norm };
	size_t n = 0;

	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		if (has[all[i].has])
			t[n++] = all[i];
	return n;
}

#define IMP_LAYER_MAX 18

/* the shape of a tensor the forward reads (rows 0 for 1-d); 0 when it reads no such tensor */
static int expected_shape(const cmf_arch *a, const char *name, size_t *rows, size_t *cols)
{
	layer_tensor t[IMP_LAYER_MAX];
	size_t n = layer_tensors(a, t), l;

	*rows = 0;
	if (!strcmp(name, "model.embed_tokens.weight") ||
	    (!a->tied && !strcmp(name, "lm_head.weight")))
		return *rows = (size_t)a->vocab, *cols = (size_t)a->hidden, 1;
	if (!strcmp(name, "model.norm.weight"))
		return *cols = (size_t)a->hidden, 1;
	if (!nv_layer_of(name, &l))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(strchr(name + strlen("model.layers."), '.') + 1, t[i].tail))
			return *rows = t[i].rows, *cols = t[i].cols, 1;
	return 0;
}

/* the first tensor the arch has and m lacks, named in the error */
static int missing(const imp_model *m)
{
	layer_tensor t[IMP_LAYER_MAX];
	size_t n = layer_tensors(&m->arch, t);
	char name[200];

	for (int l = 0; l < m->arch.layers; l++)
		for (size_t i = 0; i < n; i++) {
			snprintf(name, sizeof name, "model.layers.%d.%s", l, t[i].tail);
			if (!imp_model_find((imp_model *)m, name))
				return nv_seterr("no tensor '%s': the arch (%s) has it", name,
						 m->arch.arch), -1;
		}
	if (!m->arch.tied && !imp_model_find((imp_model *)m, "lm_head.weight"))
		return nv_seterr("the arch has an untied head but there is no lm_head.weight"), -1;
	return nv_seterr("no tensor '%s': the arch (%s) has it",
			 imp_model_find((imp_model *)m, "model.norm.weight") ? "model.embed_tokens.weight"
									   : "model.norm.weight",
			 m->arch.arch), -1;
}

int imp_model_check(const imp_model *m)
{
	layer_tensor lt[IMP_LAYER_MAX];
	size_t want = 2 + !m->arch.tied + (size_t)m->arch.layers * layer_tensors(&m->arch, lt);

	for (size_t i = 0; i < m->n; i++) {
		const nv_itensor *t = &m->t[i];
		size_t rows, cols, l;
		int want2;

		if (nv_layer_of(t->name, &l) && l >= (size_t)m->arch.layers)
			return nv_seterr("tensor '%s' is beyond the %d layers of the arch", t->name,
					 m->arch.layers), -1;
		if (!expected_shape(&m->arch, t->name, &rows, &cols))
			return nv_seterr("tensor '%s' is not read by the forward of this %s model (see "
					 "cmf-patch(1) for the tensors of each arch)", t->name,
					 m->arch.arch), -1;
		want2 = rows != 0;
		if (t->ndim != (want2 ? 2u : 1u) || (want2 && t->shape[0] != rows) ||
		    t->shape[want2] != cols)
			return nv_seterr("tensor '%s' has shape %zux%zu, the arch says %zux%zu", t->name,
					 t->shape[0], t->ndim > 1 ? t->shape[1] : (size_t)1,
					 want2 ? rows : cols, want2 ? cols : (size_t)1), -1;
	}
	/* every tensor present is one the arch has, and names are unique: count the rest */
	return m->n == want ? 0 : missing(m);
}
