/* nvgg.c - the NVGG calibration Gram: parse, validate, write, merge (see nvgg.h) */
#include "nvgg.h"
#include "aout.h"
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NVGG_HEADER 16

/* a diagonal this small counts as zero in the symmetry scale */
#define NVGG_SYM_TINY 1e-30

/* bytes of a Gram of width n: 16 + 4n² (0 with reason set on overflow) */
static size_t nvgg_size(size_t n)
{
	size_t nn, body, all;

	if (nv_mul(n, n, &nn) < 0 || nv_mul(nn, 4, &body) < 0 ||
	    nv_add(body, NVGG_HEADER, &all) < 0) {
		nv_seterr("n %zu: 16 + 4·n² overflows", n);
		return 0;
	}
	return all;
}

/* entry i of a decoded Gram, f32 or f64 */
static double ent(const nvgg *o, size_t i)
{
	return o->d ? o->d[i] : o->g[i];
}

/* finite entries, non-negative diagonal, symmetric within NVGG_SYM_TOL */
static int nvgg_check_values(const nvgg *o)
{
	size_t n = o->n;

	for (size_t i = 0; i < n * n; i++) {
		if (!isfinite(ent(o, i))) {
			nv_seterr("G[%zu,%zu] = %g is not finite", i / n, i % n, ent(o, i));
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (ent(o, i * n + i) < 0) {
			nv_seterr("diagonal G[%zu,%zu] = %g is negative", i, i, ent(o, i * n + i));
			return -1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			double a = ent(o, i * n + j), b = ent(o, j * n + i);
			double s = fmax(fmax(ent(o, i * n + i), ent(o, j * n + j)), NVGG_SYM_TINY);

			if (fabs(a - b) > NVGG_SYM_TOL * s) {
				nv_seterr("not symmetric: G[%zu,%zu] = %.9g but G[%zu,%zu] = %.9g "
					  "(allowed difference %.3g)", i, j, a, j, i, b,
					  NVGG_SYM_TOL * s);
				return -1;
			}
		}
	}
	return 0;
}

/* a cross-moment's entries need only be finite */
static int nvgc_check_values(const nvgg *o)
{
	size_t n = o->n;

	for (size_t i = 0; i < n * n; i++)
		if (!isfinite(ent(o, i))) {
			nv_seterr("C[%zu,%zu] = %g is not finite", i / n, i % n, ent(o, i));
			return -1;
		}
	return 0;
}

/* how a file's values are taken: decoded to f32 or f64 (or neither: their
 * CRC alone), the CRC of their bytes wanted or not, and the mapping whose
 * pages go once read (NULL: a buffer) */
typedef struct {
	int f64, values;
	uint32_t *crc;
	const nv_map *m;
} take;

/* the values, a million at a time */
static int decode(const uint8_t *buf, size_t nn, const take *tk, nvgg *out)
{
	const size_t piece = (size_t)1 << 20;
	uint32_t c = 0;

	if (tk->values && tk->f64 && !(out->d = nv_malloc(nn, sizeof(double))))
		return -1;
	if (tk->values && !tk->f64 && !(out->g = nv_malloc(nn, sizeof(float))))
		return -1;
	for (size_t i0 = 0; i0 < nn; i0 += piece) {
		size_t k = nn - i0 < piece ? nn - i0 : piece;
		const uint8_t *p = buf + NVGG_HEADER + 4 * i0;
		if (tk->crc)
			c = nv_crc32_update(c, p, 4 * k);
		for (size_t i = 0; i < k && tk->values; i++) {
			if (out->d)
				out->d[i0 + i] = le_f32(p + 4 * i);
			else
				out->g[i0 + i] = le_f32(p + 4 * i);
		}
		if (tk->m)
			nv_map_drop(tk->m, NVGG_HEADER + 4 * (i0 + k));
	}
	if (tk->crc)
		*tk->crc = c;
	return 0;
}

/* an NVGG (cross 0) or NVGC (cross 1) file's bytes: the layout is one */
static int parse_kind(const uint8_t *buf, size_t len, int cross, const take *tk, nvgg *out)
{
	uint32_t magic, n, want_magic = cross ? NVGC_MAGIC : NVGG_MAGIC;
	const char *kind = cross ? "NVGC" : "NVGG";
	uint64_t count;
	size_t want;

	memset(out, 0, sizeof(*out));
	if (len < NVGG_HEADER) {
		nv_seterr("%zu bytes is shorter than the 16-byte %s header", len, kind);
		return -1;
	}
	magic = le_u32(buf);
	n = le_u32(buf + 4);
	count = le_u64(buf + 8);
	if (magic != want_magic) {
		nv_seterr("magic 0x%08X is not %s (0x%08X)", magic, kind, want_magic);
		return -1;
	}
	if (n == 0) {
		nv_seterr("n 0 is outside [1, %u]", UINT32_MAX);
		return -1;
	}
	if (count == 0) {
		nv_seterr("count 0: a %s of no tokens has no mean", cross ? "moment" : "Gram");
		return -1;
	}
	want = nvgg_size(n);
	if (want == 0)
		return -1;
	if (len != want) {
		nv_seterr("size %zu bytes disagrees with n %u (16 + 4·n² = %zu bytes)", len, n, want);
		return -1;
	}
	out->n = n;
	out->count = count;
	out->cross = cross;
	if (decode(buf, (size_t)n * n, tk, out) < 0 ||
	    (tk->values && (cross ? nvgc_check_values(out) : nvgg_check_values(out)) < 0)) {
		nvgg_free(out);
		return -1;
	}
	return 0;
}

static const take as_f32 = { 0, 1, NULL, NULL };

int nvgg_parse(const uint8_t *buf, size_t len, nvgg *out)
{
	return parse_kind(buf, len, 0, &as_f32, out);
}

int nvgc_parse(const uint8_t *buf, size_t len, nvgg *out)
{
	return parse_kind(buf, len, 1, &as_f32, out);
}

/* cross −1: the kind the file's magic says; the mapping's pages go as read */
static int read_kind(const char *path, int cross, take tk, nvgg *out)
{
	nv_map m;
	int rc;

	memset(out, 0, sizeof(*out));
	if (nv_map_file(path, &m) < 0)
		return -1;
	if (cross < 0)
		cross = m.len >= 4 && le_u32(m.data) == NVGC_MAGIC;
	tk.m = &m;
	rc = parse_kind(m.data, m.len, cross, &tk, out);
	nv_map_free(&m);
	return rc;
}

int nvgg_read_any(const char *path, nvgg *out)
{
	return read_kind(path, -1, as_f32, out);
}

int nvgc_read(const char *path, nvgg *out)
{
	return read_kind(path, 1, as_f32, out);
}

int nvgg_read(const char *path, nvgg *out)
{
	return read_kind(path, 0, as_f32, out);
}

int nvgg_read_f32(const char *path, int cross, nvgg *out, uint32_t *crc)
{
	take tk = { 0, 1, crc, NULL };

	return read_kind(path, cross, tk, out);
}

int nvgg_read_f64(const char *path, int cross, nvgg *out, uint32_t *crc)
{
	take tk = { 1, 1, crc, NULL };

	return read_kind(path, cross, tk, out);
}

int nvgg_read_crc(const char *path, nvgg *out, uint32_t *crc)
{
	take tk = { 0, 0, crc, NULL };

	return read_kind(path, 0, tk, out);
}

int nvgg_write(const char *path, const nvgg *g)
{
	uint8_t hd[NVGG_HEADER];
	aout o;

	if (g->n == 0 || nvgg_size(g->n) == 0) {
		nv_seterr("n %u is outside [1, %u]", g->n, UINT32_MAX);
		return -1;
	}
	put_u32(hd, g->cross ? NVGC_MAGIC : NVGG_MAGIC);
	put_u32(hd + 4, g->n);
	put_u64(hd + 8, g->count);
	if (aout_open(&o, path, AOUT_BINARY) < 0)
		return -1;
	if (aout_write(&o, hd, sizeof(hd)) < 0 ||
	    nv_write_f32(&o, g->g, (size_t)g->n * g->n) < 0) {
		aout_abort(&o);
		return -1;
	}
	return aout_commit(&o);
}

int nvgg_merge(const nvgg *in, size_t k, nvgg *out)
{
	uint64_t total = 0;
	size_t nn;
	double *acc;

	memset(out, 0, sizeof(*out));
	if (k == 0) {
		nv_seterr("no Grams to merge");
		return -1;
	}
	for (size_t s = 0; s < k; s++) {
		if (in[s].n != in[0].n) {
			nv_seterr("shard %zu has n %u, shard 0 has n %u", s, in[s].n, in[0].n);
			return -1;
		}
		if (in[s].cross != in[0].cross) {
			nv_seterr("shard %zu is %s, shard 0 is %s", s, in[s].cross ? "NVGC" : "NVGG",
				  in[0].cross ? "NVGC" : "NVGG");
			return -1;
		}
		if (in[s].count == 0 || total > UINT64_MAX - in[s].count) {
			nv_seterr("shard %zu: count %llu is zero or the total overflows", s,
				  (unsigned long long)in[s].count);
			return -1;
		}
		total += in[s].count;
	}
	nn = (size_t)in[0].n * in[0].n;
	acc = nv_calloc(nn, sizeof(double));
	out->g = nv_malloc(nn, sizeof(float));
	if (!acc || !out->g) {
		free(acc);
		free(out->g);
		out->g = NULL;
		return -1;
	}
	/* mean = Σ_s count_s·G_s / Σ_s count_s, accumulated in f64 */
	for (size_t s = 0; s < k; s++)
		for (size_t i = 0; i < nn; i++)
			acc[i] += (double)in[s].count * in[s].g[i];
	for (size_t i = 0; i < nn; i++)
		out->g[i] = (float)(acc[i] / (double)total);
	free(acc);
	out->n = in[0].n;
	out->count = total;
	out->cross = in[0].cross;
	return 0;
}

void nvgg_free(nvgg *g)
{
	free(g->g);
	free(g->d);
	memset(g, 0, sizeof(*g));
}
