/*
 * par.h - a fixed set of jobs on threads of our own.
 *
 * nv_par runs fn on each of n jobs (an array of n elements of size bytes),
 * job 0 on the calling thread and the others on a pool of threads that
 * live for the process (started as first needed, at most NV_PAR_MAX − 1),
 * and returns when all are done.  A caller waiting for its jobs runs the
 * pool's waiting jobs itself, its own or another caller's, so that jobs
 * that call nv_par (and callers on several threads at once) never wait on
 * each other; where no thread can be started, the callers run every job.
 * The jobs' results never depend on where they ran: each runs with the
 * flush mode (nv_fp_flush) of the nv_par that made it.  At most NV_PAR_MAX
 * jobs.
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

/*
 * subnormal floats flushed to zero (on, 1) or kept (0) in the calling
 * thread's arithmetic, results and operands both (x86's FTZ and DAZ,
 * aarch64's FZ), for it and for the jobs of the nv_par calls it makes;
 * returns the previous setting (0 where the CPU has no such mode).  The forward's softmax and SwiGLU can make subnormals (a model far
 * from its source, a very peaked attention), and each product that reads
 * one runs several times slower: the f32 tools (cmf-eval, gram-capture,
 * blr-tune) flush from the start of main.
 */
int nv_fp_flush(int on);

#endif
