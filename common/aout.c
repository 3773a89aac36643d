/* aout.c - atomic output files (see aout.h) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "aout.h"
#include "err.h"
#include "mem.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * temporary names waiting for commit.  the signal handler reads this table,
 * so entries are written before they are published and only by one thread
 * at a time (the mutex); a handler racing a registration at worst misses
 * the newest file.
 */
#define MAX_PENDING 256
static char *volatile pending[MAX_PENDING];
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static int handlers_installed;

static void remove_pending(void)
{
	for (int i = 0; i < MAX_PENDING; i++) {
		char *t = pending[i];
		if (t)
			unlink(t);
	}
}

static void on_signal(int sig)
{
	remove_pending();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_handlers(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };

	if (handlers_installed)
		return;
	handlers_installed = 1;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa, old;

		sigaction(sigs[i], NULL, &old);
		if (old.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
	atexit(remove_pending);
}

static int register_tmp(char *tmp)
{
	int slot = -1;

	pthread_mutex_lock(&pending_lock);
	install_handlers();
	for (int i = 0; i < MAX_PENDING; i++) {
		if (!pending[i]) {
			pending[i] = tmp;
			slot = i;
			break;
		}
	}
	pthread_mutex_unlock(&pending_lock);
	if (slot < 0)
		nv_seterr("too many output files open at once (%d)", MAX_PENDING);
	return slot;
}

static void unregister_tmp(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&pending_lock);
	pending[slot] = NULL;
	pthread_mutex_unlock(&pending_lock);
}

int aout_is_stdout(const char *path)
{
	return path == NULL || strcmp(path, "-") == 0;
}

/*
 * what path names, decided before anything is created: 0 a regular file or
 * nothing (the temporary-and-rename path), 1 a character device or FIFO
 * (written in place: a rename would replace the node), -1 anything else.
 * A symbolic link is followed: *real is its target, which is replaced.
 */
static int out_kind(const char *path, char **real)
{
	struct stat st;

	*real = NULL;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : (nv_seterr("cannot write '%s': %s", path,
						strerror(errno)), -1);
	if (S_ISLNK(st.st_mode)) {
		if (!(*real = realpath(path, NULL)) || stat(*real, &st) != 0) {
			nv_seterr("cannot write '%s': a symbolic link to nothing", path);
			free(*real);
			*real = NULL;
			return -1;
		}
	}
	if (S_ISREG(st.st_mode))
		return 0;
	if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
		return 1;
	nv_seterr("cannot write '%s': not a regular file, a character device or a FIFO", path);
	free(*real);
	*real = NULL;
	return -1;
}

/* a character device or FIFO: opened as it is, no temporary, no rename */
static int open_direct(aout *o, const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
		nv_seterr("cannot open '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	o->direct = 1;
	return 0;
}

int aout_open(aout *o, const char *path, int flags)
{
	size_t len;
	char *real;
	int fd, kind;

	memset(o, 0, sizeof(*o));
	o->slot = -1;
	if (aout_is_stdout(path)) {
		if ((flags & AOUT_BINARY) && isatty(STDOUT_FILENO)) {
			nv_seterr("refusing to write binary data to a terminal");
			return -1;
		}
		o->f = stdout;
		return 0;
	}
	if ((kind = out_kind(path, &real)) < 0)
		return -1;
	if (kind == 1) {
		kind = open_direct(o, real ? real : path);
		free(real);
		return kind;
	}
	o->path = real ? real : nv_strdup(path);
	len = strlen(o->path) + 32;
	o->tmp = nv_malloc(len, 1);
	if (!o->path || !o->tmp)
		goto fail;
	snprintf(o->tmp, len, "%s.tmp.%ld", o->path, (long)getpid());
	o->slot = register_tmp(o->tmp);
	if (o->slot < 0)
		goto fail;
	fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		nv_seterr("cannot create '%s': %s", path, strerror(errno));
		goto fail;
	}
	o->f = fdopen(fd, "wb");
	if (!o->f) {
		nv_seterr("cannot open '%s': %s", o->tmp, strerror(errno));
		close(fd);
		unlink(o->tmp);
		goto fail;
	}
	return 0;
fail:
	unregister_tmp(o->slot);
	free(o->path);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	o->slot = -1;
	return -1;
}

/* the reason of a failed write, the output marked as the failure's subject (err.h) */
static void write_failed(const aout *o, const char *what, int err)
{
	nv_seterr("%s: %s", what, strerror(err));
	if (o->path)
		nv_err_output(o->path);
}

int aout_write(aout *o, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, o->f) != n) {
		write_failed(o, "write failed", errno);
		return -1;
	}
	return 0;
}

/* stdout (closed by the tool) or a device or FIFO (closed here) */
static int finish_direct(aout *o)
{
	int rc = 0;

	if (fflush(o->f) != 0 || ferror(o->f)) {
		nv_seterr("write to %s failed: %s", o->direct ? "the device" : "standard output",
			  strerror(errno));
		rc = -1;
	}
	if (o->direct && fclose(o->f) != 0 && rc == 0) {
		nv_seterr("closing the device failed: %s", strerror(errno));
		rc = -1;
	}
	o->f = NULL;
	o->direct = 0;
	return rc;
}

/* forget the temporary file, removing it first when it is not committed */
static void drop_tmp(aout *o, int remove)
{
	if (remove)
		unlink(o->tmp);
	unregister_tmp(o->slot);
	free(o->path);
	free(o->tmp);
	o->path = o->tmp = NULL;
	o->slot = -1;
}

int aout_finish(aout *o)
{
	int rc = 0;

	if (!o->f)
		return 0;
	if (!o->tmp)
		return finish_direct(o);
	if (fflush(o->f) != 0 || ferror(o->f)) {
		write_failed(o, "write failed", errno);
		rc = -1;
	}
	if (fclose(o->f) != 0 && rc == 0) {
		write_failed(o, "close failed", errno);
		rc = -1;
	}
	o->f = NULL;
	if (rc != 0)
		drop_tmp(o, 1);
	return rc;
}

int aout_commit(aout *o)
{
	int rc;

	if (aout_finish(o) < 0)
		return -1;
	if (!o->tmp)
		return 0;
	rc = rename(o->tmp, o->path) == 0 ? 0 : -1;
	if (rc < 0) {
		nv_seterr("cannot rename '%s' to '%s': %s", o->tmp, o->path, strerror(errno));
		nv_err_output(o->path);
	}
	drop_tmp(o, rc < 0);
	return rc;
}

void aout_abort(aout *o)
{
	if (o->direct) {
		fclose(o->f);
		memset(o, 0, sizeof(*o));
		o->slot = -1;
		return;
	}
	if (!o->f && !o->tmp)
		return;
	if (o->tmp) {
		if (o->f)
			fclose(o->f);
		unlink(o->tmp);
		unregister_tmp(o->slot);
	}
	free(o->path);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	o->slot = -1;
}
