/* state.c - the S_L state file (see state.h) */
#include "state.h"
#include "err.h"
#include "le.h"
#include "mem.h"

#include <math.h>
#include <string.h>

uint32_t st_token_crc(const uint32_t *tok, size_t n)
{
	uint8_t buf[4096];
	uint32_t crc = 0;

	for (size_t i = 0; i < n;) {
		size_t k = 0;

		for (; k < sizeof buf / 4 && i < n; k++, i++)
			put_u32(buf + 4 * k, tok[i]);
		crc = nv_crc32_update(crc, buf, 4 * k);
	}
	return crc;
}

st_header st_header_of(uint32_t layer, size_t width, size_t window, const uint32_t *tok,
		       size_t ntok, size_t fit, size_t sel, size_t rows)
{
	return (st_header){ .layer = layer, .width = (uint32_t)width, .window = (uint32_t)window,
			    .crc = st_token_crc(tok, ntok), .tokens = ntok, .fit = fit,
			    .sel = sel, .rows = rows };
}

static void parse_header(const uint8_t *p, st_header *h)
{
	h->layer = le_u32(p + 8);
	h->width = le_u32(p + 12);
	h->window = le_u32(p + 16);
	h->crc = le_u32(p + 20);
	h->tokens = le_u64(p + 24);
	h->fit = le_u64(p + 32);
	h->sel = le_u64(p + 40);
	h->rows = le_u64(p + 48);
}

static int check_size(const st_reader *r)
{
	size_t n, bytes;

	if (r->h.rows > SIZE_MAX || r->h.width == 0 || nv_mul((size_t)r->h.rows, r->h.width, &n) < 0 ||
	    nv_mul(n, 4, &bytes) < 0 || nv_add(bytes, ST_HEADER, &bytes) < 0) {
		nv_seterr("rows %llu × width %u overflows", (unsigned long long)r->h.rows, r->h.width);
		return -1;
	}
	if (r->map.len != bytes) {
		nv_seterr("size %zu bytes, want 56 + 4·rows·width = %zu (rows %llu, width %u)",
			  r->map.len, bytes, (unsigned long long)r->h.rows, r->h.width);
		return -1;
	}
	return 0;
}

int st_open(st_reader *r, const char *path)
{
	memset(r, 0, sizeof *r);
	if (nv_map_file(path, &r->map) < 0)
		return -1;
	if (r->map.len < ST_HEADER) {
		nv_seterr("size %zu bytes is shorter than the 56-byte header", r->map.len);
		goto fail;
	}
	if (le_u32(r->map.data) != ST_MAGIC) {
		nv_seterr("magic 0x%08x is not a state file's 0x%08x", le_u32(r->map.data), ST_MAGIC);
		goto fail;
	}
	if (le_u32(r->map.data + 4) != ST_VERSION) {
		nv_seterr("version %u, want %u", le_u32(r->map.data + 4), ST_VERSION);
		goto fail;
	}
	parse_header(r->map.data, &r->h);
	if (check_size(r) < 0)
		goto fail;
	r->x = r->map.data + ST_HEADER;
	return 0;
fail:
	nv_map_free(&r->map);
	return -1;
}

void st_close(st_reader *r)
{
	nv_map_free(&r->map);
	memset(r, 0, sizeof *r);
}

#define CMP(field, what)                                                                  \
	if (got->field != want->field) {                                                  \
		nv_seterr("state is for " what " %llu, this run has %llu",                \
			  (unsigned long long)got->field, (unsigned long long)want->field); \
		return -1;                                                                \
	}

int st_check(const st_header *got, const st_header *want)
{
	CMP(layer, "layer")
	CMP(width, "width")
	CMP(window, "window size")
	CMP(tokens, "a token stream of length")
	if (got->crc != want->crc) {
		nv_seterr("state is for tokens with CRC-32 %08x, these tokens have %08x", got->crc,
			  want->crc);
		return -1;
	}
	CMP(fit, "FIT tokens")
	CMP(sel, "SEL tokens")
	CMP(rows, "rows")
	return 0;
}

int st_rows(const st_reader *r, size_t r0, size_t n, float *x)
{
	size_t w = r->h.width;

	if (r0 > r->h.rows || n > r->h.rows - r0) {
		nv_seterr("rows %zu..%zu beyond the state's %llu", r0, r0 + n,
			  (unsigned long long)r->h.rows);
		return -1;
	}
	for (size_t i = 0; i < n * w; i++) {
		x[i] = le_f32(r->x + 4 * (r0 * w + i));
		if (!isfinite(x[i])) {
			nv_seterr("row %zu, column %zu is not finite", r0 + i / w, i % w);
			return -1;
		}
	}
	return 0;
}

int st_create(st_writer *w, const char *path, const st_header *h)
{
	uint8_t b[ST_HEADER];

	memset(w, 0, sizeof *w);
	w->h = *h;
	put_u32(b, ST_MAGIC);
	put_u32(b + 4, ST_VERSION);
	put_u32(b + 8, h->layer);
	put_u32(b + 12, h->width);
	put_u32(b + 16, h->window);
	put_u32(b + 20, h->crc);
	put_u64(b + 24, h->tokens);
	put_u64(b + 32, h->fit);
	put_u64(b + 40, h->sel);
	put_u64(b + 48, h->rows);
	if (aout_open(&w->o, path, AOUT_BINARY) < 0)
		return -1;
	if (aout_write(&w->o, b, sizeof b) < 0) {
		aout_abort(&w->o);
		return -1;
	}
	return 0;
}

int st_append(st_writer *w, const float *x, size_t n)
{
	if (n > w->h.rows - w->written) {
		nv_seterr("more rows than the %llu announced", (unsigned long long)w->h.rows);
		return -1;
	}
	if (nv_write_f32(&w->o, x, n * w->h.width) < 0)
		return -1;
	w->written += n;
	return 0;
}

int st_commit(st_writer *w)
{
	if (w->written != w->h.rows) {
		nv_seterr("%llu rows written, %llu announced", (unsigned long long)w->written,
			  (unsigned long long)w->h.rows);
		aout_abort(&w->o);
		return -1;
	}
	return aout_commit(&w->o);
}

void st_abort(st_writer *w)
{
	aout_abort(&w->o);
}
