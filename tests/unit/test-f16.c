/* test-f16.c - f16 and bf16 conversions, exhaustively and at every rounding boundary */
#include "f16.h"
#include "tap.h"

#include <float.h>
#include <math.h>
#include <string.h>

static uint32_t bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* the value an f16 encodes, from its definition (sign, exponent, mantissa) */
static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v;

	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(1024 + m, e - 25);
	return h & 0x8000 ? -v : v;
}

/*
 * the f16 nearest to x (ties to the even encoding), by search over the
 * positive finite encodings, which increase with their bit patterns
 */
static uint16_t f16_nearest(double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0, lo = 0, hi = 0x7bff;
	double a = fabs(x);

	if (isnan(x))
		return 0x7e00;
	if (a >= 65520.0) /* 65504 + half its spacing of 32: ties to even go up */
		return sign | 0x7c00;
	if (a >= 65504.0)
		return sign | 0x7bff;
	while (hi - lo > 1) { /* invariant: value(lo) ≤ a < value(hi) */
		uint16_t mid = (uint16_t)((lo + hi) / 2);

		if (f16_value(mid) <= a)
			lo = mid;
		else
			hi = mid;
	}
	if (a - f16_value(lo) < f16_value(hi) - a)
		return sign | lo;
	if (a - f16_value(lo) > f16_value(hi) - a)
		return sign | hi;
	return sign | (lo & 1 ? hi : lo);
}

static void exhaustive_decode(void)
{
	int bad = 0, badnan = 0, badtrip = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		float f = nv_f16_to_f32((uint16_t)h);
		double want = f16_value((uint16_t)h);

		if (isnan(want)) {
			/* NaN: stays NaN, sign kept, quiet after a round trip, payload kept */
			if (!isnan(f) || !!signbit(f) != !!(h & 0x8000))
				badnan++;
			if (nv_f32_to_f16(f) != (h | 0x0200))
				badnan++;
			continue;
		}
		if ((double)f != want || !!signbit(f) != !!(h & 0x8000))
			bad++;
		if (nv_f32_to_f16(f) != h)
			badtrip++;
	}
	is_int(bad, 0, "all 63,488 non-NaN f16 values decode to their defined value");
	is_int(badnan, 0, "all 2,046 NaN encodings decode to NaN (sign kept, quiet on return)");
	is_int(badtrip, 0, "f16 -> f32 -> f16 is the identity on every non-NaN value");
}

/* midpoints between neighbours, and the floats just either side of them */
static void rounding_boundaries(void)
{
	int bad = 0;

	for (uint32_t h = 0; h < 0x7bff; h++) {
		for (int s = 0; s < 2; s++) {
			uint16_t lo = (uint16_t)(h | (s ? 0x8000 : 0)), hi = (uint16_t)(lo + 1);
			/* the midpoint has 12 significant bits: exact in f32 */
			float mid = (float)((f16_value(lo) + f16_value(hi)) / 2);
			float below = nextafterf(mid, 0), above = nextafterf(mid, s ? -INFINITY : INFINITY);
			uint16_t even = lo & 1 ? hi : lo;

			if (nv_f32_to_f16(mid) != even || nv_f32_to_f16(below) != lo ||
			    nv_f32_to_f16(above) != hi) {
				if (bad++ < 5)
					diag("boundary %04x|%04x: mid %a -> %04x", lo, hi, mid,
					     nv_f32_to_f16(mid));
			}
		}
	}
	is_int(bad, 0, "every midpoint between adjacent f16 values ties to even, its neighbours round to the nearer");
	is_int(nv_f32_to_f16(65520.0f), 0x7c00, "65520 (max + half a step) ties to even: inf");
	is_int(nv_f32_to_f16(nextafterf(65520.0f, 0)), 0x7bff, "just below 65520 rounds to 65504");
	is_int(nv_f32_to_f16(-65520.0f), 0xfc00, "-65520 rounds to -inf");
	is_int(nv_f32_to_f16(65536.0f), 0x7c00, "2^16 overflows to inf");
	is_int(nv_f32_to_f16(FLT_MAX), 0x7c00, "FLT_MAX overflows to inf");
	is_int(nv_f32_to_f16(INFINITY), 0x7c00, "inf stays inf");
	is_int(nv_f32_to_f16(-INFINITY), 0xfc00, "-inf stays -inf");
	is_int(nv_f32_to_f16(0x1p-25f), 0x0000, "2^-25 (half the least subnormal) ties to even: 0");
	is_int(nv_f32_to_f16(nextafterf(0x1p-25f, 1)), 0x0001, "just above 2^-25 rounds to the least subnormal");
	is_int(nv_f32_to_f16(-0x1p-25f), 0x8000, "-2^-25 rounds to -0");
	is_int(nv_f32_to_f16(0x1.8p-24f), 0x0002, "1.5·2^-24 ties to even: 2·2^-24");
	is_int(nv_f32_to_f16(0x1p-26f), 0x0000, "2^-26 underflows to 0");
	is_int(nv_f32_to_f16(FLT_TRUE_MIN), 0x0000, "the least f32 subnormal underflows to 0");
	is_int(nv_f32_to_f16(-0.0f), 0x8000, "-0 keeps its sign");
	is_int(nv_f32_to_f16(0x1.ff8p-15f), 0x03ff, "the largest f16 subnormal");
	is_int(nv_f32_to_f16(0x1.ffcp-15f), 0x0400, "halfway above the largest subnormal ties to even: the least normal");
	is_int(nv_f32_to_f16(from_bits(0x7fc00000u)), 0x7e00, "quiet NaN");
	is_int(nv_f32_to_f16(from_bits(0xff800001u)), 0xfe00, "signalling NaN with a low payload becomes a quiet NaN, sign kept");
}

/* random f32 of every magnitude against the search above */
static void random_encode(void)
{
	tap_rng rng = { 20260601 };
	int bad = 0;

	for (int i = 0; i < 400000; i++) {
		/* exponents from 2^-30 to 2^17 cover underflow, subnormal, normal, overflow */
		uint32_t e = 97 + (uint32_t)(rng_u64(&rng) % 48);
		uint32_t u = (uint32_t)(rng_u64(&rng) & 0x807fffffu) | e << 23;
		float f = from_bits(u);

		if (nv_f32_to_f16(f) != f16_nearest(f)) {
			if (bad++ < 5)
				diag("%a -> %04x, want %04x", f, nv_f32_to_f16(f), f16_nearest(f));
		}
	}
	is_int(bad, 0, "400,000 random f32 round to the nearest f16 found by search");
#ifdef __FLT16_MAX__
	bad = 0;
	for (int i = 0; i < 400000; i++) {
		float f = from_bits((uint32_t)rng_u64(&rng));
		_Float16 c = (_Float16)f;
		uint16_t want;

		if (isnan(f))
			continue;
		memcpy(&want, &c, 2);
		if (nv_f32_to_f16(f) != want)
			bad++;
	}
	is_int(bad, 0, "400,000 random f32 bit patterns agree with the compiler's _Float16");
#endif
}

static void bf16(void)
{
	int bad = 0;
	tap_rng rng = { 7 };

	for (uint32_t b = 0; b < 65536; b++) {
		float f = nv_bf16_to_f32((uint16_t)b);

		if (bits(f) != b << 16)
			bad++;
		if (!isnan(f) && nv_f32_to_bf16(f) != b)
			bad++;
		if (isnan(f) && (nv_f32_to_bf16(f) & 0x7fc0) != 0x7fc0)
			bad++;
	}
	is_int(bad, 0, "all 65,536 bf16 values: exact decode, identity round trip, NaN kept");
	bad = 0;
	for (int i = 0; i < 200000; i++) {
		uint32_t u = (uint32_t)rng_u64(&rng);
		float f = from_bits(u);
		uint16_t lo = (uint16_t)(u >> 16), want;
		double dlo, dhi, x = f;

		if (isnan(f) || isinf(f))
			continue;
		/* the two candidates either side, by magnitude; ties to even */
		dlo = nv_bf16_to_f32(lo);
		dhi = nv_bf16_to_f32((uint16_t)(lo + 1));
		if (fabs(x - dlo) < fabs(dhi - x))
			want = lo;
		else if (fabs(x - dlo) > fabs(dhi - x))
			want = (uint16_t)(lo + 1);
		else
			want = lo & 1 ? (uint16_t)(lo + 1) : lo;
		if (nv_f32_to_bf16(f) != want)
			bad++;
	}
	is_int(bad, 0, "200,000 random f32 round to the nearer bf16, ties to even");
}

int main(void)
{
	exhaustive_decode();
	rounding_boundaries();
	random_encode();
	bf16();
	return done_testing();
}
