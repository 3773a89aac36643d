/* test-par.c - nv_par's pool: every job once, nested calls and callers on
 * several threads at once without a wait on each other, threads kept from
 * call to call, each job in its caller's flush mode */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "par.h"
#include "tap.h"

typedef struct {
	atomic_int *runs; /* this job's count of runs */
	int inner;	  /* > 0: the job calls nv_par on that many jobs of its own */
	atomic_int *inner_runs;
	long tid;	  /* the thread it ran on */
	int sleep_us;
	int flushed;	  /* 1: 1e-20 squared came out 0 (the flush on) */
} job;

static void inner_run(void *arg)
{
	atomic_fetch_add(((job *)arg)->runs, 1);
}

static void job_run(void *arg)
{
	job *j = arg;
	volatile float tiny = 1e-20f;

	j->tid = (long)syscall(SYS_gettid);
	j->flushed = tiny * tiny == 0.0f;
	if (j->sleep_us) {
		struct timespec ts = { 0, j->sleep_us * 1000L };
		nanosleep(&ts, NULL);
	}
	if (j->inner > 0) {
		job in[NV_PAR_MAX];

		for (int k = 0; k < j->inner; k++)
			in[k] = (job){ .runs = &j->inner_runs[k] };
		nv_par(in, (size_t)j->inner, sizeof in[0], inner_run);
	}
	atomic_fetch_add(j->runs, 1);
}

/* n jobs (inner: each with its own nv_par of that many); 1 if every job
 * and every inner job ran exactly once */
static int once_each(size_t n, int inner)
{
	job jobs[NV_PAR_MAX];
	atomic_int runs[NV_PAR_MAX], inner_runs[NV_PAR_MAX][NV_PAR_MAX];
	int good = 1;

	for (size_t t = 0; t < n; t++) {
		atomic_init(&runs[t], 0);
		for (int k = 0; k < NV_PAR_MAX; k++)
			atomic_init(&inner_runs[t][k], 0);
		jobs[t] = (job){ .runs = &runs[t], .inner = inner, .inner_runs = inner_runs[t] };
	}
	nv_par(jobs, n, sizeof jobs[0], job_run);
	for (size_t t = 0; t < n; t++) {
		good &= atomic_load(&runs[t]) == 1;
		for (int k = 0; k < inner; k++)
			good &= atomic_load(&inner_runs[t][k]) == 1;
	}
	return good;
}

static void *caller(void *arg)
{
	int *good = arg;

	for (int i = 0; i < 200; i++)
		*good &= once_each(5, i % 3);
	return NULL;
}

/* the threads of 100 calls of 4 sleeping jobs, the first calls of the
 * process: more than the caller, and no more than the caller and the 3
 * threads the pool then holds (a thread started per job would show 301) */
static void pool_kept(void)
{
	long seen[4 * 100];
	size_t nseen = 0, distinct = 0;
	long self = (long)syscall(SYS_gettid);
	int others = 0;

	for (int c = 0; c < 100; c++) {
		job jobs[4];
		atomic_int runs[4];

		for (int t = 0; t < 4; t++) {
			atomic_init(&runs[t], 0);
			jobs[t] = (job){ .runs = &runs[t], .sleep_us = 200 };
		}
		nv_par(jobs, 4, sizeof jobs[0], job_run);
		for (int t = 0; t < 4; t++) {
			seen[nseen++] = jobs[t].tid;
			others |= jobs[t].tid != self;
		}
	}
	for (size_t i = 0; i < nseen; i++) {
		int dup = 0;

		for (size_t k = 0; k < i && !dup; k++)
			dup = seen[k] == seen[i];
		distinct += !dup;
	}
	ok(others, "jobs run on threads other than the caller's");
	ok(distinct <= 4, "100 calls of 4 jobs ran on %zu threads: the caller and the pool's, kept",
	   distinct);
}

/* the flush mode of the caller in every job, whatever the pool's thread
 * ran before */
static void flush_follows(void)
{
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
	int was = nv_fp_flush(1), on = 1, off = 1;

	for (int round = 0; round < 4; round++) {
		job jobs[8];
		atomic_int runs[8];

		nv_fp_flush(round % 2 == 0);
		for (int t = 0; t < 8; t++) {
			atomic_init(&runs[t], 0);
			jobs[t] = (job){ .runs = &runs[t], .sleep_us = 100 };
		}
		nv_par(jobs, 8, sizeof jobs[0], job_run);
		for (int t = 0; t < 8; t++) {
			if (round % 2 == 0)
				on &= jobs[t].flushed;
			else
				off &= !jobs[t].flushed;
		}
	}
	nv_fp_flush(was);
	ok(on, "a caller's flush on: every job flushes");
	ok(off, "a caller's flush off: no job flushes, on the same pool");
#else
	ok(1, "no flush mode on this CPU");
	ok(1, "no flush mode on this CPU");
#endif
}

int main(void)
{
	int good = 1;
	pthread_t tid[4];
	int cgood[4] = {1, 1, 1, 1};

	alarm(120); /* a wait on each other would hang: fail instead */
	pool_kept();
	for (size_t n = 0; n <= NV_PAR_MAX; n++)
		good &= once_each(n, 0);
	ok(good, "nv_par of 0 to %d jobs runs each once", NV_PAR_MAX);
	ok(once_each(NV_PAR_MAX, 8), "64 jobs each with 8 of its own: each runs once");
	ok(once_each(3, NV_PAR_MAX), "3 jobs each with 64 of its own: each runs once");
	for (int t = 0; t < 4; t++)
		pthread_create(&tid[t], NULL, caller, &cgood[t]);
	for (int t = 0; t < 4; t++)
		pthread_join(tid[t], NULL);
	ok(cgood[0] && cgood[1] && cgood[2] && cgood[3],
	   "4 callers at once, 200 calls each (some nested): each job once");
	flush_follows();
	return done_testing();
}
