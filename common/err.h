/*
 * err.h - the library's error channel.
 *
 * Functions in common/ never print and never exit.  A function that fails
 * sets a one-line reason with nv_seterr() and returns -1 (or NULL); the tool
 * that called it prints "tool: what failed 'subject': reason" (tools/tool.h).
 * The reason is thread-local, so encoders running in threads do not clobber
 * each other's messages.
 */
#ifndef NV_ERR_H
#define NV_ERR_H

#include <stddef.h>

#if defined(__GNUC__)
#define NV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NV_PRINTF(a, b)
#endif

/* set the reason of the current failure (lowercase, no final full stop) */
void nv_seterr(const char *fmt, ...) NV_PRINTF(1, 2);

/* prefix the current reason with more context: "ctx: old reason" */
void nv_preerr(const char *fmt, ...) NV_PRINTF(1, 2);

/* the reason last set on this thread ("unknown error" when none) */
const char *nv_err(void);

/*
 * mark the current failure as one of writing the output path (aout.h: a
 * full disk, a failed rename), so that the tool names the file it was
 * writing rather than its input; nv_seterr() unmarks it
 */
void nv_err_output(const char *path);

/* the output whose writing is the current failure, or NULL */
const char *nv_err_output_path(void);

#endif
