/* par.c - a fixed set of jobs on threads of our own (par.h) */
#include "par.h"

#include <assert.h>
#include <pthread.h>

typedef struct {
	void (*fn)(void *);
	void *job;
} par_call;

static void *par_start(void *arg)
{
	const par_call *c = arg;

	c->fn(c->job);
	return NULL;
}

void nv_par(void *jobs, size_t n, size_t size, void (*fn)(void *))
{
	pthread_t tid[NV_PAR_MAX];
	par_call call[NV_PAR_MAX];
	int started[NV_PAR_MAX] = {0};
	char *base = jobs;

	assert(n <= NV_PAR_MAX);
	for (size_t t = 1; t < n; t++) {
		call[t] = (par_call){fn, base + t * size};
		started[t] = pthread_create(&tid[t], NULL, par_start, &call[t]) == 0;
	}
	if (n)
		fn(base);
	for (size_t t = 1; t < n; t++) {
		if (started[t])
			pthread_join(tid[t], NULL);
		else
			fn(base + t * size); /* no thread to be had: that job here */
	}
}
