/*
 * par.h - a fixed set of jobs on threads of our own.
 *
 * nv_par runs fn on each of n jobs (an array of n elements of size bytes),
 * job 0 on the calling thread and each other on a thread of its own, and
 * returns when all are done.  A job whose thread cannot be created runs on
 * the calling thread: the jobs' results never depend on where they ran.
 * At most NV_PAR_MAX jobs.
 */
#ifndef NV_PAR_H
#define NV_PAR_H

#include <stddef.h>

#define NV_PAR_MAX 64

void nv_par(void *jobs, size_t n, size_t size, void (*fn)(void *));

/*
 * fn(ctx, lo, hi) over [0, n) in up to nt contiguous parts of at least
 * grain each (one part on the calling thread when n < 2·grain): for loops
 * whose iterations are independent, so that the result does not depend on
 * the parts
 */
void nv_par_range(size_t n, size_t nt, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi),
		  void *ctx);

/*
 * fn(ctx, item, thread) for each item < n, taken in order from a shared
 * counter by up to nt threads (thread: 0..nt−1, for a buffer of its own):
 * for items whose results do not depend on which thread computed them
 */
void nv_par_items(size_t n, size_t nt, void (*fn)(void *ctx, size_t item, size_t thread),
		  void *ctx);

#endif
