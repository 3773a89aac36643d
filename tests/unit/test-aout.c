/* test-aout.c - atomic output: commit, abort, exit and signals remove the temporary file */
#include "aout.h"
#include "err.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/test-aout.XXXXXX";

static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

static int content_is(const char *p, const char *want)
{
	char buf[256] = { 0 };
	FILE *f = fopen(p, "rb");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return n == strlen(want) && memcmp(buf, want, n) == 0;
}

/* a child that opens path, writes, then ends by `how` before committing */
static int child_dies(const char *path, int how)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		aout o;

		if (aout_open(&o, path, 0) < 0 || aout_write(&o, "partial", 7) < 0)
			_exit(9);
		fflush(o.f);
		if (how == 0)
			exit(0); /* atexit removes it */
		raise(how);
		_exit(8);
	}
	waitpid(pid, &st, 0);
	return st;
}

/* aout_open("-") with stdout on a pseudo-terminal */
static int refused_on_tty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY), st;
	pid_t pid;

	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int s = open(ptsname(m), O_RDWR | O_NOCTTY);
		aout o;

		if (s < 0 || dup2(s, STDOUT_FILENO) < 0)
			_exit(9);
		if (aout_open(&o, "-", AOUT_BINARY) == 0)
			_exit(1);
		_exit(strstr(nv_err(), "terminal") ? 0 : 2);
	}
	waitpid(pid, &st, 0);
	close(m);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int write_all(const char *path, const char *text)
{
	aout o;

	if (aout_open(&o, path, 0) < 0)
		return -1;
	if (aout_write(&o, text, strlen(text)) < 0) {
		aout_abort(&o);
		return -1;
	}
	return aout_commit(&o);
}

/* the node path is a character device, a FIFO, a link: what lstat says */
static int node_is(const char *path, mode_t type)
{
	struct stat st;

	return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/*
 * a device or FIFO is written in place (a rename would replace the node:
 * as root, -o /dev/null replaced the system's /dev/null); a symbolic link
 * is followed and stays a link; anything else is refused up front
 */
static void check_nodes(void)
{
	char fifo[512], link[512], target[512], sub[512], null[512], buf[16] = { 0 };
	int rd;

	/* as root, a node of our own (1, 3): a regression must not take the system's */
	snprintf(null, sizeof null, "%s/null", dir);
	if (geteuid() != 0 || mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0)
		snprintf(null, sizeof null, "/dev/null");
	ok(write_all(null, "gone") == 0 && node_is(null, S_IFCHR) &&
	   entries() == (strcmp(null, "/dev/null") != 0), "%s is written in place and stays a device",
	   null);
	if (strcmp(null, "/dev/null"))
		unlink(null);
	snprintf(fifo, sizeof fifo, "%s/pipe", dir);
	mkfifo(fifo, 0600);
	/* a reader first, so that the writer's open does not wait */
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	ok(write_all(fifo, "through") == 0 && read(rd, buf, sizeof buf - 1) == 7 &&
	   !strcmp(buf, "through") && node_is(fifo, S_IFIFO), "a FIFO gets the bytes and stays a FIFO");
	close(rd);
	unlink(fifo);
	snprintf(target, sizeof target, "%s/target", dir);
	snprintf(link, sizeof link, "%s/link", dir);
	write_all(target, "old");
	if (symlink(target, link) != 0)
		printf("# symlink: %s\n", strerror(errno));
	ok(write_all(link, "new") == 0 && node_is(link, S_IFLNK) && content_is(target, "new") &&
	   entries() == 2, "a symbolic link is followed: its target replaced, the link kept");
	unlink(target);
	ok(write_all(link, "x") < 0 && strstr(nv_err(), "link to nothing") && entries() == 1,
	   "a link to nothing is refused: %s", nv_err());
	unlink(link);
	snprintf(sub, sizeof sub, "%s/sub", dir);
	mkdir(sub, 0700);
	ok(write_all(sub, "x") < 0 && strstr(nv_err(), "not a regular file") && node_is(sub, S_IFDIR) &&
	   entries() == 1, "a directory is refused before anything is made: %s", nv_err());
	rmdir(sub);
}

int main(void)
{
	char path[512], tmp[600];
	aout o;
	int st;

	/*
	 * a test run in the background inherits SIGINT ignored, and aout rightly
	 * leaves an ignored signal alone: start from the defaults, before the
	 * first aout_open installs its handlers
	 */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/out.bin", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());

	ok(aout_open(&o, path, AOUT_BINARY) == 0 && exists(tmp) && !exists(path),
	   "open writes to <path>.tmp.<pid>, not to the path");
	ok(aout_write(&o, "hello", 5) == 0 && aout_commit(&o) == 0, "write and commit");
	ok(content_is(path, "hello") && !exists(tmp) && entries() == 1, "commit renames into place");

	ok(aout_open(&o, path, 0) == 0 && aout_write(&o, "other", 5) == 0, "open over an existing file");
	ok(content_is(path, "hello"), "the old file is intact until the commit");
	aout_abort(&o);
	ok(content_is(path, "hello") && entries() == 1, "abort removes the temporary and keeps the old file");
	aout_abort(&o);
	ok(1, "a second abort is harmless");

	ok(aout_open(&o, path, 0) == 0 && aout_write(&o, "fresh", 5) == 0 && aout_finish(&o) == 0 &&
	   exists(tmp) && content_is(tmp, "fresh") && content_is(path, "hello"),
	   "finish closes the temporary whole and leaves the old file");
	ok(aout_commit(&o) == 0 && content_is(path, "fresh") && !exists(tmp) && entries() == 1,
	   "a commit after finish only renames");
	ok(aout_open(&o, path, 0) == 0 && aout_write(&o, "x", 1) == 0 && aout_finish(&o) == 0, "finish");
	aout_abort(&o);
	ok(content_is(path, "fresh") && entries() == 1, "an abort after finish removes the temporary");
	unlink(path);

	st = child_dies(path, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && entries() == 0, "an exit without commit removes the temporary");
	st = child_dies(path, SIGTERM);
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM && entries() == 0, "SIGTERM removes it, and still kills");
	st = child_dies(path, SIGINT);
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT && entries() == 0, "SIGINT removes it, and still kills");

	snprintf(tmp, sizeof(tmp), "%s/no/such/dir/out", dir);
	st = aout_open(&o, tmp, 0);
	ok(st < 0 && strstr(nv_err(), "cannot create"), "a missing directory is an error: %s", nv_err());
	ok(aout_is_stdout("-") && aout_is_stdout(NULL) && !aout_is_stdout("x"), "'-' and NULL mean stdout");
	is_int(refused_on_tty(), 0, "binary output to a terminal is refused");
	check_nodes();
	rmdir(dir);
	return done_testing();
}
