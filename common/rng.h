/*
 * rng.h - the fixed-seed orders of the tuning steps (normcal.c, tune.c):
 * splitmix64 and a Fisher-Yates shuffle of 0..n−1 drawn from it, so that the
 * same seed gives the same batches on every machine.
 */
#ifndef NV_RNG_H
#define NV_RNG_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t nv_mix64(uint64_t *st)
{
	uint64_t z = (*st += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* p[0..n) ← a permutation of 0..n−1 */
static inline void nv_shuffle(size_t *p, size_t n, uint64_t *st)
{
	for (size_t i = 0; i < n; i++)
		p[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(nv_mix64(st) % i), t = p[i - 1];

		p[i - 1] = p[j];
		p[j] = t;
	}
}

#endif
