/* par.c - a fixed set of jobs on threads of our own (par.h) */
#include "par.h"

#include <assert.h>
#include <stdatomic.h>
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

typedef struct {
	void (*fn)(void *ctx, size_t lo, size_t hi);
	void *ctx;
	size_t lo, hi;
} par_part;

static void par_part_run(void *arg)
{
	const par_part *p = arg;

	p->fn(p->ctx, p->lo, p->hi);
}

void nv_par_range(size_t n, size_t nt, size_t grain, void (*fn)(void *ctx, size_t lo, size_t hi),
		  void *ctx)
{
	par_part part[NV_PAR_MAX];

	grain = grain ? grain : 1;
	nt = nt > n / grain ? n / grain : nt;
	nt = nt < 1 ? 1 : nt > NV_PAR_MAX ? NV_PAR_MAX : nt;
	for (size_t t = 0; t < nt; t++)
		part[t] = (par_part){ fn, ctx, n * t / nt, n * (t + 1) / nt };
	nv_par(part, nt, sizeof part[0], par_part_run);
}

typedef struct {
	void (*fn)(void *ctx, size_t item, size_t thread);
	void *ctx;
	size_t n;
	atomic_size_t *next;
	size_t thread;
} par_taker;

static void par_take(void *arg)
{
	const par_taker *p = arg;

	for (size_t it; (it = atomic_fetch_add(p->next, 1)) < p->n;)
		p->fn(p->ctx, it, p->thread);
}

void nv_par_items(size_t n, size_t nt, void (*fn)(void *ctx, size_t item, size_t thread),
		  void *ctx)
{
	par_taker tk[NV_PAR_MAX];
	atomic_size_t next;

	atomic_init(&next, 0);
	nt = nt > n ? n : nt;
	nt = nt < 1 ? 1 : nt > NV_PAR_MAX ? NV_PAR_MAX : nt;
	for (size_t t = 0; t < nt; t++)
		tk[t] = (par_taker){ fn, ctx, n, &next, t };
	nv_par(tk, nt, sizeof tk[0], par_take);
}
