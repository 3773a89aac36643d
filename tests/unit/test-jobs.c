/* test-jobs.c - make's jobserver read from MAKEFLAGS (its forms, a later
 * entry over an earlier one, descriptors not given, malformed entries),
 * tokens taken only up to the maximum and every one written back, from a
 * pipe and from a named pipe.  The lending thread's waits end on events
 * (a token there), each with a deadline of seconds against a poll of 2 ms. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "jobs.h"
#include "tap.h"

static atomic_size_t grown[8];
static atomic_size_t ngrown;

static void grow(void *ctx, size_t held)
{
	size_t i = atomic_fetch_add(&ngrown, 1);

	(void)ctx;
	if (i < 8)
		atomic_store(&grown[i], held);
}

/* wait until j holds n tokens, at most 10 s */
static int wait_held(nv_jobs *j, size_t n)
{
	struct timespec ms = { 0, 1000000L };

	for (int i = 0; i < 10000; i++) {
		if (nv_jobs_held(j) == n)
			return 1;
		nanosleep(&ms, NULL);
	}
	return 0;
}

/* what fd holds now (non-blocking), into buf */
static size_t drain(int fd, char *buf, size_t cap)
{
	int fl = fcntl(fd, F_GETFL);
	ssize_t n;

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	n = read(fd, buf, cap);
	fcntl(fd, F_SETFL, fl);
	return n < 0 ? 0 : (size_t)n;
}

static void test_forms(void)
{
	nv_jobs *j = (nv_jobs *)1;
	int devnull = open("/dev/null", O_WRONLY), rc;
	char f[128];

	ok(nv_jobs_open(NULL, &j) == 0 && j == NULL, "no MAKEFLAGS: no jobserver");
	ok(nv_jobs_open("s -j2", &j) == 0 && j == NULL, "MAKEFLAGS without an entry: none");
	ok(nv_jobs_open("s -- X--jobserver-auth=3,4", &j) == 0 && j == NULL,
	   "an entry inside another word is not one");
	ok(nv_jobs_open(" -j2 --jobserver-auth=900,901", &j) == 0 && j == NULL,
	   "descriptors not open here (a recipe not marked recursive): none");
	snprintf(f, sizeof f, "-j2 --jobserver-auth=%d,%d", devnull, devnull);
	ok(nv_jobs_open(f, &j) == 0 && j == NULL, "descriptors that are not a pipe: none");
	ok(nv_jobs_open("-j2 --jobserver-auth=-2,-2", &j) == 0 && j == NULL,
	   "negative descriptors: none");
	rc = nv_jobs_open("-j2 --jobserver-auth=3x4", &j);
	ok(rc == -1 && j == NULL && strstr(nv_err(), "not R,W or fifo:PATH") != NULL,
	   "a malformed entry: an error (%s)", nv_err());
	ok(nv_jobs_open("-j2 --jobserver-auth=3,", &j) == -1, "R, without W: an error");
	ok(nv_jobs_open("-j2 --jobserver-auth=", &j) == -1, "an empty entry: an error");
	char *big = malloc(5000);
	if (big) {
		memcpy(big, "--jobserver-auth=fifo:/", 23);
		memset(big + 23, 'x', 4960);
		big[4983] = 0;
		rc = nv_jobs_open(big, &j);
		ok(rc == -1 && j == NULL && strstr(nv_err(), "of 4966 characters") != NULL,
		   "an entry longer than a path can be: an error (%s)", nv_err());
		free(big);
	}
	rc = nv_jobs_open("-j2 --jobserver-auth=fifo:/nonexistent/fifo", &j);
	ok(rc == -1 && strstr(nv_err(), "/nonexistent/fifo") != NULL,
	   "a named pipe that cannot be opened: an error naming it (%s)", nv_err());
	rc = nv_jobs_open("-j2 --jobserver-auth=fifo:/dev/null", &j);
	ok(rc == -1 && j == NULL && strstr(nv_err(), "not a named pipe") != NULL,
	   "a named pipe that is not one: an error, nothing read from it (%s)", nv_err());
	ok(nv_jobs_close(NULL) == 0, "closing none");
	close(devnull);
}

static void test_pipe(void)
{
	int p[2];
	char f[128], buf[16];
	nv_jobs *j = NULL;
	size_t n;

	if (pipe(p) < 0 || write(p[1], "abc", 3) != 3) {
		ok(0, "a pipe with three tokens");
		return;
	}
	snprintf(f, sizeof f, "s -j4 --jobserver-auth=900,901 --jobserver-auth=%d,%d", p[0], p[1]);
	ok(nv_jobs_open(f, &j) == 0 && j != NULL, "the last entry, a pipe given to this process");
	if (!j)
		return;
	ok(nv_jobs_lend(j, 2, 2, grow, NULL) == 0, "lending started");
	ok(wait_held(j, 2), "two tokens taken, the maximum");
	n = drain(p[0], buf, sizeof buf);
	ok(n == 1 && buf[0] == 'c', "the third left in the pipe (%zu bytes there)", n);
	ok(atomic_load(&ngrown) == 2 && atomic_load(&grown[0]) == 1 && atomic_load(&grown[1]) == 2,
	   "grow told after each: %zu calls", atomic_load(&ngrown));
	ok(nv_jobs_close(j) == 0, "closed");
	n = drain(p[0], buf, sizeof buf);
	ok(n == 2 && !memcmp(buf, "ab", 2), "both written back, the bytes taken (%zu bytes)", n);
	ok(fcntl(p[0], F_GETFL) >= 0 && !(fcntl(p[0], F_GETFL) & O_NONBLOCK),
	   "make's read end left blocking and open");
	close(p[0]);
	close(p[1]);
}

static void test_fifo(void)
{
	char dir[] = "/tmp/test-jobs.XXXXXX", path[64], f[128], buf[8];
	nv_jobs *j = NULL;
	int fd;
	size_t n;

	if (!mkdtemp(dir)) {
		ok(0, "a directory for the named pipe");
		return;
	}
	snprintf(path, sizeof path, "%s/fifo", dir);
	fd = mkfifo(path, 0600) == 0 ? open(path, O_RDWR) : -1;
	if (fd < 0 || write(fd, "+", 1) != 1) {
		ok(0, "a named pipe with a token");
		return;
	}
	snprintf(f, sizeof f, "-j2 --jobserver-auth=fifo:%s", path);
	ok(nv_jobs_open(f, &j) == 0 && j != NULL, "a named pipe (make 4.4)");
	atomic_store(&ngrown, 0);
	if (j && nv_jobs_lend(j, 4, 2, grow, NULL) == 0) {
		ok(wait_held(j, 1), "its token taken");
		ok(nv_jobs_close(j) == 0, "closed");
	}
	n = drain(fd, buf, sizeof buf);
	ok(n == 1 && buf[0] == '+', "the token written back (%zu bytes)", n);
	close(fd);
	unlink(path);
	rmdir(dir);
}

static void test_none_lent(void)
{
	int p[2];
	char f[64], buf[4];
	nv_jobs *j = NULL;

	if (pipe(p) < 0 || write(p[1], "x", 1) != 1) {
		ok(0, "a pipe with a token");
		return;
	}
	snprintf(f, sizeof f, "--jobserver-auth=%d,%d", p[0], p[1]);
	atomic_store(&ngrown, 0);
	ok(nv_jobs_open(f, &j) == 0 && j && nv_jobs_lend(j, 0, 2, grow, NULL) == 0,
	   "lending at most none");
	ok(nv_jobs_close(j) == 0 && atomic_load(&ngrown) == 0 && drain(p[0], buf, 4) == 1,
	   "nothing taken, the token still there");
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	test_forms();
	test_pipe();
	test_fifo();
	test_none_lent();
	return done_testing();
}
