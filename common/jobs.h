/*
 * jobs.h - idle job slots of make's jobserver, lent as threads.
 *
 * Under make -jN a conversion runs a layer's encodes N at a time, the
 * longest first, and each layer still ends with its longest encode
 * running while the other slots have nothing left to start.  GNU make
 * hands slots out as tokens, one byte each in a pipe (or a named pipe,
 * make 4.4) that MAKEFLAGS names to the recipes it marks recursive: a
 * process may read a token, use one more CPU, and must write it back.
 *
 * nv_jobs_lend watches the pipe from a thread of its own and takes a
 * token only when it has lain there unclaimed for a poll period or more
 * (make itself takes a token the moment it has a job to start, so a slot
 * that stays free is one nothing else wants), up to max tokens, calling
 * grow after each; nv_jobs_close gives every token back.  The threads it
 * lends only change the speed: the encoders' bytes do not depend on their
 * thread count (linalg.h).  A token held when the process dies is lost to
 * the make that lent it, which then runs fewer jobs at a time; make's
 * recipes fail with the process anyway.
 */
#ifndef NV_JOBS_H
#define NV_JOBS_H

#include <stddef.h>

typedef struct nv_jobs nv_jobs;

/*
 * The jobserver that makeflags (MAKEFLAGS's value) names with its last
 * --jobserver-auth= (or make 4.1's --jobserver-fds=): "R,W", two
 * descriptors of a pipe, or "fifo:PATH".  *out is NULL (return 0) when it
 * names none, or descriptors that are not open here (a recipe make did not
 * mark recursive, whose descriptors make closes) or not a pipe; -1 with
 * reason when the entry is malformed, or the pipe cannot be opened, or the
 * named pipe is not one.
 */
int nv_jobs_open(const char *makeflags, nv_jobs **out);

/*
 * start lending: every poll_ms milliseconds a thread looks at the pipe, and
 * takes a token seen there on two looks in a row, while it holds fewer than
 * max; grow(ctx, held) after each token taken, on that thread.  -1 with
 * reason when the thread cannot be started (nothing is lent then).
 */
int nv_jobs_lend(nv_jobs *j, size_t max, unsigned poll_ms, void (*grow)(void *ctx, size_t held),
		 void *ctx);

/* the tokens held now */
size_t nv_jobs_held(nv_jobs *j);

/*
 * stop lending, write every token taken back (the bytes read, in order),
 * close and free j (NULL: nothing); -1 with reason when a token could not
 * be written back (j is freed all the same)
 */
int nv_jobs_close(nv_jobs *j);

#endif
