/*
 * bench.h - what the benchmark programs of tests/bench share: a monotonic
 * clock and the comparison that sorts measurements for their median.  Header only: each program is
 * built alone by its script, and finds this file beside its source.
 */
#ifndef NV_BENCH_H
#define NV_BENCH_H

#include <stdlib.h>
#include <time.h>

/* monotonic seconds */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

#endif
