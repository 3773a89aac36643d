/*
 * aout.h - atomic output files.
 *
 * An output is written to "<path>.tmp.<pid>" in the target directory and
 * renamed into place by aout_commit(), so a reader (or make) never sees a
 * half-written file.  Until the commit, the temporary file is registered
 * for removal: aout_abort(), an exit without commit, and SIGINT, SIGTERM,
 * SIGHUP or SIGPIPE all unlink it.  "-" means standard output; binary
 * output to a terminal is refused.
 *
 * What the path names decides how it is written: a regular file (or no file
 * yet) as above; a character device or a FIFO (/dev/null, a named pipe) in
 * place, since a rename would replace the node itself; a symbolic link is
 * followed, so that its target is replaced atomically and the link stays;
 * anything else (a directory, a socket, a block device, a link to nothing)
 * is refused before anything is created.  A failed write, close or rename
 * of a file marks its path as the failure's subject (err.h, nv_err_output),
 * so a full disk is reported against the file being written.
 */
#ifndef NV_AOUT_H
#define NV_AOUT_H

#include <stdio.h>

typedef struct {
	FILE *f;     /* write through this */
	char *path;  /* final name (NULL for stdout) */
	char *tmp;   /* temporary name (NULL for stdout) */
	int slot;    /* registry slot for signal-time removal, -1 when none */
	int direct;  /* a device or FIFO written in place */
} aout;

#define AOUT_BINARY 1 /* refuse a terminal on stdout */

/* open path ("-" = stdout) for writing; -1 with reason set on failure */
int aout_open(aout *o, const char *path, int flags);

/* flush, check for write errors, close and rename into place */
int aout_commit(aout *o);

/*
 * flush, check for write errors and close, but leave the temporary file
 * unrenamed: aout_commit() then only renames it, aout_abort() removes it.
 * So two outputs can both be written whole before either is renamed.
 */
int aout_finish(aout *o);

/* close and remove the temporary file (no-op on a closed or stdout output) */
void aout_abort(aout *o);

/* write n bytes; -1 with reason set on a short write */
int aout_write(aout *o, const void *p, size_t n);

/* true when path names standard output */
int aout_is_stdout(const char *path);

#endif
