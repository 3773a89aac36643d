/* f16.c - IEEE 754 binary16 and bfloat16 <-> binary32 (see f16.h) */
#include "f16.h"

#include <string.h>

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

float nv_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f) /* inf, or NaN with its payload moved to the top */
		return bits_f32(sign | 0x7f800000u | m << 13);
	if (e != 0)
		return bits_f32(sign | (e + 112) << 23 | m << 13);
	if (m == 0)
		return bits_f32(sign);
	/* subnormal m·2^-24: normalise the mantissa into an f32 normal */
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return bits_f32(sign | e << 23 | (m & 0x3ff) << 13);
}

/* v >> s rounded to nearest, ties to even (1 ≤ s ≤ 31) */
static uint32_t shift_rne(uint32_t v, unsigned s)
{
	uint32_t q = v >> s, rem = v & ((1u << s) - 1), half = 1u << (s - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

uint16_t nv_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffffu, e = ax >> 23;

	if (ax > 0x7f800000u) /* NaN: keep the payload's top bits, force quiet */
		return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
	if (e >= 143) /* |f| ≥ 2^16 (or inf): beyond the f16 range */
		return sign | 0x7c00;
	if (e >= 113) /* normal: the carry of a round-up may reach the exponent */
		return (uint16_t)(sign | shift_rne(ax - (112u << 23), 13));
	if (e < 102) /* |f| < 2^-25: below half the least subnormal */
		return sign;
	/* subnormal result: units of 2^-24, the implicit bit made explicit */
	return (uint16_t)(sign | shift_rne((ax & 0x7fffff) | 0x800000, 126 - e));
}

float nv_bf16_to_f32(uint16_t b)
{
	return bits_f32((uint32_t)b << 16);
}

uint16_t nv_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
