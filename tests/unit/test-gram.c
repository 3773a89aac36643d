/*
 * test-gram.c - Gram accumulation against a naive f64 sum written here,
 * the FIT/SEL split of filter mode, and its refusals.
 */
#include "err.h"
#include "gram.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static double gram_err(const nvgg *g, const float *x, size_t r0, size_t T, size_t n)
{
	double e = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double s = 0;

			for (size_t t = r0; t < r0 + T; t++)
				s += (double)x[t * n + i] * x[t * n + j];
			s /= (double)T;
			e = fmax(e, fabs(g->g[i * n + j] - s) / (fabs(s) + 1e-3));
		}
	return e;
}

int main(void)
{
	size_t n = 7, T = 600;
	float *x = malloc(T * n * sizeof *x);
	tap_rng r = { 11 };
	char dir[256], p[512];
	const char *files[2];
	gr_acc a, acc[2];
	nvgg g;
	FILE *f;
	int sym = 1;

	for (size_t i = 0; i < T * n; i++)
		x[i] = (float)(rng_normal(&r) + (i % n == 2 ? 3.0 : 0.0));
	ok(gr_init(&a, n) == 0 && gr_add(&a, x, 100) == 0 && gr_add(&a, x + 100 * n, 500) == 0,
	   "accumulate 600 rows in two calls");
	ok(gr_finish(&a, &g) == 0 && g.count == 600 && g.n == n, "count 600, n 7");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			sym &= g.g[i * n + j] == g.g[j * n + i];
	ok(sym, "the stored Gram is exactly symmetric");
	/* f64 sums stored as f32: relative error of f32 rounding, 1e-6 */
	ok(gram_err(&g, x, 0, T, n) < 1e-6, "the mean Gram equals the naive sum (rel err %.2g)",
	   gram_err(&g, x, 0, T, n));
	nvgg_free(&g);
	x[5 * n + 3] = NAN;
	ok(gr_add(&a, x, 10) < 0 && strstr(nv_err(), "row 5, channel 3 is nan"),
	   "a non-finite value is named: %s", nv_err());
	x[5 * n + 3] = 0.5f;
	gr_free(&a);
	gr_init(&a, n);
	ok(gr_finish(&a, &g) < 0, "an empty Gram is refused");
	gr_free(&a);

	snprintf(dir, sizeof dir, "/tmp/test-gram.%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(p, sizeof p, "%s/rows.f32", dir);
	f = fopen(p, "wb");
	fwrite(x, sizeof *x, T * n, f);
	fclose(f);
	files[0] = p;
	gr_init(&acc[0], n);
	gr_init(&acc[1], n);
	ok(gr_filter(files, 1, n, 1, 400, 150, acc) == 0 && acc[0].count == 400 &&
	   acc[1].count == 150, "filter: FIT 400 rows, SEL 150, the rest unread");
	gr_finish(&acc[1], &g);
	ok(gram_err(&g, x, 400, 150, n) < 1e-6, "the SEL Gram is of rows 400..549");
	nvgg_free(&g);
	gr_free(&acc[0]);
	gr_free(&acc[1]);
	gr_init(&acc[0], n);
	gr_init(&acc[1], n);
	ok(gr_filter(files, 1, n, 1, 500, 150, acc) < 0 &&
	   strstr(nv_err(), "600 rows of width 7, the split needs 650"),
	   "too few rows for the split: %s", nv_err());
	gr_free(&acc[0]);
	gr_free(&acc[1]);
	gr_init(&acc[0], 9);
	gr_init(&acc[1], 9);
	ok(gr_filter(files, 1, 9, 0, 0, 0, acc) < 0 && strstr(nv_err(), "16800 bytes, not a multiple of 4·9"),
	   "bytes that are not whole rows: %s", nv_err());
	gr_free(&acc[0]);
	gr_free(&acc[1]);
	unlink(p);
	rmdir(dir);
	free(x);
	return done_testing();
}
