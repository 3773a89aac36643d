/* test-gguf.c - the GGUF importer on synthetic files: every block type (K-quants too), names, RoPE rows, tokenizer, bad input */
#include "cmf.h"
#include "err.h"
#include "f16.h"
#include "import.h"
#include "le.h"
#include "tap.h"
#include "vocab.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- a GGUF builder */

typedef struct {
	uint8_t *b;
	size_t n, cap;
} buf;

static void put(buf *x, const void *p, size_t n)
{
	if (x->n + n > x->cap) {
		x->cap = 2 * (x->n + n) + 1024;
		x->b = realloc(x->b, x->cap);
	}
	memcpy(x->b + x->n, p, n);
	x->n += n;
}

static void u32(buf *x, uint32_t v)
{
	uint8_t t[4];

	put_u32(t, v);
	put(x, t, 4);
}

static void u64(buf *x, uint64_t v)
{
	uint8_t t[8];

	put_u64(t, v);
	put(x, t, 8);
}

static void str(buf *x, const char *s)
{
	u64(x, strlen(s));
	put(x, s, strlen(s));
}

static void kv_u32(buf *x, const char *k, uint32_t v)
{
	str(x, k);
	u32(x, 4);
	u32(x, v);
}

static void kv_f32(buf *x, const char *k, float v)
{
	uint8_t t[4];

	str(x, k);
	u32(x, 6);
	put_f32(t, v);
	put(x, t, 4);
}

static void kv_str(buf *x, const char *k, const char *v)
{
	str(x, k);
	u32(x, 8);
	str(x, v);
}

/* ggml type ids and block geometry, from the GGUF specification */
enum {
	T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8,
	T_Q2_K = 10, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_BF16 = 30
};

static int is_k(uint32_t t)
{
	return t == T_Q4_K || t == T_Q5_K || t == T_Q6_K;
}

typedef struct {
	const char *name;
	uint32_t type;
	size_t rows, cols;
	uint8_t *data;
	size_t nbytes;
	float *want; /* the value of every element by the block definitions */
} spec;

static size_t block_bytes(uint32_t t)
{
	switch (t) {
	case T_Q4_0: return 18;
	case T_Q4_1: return 20;
	case T_Q5_0: return 22;
	case T_Q5_1: return 24;
	case T_Q8_0: return 34;
	case T_Q4_K: return 144;
	case T_Q5_K: return 176;
	case T_Q6_K: return 210;
	case T_F32: return 4 * 32;
	default: return 2 * 32;
	}
}

/*
 * random blocks and the value of each element e (0..31) of a block:
 *   Q4_0  (q − 8)·d            q = e<16 ? lo nibble of qs[e] : hi nibble of qs[e−16]
 *   Q4_1  q·d + m
 *   Q5_0  (q + 16·bit_e(qh) − 16)·d
 *   Q5_1  (q + 16·bit_e(qh))·d + m
 *   Q8_0  qs[e]·d
 */
static void fill_block(uint32_t t, tap_rng *r, uint8_t *x, float *y)
{
	float d = (float)(0.01 + 0.05 * rng_unif(r)), m = (float)(-0.3 * rng_unif(r));
	size_t qs = t == T_Q4_1 ? 4 : t == T_Q5_0 ? 6 : t == T_Q5_1 ? 8 : 2;
	uint32_t qh = (uint32_t)rng_u64(r);

	for (size_t i = 0; i < block_bytes(t); i++)
		x[i] = (uint8_t)rng_u64(r);
	put_u16(x, nv_f32_to_f16(d));
	d = nv_f16_to_f32(nv_f32_to_f16(d));
	if (t == T_Q4_1 || t == T_Q5_1) {
		put_u16(x + 2, nv_f32_to_f16(m));
		m = nv_f16_to_f32(nv_f32_to_f16(m));
	}
	if (t == T_Q5_0)
		put_u32(x + 2, qh);
	if (t == T_Q5_1)
		put_u32(x + 4, qh);
	for (int e = 0; e < 32; e++) {
		int q = e < 16 ? x[qs + e] & 15 : x[qs + e - 16] >> 4, hb = (int)((qh >> e) & 1);

		switch (t) {
		case T_Q4_0: y[e] = (float)(q - 8) * d; break;
		case T_Q4_1: y[e] = (float)q * d + m; break;
		case T_Q5_0: y[e] = (float)(q + 16 * hb - 16) * d; break;
		case T_Q5_1: y[e] = (float)(q + 16 * hb) * d + m; break;
		case T_Q8_0: y[e] = (float)(int8_t)x[2 + e] * d; break;
		}
	}
}

/* the 6-bit scale (mins = 0) or min (mins = 1) j of the 12 packed bytes, per the GGUF K-quant layout */
static int k6(const uint8_t *s, int j, int mins)
{
	if (j < 4)
		return s[j + 4 * mins] & 63;
	return mins ? (s[j + 4] >> 4) | ((s[j] >> 6) << 4) : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
}

/*
 * random K-quant super-blocks of 256 and the value of each element e:
 *   Q4_K/Q5_K  group g = e/64, half h = e%64/32, l = e%32, j = 2g+h:
 *              q = nibble h of qs[32g+l] (+16 if bit j of qh[l], Q5_K);
 *              (d·sc_j)·q − dmin·mn_j
 *   Q6_K       half n = e/128, quarter k = e%128/32, l = e%32:
 *              q = nibble (k/2) of ql[64n+l+32(k%2)] | bits 2k..2k+1 of qh[32n+l] << 4, − 32;
 *              (d·sc[8n+l/16+2k])·q
 */
static void fill_kblock(uint32_t t, tap_rng *r, uint8_t *x, float *y)
{
	float d = (float)(0.001 + 0.01 * rng_unif(r)), dm = (float)(0.001 + 0.01 * rng_unif(r));

	for (size_t i = 0; i < block_bytes(t); i++)
		x[i] = (uint8_t)rng_u64(r);
	d = nv_f16_to_f32(nv_f32_to_f16(d));
	dm = nv_f16_to_f32(nv_f32_to_f16(dm));
	if (t == T_Q6_K) {
		put_u16(x + 208, nv_f32_to_f16(d));
		for (int e = 0; e < 256; e++) {
			int n = e / 128, k = e % 128 / 32, l = e % 32;
			int lo = x[64 * n + l + 32 * (k % 2)], hb = (x[128 + 32 * n + l] >> (2 * k)) & 3;
			int q = ((k / 2 ? lo >> 4 : lo & 15) | hb << 4) - 32;

			y[e] = d * (float)(int8_t)x[192 + 8 * n + l / 16 + 2 * k] * (float)q;
		}
		return;
	}
	put_u16(x, nv_f32_to_f16(d));
	put_u16(x + 2, nv_f32_to_f16(dm));
	for (int e = 0; e < 256; e++) {
		int g = e / 64, h = e % 64 / 32, l = e % 32, j = 2 * g + h;
		const uint8_t *qs = x + (t == T_Q5_K ? 48 : 16);
		int q = h ? qs[32 * g + l] >> 4 : qs[32 * g + l] & 15;

		if (t == T_Q5_K)
			q += 16 * ((x[16 + l] >> j) & 1);
		y[e] = d * (float)k6(x + 4, j, 0) * (float)q - dm * (float)k6(x + 4, j, 1);
	}
}

static void fill(spec *s, tap_rng *r)
{
	size_t n = s->rows * s->cols, bl = is_k(s->type) ? 256 : 32, nb = n / bl;

	s->want = malloc(n * sizeof(float));
	s->nbytes = nb * block_bytes(s->type);
	s->data = malloc(s->nbytes);
	for (size_t b = 0; b < nb; b++) {
		uint8_t *x = s->data + b * block_bytes(s->type);
		float *y = s->want + bl * b;

		if (is_k(s->type))
			fill_kblock(s->type, r, x, y);
		else if (s->type == T_F32 || s->type == T_F16 || s->type == T_BF16) {
			for (int e = 0; e < 32; e++) {
				float v = (float)rng_normal(r);

				if (s->type == T_F32)
					put_f32(x + 4 * e, y[e] = v);
				else if (s->type == T_F16)
					put_u16(x + 2 * e, nv_f32_to_f16(v)), y[e] = nv_f16_to_f32(nv_f32_to_f16(v));
				else
					put_u16(x + 2 * e, nv_f32_to_bf16(v)), y[e] = nv_bf16_to_f32(nv_f32_to_bf16(v));
			}
		} else {
			fill_block(s->type, r, x, y);
		}
	}
}

/* rows of 256 so that the K-quant super-blocks fit */
enum { HID = 256, FFN = 512, VOC = 4, HEADS = 4, KVH = 2 };

static spec specs[] = {
	{ "token_embd.weight", T_Q8_0, VOC, HID, 0, 0, 0 },
	{ "blk.0.attn_norm.weight", T_F32, 1, HID, 0, 0, 0 },
	{ "blk.0.attn_q.weight", T_Q4_0, HID, HID, 0, 0, 0 },
	{ "blk.0.attn_k.weight", T_Q4_1, HID / HEADS * KVH, HID, 0, 0, 0 },
	{ "blk.0.attn_v.weight", T_Q5_0, HID / HEADS * KVH, HID, 0, 0, 0 },
	{ "blk.0.attn_output.weight", T_Q5_1, HID, HID, 0, 0, 0 },
	{ "blk.0.ffn_norm.weight", T_F32, 1, HID, 0, 0, 0 },
	{ "blk.0.ffn_gate.weight", T_F16, FFN, HID, 0, 0, 0 },
	{ "blk.0.ffn_up.weight", T_BF16, FFN, HID, 0, 0, 0 },
	{ "blk.0.ffn_down.weight", T_F32, HID, FFN, 0, 0, 0 },
	{ "blk.1.attn_norm.weight", T_F32, 1, HID, 0, 0, 0 },
	{ "blk.1.attn_q.weight", T_Q6_K, HID, HID, 0, 0, 0 },
	{ "blk.1.attn_k.weight", T_Q4_K, HID / HEADS * KVH, HID, 0, 0, 0 },
	{ "blk.1.attn_v.weight", T_Q5_K, HID / HEADS * KVH, HID, 0, 0, 0 },
	{ "blk.1.attn_output.weight", T_Q8_0, HID, HID, 0, 0, 0 },
	{ "blk.1.ffn_norm.weight", T_F32, 1, HID, 0, 0, 0 },
	{ "blk.1.ffn_gate.weight", T_Q4_K, FFN, HID, 0, 0, 0 },
	{ "blk.1.ffn_up.weight", T_Q5_K, FFN, HID, 0, 0, 0 },
	{ "blk.1.ffn_down.weight", T_Q6_K, HID, FFN, 0, 0, 0 },
	{ "output_norm.weight", T_F32, 1, HID, 0, 0, 0 },
};
#define NSPEC (sizeof(specs) / sizeof(specs[0]))

static const char *hf[NSPEC] = {
	"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
	"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
	"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
	"model.layers.0.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
	"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
	"model.layers.1.input_layernorm.weight",
	"model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
	"model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
	"model.layers.1.post_attention_layernorm.weight", "model.layers.1.mlp.gate_proj.weight",
	"model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight",
	"model.norm.weight",
};

/* knobs to break the file */
typedef struct {
	uint32_t magic, version, q_type;
	uint64_t tensor_count_add;
	size_t q_offset_add;
	const char *arch;
	int drop_heads;
	size_t cut; /* bytes removed from the end */
	const char *rope_scaling; /* llama.rope.scaling.type, or NULL for none */
} knobs;

static void kv_tokenizer(buf *x)
{
	static const char *const toks[VOC] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81hi" };

	kv_str(x, "tokenizer.ggml.model", "llama");
	str(x, "tokenizer.ggml.tokens");
	u32(x, 9), u32(x, 8), u64(x, VOC);
	for (int i = 0; i < VOC; i++)
		str(x, toks[i]);
	str(x, "tokenizer.ggml.scores");
	u32(x, 9), u32(x, 6), u64(x, VOC);
	for (int i = 0; i < VOC; i++) {
		uint8_t t[4];

		put_f32(t, (float)-i);
		put(x, t, 4);
	}
	str(x, "tokenizer.ggml.token_type");
	u32(x, 9), u32(x, 5), u64(x, VOC);
	u32(x, 2), u32(x, 3), u32(x, 3), u32(x, 1);
	kv_u32(x, "tokenizer.ggml.bos_token_id", 1);
	kv_u32(x, "tokenizer.ggml.eos_token_id", 2);
}

static const char *write_gguf(const char *path, const knobs *k)
{
	buf x = { 0 };
	size_t off = 0, nkv = 13 - (size_t)k->drop_heads + (k->rope_scaling != NULL);
	FILE *f;

	u32(&x, k->magic), u32(&x, k->version);
	u64(&x, NSPEC + k->tensor_count_add), u64(&x, nkv);
	kv_str(&x, "general.architecture", k->arch);
	kv_u32(&x, "llama.embedding_length", HID);
	kv_u32(&x, "llama.feed_forward_length", FFN);
	kv_u32(&x, "llama.block_count", 2);
	if (!k->drop_heads)
		kv_u32(&x, "llama.attention.head_count", HEADS);
	kv_u32(&x, "llama.attention.head_count_kv", KVH);
	kv_f32(&x, "llama.rope.freq_base", 500000.0f);
	if (k->rope_scaling)
		kv_str(&x, "llama.rope.scaling.type", k->rope_scaling);
	kv_tokenizer(&x); /* 6 keys */
	for (size_t i = 0; i < NSPEC; i++) {
		spec *s = &specs[i];
		int one = s->rows == 1;

		str(&x, s->name);
		u32(&x, one ? 1 : 2);
		u64(&x, s->cols);
		if (!one)
			u64(&x, s->rows);
		u32(&x, i == 2 ? k->q_type : s->type);
		u64(&x, off + (i == 2 ? k->q_offset_add : 0));
		off += (s->nbytes + 31) / 32 * 32;
	}
	while (x.n % 32)
		put(&x, "", 1);
	for (size_t i = 0; i < NSPEC; i++) {
		static const uint8_t zero[32];

		put(&x, specs[i].data, specs[i].nbytes);
		put(&x, zero, (32 - specs[i].nbytes % 32) % 32);
	}
	f = fopen(path, "wb");
	fwrite(x.b, 1, x.n - k->cut, f);
	fclose(f);
	free(x.b);
	return path;
}

/* ---------------------------------------------------------------- checks */

/* the expected value of rotate-half row r: interleaved row 2i + j of the same head */
static float want_at(const spec *s, size_t heads, size_t r, size_t c)
{
	size_t d = s->rows / heads, h = r / d, j = (r % d) / (d / 2), i = (r % d) % (d / 2);

	return s->want[(h * d + 2 * i + j) * s->cols + c];
}

static void check_tensor(const cmf_file *f, size_t i)
{
	const spec *s = &specs[i];
	const cmf_tensor *t = cmf_find(f, hf[i]);
	size_t heads = i == 2 || i == 11 ? HEADS : i == 3 || i == 12 ? KVH : 0, bad = 0;
	float *w;

	if (!t || t->rows != s->rows || t->cols != s->cols || !(w = cmf_tensor_f32_alloc(t))) {
		ok(0, "%s present with shape %zu×%zu", hf[i], s->rows, s->cols);
		return;
	}
	for (size_t r = 0; r < s->rows; r++)
		for (size_t c = 0; c < s->cols; c++)
			bad += w[r * s->cols + c] !=
			       (heads ? want_at(s, heads, r, c) : s->want[r * s->cols + c]);
	ok(bad == 0, "%s from %s: every element exact%s", hf[i], s->name,
	   heads ? ", rows rotate-half" : "");
	free(w);
}

static char dir[256];

static const char *tmp(const char *name)
{
	static char p[2][512];
	static int k;

	k ^= 1;
	snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
	return p[k];
}

static void good_file(const knobs *base)
{
	char *src = strdup(write_gguf(tmp("m.gguf"), base)), *srcs[1] = { src };
	nv_import_opts o = { NV_FROM_AUTO, -1, NULL };
	imp_model m;
	cmf_file f;
	nv_vocab v;

	if (nv_import(1, srcs, &o, &m) < 0 || imp_model_write(&m, tmp("m.cmf")) < 0) {
		ok(0, "import the synthetic GGUF: %s", nv_err());
		free(src);
		return;
	}
	imp_model_free(&m);
	if (cmf_open(tmp("m.cmf"), &f) < 0) {
		ok(0, "open the import: %s", nv_err());
		free(src);
		return;
	}
	is_int((long long)f.ntensors, NSPEC, "every tensor imported, no head (tied)");
	for (size_t i = 0; i < NSPEC; i++)
		check_tensor(&f, i);
	ok(f.arch.tied && f.arch.hidden == HID && f.arch.heads == HEADS && f.arch.kv_heads == KVH &&
	   f.arch.head_dim == HID / HEADS && f.arch.rope_theta == 500000.0 && f.arch.rms_eps == 1e-5 &&
	   f.arch.vocab == VOC && f.arch.bos == 1 && f.arch.eos == 2, "arch from the metadata");
	ok(cmf_find(&f, "model.layers.0.mlp.gate_proj.weight")->dtype == CMF_F16 &&
	   cmf_find(&f, "model.layers.0.mlp.up_proj.weight")->dtype == CMF_BF16 &&
	   cmf_find(&f, "model.embed_tokens.weight")->dtype == CMF_F32,
	   "F16/BF16 sources keep their dtype, quantized ones become F32");
	ok(nv_vocab_from_json(cmf_meta(&f, "cmf.tokenizer"), &v) == 0 && v.n == VOC &&
	   !strcmp(v.tokens[3], "\xe2\x96\x81hi") && v.scores[3] == -3.0f && v.types[0] == 2 &&
	   v.bos == 1 && v.add_bos && v.add_space_prefix && v.model == NV_VOCAB_LLAMA,
	   "tokenizer from tokenizer.ggml.*");
	nv_vocab_free(&v);
	cmf_close(&f);
	free(src);
}

static void bad_file(const char *title, const knobs *k, const char *word)
{
	char *src = strdup(write_gguf(tmp("bad.gguf"), k)), *srcs[1] = { src };
	nv_import_opts o = { NV_FROM_GGUF, -1, NULL };
	imp_model m;
	int rc = nv_import(1, srcs, &o, &m);

	ok(rc < 0 && strstr(nv_err(), word), "%s is refused naming '%s'", title, word);
	if (rc == 0)
		imp_model_free(&m);
	else if (!strstr(nv_err(), word))
		diag("message: %s", nv_err());
	free(src);
}

int main(void)
{
	tap_rng r = { 42 };
	knobs k = { 0x46554747u, 3, T_Q4_0, 0, 0, "llama", 0, 0, NULL }, b;

	snprintf(dir, sizeof(dir), "%s/test-gguf.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < NSPEC; i++)
		fill(&specs[i], &r);
	good_file(&k);
	b = k, b.magic = 0x46554748u;
	bad_file("a bad magic", &b, "magic");
	b = k, b.version = 4;
	bad_file("version 4", &b, "version 4");
	b = k, b.tensor_count_add = 1ull << 40;
	bad_file("a tensor count beyond the file", &b, "tensor_count");
	b = k, b.q_offset_add = 1;
	bad_file("a misaligned data offset", &b, "alignment");
	b = k, b.q_type = T_Q2_K;
	bad_file("an unsupported type", &b, "Q2_K");
	b = k, b.cut = 64;
	bad_file("data beyond the end", &b, "beyond the data section");
	b = k, b.arch = "mamba";
	bad_file("another architecture", &b, "mamba");
	b = k, b.drop_heads = 1;
	bad_file("a missing head count", &b, "llama.attention.head_count");
	b = k, b.rope_scaling = "none";
	good_file(&b);
	b = k, b.rope_scaling = "yarn";
	bad_file("RoPE scaling (read from config.json only)", &b, "llama.rope.scaling.type");
	for (size_t i = 0; i < NSPEC; i++) {
		free(specs[i].data);
		free(specs[i].want);
	}
	unlink(tmp("m.gguf"));
	unlink(tmp("m.cmf"));
	unlink(tmp("bad.gguf"));
	rmdir(dir);
	return done_testing();
}
