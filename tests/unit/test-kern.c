/* test-kern.c - the encoder's element-wise loops (kern.h) give the bits of
 * their plain C formulas, written out here as the callers wrote them before,
 * on every length from 0 to 37 (each remainder of a vector's width) and 1001 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"
#include "tap.h"

static tap_rng rng = {12};

static void test_flip_gains(void)
{
	size_t bad = 0;

	for (size_t r = 0; r <= 38; r++) {
		size_t n = r == 38 ? 1001 : r;
		double *s = malloc((n + 1) * sizeof(double)), *ks = malloc((n + 1) * sizeof(double));
		double *kd = malloc((n + 1) * sizeof(double)), *bv = malloc((n + 1) * sizeof(double));
		double *d = malloc((n + 1) * sizeof(double)), g = rng_normal(&rng);
		for (size_t x = 0; x < n; x++) {
			s[x] = rng_unif(&rng) < 0.5 ? -1.0 : 1.0;
			ks[x] = rng_normal(&rng);
			kd[x] = fabs(rng_normal(&rng));
			bv[x] = rng_normal(&rng);
		}
		nv_flip_gains(s, ks, kd, bv, n, g, d);
		for (size_t x = 0; x < n; x++) {
			double want = -4.0 * g * g * s[x] * (ks[x] - kd[x] * s[x]) +
				      4.0 * g * s[x] * bv[x];
			bad += memcmp(&want, &d[x], sizeof want) != 0;
		}
		free(s), free(ks), free(kd), free(bv), free(d);
	}
	ok(bad == 0, "flip_gains: the formula's bits at every length (%zu differ)", bad);
}

static void test_i8_scaled(void)
{
	size_t bad = 0;

	for (size_t c = 0; c <= 38; c++) {
		size_t n = c == 38 ? 1001 : c;
		int8_t *s = malloc(n + 1);
		double *cs = malloc((n + 1) * sizeof(double)), *o = malloc((n + 1) * sizeof(double));
		double a = rng_normal(&rng);
		for (size_t k = 0; k < n; k++) {
			s[k] = rng_unif(&rng) < 0.5 ? -1 : 1;
			cs[k] = rng_normal(&rng);
		}
		for (int with = 0; with < 2; with++) {
			nv_i8_scaled(s, a, with ? cs : NULL, o, n);
			for (size_t k = 0; k < n; k++) {
				double want = (double)s[k] * (a * (with ? cs[k] : 1.0));
				bad += memcmp(&want, &o[k], sizeof want) != 0;
			}
		}
		free(s), free(cs), free(o);
	}
	ok(bad == 0, "i8_scaled: the formula's bits at every length, with and without cs (%zu differ)",
	   bad);
}

int main(void)
{
	test_flip_gains();
	test_i8_scaled();
	return done_testing();
}
