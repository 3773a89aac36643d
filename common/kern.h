/* kern.h - the encoder's element-wise loops, vectorized where the CPU has
 * AVX2 (the file is built with -O3 and each function cloned for it).  No
 * sum is reordered and nothing is fused, so every clone gives the bits of
 * the plain C loop it is written as. */
#ifndef NV_KERN_H
#define NV_KERN_H

#include <stddef.h>
#include <stdint.h>

/*
 * the gain of flipping each sign of a column (gptq_v's greedy search):
 * d[x] = −4g²·s_x·(ks_x − kd_x·s_x) + 4g·s_x·bv_x, x < r, evaluated as
 * ((−4g)·g)·s_x·(ks_x − kd_x·s_x) + ((4g)·s_x)·bv_x
 */
void nv_flip_gains(const double *s, const double *ks, const double *kd, const double *bv,
		   size_t r, double g, double *d);

/* o[k] = s[k]·(a·cs[k]) for k < c (cs NULL: s[k]·a, the same bits as a·1) */
void nv_i8_scaled(const int8_t *s, double a, const double *cs, double *o, size_t c);

#endif
