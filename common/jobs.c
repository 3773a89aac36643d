/* jobs.c - idle job slots of make's jobserver, lent as threads (jobs.h) */
#include "jobs.h"

#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the most tokens one process takes (make -j beyond it gains nothing here) */
#define JOBS_MAX 1024

struct nv_jobs {
	int rfd;           /* ours: non-blocking, its own open file description */
	int wfd;           /* make's write end (a pipe), or rfd (a named pipe) */
	unsigned char *tok; /* (max) the tokens taken, in order */
	size_t held, max;
	unsigned poll_ms;
	void (*grow)(void *, size_t);
	void *ctx;
	pthread_t th;
	int started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* the value of the last "--jobserver-auth=" or "--jobserver-fds=" word, into v (cap) */
static int auth_value(const char *flags, char *v, size_t cap)
{
	static const char *const keys[] = { "--jobserver-auth=", "--jobserver-fds=" };
	const char *best = NULL;

	for (size_t k = 0; k < 2; k++)
		for (const char *p = flags; (p = strstr(p, keys[k])) != NULL; p++)
			if ((p == flags || p[-1] == ' ') && (!best || p > best))
				best = p + strlen(keys[k]);
	if (!best)
		return 0;
	size_t n = strcspn(best, " ");
	if (n == 0 || n >= cap) {
		nv_seterr("MAKEFLAGS: a jobserver entry of %zu characters", n);
		return -1;
	}
	memcpy(v, best, n);
	v[n] = 0;
	return 1;
}

static int is_pipe(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static int parse_fds(const char *v, int *r, int *w)
{
	char *e, *f = NULL;
	long a = strtol(v, &e, 10), b = 0;

	if (e != v && *e == ',')
		b = strtol(e + 1, &f, 10);
	if (!f || *f || f == e + 1) {
		nv_seterr("MAKEFLAGS: jobserver '%s' is not R,W or fifo:PATH", v);
		return -1;
	}
	*r = a < 0 || a > 1 << 20 ? -1 : (int)a;
	*w = b < 0 || b > 1 << 20 ? -1 : (int)b;
	return 0;
}

/* a read end of our own on make's pipe R (so that O_NONBLOCK is ours alone) */
static int open_fds(nv_jobs *j, const char *v)
{
	char path[64];
	int r, w;

	if (!strncmp(v, "fifo:", 5)) {
		if ((j->rfd = open(v + 5, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
			nv_seterr("jobserver fifo '%s': %s", v + 5, strerror(errno));
			return -1;
		}
		if (!is_pipe(j->rfd)) {
			close(j->rfd);
			nv_seterr("jobserver fifo '%s': not a named pipe", v + 5);
			return -1;
		}
		j->wfd = j->rfd;
		return 1;
	}
	if (parse_fds(v, &r, &w) < 0)
		return -1;
	if (r < 0 || w < 0 || !is_pipe(r) || !is_pipe(w))
		return 0; /* not given to this process */
	snprintf(path, sizeof path, "/proc/self/fd/%d", r);
	if ((j->rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		nv_seterr("jobserver pipe %d: %s", r, strerror(errno));
		return -1;
	}
	j->wfd = w;
	return 1;
}

int nv_jobs_open(const char *makeflags, nv_jobs **out)
{
	char v[4096];
	nv_jobs *j;
	int rc;

	*out = NULL;
	if (!makeflags || (rc = auth_value(makeflags, v, sizeof v)) <= 0)
		return rc < 0 ? -1 : 0;
	if (!(j = calloc(1, sizeof *j))) {
		nv_seterr("out of memory");
		return -1;
	}
	j->rfd = j->wfd = -1;
	if ((rc = open_fds(j, v)) <= 0) {
		free(j);
		return rc;
	}
	pthread_mutex_init(&j->mu, NULL);
	*out = j;
	return 0;
}

/* one token from the pipe, if there is one now */
static int take(nv_jobs *j)
{
	unsigned char c;
	ssize_t n;

	do
		n = read(j->rfd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		return 0;
	pthread_mutex_lock(&j->mu);
	j->tok[j->held++] = c;
	pthread_mutex_unlock(&j->mu);
	return 1;
}

static int readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* sleep one period; 1 when asked to stop */
static int wait_period(nv_jobs *j)
{
	struct timespec ts;
	int stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)(j->poll_ms % 1000) * 1000000L;
	ts.tv_sec += (time_t)(j->poll_ms / 1000) + ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&j->mu);
	while (!j->stop && pthread_cond_timedwait(&j->cv, &j->mu, &ts) != ETIMEDOUT)
		;
	stop = j->stop;
	pthread_mutex_unlock(&j->mu);
	return stop;
}

static void *lender(void *arg)
{
	nv_jobs *j = arg;
	int seen = 0;

	while (!wait_period(j) && j->held < j->max) {
		if (!readable(j->rfd)) {
			seen = 0;
			continue;
		}
		if (!seen++) /* there now: take it if it is still there next time */
			continue;
		seen = 0;
		if (take(j))
			j->grow(j->ctx, j->held);
	}
	return NULL;
}

int nv_jobs_lend(nv_jobs *j, size_t max, unsigned poll_ms, void (*grow)(void *ctx, size_t held),
		 void *ctx)
{
	pthread_condattr_t a;

	if (j->started || max == 0)
		return 0;
	max = max > JOBS_MAX ? JOBS_MAX : max;
	if (!(j->tok = malloc(max))) {
		nv_seterr("out of memory");
		return -1;
	}
	j->max = max;
	j->poll_ms = poll_ms ? poll_ms : 1;
	j->grow = grow;
	j->ctx = ctx;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cv, &a);
	pthread_condattr_destroy(&a);
	if (pthread_create(&j->th, NULL, lender, j) != 0) {
		pthread_cond_destroy(&j->cv);
		nv_seterr("cannot start the jobserver's thread");
		return -1;
	}
	j->started = 1;
	return 0;
}

size_t nv_jobs_held(nv_jobs *j)
{
	size_t n;

	if (!j)
		return 0;
	pthread_mutex_lock(&j->mu);
	n = j->held;
	pthread_mutex_unlock(&j->mu);
	return n;
}

/* the tokens back into make's pipe */
static int give_back(nv_jobs *j)
{
	int rc = 0;

	for (size_t i = 0; i < j->held; i++) {
		ssize_t n;

		do
			n = write(j->wfd, &j->tok[i], 1);
		while (n < 0 && errno == EINTR);
		if (n != 1 && rc == 0) {
			nv_seterr("cannot give a jobserver token back: %s",
				  n < 0 ? strerror(errno) : "nothing written");
			rc = -1;
		}
	}
	j->held = 0;
	return rc;
}

int nv_jobs_close(nv_jobs *j)
{
	int rc;

	if (!j)
		return 0;
	if (j->started) {
		pthread_mutex_lock(&j->mu);
		j->stop = 1;
		pthread_cond_signal(&j->cv);
		pthread_mutex_unlock(&j->mu);
		pthread_join(j->th, NULL);
		pthread_cond_destroy(&j->cv);
	}
	rc = give_back(j);
	close(j->rfd);
	pthread_mutex_destroy(&j->mu);
	free(j->tok);
	free(j);
	return rc;
}
