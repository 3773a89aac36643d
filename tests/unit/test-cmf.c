/* test-cmf.c - the CMF container: write, read back, validation of bad headers, CRCs, RoPE rows */
#include "blr.h"
#include "cmf.h"
#include "err.h"
#include "f16.h"
#include "import.h"
#include "le.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static const char *tmp(const char *name)
{
	static char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

/* a safetensors file from a header text and datalen bytes of data */
static const char *craft(const char *name, const char *hdr, uint64_t hlen_field, size_t datalen)
{
	const char *p = tmp(name);
	FILE *f = fopen(p, "wb");
	uint8_t b[8];

	put_u64(b, hlen_field);
	fwrite(b, 1, 8, f);
	fputs(hdr, f);
	for (size_t i = 0; i < datalen; i++)
		fputc((int)(i & 0xff), f);
	fclose(f);
	return p;
}

static void expect_bad(const char *title, const char *hdr, size_t datalen, const char *word)
{
	const char *p = craft("bad.cmf", hdr, strlen(hdr), datalen);
	cmf_file f;
	int rc = cmf_open(p, &f);

	ok(rc < 0 && strstr(nv_err(), word) != NULL, "%s is refused naming '%s'", title, word);
	if (rc < 0 && !strstr(nv_err(), word))
		diag("message: %s", nv_err());
	if (rc == 0)
		cmf_close(&f);
}

static void bad_headers(void)
{
	const char *p;
	cmf_file f;

	expect_bad("JSON that does not parse", "{\"a\": {", 0, "does not parse");
	expect_bad("an unknown dtype",
		   "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "I64");
	expect_bad("shape disagreeing with the bytes",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "12");
	expect_bad("a shape whose product overflows",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
		   8, "overflows");
	expect_bad("a range outside the buffer",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
		   "outside the data buffer");
	expect_bad("overlapping ranges",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
	expect_bad("a hole between ranges",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "hole");
	expect_bad("bytes after the last tensor",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "after the last");
	expect_bad("duplicate names",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate");
	expect_bad("a non-string __metadata__ value",
		   "{\"__metadata__\":{\"x\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		   4, "not a string");
	expect_bad("a negative offset",
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
		   "data_offsets");
	expect_bad("a codec naming a float tensor",
		   "{\"__metadata__\":{\"cmf.codec\":\"{\\\"a\\\":\\\"blr\\\"}\"},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "want U8");
	expect_bad("an arch with a missing key",
		   "{\"__metadata__\":{\"cmf.arch\":\"{\\\"model_type\\\":\\\"llama\\\"}\"},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "hidden_size");
	p = craft("big.cmf", "{}", 1ull << 40, 0);
	ok(cmf_open(p, &f) < 0 && strstr(nv_err(), "beyond the file"),
	   "an absurd header length is refused: %s", nv_err());
	p = craft("long.cmf", "{}", 100, 0);
	ok(cmf_open(p, &f) < 0 && strstr(nv_err(), "header length 100"),
	   "a header length beyond the file is refused: %s", nv_err());
	p = craft("short.cmf", "", 0, 0);
	truncate(p, 5);
	ok(cmf_open(p, &f) < 0 && strstr(nv_err(), "too short"), "a 5-byte file is refused");
}

/* a BLR payload m × n, rank 8, one path, from fixed-seed signs and scales */
static uint8_t *make_blr(size_t m, size_t n, size_t *len)
{
	size_t r = 8;
	uint16_t *h = malloc(m * 2), *g = malloc(n * 2), l[8];
	int8_t *su = malloc(m * r), *sv = malloc(n * r);
	tap_rng rng = { 7 };
	blr_path_in in;
	uint8_t *out;

	for (size_t i = 0; i < m; i++)
		h[i] = nv_f32_to_f16((float)(0.5 + rng_unif(&rng)));
	for (size_t i = 0; i < n; i++)
		g[i] = nv_f32_to_f16((float)(0.5 + rng_unif(&rng)));
	for (size_t i = 0; i < r; i++)
		l[i] = nv_f32_to_f16((float)(1.0 / (double)(i + 1)));
	for (size_t i = 0; i < m * r; i++)
		su[i] = rng_u64(&rng) & 1 ? 1 : -1;
	for (size_t i = 0; i < n * r; i++)
		sv[i] = rng_u64(&rng) & 1 ? 1 : -1;
	in = (blr_path_in){ h, g, l, su, sv };
	*len = blr_payload_size(m, n, r, 1);
	out = malloc(*len);
	blr_build(m, n, r, 1, &in, out);
	free(h);
	free(g);
	free(su);
	free(sv);
	return out;
}

static void write_and_read(void)
{
	float a[6] = { 1.5f, -2.25f, 0.0f, 3.0e-5f, 65504.0f, -1.0f }, got[8];
	uint8_t half[8], bf[8];
	size_t sa[2] = { 2, 3 }, sh[1] = { 4 }, sb[2] = { 2, 2 }, blen;
	const float hv[4] = { 0.5f, -1.0f, 2048.0f, 0.099975586f }, bv[4] = { 1.0f, -3.0f, 0.15625f, 1e30f };
	uint8_t *pl = make_blr(16, 8, &blen);
	cmf_writer *w = cmf_writer_new();
	cmf_arch ar;
	cmf_file f;
	const cmf_tensor *t;
	int rc;

	for (int i = 0; i < 4; i++) {
		put_u16(half + 2 * i, nv_f32_to_f16(hv[i]));
		put_u16(bf + 2 * i, nv_f32_to_bf16(bv[i]));
	}
	cmf_arch_init(&ar);
	strcpy(ar.arch, "llama");
	ar.hidden = 8, ar.intermediate = 16, ar.layers = 2, ar.heads = 2, ar.kv_heads = 1;
	ar.head_dim = 4, ar.rms_eps = 1e-5, ar.rope_theta = 10000, ar.vocab = 32, ar.tied = 1;
	ar.bos = 1, ar.eos = 2, ar.max_pos = 64;
	ok(cmf_writer_add(w, "a", CMF_F32, 2, sa, a, sizeof(a), 0) == 0 &&
	   cmf_writer_add(w, "h", CMF_F16, 1, sh, half, 8, 1) == 0 &&
	   cmf_writer_add(w, "b", CMF_BF16, 2, sb, bf, 8, 1) == 0 &&
	   cmf_writer_add_blr(w, "model.layers.0.mlp.up_proj.weight", pl, blen, 0) == 0 &&
	   cmf_writer_set_arch(w, &ar) == 0 && cmf_writer_set_meta(w, "note", "x\"y") == 0,
	   "writer takes F32, F16, BF16, a BLR payload, arch and metadata");
	ok(cmf_writer_add(w, "a", CMF_F32, 2, sa, a, sizeof(a), 0) < 0 &&
	   strstr(nv_err(), "duplicate"), "writer refuses a duplicate name");
	ok(cmf_writer_add(w, "c", CMF_F32, 2, sa, a, 20, 0) < 0, "writer refuses a byte count off the shape");
	pl[14] = 3;
	ok(cmf_writer_add_blr(w, "z", pl, blen, 0) < 0, "writer refuses a bad BLR payload");
	pl[14] = 1;
	rc = cmf_writer_commit(w, tmp("ok.cmf"));
	cmf_writer_free(w);
	ok(rc == 0, "commit");
	if (cmf_open(tmp("ok.cmf"), &f) < 0) {
		ok(0, "open the written file: %s", nv_err());
		return;
	}
	is_int((long long)f.ntensors, 4, "four tensors read back");
	t = cmf_find(&f, "a");
	ok(t && t->dtype == CMF_F32 && t->rows == 2 && t->cols == 3 && cmf_tensor_f32(t, got) == 0 &&
	   memcmp(got, a, sizeof(a)) == 0, "F32 tensor reads back exactly");
	t = cmf_find(&f, "h");
	ok(t && t->rows == 1 && t->cols == 4 && cmf_tensor_f32(t, got) == 0 &&
	   memcmp(got, hv, sizeof(hv)) == 0, "F16 values representable in f16 read back exactly");
	t = cmf_find(&f, "b");
	ok(t && cmf_tensor_f32(t, got) == 0 && got[0] == 1.0f && got[1] == -3.0f &&
	   got[2] == 0.15625f && got[3] == nv_bf16_to_f32(nv_f32_to_bf16(1e30f)),
	   "BF16 tensor reads back");
	t = cmf_find(&f, "model.layers.0.mlp.up_proj.weight");
	ok(t && t->blr && t->dtype == CMF_U8 && t->rows == 16 && t->cols == 8 && t->nbytes == blen,
	   "BLR tensor: codec blr, U8, logical 16×8");
	ok(f.has_arch && f.arch.hidden == 8 && f.arch.kv_heads == 1 && f.arch.tied == 1 &&
	   f.arch.rms_eps == 1e-5 && f.arch.max_pos == 64 && !strcmp(f.arch.arch, "llama"),
	   "cmf.arch round-trips");
	ok(cmf_meta(&f, "note") && !strcmp(cmf_meta(&f, "note"), "x\"y") &&
	   !strcmp(cmf_meta(&f, "format"), "cmf"), "metadata round-trips");
	ok(cmf_verify(&f) == 0, "every CRC matches");
	ok((((uintptr_t)cmf_find(&f, "a")->data - (uintptr_t)f.map.data) % 8) == 0,
	   "the data buffer starts 8-aligned");
	cmf_close(&f);
	free(pl);
}

static void crc_mismatch(void)
{
	FILE *fp = fopen(tmp("ok.cmf"), "r+b");
	cmf_file f;

	fseek(fp, -1, SEEK_END);
	fputc(0x5a, fp);
	fclose(fp);
	ok(cmf_open(tmp("ok.cmf"), &f) == 0, "a file with a changed data byte still opens");
	ok(cmf_verify(&f) < 0 && strstr(nv_err(), "CRC-32"), "verify names the bad tensor: %s",
	   nv_err());
	cmf_close(&f);
}

/* x rotated at position p: pairs (a[k], b[k]) by angle p·θ^(-2k/d) */
static void rotate(float *x, const size_t *ia, const size_t *ib, size_t half, size_t d, int p)
{
	for (size_t k = 0; k < half; k++) {
		double ang = p * pow(10000.0, -2.0 * (double)k / (double)d);
		float c = (float)cos(ang), s = (float)sin(ang), u = x[ia[k]], v = x[ib[k]];

		x[ia[k]] = u * c - v * s;
		x[ib[k]] = u * s + v * c;
	}
}

static void rope_rows(void)
{
	/* 2 heads of d = 4: rotate-half rows per head are interleaved rows 0 2 1 3 */
	float w[8], q[8], qh[8];
	size_t ia[4], ib[4], ra[4], rb[4], d = 8, half = 4;
	tap_rng rng = { 3 };
	int exact = 1;

	for (int i = 0; i < 8; i++)
		w[i] = (float)i;
	nv_unpermute_rope(w, 8, sizeof(float), 2);
	ok(w[0] == 0 && w[1] == 2 && w[2] == 1 && w[3] == 3 && w[4] == 4 && w[5] == 6 && w[6] == 5 &&
	   w[7] == 7, "2 heads of 4 rows: order 0 2 1 3 | 4 6 5 7");
	ok(nv_unpermute_rope(w, 6, sizeof(float), 2) < 0, "odd head size is refused");
	/* one head of 8: interleaved RoPE on q equals rotate-half RoPE on the permuted q, permuted */
	for (size_t k = 0; k < half; k++) {
		ia[k] = 2 * k, ib[k] = 2 * k + 1; /* interleaved pairs */
		ra[k] = k, rb[k] = k + half;      /* rotate-half pairs */
	}
	for (int p = 0; p < 5; p++) {
		for (size_t i = 0; i < d; i++)
			q[i] = qh[i] = (float)rng_normal(&rng);
		nv_unpermute_rope(qh, d, sizeof(float), 1);
		rotate(q, ia, ib, half, d, p);
		rotate(qh, ra, rb, half, d, p);
		nv_unpermute_rope(q, d, sizeof(float), 1);
		exact &= memcmp(q, qh, sizeof(q)) == 0;
	}
	ok(exact, "interleaved RoPE then permute = permute then rotate-half RoPE, bit for bit");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s/test-cmf.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	bad_headers();
	write_and_read();
	crc_mismatch();
	rope_rows();
	unlink(tmp("bad.cmf"));
	unlink(tmp("big.cmf"));
	unlink(tmp("long.cmf"));
	unlink(tmp("short.cmf"));
	unlink(tmp("ok.cmf"));
	rmdir(dir);
	return done_testing();
}
