/*
 * prof.h - the per-stage profile of an encode (timing only: it never
 * changes a result), one for the CPU encoder and the device encoder: the
 * seed's "stage 1.23s | stage 0.10s/4 | ..." line.  Thread-safe: the
 * row-parallel stages add to one profile.
 */
#ifndef NV_PROF_H
#define NV_PROF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define NV_PROF_MAX 32

typedef struct {
	const char *name; /* a string literal */
	double secs;
	uint64_t n;
} nv_prof_entry;

typedef struct {
	nv_prof_entry e[NV_PROF_MAX]; /* first-seen order */
	size_t k;
	pthread_mutex_t mu;
} nv_prof;

void nv_prof_init(nv_prof *p);
void nv_prof_free(nv_prof *p);
/* add secs and a count to a stage (p may be NULL: no-op) */
void nv_prof_add(nv_prof *p, const char *name, double secs, uint64_t n);
/* "stage 1.23s | stage 0.10s/4 | ..." (count shown when nonzero) */
void nv_prof_line(nv_prof *p, char *buf, size_t len);
/* monotonic seconds */
double nv_now(void);

#endif
