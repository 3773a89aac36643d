/* par.c - a fixed set of jobs on threads of our own (par.h) */
#include "par.h"

#include <assert.h>
#include <stdatomic.h>
#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

/* a job of a batch (one nv_par call) waiting in the pool's queue */
typedef struct par_task par_task;
typedef struct {
	size_t left; /* the batch's jobs not yet done */
} par_batch;
struct par_task {
	void (*fn)(void *);
	void *job;
	int flush; /* nv_fp_flush of the caller */
	par_batch *batch;
	par_task *next;
};

/* the pool: its queue, its threads, one lock; work: a job queued; done: a
 * batch finished */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER;
static par_task *queue_head, *queue_tail;
static size_t pool_threads;
static int pool_broken; /* a thread could not be started: start no more */

/* the next queued job, under the lock, or NULL */
static par_task *queue_pop(void)
{
	par_task *t = queue_head;

	if (t) {
		queue_head = t->next;
		if (!queue_head)
			queue_tail = NULL;
	}
	return t;
}

/* task t run in its caller's flush mode, then counted done (the lock held
 * on entry and on return, not while it runs) */
static void task_run(par_task *t)
{
	int was;

	pthread_mutex_unlock(&pool_mu);
	was = nv_fp_flush(t->flush);
	t->fn(t->job);
	nv_fp_flush(was);
	pthread_mutex_lock(&pool_mu);
	if (--t->batch->left == 0)
		pthread_cond_broadcast(&pool_done);
}

static void *pool_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool_mu);
	for (;;) {
		par_task *t = queue_pop();

		if (t)
			task_run(t);
		else
			pthread_cond_wait(&pool_work, &pool_mu);
	}
	return NULL;
}

/* the pool grown to n threads where it can be (the lock held) */
static void pool_grow(size_t n)
{
	pthread_attr_t at;

	if (pool_broken || pool_threads >= n || pthread_attr_init(&at) != 0)
		return;
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	while (pool_threads < n) {
		pthread_t tid;

		if (pthread_create(&tid, &at, pool_thread, NULL) != 0) {
			pool_broken = 1;
			break;
		}
		pool_threads++;
	}
	pthread_attr_destroy(&at);
}

void nv_par(void *jobs, size_t n, size_t size, void (*fn)(void *))
{
	par_task task[NV_PAR_MAX];
	par_batch batch = { n ? n - 1 : 0 };
	char *base = jobs;
	int flush;

	assert(n <= NV_PAR_MAX);
	if (n == 0)
		return;
	flush = nv_fp_flush(0);
	nv_fp_flush(flush);
	pthread_mutex_lock(&pool_mu);
	pool_grow(n - 1);
	for (size_t t = 1; t < n; t++) {
		task[t] = (par_task){ fn, base + t * size, flush, &batch, NULL };
		if (queue_tail)
			queue_tail->next = &task[t];
		else
			queue_head = &task[t];
		queue_tail = &task[t];
	}
	if (n > 1)
		pthread_cond_broadcast(&pool_work);
	pthread_mutex_unlock(&pool_mu);
	fn(base);
	pthread_mutex_lock(&pool_mu);
	while (batch.left > 0) { /* the queue's jobs run here while ours are not done */
		par_task *t = queue_pop();

		if (t)
			task_run(t);
		else
			pthread_cond_wait(&pool_done, &pool_mu);
	}
	pthread_mutex_unlock(&pool_mu);
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

#if defined(__x86_64__) || defined(__i386__)
int nv_fp_flush(int on)
{
	const unsigned int bits = 0x8040; /* MXCSR's FTZ (bit 15) and DAZ (bit 6) */
	unsigned int csr = _mm_getcsr();

	_mm_setcsr(on ? csr | bits : csr & ~bits);
	return (csr & bits) == bits;
}
#elif defined(__aarch64__)
int nv_fp_flush(int on)
{
	const unsigned long fz = 1ul << 24; /* FPCR.FZ */
	unsigned long fpcr;

	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	__asm__ volatile("msr fpcr, %0" : : "r"(on ? fpcr | fz : fpcr & ~fz));
	return (fpcr & fz) != 0;
}
#else
int nv_fp_flush(int on)
{
	(void)on;
	return 0;
}
#endif
