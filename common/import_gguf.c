/* import_gguf.c - llama.cpp GGUF (v2, v3; llama architecture) into a model (see import.h) */
#include "import.h"
#include "err.h"
#include "f16.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" */

enum {
	GT_U8 = 0, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STRING,
	GT_ARRAY, GT_U64, GT_I64, GT_F64, GT_COUNT
};

/* ggml tensor types this importer dequantizes */
enum {
	GG_F32 = 0, GG_F16 = 1, GG_Q4_0 = 2, GG_Q4_1 = 3, GG_Q5_0 = 6, GG_Q5_1 = 7, GG_Q8_0 = 8,
	GG_Q4_K = 12, GG_Q5_K = 13, GG_Q6_K = 14, GG_BF16 = 30
};

typedef struct {
	const char *path;
	const uint8_t *b;
	size_t len, at;
} cursor;

typedef struct {
	char *key;
	uint32_t type;
	const uint8_t *val;   /* the value (for arrays: the first element) */
	uint32_t atype;       /* array element type */
	size_t count;         /* array element count */
} gkv;

typedef struct {
	char *name;
	size_t ndim, ne[4];   /* ne[0] is the innermost (columns) */
	uint32_t type;
	size_t offset, nbytes;
} gtensor;

typedef struct {
	nv_map map;
	const char *path;
	char *own_path;       /* the path, kept for messages while the model lives */
	size_t nkv, nt;
	gkv *kv;
	gtensor *t;
	size_t align, data; /* data section offset */
} gguf;

/* ---------------------------------------------------------------- reading */

static int need(cursor *c, size_t n, const char *what)
{
	if (c->len - c->at < n)
		return nv_seterr("'%s': %s at byte %zu needs %zu bytes, %zu left", c->path, what, c->at,
				 n, c->len - c->at), -1;
	return 0;
}

static int rd_u32(cursor *c, const char *what, uint32_t *v)
{
	if (need(c, 4, what) < 0)
		return -1;
	*v = le_u32(c->b + c->at);
	c->at += 4;
	return 0;
}

static int rd_u64(cursor *c, const char *what, uint64_t *v)
{
	if (need(c, 8, what) < 0)
		return -1;
	*v = le_u64(c->b + c->at);
	c->at += 8;
	return 0;
}

/* a string: u64 length, bytes; *s points into the file */
static int rd_str(cursor *c, const char *what, const uint8_t **s, size_t *n)
{
	uint64_t len;

	if (rd_u64(c, what, &len) < 0)
		return -1;
	if (len > c->len - c->at)
		return nv_seterr("'%s': %s at byte %zu: string length %llu is beyond the file", c->path,
				 what, c->at - 8, (unsigned long long)len), -1;
	*s = c->b + c->at;
	*n = (size_t)len;
	c->at += (size_t)len;
	return 0;
}

static char *dup_str(const uint8_t *s, size_t n)
{
	char *d;

	if (memchr(s, 0, n))
		return nv_seterr("a string holds a NUL byte"), NULL;
	if (!(d = nv_malloc(n + 1, 1)))
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

static size_t scalar_size(uint32_t t)
{
	static const size_t sz[GT_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	return t < GT_COUNT ? sz[t] : 0;
}

/* skip one value of type t (arrays of arrays nest at most 2 deep) */
static int skip_value(cursor *c, uint32_t t, int depth, const char *key)
{
	const uint8_t *s;
	size_t n;

	if (t == GT_STRING)
		return rd_str(c, key, &s, &n);
	if (t == GT_ARRAY) {
		uint32_t at;
		uint64_t cnt;

		if (depth > 2)
			return nv_seterr("'%s': key '%s': arrays nested too deep", c->path, key), -1;
		if (rd_u32(c, key, &at) < 0 || rd_u64(c, key, &cnt) < 0)
			return -1;
		if (at >= GT_COUNT)
			return nv_seterr("'%s': key '%s': array element type %u is unknown", c->path, key,
					 at), -1;
		if (scalar_size(at)) {
			if (cnt > (c->len - c->at) / scalar_size(at))
				return nv_seterr("'%s': key '%s': array count %llu is beyond the file",
						 c->path, key, (unsigned long long)cnt), -1;
			c->at += (size_t)cnt * scalar_size(at);
			return 0;
		}
		/* strings and arrays take at least 8 bytes each */
		if (cnt > (c->len - c->at) / 8)
			return nv_seterr("'%s': key '%s': array count %llu is beyond the file", c->path,
					 key, (unsigned long long)cnt), -1;
		for (uint64_t i = 0; i < cnt; i++)
			if (skip_value(c, at, depth + 1, key) < 0)
				return -1;
		return 0;
	}
	if (!scalar_size(t))
		return nv_seterr("'%s': key '%s': value type %u is unknown", c->path, key, t), -1;
	if (need(c, scalar_size(t), key) < 0)
		return -1;
	c->at += scalar_size(t);
	return 0;
}

static int read_kv(cursor *c, gkv *kv)
{
	const uint8_t *s;
	size_t n, start;

	if (rd_str(c, "key", &s, &n) < 0)
		return -1;
	if (!(kv->key = dup_str(s, n)))
		return nv_preerr("'%s': key at byte %zu", c->path, c->at - n), -1;
	if (rd_u32(c, kv->key, &kv->type) < 0)
		return -1;
	start = c->at;
	if (kv->type == GT_ARRAY) {
		if (need(c, 12, kv->key) < 0)
			return -1;
		kv->atype = le_u32(c->b + start);
		kv->count = (size_t)le_u64(c->b + start + 4);
		kv->val = c->b + start + 12;
	} else {
		kv->val = c->b + start;
	}
	return skip_value(c, kv->type, 0, kv->key);
}

static const gkv *find_kv(const gguf *g, const char *key)
{
	for (size_t i = 0; i < g->nkv; i++)
		if (strcmp(g->kv[i].key, key) == 0)
			return &g->kv[i];
	return NULL;
}

/* an integer-typed key as a long; 0 absent, 1 found, -1 wrong type */
static int kv_int(const gguf *g, const char *key, long long *v)
{
	const gkv *k = find_kv(g, key);

	if (!k)
		return 0;
	switch (k->type) {
	case GT_U8: *v = k->val[0]; break;
	case GT_I8: *v = (int8_t)k->val[0]; break;
	case GT_U16: *v = le_u16(k->val); break;
	case GT_I16: *v = (int16_t)le_u16(k->val); break;
	case GT_U32: *v = le_u32(k->val); break;
	case GT_I32: *v = (int32_t)le_u32(k->val); break;
	case GT_U64: *v = (long long)(le_u64(k->val) & 0x7fffffffffffffffull); break;
	case GT_I64: *v = (long long)le_u64(k->val); break;
	case GT_BOOL: *v = k->val[0] != 0; break;
	default:
		return nv_seterr("'%s': key '%s' has type %u, want an integer", g->path, key,
				 k->type), -1;
	}
	return 1;
}

static int kv_float(const gguf *g, const char *key, double *v)
{
	const gkv *k = find_kv(g, key);

	if (!k)
		return 0;
	if (k->type == GT_F32)
		*v = le_f32(k->val);
	else if (k->type == GT_F64)
		*v = le_f64(k->val);
	else
		return nv_seterr("'%s': key '%s' has type %u, want a float", g->path, key, k->type), -1;
	return 1;
}

/* ---------------------------------------------------------------- tensor types */

typedef struct {
	uint32_t type;
	const char *name;
	size_t block, bytes; /* elements per block, bytes per block */
} gtype;

static const gtype gtypes[] = {
	{ GG_F32, "F32", 1, 4 },     { GG_F16, "F16", 1, 2 },     { GG_Q4_0, "Q4_0", 32, 18 },
	{ GG_Q4_1, "Q4_1", 32, 20 }, { GG_Q5_0, "Q5_0", 32, 22 }, { GG_Q5_1, "Q5_1", 32, 24 },
	{ GG_Q8_0, "Q8_0", 32, 34 }, { GG_BF16, "BF16", 1, 2 },   { GG_Q4_K, "Q4_K", 256, 144 },
	{ GG_Q5_K, "Q5_K", 256, 176 }, { GG_Q6_K, "Q6_K", 256, 210 },
};

static const char *const ggml_names[] = {
	"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K",
	"Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
	"IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16",
};

static const gtype *find_type(uint32_t t)
{
	for (size_t i = 0; i < sizeof(gtypes) / sizeof(gtypes[0]); i++)
		if (gtypes[i].type == t)
			return &gtypes[i];
	return NULL;
}

static const char *type_name(uint32_t t)
{
	return t < sizeof(ggml_names) / sizeof(ggml_names[0]) ? ggml_names[t] : "unknown";
}

/* ggml's reference dequantize_row_*: one block of 32 into y */
static void deq_block(uint32_t type, const uint8_t *x, float *y)
{
	const float d = nv_f16_to_f32(le_u16(x));

	switch (type) {
	case GG_Q4_0:
		for (int j = 0; j < 16; j++) {
			y[j] = (float)((x[2 + j] & 0x0f) - 8) * d;
			y[j + 16] = (float)((x[2 + j] >> 4) - 8) * d;
		}
		break;
	case GG_Q4_1: {
		const float m = nv_f16_to_f32(le_u16(x + 2));

		for (int j = 0; j < 16; j++) {
			y[j] = (float)(x[4 + j] & 0x0f) * d + m;
			y[j + 16] = (float)(x[4 + j] >> 4) * d + m;
		}
		break;
	}
	case GG_Q5_0: {
		const uint32_t qh = le_u32(x + 2);

		for (int j = 0; j < 16; j++) {
			int h0 = (int)(((qh >> j) << 4) & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);

			y[j] = (float)(((x[6 + j] & 0x0f) | h0) - 16) * d;
			y[j + 16] = (float)(((x[6 + j] >> 4) | h1) - 16) * d;
		}
		break;
	}
	case GG_Q5_1: {
		const float m = nv_f16_to_f32(le_u16(x + 2));
		const uint32_t qh = le_u32(x + 4);

		for (int j = 0; j < 16; j++) {
			int h0 = (int)(((qh >> j) << 4) & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);

			y[j] = (float)((x[8 + j] & 0x0f) | h0) * d + m;
			y[j + 16] = (float)((x[8 + j] >> 4) | h1) * d + m;
		}
		break;
	}
	case GG_Q8_0:
		for (int j = 0; j < 32; j++)
			y[j] = (float)(int8_t)x[2 + j] * d;
		break;
	}
}

/* the 6-bit scale and min j (0..7) of a Q4_K/Q5_K block's 12 packed bytes */
static void k_scale_min(const uint8_t *q, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/*
 * Q4_K (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes) and
 * Q5_K (176: the same with 32 high-bit bytes before the nibbles): four
 * groups of 64, each two halves of 32 with their own scale and min:
 * y = (d·sc)·q − dmin·mn
 */
static void deq_q45k(const uint8_t *x, int five, float *y)
{
	const float d = nv_f16_to_f32(le_u16(x)), dmin = nv_f16_to_f32(le_u16(x + 2));
	const uint8_t *sc = x + 4, *qh = x + 16, *qs = x + (five ? 48 : 16);

	for (int g = 0; g < 4; g++) {
		for (int h = 0; h < 2; h++) {
			int s, m;
			float dh, mh;

			k_scale_min(sc, 2 * g + h, &s, &m);
			dh = d * (float)s;
			mh = dmin * (float)m;
			for (int l = 0; l < 32; l++) {
				int q = h ? qs[32 * g + l] >> 4 : qs[32 * g + l] & 0x0f;

				if (five && (qh[l] >> (2 * g + h)) & 1)
					q += 16;
				y[64 * g + 32 * h + l] = dh * (float)q - mh;
			}
		}
	}
}

/*
 * Q6_K (210 bytes: 128 low-nibble bytes, 64 high-2-bit bytes, 16 int8
 * scales, f16 d): two halves of 128, each four quarters of 32;
 * y = (d·sc)·(q − 32)
 */
static void deq_q6k(const uint8_t *x, float *y)
{
	const float d = nv_f16_to_f32(le_u16(x + 208));

	for (int n = 0; n < 2; n++) {
		const uint8_t *ql = x + 64 * n, *qh = x + 128 + 32 * n;
		const int8_t *sc = (const int8_t *)(x + 192 + 8 * n);

		for (int k = 0; k < 4; k++) {
			for (int l = 0; l < 32; l++) {
				int lo = k & 1 ? ql[l + 32] : ql[l];
				int q = ((k < 2 ? lo & 0x0f : lo >> 4) | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;

				y[128 * n + 32 * k + l] = d * (float)sc[l / 16 + 2 * k] * (float)q;
			}
		}
	}
}

/* n elements of a tensor's data into y */
static void dequantize(uint32_t type, const uint8_t *x, size_t n, float *y)
{
	const gtype *gt = find_type(type);

	switch (type) {
	case GG_F32:
		for (size_t i = 0; i < n; i++)
			y[i] = le_f32(x + 4 * i);
		return;
	case GG_F16:
		for (size_t i = 0; i < n; i++)
			y[i] = nv_f16_to_f32(le_u16(x + 2 * i));
		return;
	case GG_BF16:
		for (size_t i = 0; i < n; i++)
			y[i] = nv_bf16_to_f32(le_u16(x + 2 * i));
		return;
	}
	for (size_t b = 0; b < n / gt->block; b++) {
		const uint8_t *xb = x + b * gt->bytes;
		float *yb = y + b * gt->block;

		if (type == GG_Q4_K || type == GG_Q5_K)
			deq_q45k(xb, type == GG_Q5_K, yb);
		else if (type == GG_Q6_K)
			deq_q6k(xb, yb);
		else
			deq_block(type, xb, yb);
	}
}

/* ---------------------------------------------------------------- the file */

static int read_tensor_info(cursor *c, gguf *g, gtensor *t)
{
	const uint8_t *s;
	size_t n, elems = 1;
	uint32_t nd;
	uint64_t v;
	const gtype *gt;

	if (rd_str(c, "tensor name", &s, &n) < 0)
		return -1;
	if (n == 0 || n > 256 || !(t->name = dup_str(s, n)))
		return nv_seterr("'%s': tensor name at byte %zu is empty, too long (%zu) or holds NUL",
				 g->path, c->at - n, n), -1;
	if (rd_u32(c, t->name, &nd) < 0)
		return -1;
	if (nd < 1 || nd > 4)
		return nv_seterr("'%s': tensor '%s': n_dims = %u is outside [1, 4]", g->path, t->name,
				 nd), -1;
	t->ndim = nd;
	for (uint32_t d = 0; d < nd; d++) {
		if (rd_u64(c, t->name, &v) < 0)
			return -1;
		if (v == 0 || v > SIZE_MAX || nv_mul(elems, (size_t)v, &elems) < 0)
			return nv_seterr("'%s': tensor '%s': dimension %u = %llu is zero or overflows",
					 g->path, t->name, d, (unsigned long long)v), -1;
		t->ne[d] = (size_t)v;
	}
	if (rd_u32(c, t->name, &t->type) < 0 || rd_u64(c, t->name, &v) < 0)
		return -1;
	if (!(gt = find_type(t->type)))
		return nv_seterr("'%s': tensor '%s': type %s (%u) is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
				 g->path, t->name, type_name(t->type), t->type), -1;
	if (t->ne[0] % gt->block != 0)
		return nv_seterr("'%s': tensor '%s': row of %zu is not a multiple of the %s block %zu",
				 g->path, t->name, t->ne[0], gt->name, gt->block), -1;
	if (nv_mul(elems / gt->block, gt->bytes, &t->nbytes) < 0)
		return -1;
	t->offset = (size_t)v;
	if (v > SIZE_MAX || t->offset % g->align != 0)
		return nv_seterr("'%s': tensor '%s': data offset %llu is not a multiple of the alignment %zu",
				 g->path, t->name, (unsigned long long)v, g->align), -1;
	return 0;
}

static int read_header(cursor *c, gguf *g, uint64_t *nt, uint64_t *nkv)
{
	uint32_t magic, version;

	if (rd_u32(c, "magic", &magic) < 0)
		return -1;
	if (magic != GGUF_MAGIC)
		return nv_seterr("'%s': magic 0x%08x is not GGUF (0x%08x)", g->path, magic, GGUF_MAGIC), -1;
	if (rd_u32(c, "version", &version) < 0)
		return -1;
	if (version < 2 || version > 3)
		return nv_seterr("'%s': version %u is not supported (2 or 3)", g->path, version), -1;
	if (rd_u64(c, "tensor_count", nt) < 0 || rd_u64(c, "metadata_kv_count", nkv) < 0)
		return -1;
	/* a key-value pair takes at least 13 bytes, a tensor info at least 29 */
	if (*nkv > (c->len - c->at) / 13)
		return nv_seterr("'%s': metadata_kv_count %llu is beyond the file (%zu bytes)", g->path,
				 (unsigned long long)*nkv, c->len), -1;
	if (*nt > (c->len - c->at) / 29)
		return nv_seterr("'%s': tensor_count %llu is beyond the file (%zu bytes)", g->path,
				 (unsigned long long)*nt, c->len), -1;
	return 0;
}

static int check_tensor_data(gguf *g)
{
	size_t datalen = g->map.len - g->data;

	for (size_t i = 0; i < g->nt; i++) {
		gtensor *t = &g->t[i];

		if (t->offset > datalen || t->nbytes > datalen - t->offset)
			return nv_seterr("'%s': tensor '%s': data [%zu, +%zu) is beyond the data section (%zu bytes)",
					 g->path, t->name, t->offset, t->nbytes, datalen), -1;
		for (size_t k = 0; k < i; k++)
			if (strcmp(g->t[k].name, t->name) == 0)
				return nv_seterr("'%s': duplicate tensor '%s'", g->path, t->name), -1;
	}
	return 0;
}

static int gguf_open(const char *path, gguf *g)
{
	cursor c = { path, NULL, 0, 0 };
	uint64_t nt, nkv;
	long long al = 32;

	memset(g, 0, sizeof(*g));
	g->own_path = nv_strdup(path);
	g->path = g->own_path ? g->own_path : path;
	if (nv_map_file(path, &g->map) < 0)
		return -1;
	c.b = g->map.data;
	c.len = g->map.len;
	if (read_header(&c, g, &nt, &nkv) < 0)
		return -1;
	if (!(g->kv = nv_calloc(nkv ? nkv : 1, sizeof(gkv))) ||
	    !(g->t = nv_calloc(nt ? nt : 1, sizeof(gtensor))))
		return -1;
	/* a failed entry is counted too, so that gguf_close frees what it holds */
	while (g->nkv < nkv)
		if (read_kv(&c, &g->kv[g->nkv++]) < 0)
			return -1;
	if (kv_int(g, "general.alignment", &al) < 0)
		return -1;
	if (al < 1 || al > 65536 || (al & (al - 1)) != 0)
		return nv_seterr("'%s': general.alignment = %lld is not a power of two up to 65536",
				 path, al), -1;
	g->align = (size_t)al;
	while (g->nt < nt)
		if (read_tensor_info(&c, g, &g->t[g->nt++]) < 0)
			return -1;
	g->data = (c.at + g->align - 1) / g->align * g->align;
	/* no tensors: an empty data section, its padding to the alignment may be left out */
	if (nt == 0 && g->data > g->map.len)
		g->data = g->map.len;
	if (g->data > g->map.len)
		return nv_seterr("'%s': the data section (byte %zu) starts beyond the file", path,
				 g->data), -1;
	return check_tensor_data(g);
}

static void gguf_close(gguf *g)
{
	for (size_t i = 0; i < g->nkv; i++)
		free(g->kv[i].key);
	for (size_t i = 0; i < g->nt; i++)
		free(g->t[i].name);
	free(g->kv);
	free(g->t);
	free(g->own_path);
	nv_map_free(&g->map);
}

/* ---------------------------------------------------------------- arch */

static int kv_string(const gguf *g, const char *key, char *out, size_t len)
{
	const gkv *k = find_kv(g, key);
	size_t n;

	if (!k)
		return 0;
	if (k->type != GT_STRING)
		return nv_seterr("'%s': key '%s' has type %u, want a string", g->path, key, k->type), -1;
	n = (size_t)le_u64(k->val);
	if (n >= len)
		return nv_seterr("'%s': key '%s' is %zu bytes long (at most %zu)", g->path, key, n,
				 len - 1), -1;
	memcpy(out, k->val + 8, n);
	out[n] = '\0';
	return 1;
}

/* an integer key in [lo, hi]: required, or def when absent */
static int arch_int(const gguf *g, const char *key, int required, long long def, long long lo,
		    long long hi, int *out)
{
	long long v = def;
	int r = kv_int(g, key, &v);

	if (r < 0)
		return -1;
	if (r == 0 && required)
		return nv_seterr("'%s': missing key '%s'", g->path, key), -1;
	if (v < lo || v > hi)
		return nv_seterr("'%s': key '%s' = %lld is outside [%lld, %lld]", g->path, key, v, lo,
				 hi), -1;
	*out = (int)v;
	return 0;
}

/* RoPE scaling in GGUF keys: refused, never ignored (a Hugging Face import reads it) */
static int gguf_rope_scaling(const gguf *g)
{
	char type[32];
	double v;
	int r;

	if ((r = kv_string(g, "llama.rope.scaling.type", type, sizeof type)) < 0)
		return -1;
	if (r && strcmp(type, "none"))
		return nv_seterr("'%s': key 'llama.rope.scaling.type' = '%s': RoPE scaling is read "
				 "from a Hugging Face config.json, not from GGUF", g->path, type), -1;
	if ((r = kv_float(g, "llama.rope.scale_linear", &v)) < 0)
		return -1;
	if (r && v != 1.0)
		return nv_seterr("'%s': key 'llama.rope.scale_linear' = %g: RoPE scaling is read "
				 "from a Hugging Face config.json, not from GGUF", g->path, v), -1;
	return 0;
}

static int gguf_arch(const gguf *g, cmf_arch *a)
{
	const long long big = 1LL << 30;
	int rope_dim, key_len;
	char arch[32];
	double v;
	int r;

	cmf_arch_init(a);
	if ((r = kv_string(g, "general.architecture", arch, sizeof(arch))) <= 0)
		return r < 0 ? -1 : (nv_seterr("'%s': missing key 'general.architecture'", g->path), -1);
	if (strcmp(arch, "llama") != 0)
		return nv_seterr("'%s': general.architecture = '%s' is not supported (llama)", g->path,
				 arch), -1;
	strcpy(a->arch, "llama");
	if (arch_int(g, "llama.embedding_length", 1, 0, 1, big, &a->hidden) < 0 ||
	    arch_int(g, "llama.feed_forward_length", 1, 0, 1, big, &a->intermediate) < 0 ||
	    arch_int(g, "llama.block_count", 1, 0, 1, 65536, &a->layers) < 0 ||
	    arch_int(g, "llama.attention.head_count", 1, 0, 1, 65536, &a->heads) < 0 ||
	    arch_int(g, "llama.attention.head_count_kv", 0, a->heads, 1, a->heads, &a->kv_heads) < 0 ||
	    arch_int(g, "llama.context_length", 0, 0, 0, big, &a->max_pos) < 0)
		return -1;
	if (a->heads % a->kv_heads != 0 || a->hidden % a->heads != 0)
		return nv_seterr("'%s': head_count %d, head_count_kv %d and embedding_length %d do not divide",
				 g->path, a->heads, a->kv_heads, a->hidden), -1;
	a->head_dim = a->hidden / a->heads;
	if (arch_int(g, "llama.attention.key_length", 0, a->head_dim, a->head_dim, a->head_dim,
		     &key_len) < 0 ||
	    arch_int(g, "llama.rope.dimension_count", 0, a->head_dim, a->head_dim, a->head_dim,
		     &rope_dim) < 0)
		return nv_preerr("partial rotary or a head size other than embedding/heads"), -1;
	a->rms_eps = 1e-5;
	a->rope_theta = 10000.0;
	if ((r = kv_float(g, "llama.attention.layer_norm_rms_epsilon", &v)) < 0)
		return -1;
	if (r && !(v > 0 && v < 1))
		return nv_seterr("'%s': layer_norm_rms_epsilon = %g is outside (0, 1)", g->path, v), -1;
	if (r)
		a->rms_eps = v;
	if ((r = kv_float(g, "llama.rope.freq_base", &v)) < 0)
		return -1;
	if (r && !(v > 0 && v < 1e12))
		return nv_seterr("'%s': rope.freq_base = %g is outside (0, 1e12)", g->path, v), -1;
	if (r)
		a->rope_theta = v;
	return gguf_rope_scaling(g);
}

/* ---------------------------------------------------------------- tokenizer */

/* the strings of an array key, fresh; *n their count */
static int kv_strings(const gguf *g, const char *key, char ***out, size_t *n)
{
	const gkv *k = find_kv(g, key);
	const uint8_t *p;

	if (!k || k->type != GT_ARRAY || k->atype != GT_STRING)
		return nv_seterr("'%s': key '%s' is missing or not an array of strings", g->path,
				 key), -1;
	if (!(*out = nv_calloc(k->count ? k->count : 1, sizeof(char *))))
		return -1;
	*n = k->count;
	p = k->val; /* lengths were checked against the file when the key was read */
	for (size_t i = 0; i < k->count; i++) {
		size_t len = (size_t)le_u64(p);

		if (!((*out)[i] = dup_str(p + 8, len)))
			return nv_preerr("'%s': %s[%zu]", g->path, key, i), -1;
		p += 8 + len;
	}
	return 0;
}

static int kv_numbers(const gguf *g, const char *key, size_t n, float *f, int32_t *i32)
{
	const gkv *k = find_kv(g, key);
	uint32_t want = f ? GT_F32 : GT_I32;

	if (!k || k->type != GT_ARRAY || (k->atype != want && !(i32 && k->atype == GT_U32)))
		return nv_seterr("'%s': key '%s' is missing or not an array of %s", g->path, key,
				 f ? "f32" : "i32"), -1;
	if (k->count != n)
		return nv_seterr("'%s': key '%s' has %zu entries, the vocabulary %zu", g->path, key,
				 k->count, n), -1;
	for (size_t i = 0; i < n; i++) {
		if (f) {
			f[i] = le_f32(k->val + 4 * i);
			if (!(f[i] == f[i]) || f[i] - f[i] != 0)
				return nv_seterr("'%s': %s[%zu] is not finite", g->path, key, i), -1;
		} else {
			i32[i] = (int32_t)le_u32(k->val + 4 * i);
			if (i32[i] < 0 || i32[i] > 6)
				return nv_seterr("'%s': %s[%zu] = %d is outside [0, 6]", g->path, key, i,
						 i32[i]), -1;
		}
	}
	return 0;
}

/* a token id key: absent or 0xffffffff → -1; else below n */
static int token_id(const gguf *g, const char *key, size_t n, int *out)
{
	long long v = -1;
	int r = kv_int(g, key, &v);

	if (r < 0)
		return -1;
	if (r == 0 || v == 0xffffffffLL || v == -1) {
		*out = -1;
		return 0;
	}
	if (v < 0 || (size_t)v >= n)
		return nv_seterr("'%s': key '%s' = %lld is not a token id below %zu", g->path, key, v,
				 n), -1;
	*out = (int)v;
	return 0;
}

static int token_flag(const gguf *g, const char *key, int def, int *out)
{
	long long v = def;

	if (kv_int(g, key, &v) < 0)
		return -1;
	*out = v != 0;
	return 0;
}

static int vocab_fill(const gguf *g, nv_vocab *v)
{
	int llama = v->model == NV_VOCAB_LLAMA;

	if (kv_strings(g, "tokenizer.ggml.tokens", &v->tokens, &v->n) < 0)
		return -1;
	if (v->n == 0)
		return nv_seterr("'%s': tokenizer.ggml.tokens is empty", g->path), -1;
	if (!(v->types = nv_malloc(v->n, sizeof(int32_t))) ||
	    (llama && !(v->scores = nv_malloc(v->n, sizeof(float)))))
		return -1;
	if (find_kv(g, "tokenizer.ggml.token_type")) {
		if (kv_numbers(g, "tokenizer.ggml.token_type", v->n, NULL, v->types) < 0)
			return -1;
	} else {
		for (size_t i = 0; i < v->n; i++)
			v->types[i] = NV_TOK_NORMAL;
	}
	if (llama && kv_numbers(g, "tokenizer.ggml.scores", v->n, v->scores, NULL) < 0)
		return -1;
	if (!llama && kv_strings(g, "tokenizer.ggml.merges", &v->merges, &v->nmerges) < 0)
		return -1;
	if (kv_string(g, "tokenizer.ggml.pre", v->pre, sizeof(v->pre)) < 0)
		return -1;
	/*
	 * The file says neither ignore_merges nor, often, add_bos_token for
	 * Llama 3's pre-tokenizer: llama.cpp implies both from its name, as
	 * Llama 3's tokenizer.json has them (a chunk that is a piece is that
	 * piece; <|begin_of_text|> first).  Its names for it are one here.
	 */
	if (!strcmp(v->pre, "llama3") || !strcmp(v->pre, "llama-v3"))
		strcpy(v->pre, "llama-bpe");
	v->ignore_merges = !llama && !strcmp(v->pre, "llama-bpe");
	/* Qwen2's tokenizer.json normalizes to NFC first; the file cannot say so */
	v->nfc = !llama && !strcmp(v->pre, "qwen2");
	if (token_id(g, "tokenizer.ggml.bos_token_id", v->n, &v->bos) < 0 ||
	    token_id(g, "tokenizer.ggml.eos_token_id", v->n, &v->eos) < 0 ||
	    token_id(g, "tokenizer.ggml.unknown_token_id", v->n, &v->unk) < 0 ||
	    token_id(g, "tokenizer.ggml.padding_token_id", v->n, &v->pad) < 0 ||
	    token_flag(g, "tokenizer.ggml.add_bos_token", llama || v->ignore_merges, &v->add_bos) < 0 ||
	    token_flag(g, "tokenizer.ggml.add_eos_token", 0, &v->add_eos) < 0 ||
	    token_flag(g, "tokenizer.ggml.add_space_prefix", llama, &v->add_space_prefix) < 0)
		return -1;
	return 0;
}

/* v from tokenizer.ggml.*: 1, or 0 (v untouched) when the file has no tokenizer.ggml.model */
static int gguf_vocab_read(const gguf *g, nv_vocab *v)
{
	char model[32];
	int r = kv_string(g, "tokenizer.ggml.model", model, sizeof(model));

	if (r <= 0)
		return r;
	if (strcmp(model, "llama") != 0 && strcmp(model, "gpt2") != 0)
		return nv_seterr("'%s': tokenizer.ggml.model = '%s' is not supported (llama, gpt2)",
				 g->path, model), -1;
	nv_vocab_init(v, strcmp(model, "gpt2") == 0 ? NV_VOCAB_GPT2 : NV_VOCAB_LLAMA);
	if (vocab_fill(g, v) < 0) {
		nv_vocab_free(v);
		return nv_preerr("'%s': tokenizer", g->path), -1;
	}
	return 1;
}

/* cmf.tokenizer from tokenizer.ggml.*; none when the file has no tokenizer.ggml.model */
static int gguf_vocab(const gguf *g, imp_model *m)
{
	nv_vocab v;
	int r = gguf_vocab_read(g, &v);

	if (r <= 0)
		return r;
	m->tokenizer = nv_vocab_to_json(&v);
	m->arch.bos = v.bos;
	m->arch.eos = v.eos;
	nv_vocab_free(&v);
	return m->tokenizer ? 0 : -1;
}

int nv_gguf_vocab(const char *path, nv_vocab *v)
{
	gguf g;
	int r = gguf_open(path, &g) < 0 ? -1 : gguf_vocab_read(&g, v);

	gguf_close(&g);
	if (r == 0)
		nv_seterr("'%s' has no tokenizer (no tokenizer.ggml.model)", path);
	return r > 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- tensors */

static const struct {
	const char *gguf, *hf;
} layer_names[] = {
	{ "attn_norm.weight", "input_layernorm.weight" },
	{ "attn_q.weight", "self_attn.q_proj.weight" },
	{ "attn_k.weight", "self_attn.k_proj.weight" },
	{ "attn_v.weight", "self_attn.v_proj.weight" },
	{ "attn_output.weight", "self_attn.o_proj.weight" },
	{ "ffn_norm.weight", "post_attention_layernorm.weight" },
	{ "ffn_gate.weight", "mlp.gate_proj.weight" },
	{ "ffn_up.weight", "mlp.up_proj.weight" },
	{ "ffn_down.weight", "mlp.down_proj.weight" },
};

/* the Hugging Face name of a GGUF tensor; -1 when it has none */
static int hf_name(const char *g, int layers, char *out, size_t len)
{
	unsigned l;
	int pos = 0;

	if (strcmp(g, "token_embd.weight") == 0)
		return snprintf(out, len, "model.embed_tokens.weight"), 0;
	if (strcmp(g, "output_norm.weight") == 0)
		return snprintf(out, len, "model.norm.weight"), 0;
	if (strcmp(g, "output.weight") == 0)
		return snprintf(out, len, "lm_head.weight"), 0;
	if (sscanf(g, "blk.%u.%n", &l, &pos) != 1 || pos == 0 || g[4] < '0' || g[4] > '9' ||
	    l >= (unsigned)layers)
		return -1;
	for (size_t i = 0; i < sizeof(layer_names) / sizeof(layer_names[0]); i++)
		if (strcmp(g + pos, layer_names[i].gguf) == 0)
			return snprintf(out, len, "model.layers.%u.%s", l, layer_names[i].hf), 0;
	return -1;
}

static const gtensor *find_tensor(const gguf *g, const char *name)
{
	for (size_t i = 0; i < g->nt; i++)
		if (strcmp(g->t[i].name, name) == 0)
			return &g->t[i];
	return NULL;
}

/* an output head stored as a byte-identical copy of the embeddings is the tied head */
static int head_is_embedding_copy(const gguf *g, const gtensor *t)
{
	const gtensor *e = find_tensor(g, "token_embd.weight");

	return e && e->type == t->type && e->ndim == t->ndim && e->ne[0] == t->ne[0] &&
	       e->ne[1] == t->ne[1] && e->nbytes == t->nbytes &&
	       memcmp(g->map.data + g->data + e->offset, g->map.data + g->data + t->offset,
		      t->nbytes) == 0;
}

/* a lazy tensor of the GGUF: dequantized and its rows un-permuted when written */
typedef struct {
	const gguf *g;
	const gtensor *t;
	size_t rope_heads;
} gguf_lazy;

static int gguf_f32(const void *p, float *w)
{
	const gguf_lazy *z = p;
	const gtensor *t = z->t;
	size_t n = t->ndim == 1 ? t->ne[0] : t->ne[0] * t->ne[1];

	dequantize(t->type, z->g->map.data + z->g->data + t->offset, n, w);
	if (z->rope_heads &&
	    nv_unpermute_rope(w, t->ne[1], t->ne[0] * sizeof(float), z->rope_heads) < 0)
		return nv_preerr("'%s': tensor '%s'", z->g->path, t->name), -1;
	return 0;
}

static int import_tensor(const gguf *g, const gtensor *t, const char *name, size_t rope_heads,
			 int dtype, imp_model *m)
{
	size_t shape[2];
	gguf_lazy *z;

	if (t->ndim > 2)
		return nv_seterr("'%s': tensor '%s' has %zu dimensions (at most 2)", g->path, t->name,
				 t->ndim), -1;
	if (rope_heads && (t->ndim != 2 || t->ne[1] % rope_heads || (t->ne[1] / rope_heads) % 2))
		return nv_seterr("'%s': tensor '%s': %zu rows do not split into %zu heads of even size",
				 g->path, t->name, t->ndim == 2 ? t->ne[1] : (size_t)1, rope_heads), -1;
	if (!(z = nv_malloc(1, sizeof(*z))))
		return -1;
	*z = (gguf_lazy){ g, t, rope_heads };
	if (dtype < 0)
		dtype = t->type == GG_F16 ? CMF_F16 : t->type == GG_BF16 ? CMF_BF16 : CMF_F32;
	shape[0] = t->ndim == 1 ? t->ne[0] : t->ne[1];
	shape[1] = t->ne[0];
	return imp_model_add_lazy(m, name, (cmf_dtype)dtype, t->ndim, shape, gguf_f32, z);
}

static int gguf_tensors(const gguf *g, int dtype, imp_model *m)
{
	char name[128];

	m->arch.tied = 1;
	for (size_t i = 0; i < g->nt; i++) {
		const gtensor *t = &g->t[i];
		size_t rope = 0;

		if (hf_name(t->name, m->arch.layers, name, sizeof(name)) < 0)
			return nv_seterr("'%s': tensor '%s' has no Hugging Face llama name", g->path,
					 t->name), -1;
		if (strcmp(name, "lm_head.weight") == 0) {
			if (head_is_embedding_copy(g, t))
				continue;
			m->arch.tied = 0;
		}
		if (strstr(name, "q_proj.weight"))
			rope = (size_t)m->arch.heads;
		else if (strstr(name, "k_proj.weight"))
			rope = (size_t)m->arch.kv_heads;
		if (import_tensor(g, t, name, rope, dtype, m) < 0)
			return -1;
	}
	return 0;
}

static void gguf_free(void *p)
{
	if (p)
		gguf_close(p);
	free(p);
}

int nv_import_gguf(const char *path, int dtype, imp_model *m)
{
	const gtensor *e;
	gguf *g = nv_calloc(1, sizeof(*g));

	if (!g)
		return -1;
	/* the tensors read the mapping when the model is written: the model keeps it */
	m->keep = g;
	m->keep_free = gguf_free;
	if (gguf_open(path, g) < 0 || gguf_arch(g, &m->arch) < 0)
		return -1;
	if (!(e = find_tensor(g, "token_embd.weight")) || e->ndim != 2)
		return nv_seterr("'%s': no 2-d tensor 'token_embd.weight'", path), -1;
	m->arch.vocab = (int)e->ne[1];
	if (arch_int(g, "llama.vocab_size", 0, m->arch.vocab, 1, 1 << 30, &m->arch.vocab) < 0 ||
	    gguf_vocab(g, m) < 0 || gguf_tensors(g, dtype, m) < 0)
		return -1;
	return 0;
}
