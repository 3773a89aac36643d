/* blr.c - the BLR payload: rank rule, build, parse, dequantize (see blr.h) */
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLR_MAX_RANK 65528u /* the largest multiple of 8 a u16 holds */

size_t blr_cap(size_t m, size_t n)
{
	size_t c = 8 * ((m < n ? m : n) / 8);

	return c > BLR_MAX_RANK ? BLR_MAX_RANK : c;
}

/* the bytes of one path: 2(m+n+r) + r(m+n)/8 (0 on overflow) */
static size_t path_size(size_t m, size_t n, size_t r)
{
	size_t mn, scales, bits, all;

	if (nv_add(m, n, &mn) < 0 || nv_add(mn, r, &scales) < 0 ||
	    nv_mul(scales, 2, &scales) < 0 || nv_mul(mn, r / 8, &bits) < 0 ||
	    nv_add(scales, bits, &all) < 0)
		return 0;
	return all;
}

size_t blr_payload_size(size_t m, size_t n, size_t r, size_t p)
{
	size_t one, all;

	if (r % 8 != 0 || p < 1 || p > 2)
		return 0;
	one = path_size(m, n, r);
	if (one == 0 || nv_mul(one, p, &all) < 0 || nv_add(all, BLR_HEADER, &all) < 0)
		return 0;
	return all;
}

double blr_bits(size_t m, size_t n, size_t r, size_t p)
{
	double s = (double)m + (double)n;

	return (double)p * ((double)r * s + 16.0 * (s + (double)r));
}

double blr_target_bits(size_t m, size_t n, double bpw, double k)
{
	return bpw * k * (double)m * (double)n;
}

double blr_step(size_t m, size_t n, size_t p)
{
	return (double)p * 8.0 * ((double)m + (double)n + 16.0) / ((double)m * (double)n);
}

double blr_min_bpw(size_t m, size_t n, size_t p)
{
	return blr_bits(m, n, 8, p) / ((double)m * (double)n);
}

const char *blr_clip_name(blr_clip c)
{
	return c == BLR_CLIP_FLOOR ? "floor" : c == BLR_CLIP_CAP ? "cap" : "";
}

int blr_rank(size_t m, size_t n, double bpw, size_t p, double k, size_t *r, blr_clip *clip)
{
	double s = (double)m + (double)n, rstar, r8;
	size_t cap = blr_cap(m, n);

	if (p < 1 || p > 2) {
		nv_seterr("paths %zu is not 1 or 2", p);
		return -1;
	}
	if (!isfinite(bpw) || bpw < 0 || !isfinite(k) || k <= 0) {
		nv_seterr("budget %g bits per weight times kv factor %g is not a finite "
			  "non-negative request", bpw, k);
		return -1;
	}
	if (cap < 8) {
		nv_seterr("shape %zux%zu is not encodable: min(m,n) %zu is below 8", m, n,
			  m < n ? m : n);
		return -1;
	}
	/* r* = ⌊(target/p − 16(m+n)) / (m+n+16)⌋, r = 8·⌊r* / 8⌋ */
	rstar = floor((blr_target_bits(m, n, bpw, k) / (double)p - 16.0 * s) / (s + 16.0));
	r8 = 8.0 * floor(rstar / 8.0);
	if (r8 < 8) {
		*r = 8;
		*clip = BLR_CLIP_FLOOR;
	} else if (r8 > (double)cap) {
		*r = cap;
		*clip = BLR_CLIP_CAP;
	} else {
		*r = (size_t)r8;
		*clip = BLR_CLIP_NONE;
	}
	return 0;
}

/* shape, rank and path count of a payload to build or parse */
static int check_dims(size_t m, size_t n, size_t r, size_t p)
{
	size_t cap = blr_cap(m, n);

	if (m < 1 || m > UINT32_MAX || n < 1 || n > UINT32_MAX) {
		nv_seterr("shape %zux%zu: d_out and d_in must be in [1, %u]", m, n, UINT32_MAX);
		return -1;
	}
	if (p < 1 || p > 2) {
		nv_seterr("paths %zu is not 1 or 2", p);
		return -1;
	}
	if (cap < 8) {
		nv_seterr("shape %zux%zu is not encodable: min(d_out, d_in) is below 8", m, n);
		return -1;
	}
	if (r % 8 != 0 || r < 8 || r > cap) {
		nv_seterr("rank %zu is not a multiple of 8 in [8, %zu] for %zux%zu", r, cap, m, n);
		return -1;
	}
	return 0;
}

/* pack a (rows × r) matrix of ±1 into bits, row-major, 1 = +1 */
static int pack_signs(const int8_t *s, size_t rows, size_t r, uint8_t *out, const char *what)
{
	size_t nb = rows * r;

	memset(out, 0, nb / 8);
	for (size_t b = 0; b < nb; b++) {
		if (s[b] != 1 && s[b] != -1) {
			nv_seterr("%s[%zu,%zu] = %d is not ±1", what, b / r, b % r, s[b]);
			return -1;
		}
		if (s[b] == 1)
			out[b >> 3] |= (uint8_t)(1u << (b & 7));
	}
	return 0;
}

/* write count f16 scales, each finite */
static int put_scales(const uint16_t *v, size_t count, uint8_t *out, const char *what)
{
	for (size_t i = 0; i < count; i++) {
		if ((v[i] & 0x7c00) == 0x7c00) {
			nv_seterr("%s[%zu] = %g is not finite", what, i, nv_f16_to_f32(v[i]));
			return -1;
		}
		put_u16(out + 2 * i, v[i]);
	}
	return 0;
}

/* one path's scales and signs at q; -1 with reason set */
static int put_path(size_t m, size_t n, size_t r, const blr_path_in *in, uint8_t *q)
{
	if (put_scales(in->h, m, q, "h") < 0 || put_scales(in->g, n, q + 2 * m, "g") < 0 ||
	    put_scales(in->l, r, q + 2 * (m + n), "l") < 0)
		return -1;
	q += 2 * (m + n + r);
	if (pack_signs(in->su, m, r, q, "S_U") < 0 ||
	    pack_signs(in->sv, n, r, q + m * r / 8, "S_V") < 0)
		return -1;
	return 0;
}

int blr_build(size_t m, size_t n, size_t r, size_t p, const blr_path_in *paths, uint8_t *out)
{
	size_t one;

	if (check_dims(m, n, r, p) < 0 || blr_payload_size(m, n, r, p) == 0)
		return -1;
	one = path_size(m, n, r);
	put_u32(out, BLR_MAGIC);
	put_u32(out + 4, (uint32_t)m);
	put_u32(out + 8, (uint32_t)n);
	put_u16(out + 12, (uint16_t)r);
	out[14] = (uint8_t)p;
	out[15] = 0;
	for (size_t k = 0; k < p; k++) {
		if (put_path(m, n, r, &paths[k], out + BLR_HEADER + k * one) < 0) {
			nv_preerr("path %zu", k);
			return -1;
		}
	}
	return 0;
}

/* every scale of a path finite */
static int check_scales(const uint8_t *v, size_t count, const char *what, size_t path)
{
	for (size_t i = 0; i < count; i++) {
		uint16_t h = le_u16(v + 2 * i);

		if ((h & 0x7c00) == 0x7c00) {
			nv_seterr("path %zu: %s[%zu] = %g is not finite", path, what, i,
				  nv_f16_to_f32(h));
			return -1;
		}
	}
	return 0;
}

/* the header fields, checked one by one so the message names the bad one */
static int parse_header(const uint8_t *buf, size_t len, blr_header *hd)
{
	uint32_t magic;
	size_t want;

	if (len < BLR_HEADER) {
		nv_seterr("%zu bytes is shorter than the 16-byte BLR header", len);
		return -1;
	}
	magic = le_u32(buf);
	if (magic != BLR_MAGIC) {
		nv_seterr("magic 0x%08X is not BLR1 (0x%08X)", magic, BLR_MAGIC);
		return -1;
	}
	if (buf[15] != 0) {
		nv_seterr("flags 0x%02X are not 0", buf[15]);
		return -1;
	}
	hd->m = le_u32(buf + 4);
	hd->n = le_u32(buf + 8);
	hd->r = le_u16(buf + 12);
	hd->paths = buf[14];
	if (hd->m == 0 || hd->n == 0) {
		nv_seterr("%s 0 is outside [8, %u]", hd->m == 0 ? "d_out" : "d_in", UINT32_MAX);
		return -1;
	}
	if (check_dims(hd->m, hd->n, hd->r, hd->paths) < 0)
		return -1;
	want = blr_payload_size(hd->m, hd->n, hd->r, hd->paths);
	if (want == 0) {
		nv_seterr("shape %ux%u rank %u with %u paths: the payload size overflows",
			  hd->m, hd->n, hd->r, hd->paths);
		return -1;
	}
	if (len != want) {
		nv_seterr("size %zu bytes disagrees with the header (%ux%u, rank %u, %u paths: "
			  "%zu bytes)", len, hd->m, hd->n, hd->r, hd->paths, want);
		return -1;
	}
	return 0;
}

int blr_parse(const uint8_t *buf, size_t len, blr_header *hd, blr_view views[2])
{
	size_t m, n, r, one;

	memset(hd, 0, sizeof(*hd));
	if (parse_header(buf, len, hd) < 0)
		return -1;
	m = hd->m;
	n = hd->n;
	r = hd->r;
	one = path_size(m, n, r);
	for (size_t p = 0; p < 2; p++) {
		const uint8_t *q = buf + BLR_HEADER + p * one;

		memset(&views[p], 0, sizeof(views[p]));
		if (p >= hd->paths)
			continue;
		if (check_scales(q, m, "h", p) < 0 || check_scales(q + 2 * m, n, "g", p) < 0 ||
		    check_scales(q + 2 * (m + n), r, "l", p) < 0)
			return -1;
		views[p].h = q;
		views[p].g = q + 2 * m;
		views[p].l = q + 2 * (m + n);
		views[p].su = q + 2 * (m + n + r);
		views[p].sv = views[p].su + m * r / 8;
	}
	return 0;
}

int blr_verify_shape(const uint8_t *buf, size_t len, size_t m, size_t n)
{
	blr_header hd;
	blr_view v[2];

	if (blr_parse(buf, len, &hd, v) < 0)
		return -1;
	if (hd.m != m || hd.n != n) {
		nv_seterr("shape %ux%u is not the expected %zux%zu", hd.m, hd.n, m, n);
		return -1;
	}
	return 0;
}

/* the scales of a path as f64 (count) */
static void decode_scales(const uint8_t *v, size_t count, double *out)
{
	for (size_t i = 0; i < count; i++)
		out[i] = nv_f16_to_f32(le_u16(v + 2 * i));
}

/* row i of a packed sign matrix times w: out[k] = ±w[k] (r) */
static void signed_row(const uint8_t *bits, size_t i, size_t r, const double *w, double s,
		       double *out)
{
	const uint8_t *row = bits + i * r / 8; /* r is a multiple of 8: rows start on bytes */

	for (size_t k = 0; k < r; k++)
		out[k] = (row[k >> 3] >> (k & 7)) & 1 ? s * w[k] : -s * w[k];
}

/*
 * A (rows × pr) = [diag(h_p)·S_U,p·diag(ℓ_p)]_p for rows [i0, i0+rows): the
 * paths side by side, as blr_factors gives them.  l (p × r) holds the
 * decoded ℓ of every path.
 */
static void left_factor(const blr_header *hd, const blr_view *v, const double *l, size_t i0,
			size_t rows, double *a)
{
	size_t r = hd->r, kk = (size_t)hd->paths * r;

	for (size_t p = 0; p < hd->paths; p++)
		for (size_t i = 0; i < rows; i++)
			signed_row(v[p].su, i0 + i, r, l + p * r,
				   nv_f16_to_f32(le_u16(v[p].h + 2 * (i0 + i))), a + i * kk + p * r);
}

#define DEQ_ROWS 256 /* rows of A per pass: bounds the f64 scratch */

int blr_factors(const uint8_t *buf, size_t len, float *a, float *b)
{
	blr_header hd;
	blr_view v[2];
	size_t r, kk, rows;
	double *l, *ad, *bd;

	if (blr_parse(buf, len, &hd, v) < 0)
		return -1;
	r = hd.r;
	kk = (size_t)hd.paths * r;
	l = nv_malloc(3 * r, sizeof(double));
	ad = nv_malloc(DEQ_ROWS * kk, sizeof(double));
	bd = nv_malloc(kk, sizeof(double));
	if (!l || !ad || !bd) {
		free(l);
		free(ad);
		free(bd);
		return -1;
	}
	for (size_t p = 0; p < hd.paths; p++)
		decode_scales(v[p].l, r, l + p * r);
	for (size_t k = 0; k < r; k++)
		l[2 * r + k] = 1.0;
	/* both products are exact in f64 and fit f32 exactly: the casts do not round */
	for (size_t i0 = 0; i0 < hd.m; i0 += rows) {
		rows = hd.m - i0 < DEQ_ROWS ? hd.m - i0 : DEQ_ROWS;
		left_factor(&hd, v, l, i0, rows, ad);
		for (size_t i = 0; i < rows * kk; i++)
			a[i0 * kk + i] = (float)ad[i];
	}
	for (size_t j = 0; j < hd.n; j++)
		for (size_t p = 0; p < hd.paths; p++) {
			signed_row(v[p].sv, j, r, l + 2 * r, nv_f16_to_f32(le_u16(v[p].g + 2 * j)), bd);
			for (size_t k = 0; k < r; k++)
				b[j * kk + p * r + k] = (float)bd[k];
		}
	free(l);
	free(ad);
	free(bd);
	return 0;
}

void blr_path_range(const blr_header *hd, const blr_view *v, blr_scale_range *out)
{
	out->h_min = out->g_min = out->l_min = INFINITY;
	out->h_max = out->g_max = out->l_max = -INFINITY;
	for (size_t i = 0; i < hd->m; i++) {
		double x = fabs(nv_f16_to_f32(le_u16(v->h + 2 * i)));

		out->h_min = fmin(out->h_min, x);
		out->h_max = fmax(out->h_max, x);
	}
	for (size_t j = 0; j < hd->n; j++) {
		double x = fabs(nv_f16_to_f32(le_u16(v->g + 2 * j)));

		out->g_min = fmin(out->g_min, x);
		out->g_max = fmax(out->g_max, x);
	}
	for (size_t k = 0; k < hd->r; k++) {
		double x = nv_f16_to_f32(le_u16(v->l + 2 * k));

		out->l_min = fmin(out->l_min, x);
		out->l_max = fmax(out->l_max, x);
	}
}

/* the gauge factors: finite and nonzero, one per row */
static int check_gauge(const double *d, size_t nd, size_t m)
{
	if (nd != m) {
		nv_seterr("%zu row factors for %zu rows", nd, m);
		return -1;
	}
	for (size_t i = 0; i < nd; i++) {
		if (!isfinite(d[i]) || d[i] == 0) {
			nv_seterr("row factor %zu = %g is not finite and nonzero", i, d[i]);
			return -1;
		}
	}
	return 0;
}

int blr_gauge_undo(uint8_t *buf, size_t len, const double *d, size_t nd)
{
	blr_header hd;
	blr_view v[2];
	uint16_t *nh;

	if (blr_parse(buf, len, &hd, v) < 0 || check_gauge(d, nd, hd.m) < 0)
		return -1;
	nh = nv_malloc((size_t)hd.paths * hd.m, sizeof(uint16_t));
	if (!nh)
		return -1;
	/* compute every new scale first: a refusal leaves the bytes untouched */
	for (size_t p = 0; p < hd.paths; p++) {
		for (size_t i = 0; i < hd.m; i++) {
			double cur = nv_f16_to_f32(le_u16(v[p].h + 2 * i));
			uint16_t h = nv_f32_to_f16((float)(cur / d[i]));

			if ((h & 0x7c00) == 0x7c00) {
				nv_seterr("path %zu: h[%zu] = %g divided by %g is beyond the f16 "
					  "range", p, i, cur, d[i]);
				free(nh);
				return -1;
			}
			nh[p * hd.m + i] = h;
		}
	}
	for (size_t p = 0; p < hd.paths; p++)
		for (size_t i = 0; i < hd.m; i++)
			put_u16((uint8_t *)v[p].h + 2 * i, nh[p * hd.m + i]);
	free(nh);
	return 0;
}
