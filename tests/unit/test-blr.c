/* test-blr.c - the BLR payload: rank rule, layout, validation, dequantization, gauge undo */
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "linalg.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* the seed's Delivered: what a request gets */
typedef struct {
	double requested, achieved;
	size_t rank, paths;
	blr_clip clip;
} delivered;

static delivered delivered_of(size_t m, size_t n, double bpw, size_t p, double mult)
{
	delivered d = { bpw, 0, 0, p, BLR_CLIP_NONE };

	if (blr_rank(m, n, bpw, p, mult, &d.rank, &d.clip) < 0)
		d.rank = 0;
	d.achieved = blr_bits(m, n, d.rank, p) / ((double)m * (double)n);
	return d;
}

static int over_budget(const delivered *d)
{
	return d->achieved > d->requested + 1e-9;
}

/*
 * the rule restated as a property, independently of its closed form: the
 * rank is the largest multiple of 8 whose bits fit the target, raised to 8
 * or lowered to the cap
 */
static int rank_is_the_rule(size_t m, size_t n, double target, size_t p, const delivered *d)
{
	size_t cap = 8 * ((m < n ? m : n) / 8);

	if (d->rank % 8 != 0 || d->rank < 8 || d->rank > cap)
		return 0;
	switch (d->clip) {
	case BLR_CLIP_FLOOR:
		return d->rank == 8 && blr_bits(m, n, 8, p) > target;
	case BLR_CLIP_CAP:
		return d->rank == cap && blr_bits(m, n, cap + 8, p) <= target;
	default:
		return blr_bits(m, n, d->rank, p) <= target &&
		       blr_bits(m, n, d->rank + 8, p) > target;
	}
}

static void delivered_budget_respects_the_request_or_names_the_floor(void)
{
	static const size_t ms[] = { 32, 64, 256, 1024, 2048 }, ns[] = { 32, 64, 256, 1024, 3584 };
	static const double bs[] = { 0.05, 0.11, 0.2, 0.55, 0.56, 1.0, 1.5, 4.0 }, ks[] = { 0.5, 1.0, 2.0 };
	int cases = 0, bad = 0, rule = 0;

	for (size_t a = 0; a < 5; a++)
	for (size_t c = 0; c < 5; c++)
	for (size_t e = 0; e < 8; e++)
	for (size_t p = 1; p <= 2; p++)
	for (size_t q = 0; q < 3; q++) {
		size_t m = ms[a], n = ns[c];
		delivered d = delivered_of(m, n, bs[e], p, ks[q]);
		double floor_bits = blr_bits(m, n, 8, p);
		double target = blr_target_bits(m, n, bs[e], ks[q]);
		double got = d.achieved * (double)m * (double)n;
		int fail = 0;

		cases++;
		/* never cheaper than the container's own floor */
		fail |= got < floor_bits - 1e-9;
		if (target < floor_bits)
			/* below what the container can hold: the floor, named */
			fail |= d.clip != BLR_CLIP_FLOOR || fabs(got - floor_bits) >= 1e-9;
		else
			/* the rank only moves down: never more than the target */
			fail |= got > target + 1e-9;
		if (fail && bad++ < 5)
			diag("%zux%zu b=%g p=%zu k=%g: rank %zu clip '%s' bits %g target %g floor %g",
			     m, n, bs[e], p, ks[q], d.rank, blr_clip_name(d.clip), got, target, floor_bits);
		if (!rank_is_the_rule(m, n, target, p, &d) && rule++ < 5)
			diag("%zux%zu b=%g p=%zu k=%g: rank %zu clip '%s' is not the rule",
			     m, n, bs[e], p, ks[q], d.rank, blr_clip_name(d.clip));
	}
	is_int(cases, 1200, "the seed's grid: 5 m × 5 n × 8 budgets × 2 path counts × 3 kv factors");
	is_int(bad, 0, "delivered bits respect the request, or are the floor and say so");
	is_int(rule, 0, "every rank is the largest multiple of 8 within the target, floored at 8, capped");

	{
		delivered d = delivered_of(32, 32, 0.05, 1, 1.0);

		ok(d.clip == BLR_CLIP_FLOOR && over_budget(&d) &&
		   d.achieved >= blr_min_bpw(32, 32, 1), "32×32 at 0.05: the floor binds, over budget");
	}
	{
		delivered d = delivered_of(64, 64, 8.0, 1, 1.0);

		ok(d.clip == BLR_CLIP_CAP && d.rank == 64 && !over_budget(&d),
		   "64×64 at 8 bpw: the cap binds at rank 64, under budget");
	}
	{
		delivered d = delivered_of(1024, 1024, 0.56, 2, 1.0);
		double step = blr_step(1024, 1024, 2);

		ok(d.clip == BLR_CLIP_NONE && !over_budget(&d) && d.achieved <= 0.56 &&
		   0.56 - d.achieved <= step + 1e-9,
		   "1024×1024 at 0.56, 2 paths: delivered %.6f, within a step (%.6f) below", d.achieved, step);
	}
	{
		delivered d = delivered_of(4096, 4096, 0.55, 2, 1.0);

		ok(d.rank == 544 && d.clip == BLR_CLIP_NONE && d.achieved <= 0.55,
		   "DESIGN.md's example: 4096×4096 at 0.55 with two paths is rank 544 (%zu)", d.rank);
	}
	{
		size_t r;
		blr_clip c;

		ok(blr_rank(7, 4096, 1.0, 1, 1.0, &r, &c) < 0 && strstr(nv_err(), "not encodable"),
		   "min(m,n) < 8 is not encodable");
		ok(blr_rank(64, 64, 1.0, 3, 1.0, &r, &c) < 0, "3 paths refused");
		ok(blr_rank(64, 64, NAN, 1, 1.0, &r, &c) < 0, "a NaN budget refused");
	}
	near(blr_step(1024, 1024, 2), 2 * 8.0 * (1024 + 1024 + 16) / (1024.0 * 1024), 0,
	     "step is p·8·(m+n+16)/(m·n)");
	near(blr_bits(96, 64, 16, 2), 2 * (16 * 160 + 16 * (160 + 16)), 0, "bits is p·(r(m+n) + 16(m+n+r))");
}

/* random f16 with exponents in [2^lo, 2^hi), optionally of random sign */
static uint16_t rand_f16(tap_rng *rng, int lo, int hi, int signed_)
{
	double v = ldexp(1.0 + rng_unif(rng), lo + (int)(rng_u64(rng) % (uint64_t)(hi - lo)));
	uint16_t h = nv_f32_to_f16((float)v);

	return signed_ && (rng_u64(rng) & 1) ? h | 0x8000 : h;
}

typedef struct {
	uint16_t *h, *g, *l;
	int8_t *su, *sv;
} path_buf;

/* ℓ at the edges of f16: zeros of both signs, subnormals, the largest */
static uint16_t edge_f16(tap_rng *rng)
{
	static const uint16_t e[] = { 0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x7bff, 0xfbff };
	uint64_t c = rng_u64(rng) % 10;

	return c < 7 ? e[c] : rand_f16(rng, -14, 15, 1);
}

enum { SC_WIDE, SC_EXACT, SC_EDGE }; /* the scales a random path takes */

static void fill_path(path_buf *b, size_t m, size_t n, size_t r, tap_rng *rng, int sc)
{
	int exact = sc == SC_EXACT;

	b->h = malloc(m * 2);
	b->g = malloc(n * 2);
	b->l = malloc(r * 2);
	b->su = malloc(m * r);
	b->sv = malloc(n * r);
	/* exact: every partial sum fits 53 bits (see roundtrip()); else wide ranges */
	for (size_t i = 0; i < m; i++)
		b->h[i] = exact ? rand_f16(rng, -1, 0, 1) : rand_f16(rng, -12, 8, 1);
	for (size_t j = 0; j < n; j++)
		b->g[j] = exact ? rand_f16(rng, -1, 0, 1) : rand_f16(rng, -12, 8, 1);
	for (size_t k = 0; k < r; k++)
		b->l[k] = exact ? rand_f16(rng, -6, -2, 0) :
			  sc == SC_EDGE ? edge_f16(rng) : rand_f16(rng, -14, 6, 0);
	for (size_t i = 0; i < m * r; i++)
		b->su[i] = rng_u64(rng) & 1 ? 1 : -1;
	for (size_t i = 0; i < n * r; i++)
		b->sv[i] = rng_u64(rng) & 1 ? 1 : -1;
}

static void free_path(path_buf *b)
{
	free(b->h);
	free(b->g);
	free(b->l);
	free(b->su);
	free(b->sv);
}

static blr_path_in as_in(const path_buf *b)
{
	blr_path_in in = { b->h, b->g, b->l, b->su, b->sv };

	return in;
}

/* payload of random paths; caller frees */
static uint8_t *random_payload(size_t m, size_t n, size_t r, size_t p, tap_rng *rng, int sc,
			       path_buf *pb, size_t *len)
{
	blr_path_in in[2];
	uint8_t *buf;

	*len = blr_payload_size(m, n, r, p);
	buf = malloc(*len);
	for (size_t k = 0; k < p; k++) {
		fill_path(&pb[k], m, n, r, rng, sc);
		in[k] = as_in(&pb[k]);
	}
	if (blr_build(m, n, r, p, in, buf) < 0)
		diag("build failed: %s", nv_err());
	return buf;
}

/*
 * Ŵ = Σ_p diag(h) S_U diag(ℓ) S_Vᵀ diag(g), straight from the unpacked inputs
 * in long double; *mag gets Σ|terms| for the rounding bound
 */
static long double direct(const path_buf *pb, size_t p, size_t r, size_t n, size_t i, size_t j,
			  long double *mag)
{
	long double s = 0;

	*mag = 0;
	for (size_t q = 0; q < p; q++) {
		for (size_t k = 0; k < r; k++) {
			long double t = (long double)nv_f16_to_f32(pb[q].h[i]) * pb[q].su[i * r + k] *
					nv_f16_to_f32(pb[q].l[k]) * pb[q].sv[j * r + k] *
					nv_f16_to_f32(pb[q].g[j]);
			s += t;
			*mag += fabsl(t);
		}
	}
	(void)n;
	return s;
}

/*
 * Ŵ_ij as blr_dequantize defines it, computed plainly: T_p = Σ_k ±ℓ_k summed
 * in long double (exact: every ℓ is a multiple of 2^-24 below 2^16, so r ≤
 * 256 terms need at most 48 bits, which f64 holds too), then
 * fl64(fl64(h·g·T_0) + fl64(h·g·T_1)) (h·g exact) rounded to f32
 */
static float defined(const path_buf *pb, size_t p, size_t r, size_t i, size_t j, int *inexact)
{
	double acc = 0;

	for (size_t q = 0; q < p; q++) {
		long double t = 0;
		double x;

		for (size_t k = 0; k < r; k++)
			t += (long double)pb[q].su[i * r + k] * pb[q].sv[j * r + k] *
			     nv_f16_to_f32(pb[q].l[k]);
		*inexact |= (long double)(double)t != t;
		x = (double)nv_f16_to_f32(pb[q].h[i]) * nv_f16_to_f32(pb[q].g[j]) * (double)t;
		acc = q ? acc + x : x;
	}
	return (float)acc;
}

/* blr_factors: every entry is the exact product of its scales and sign */
static void factors(const uint8_t *buf, size_t len, const path_buf *pb, size_t m, size_t n,
		    size_t r, size_t p)
{
	float *a = malloc(m * p * r * sizeof(float)), *b = malloc(n * p * r * sizeof(float));
	int bad = 0;

	ok(blr_factors(buf, len, a, b) == 0, "blr_factors");
	for (size_t q = 0; q < p; q++)
		for (size_t k = 0; k < r; k++) {
			for (size_t i = 0; i < m; i++)
				bad += (double)a[i * p * r + q * r + k] !=
				       (double)nv_f16_to_f32(pb[q].h[i]) * pb[q].su[i * r + k] *
					       nv_f16_to_f32(pb[q].l[k]);
			for (size_t j = 0; j < n; j++)
				bad += b[j * p * r + q * r + k] !=
				       nv_f16_to_f32(pb[q].g[j]) * pb[q].sv[j * r + k];
		}
	is_int(bad, 0, "the factors A = [diag(h) S_U diag(ℓ)]_p and B = [diag(g) S_V]_p, exactly");
	free(a);
	free(b);
}

static void roundtrip(size_t m, size_t n, size_t r, size_t p, int sc, tap_rng *rng)
{
	static const char *what[] = { "wide scales", "exact scales", "ℓ at f16's edges" };
	path_buf pb[2];
	size_t len;
	uint8_t *buf = random_payload(m, n, r, p, rng, sc, pb, &len);
	float *w = malloc(m * n * sizeof(float)), *w2 = malloc(m * n * sizeof(float));
	int bad = 0, off = 0, inexact = 0;

	ok(blr_dequantize(buf, len, w) == 0, "dequantize %zux%zu r%zu p%zu", m, n, r, p);
	for (size_t i = 0; i < m; i++) {
		for (size_t j = 0; j < n; j++) {
			long double mag, want = direct(pb, p, r, n, i, j, &mag);
			/*
			 * against the exact sum: the f32 rounding (half an ulp,
			 * 2^-24 relative) and the two f64 roundings of the paths'
			 * terms and their sum (2·2^-53 of Σ|terms|); exact scales
			 * (|h|,|g| in [0.5,1), ℓ in [2^-6,2^-2): every term on a
			 * 2^-38 grid, 2r terms below 2^7) leave no f64 rounding,
			 * so only the f32 one
			 */
			long double tol = sc == SC_EXACT ? 0 : 0x1p-24L * fabsl(want) +
				2 * 0x1p-53L * mag;

			if ((sc == SC_EXACT && w[i * n + j] != (float)want) ||
			    (sc != SC_EXACT && fabsl(w[i * n + j] - want) > tol)) {
				if (bad++ < 3)
					diag("W[%zu,%zu] = %a, direct %La", i, j, w[i * n + j], want);
			}
			off += memcmp(&w[i * n + j], &(float){ defined(pb, p, r, i, j, &inexact) },
				      sizeof(float)) != 0;
		}
	}
	is_int(bad, 0, "%s %s: dequantized Ŵ equals Σ diag(h) S_U diag(ℓ) S_Vᵀ diag(g) computed directly",
	       what[sc], sc == SC_EXACT ? "identical floats" : "within rounding");
	is_int(off + inexact, 0, "%s: each entry is its definition's bits (T exact, h·g·T and the paths' sum rounded once each)",
	       what[sc]);
	nv_set_threads(2);
	ok(blr_dequantize(buf, len, w2) == 0 && !memcmp(w, w2, m * n * sizeof(float)),
	   "%s: the same bits at two threads", what[sc]);
	nv_set_threads(1);
	factors(buf, len, pb, m, n, r, p);
	for (size_t k = 0; k < p; k++)
		free_path(&pb[k]);
	free(w);
	free(w2);
	free(buf);
}

static void layout(void)
{
	enum { M = 8, N = 16, R = 8 };
	uint16_t h[M], g[N], l[R];
	int8_t su[M * R], sv[N * R];
	blr_path_in in = { h, g, l, su, sv };
	uint8_t buf[16 + 2 * (M + N + R) + (M + N) * R / 8], want[sizeof(buf)];
	size_t o = 16;

	is_int((long long)sizeof(buf), (long long)blr_payload_size(M, N, R, 1), "size 16 + 2(m+n+r) + r(m+n)/8");
	is_int((long long)blr_payload_size(16, 24, 8, 2), 288, "16×24 rank 8, two paths: 288 bytes");
	for (int i = 0; i < M; i++)
		h[i] = (uint16_t)(0x3c00 + i);
	for (int j = 0; j < N; j++)
		g[j] = (uint16_t)(0x4000 + j);
	for (int k = 0; k < R; k++)
		l[k] = (uint16_t)(0x2000 + k);
	memset(su, -1, sizeof(su));
	memset(sv, -1, sizeof(sv));
	su[0 * R + 0] = 1; /* bit 0: byte 0, bit 0 */
	su[1 * R + 3] = 1; /* bit 11: byte 1, bit 3 */
	sv[15 * R + 7] = 1; /* bit 127: byte 15, bit 7 */
	memset(want, 0, sizeof(want));
	memcpy(want, "BLR1", 4);
	want[4] = M;
	want[8] = N;
	want[12] = R;
	want[14] = 1;
	for (int i = 0; i < M; i++, o += 2)
		put_u16(want + o, h[i]);
	for (int j = 0; j < N; j++, o += 2)
		put_u16(want + o, g[j]);
	for (int k = 0; k < R; k++, o += 2)
		put_u16(want + o, l[k]);
	want[o + 0] = 0x01;
	want[o + 1] = 0x08;
	want[o + M + 15] = 0x80;
	ok(blr_build(M, N, R, 1, &in, buf) == 0 && memcmp(buf, want, sizeof(buf)) == 0,
	   "the bytes: header, h, g, ℓ (f16 LE), then S_U and S_V bits, LSB first, 1 = +1");
	su[5] = 0;
	ok(blr_build(M, N, R, 1, &in, buf) < 0 && strstr(nv_err(), "not ±1"), "a zero sign is refused");
	su[5] = -1;
	h[2] = 0x7e00;
	ok(blr_build(M, N, R, 1, &in, buf) < 0 && strstr(nv_err(), "not finite"), "a NaN scale is refused");
	h[2] = 0x3c00;
	ok(blr_build(M, N, 16, 1, &in, buf) < 0 && strstr(nv_err(), "rank 16"), "rank above the cap refused");
	ok(blr_build(4, N, R, 1, &in, buf) < 0 && strstr(nv_err(), "not encodable"), "m < 8 refused");
}

static int rejects(const uint8_t *b, size_t len, const char *needle)
{
	blr_header hd;
	blr_view v[2];

	if (blr_parse(b, len, &hd, v) == 0)
		return 0;
	if (!strstr(nv_err(), needle)) {
		diag("reason '%s' lacks '%s'", nv_err(), needle);
		return 0;
	}
	return 1;
}

static void parse(tap_rng *rng)
{
	enum { M = 24, N = 16, R = 16 };
	path_buf pb[2];
	size_t len;
	uint8_t *b = random_payload(M, N, R, 2, rng, 0, pb, &len), *c = malloc(len + 1);
	size_t one = 2 * (M + N + R) + (M + N) * R / 8;
	blr_header hd;
	blr_view v[2];
	int all = 1;

	ok(blr_parse(b, len, &hd, v) == 0 && hd.m == M && hd.n == N && hd.r == R && hd.paths == 2,
	   "a valid payload parses: 24×16 rank 16, two paths");
	ok(v[0].h == b + 16 && v[0].g == b + 16 + 2 * M && v[0].l == b + 16 + 2 * (M + N) &&
	   v[0].su == b + 16 + 2 * (M + N + R) && v[0].sv == v[0].su + M * R / 8 && v[1].h == b + 16 + one,
	   "views point at each field of each path");
	ok(blr_verify_shape(b, len, M, N) == 0, "verify against its own shape");
	ok(blr_verify_shape(b, len, N, M) < 0 && strstr(nv_err(), "not the expected 16x24"),
	   "verify against another shape fails");
	for (size_t cut = 0; cut < len; cut++)
		all &= rejects(b, cut, cut < 16 ? "shorter than the 16-byte" : "disagrees");
	ok(all, "every truncation (0..%zu bytes) is rejected and says why", len - 1);
	memcpy(c, b, len);
	c[len] = 0;
	ok(rejects(c, len + 1, "disagrees"), "one trailing byte is rejected");
#define MUTATE(what, stmt, needle)                                \
	do {                                                      \
		memcpy(c, b, len);                                \
		stmt;                                             \
		ok(rejects(c, len, needle), "rejected: %s", what); \
	} while (0)
	MUTATE("wrong magic", c[3] = '2', "magic");
	MUTATE("nonzero flags", c[15] = 1, "flags 0x01");
	MUTATE("paths 0", c[14] = 0, "paths 0");
	MUTATE("paths 3", c[14] = 3, "paths 3");
	MUTATE("rank 0", put_u16(c + 12, 0), "rank 0");
	MUTATE("rank 12 (not a multiple of 8)", put_u16(c + 12, 12), "rank 12");
	MUTATE("rank 24 above the cap 16", put_u16(c + 12, 24), "rank 24");
	MUTATE("d_out 0", put_u32(c + 4, 0), "d_out 0");
	MUTATE("d_in 0", put_u32(c + 8, 0), "d_in 0");
	MUTATE("d_in 4 (below 8)", put_u32(c + 8, 4), "not encodable");
	MUTATE("d_out too large for the bytes", put_u32(c + 4, 4000000), "disagrees");
	MUTATE("d_out and d_in at 2^32-1", (put_u32(c + 4, UINT32_MAX), put_u32(c + 8, UINT32_MAX)), "disagrees");
	MUTATE("NaN in h of path 0", put_u16(c + 16 + 2 * 3, 0x7e01), "path 0: h[3]");
	MUTATE("inf in g of path 1", put_u16(c + 16 + one + 2 * M + 2 * 5, 0xfc00), "path 1: g[5]");
	MUTATE("NaN in l of path 1", put_u16(c + 16 + one + 2 * (M + N) + 2 * 15, 0x7c01), "path 1: l[15]");
#undef MUTATE
	for (int k = 0; k < 2; k++)
		free_path(&pb[k]);
	free(b);
	free(c);
}

static void gauge(tap_rng *rng)
{
	enum { M = 16, N = 8, R = 8 };
	path_buf pb[2];
	size_t len;
	uint8_t *b = random_payload(M, N, R, 2, rng, 0, pb, &len), *c = malloc(len), *orig = malloc(len);
	double d[M];
	size_t one = 2 * (M + N + R) + (M + N) * R / 8;
	int bad = 0, rest = 1;

	for (int i = 0; i < M; i++)
		d[i] = (float)((rng_u64(rng) & 1 ? -1 : 1) * (0.25 + 3 * rng_unif(rng)));
	memcpy(c, b, len);
	ok(blr_gauge_undo(c, len, d, M) == 0, "undo a row gauge");
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < M; i++) {
			size_t off = 16 + p * one + 2 * i;
			double cur = nv_f16_to_f32(le_u16(b + off));

			bad += le_u16(c + off) != nv_f32_to_f16((float)(cur / d[i]));
			b[off] = c[off];
			b[off + 1] = c[off + 1];
		}
	is_int(bad, 0, "every h of both paths became f16(f32(h / d)) (the seed's undo_row_gauge)");
	ok(memcmp(b, c, len) == 0, "and nothing else changed");
	memcpy(orig, c, len);
	d[3] = 0;
	rest &= blr_gauge_undo(c, len, d, M) < 0 && strstr(nv_err(), "row factor 3");
	d[3] = NAN;
	rest &= blr_gauge_undo(c, len, d, M) < 0 && strstr(nv_err(), "row factor 3");
	d[3] = 1;
	rest &= blr_gauge_undo(c, len, d, M - 1) < 0 && strstr(nv_err(), "15 row factors for 16 rows");
	d[7] = 1e-6; /* h[7] = 8192 below: 8192 / 1e-6 is beyond 65504 */
	put_u16(c + 16 + 2 * 7, 0x7000);
	memcpy(orig, c, len);
	rest &= blr_gauge_undo(c, len, d, M) < 0 && strstr(nv_err(), "beyond the f16 range");
	ok(rest && memcmp(orig, c, len) == 0,
	   "zero, NaN, a wrong count or an f16 overflow are refused, and the bytes left as they were");
	for (int k = 0; k < 2; k++)
		free_path(&pb[k]);
	free(b);
	free(c);
	free(orig);
}

/*
 * random damage to a valid payload (bytes set, mostly in the header, and
 * cuts): each result is rejected, or parses, verifies against its own shape
 * and dequantizes to finite values; each copy is exactly as long as its
 * bytes, so a read past the end is an ASan error in `make SAN=1 check`
 */
static void mutations(tap_rng *rng)
{
	path_buf pb[2];
	size_t len;
	uint8_t *b = random_payload(24, 16, 16, 2, rng, 0, pb, &len);
	float *w = malloc(24 * 16 * sizeof(float) * 4);
	int broken = 0, accepted = 0;

	for (int it = 0; it < 20000; it++) {
		size_t l = len, k = 1 + rng_u64(rng) % 4;
		uint8_t *c;
		blr_header hd;
		blr_view v[2];

		if (rng_u64(rng) % 10 == 0)
			l = rng_u64(rng) % (len + 1);
		c = malloc(l ? l : 1);
		memcpy(c, b, l);
		for (size_t j = 0; j < k && l > 0; j++) {
			size_t at = rng_u64(rng) % 2 ? rng_u64(rng) % (l < 16 ? l : 16) : rng_u64(rng) % l;

			c[at] = (uint8_t)rng_u64(rng);
		}
		if (blr_parse(c, l, &hd, v) == 0) {
			accepted++;
			if (blr_verify_shape(c, l, hd.m, hd.n) < 0 || (size_t)hd.m * hd.n > 24 * 16 * 4 ||
			    blr_dequantize(c, l, w) < 0)
				broken++;
			for (size_t i = 0; i < (size_t)hd.m * hd.n && !broken; i++)
				broken += !isfinite(w[i]);
		}
		free(c);
	}
	is_int(broken, 0, "20,000 damaged payloads: each rejected, or valid and dequantized to finite values (%d accepted)", accepted);
	for (int k = 0; k < 2; k++)
		free_path(&pb[k]);
	free(w);
	free(b);
}

int main(void)
{
	tap_rng rng = { 1234 };

	delivered_budget_respects_the_request_or_names_the_floor();
	layout();
	parse(&rng);
	roundtrip(40, 24, 16, 2, SC_EXACT, &rng);
	roundtrip(40, 24, 16, 1, SC_EXACT, &rng);
	roundtrip(72, 130, 64, 2, SC_WIDE, &rng);
	roundtrip(8, 8, 8, 1, SC_WIDE, &rng);
	roundtrip(264, 256, 256, 2, SC_EDGE, &rng);
	roundtrip(520, 384, 64, 2, SC_WIDE, &rng); /* enough work for two threads' tiles */
	gauge(&rng);
	mutations(&rng);
	return done_testing();
}
