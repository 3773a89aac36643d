/* kern.c - the encoder's element-wise loops (see kern.h); built with -O3 */
#include "kern.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KERN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KERN_CLONES
#endif

KERN_CLONES void nv_flip_gains(const double *s, const double *ks, const double *kd,
			       const double *bv, size_t r, double g, double *d)
{
	double c1 = -4.0 * g * g, c2 = 4.0 * g;

	for (size_t x = 0; x < r; x++)
		d[x] = c1 * s[x] * (ks[x] - kd[x] * s[x]) + c2 * s[x] * bv[x];
}

KERN_CLONES void nv_i8_scaled(const int8_t *s, double a, const double *cs, double *o, size_t c)
{
	if (cs)
		for (size_t k = 0; k < c; k++)
			o[k] = (double)s[k] * (a * cs[k]);
	else
		for (size_t k = 0; k < c; k++)
			o[k] = (double)s[k] * a;
}
