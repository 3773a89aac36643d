/*
 * adam.h - the Adam step of the two tuners (normcal.c, tune.c): β1 0.9,
 * β2 0.999, ε 1e-8, bias-corrected, on parameters s with gradient g.
 */
#ifndef NV_ADAM_H
#define NV_ADAM_H

#include <math.h>
#include <stddef.h>

/* step (1-based) of Adam over n parameters: s, the moments m and v updated */
static inline void nv_adam(double *s, double *m, double *v, const double *g, size_t n, double lr,
			   size_t step)
{
	double c1 = 1 - pow(0.9, (double)step), c2 = 1 - pow(0.999, (double)step);

	for (size_t i = 0; i < n; i++) {
		m[i] = 0.9 * m[i] + 0.1 * g[i];
		v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
		s[i] -= lr * (m[i] / c1) / (sqrt(v[i] / c2) + 1e-8);
	}
}

#endif
