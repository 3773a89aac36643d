/*
 * adam.h - the Adam step of the two tuners (normcal.c, tparam.c): β1 0.9,
 * β2 0.999, ε 1e-8, bias-corrected, on parameters s with gradient g; and
 * the rate of each step.
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

/* the rate of step k (1-based) of steps: lr, or with cosine lr·½(1 + cos(π(k−1)/steps)),
 * from lr at the first step down towards 0 at the last */
static inline double nv_lr_at(double lr, int cosine, size_t k, size_t steps)
{
	if (!cosine || steps == 0)
		return lr;
	return lr * 0.5 * (1.0 + cos(M_PI * (double)(k - 1) / (double)steps));
}

#endif
