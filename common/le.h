/*
 * le.h - little-endian readers and writers over byte buffers.
 *
 * Every file format of nvgkit is little-endian.  These go through bytes, so
 * they are correct on any host and never do unaligned loads.
 */
#ifndef NV_LE_H
#define NV_LE_H

#include <stdint.h>
#include <string.h>

static inline uint16_t le_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t le_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t le_u64(const uint8_t *p)
{
	return (uint64_t)le_u32(p) | (uint64_t)le_u32(p + 4) << 32;
}

static inline float le_f32(const uint8_t *p)
{
	uint32_t u = le_u32(p);
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline double le_f64(const uint8_t *p)
{
	uint64_t u = le_u64(p);
	double d;

	memcpy(&d, &u, 8);
	return d;
}

static inline void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline void put_f32(uint8_t *p, float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	put_u32(p, u);
}

static inline void put_f64(uint8_t *p, double d)
{
	uint64_t u;

	memcpy(&u, &d, 8);
	put_u64(p, u);
}

#endif
