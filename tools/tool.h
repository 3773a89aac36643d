/*
 * tool.h - what every tool's main() shares: its name, the message form
 * "tool: what failed 'subject': reason", the exit statuses, --version and
 * the final check of standard output.  Header-only so that tools/ keeps one
 * .c file per executable.
 */
#ifndef NV_TOOL_H
#define NV_TOOL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmf.h"
#include "err.h"
#include "forward.h"
#include "linalg.h"
#include "parse.h"

#ifndef NVGKIT_VERSION
#define NVGKIT_VERSION "0.1.0"
#endif

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_REFUSED = 3 };

static const char *tool_name = "nvgkit";

/*
 * The options that several tools take accept one range each, set here
 * (pipelines/convert.mk checks BPW, KV_FACTOR, RHO, REFINE, THREADS and
 * WINDOW against the same); each returns -1 with the reason set, and the tool
 * reports it its own way.
 */
/* --bpw (and plan-alloc's --min, --max): bits per weight in (0, 16) */
static inline int tool_parse_bpw(const char *s, double *v)
{
	return nv_parse_double_open(s, 0.0, 16.0, v);
}

/* --kv-factor: the GQA k/v budget multiplier, in (0, 16) */
static inline int tool_parse_kv_factor(const char *s, double *v)
{
	return nv_parse_double_open(s, 0.0, 16.0, v);
}

/* --rho: the relative damping, in [0, 1e6] */
static inline int tool_parse_rho(const char *s, double *v)
{
	return nv_parse_double(s, 0.0, 1e6, v);
}

/* --refine (nvg-encode): 1 to NV_SWEEPS_MAX (16) */
static inline int tool_parse_refine(const char *s, long *v)
{
	return nv_parse_long(s, 1, 16, v);
}

/* --threads: 1 to 64 */
static inline int tool_parse_threads(const char *s, long *v)
{
	return nv_parse_long(s, 1, 64, v);
}

/* --window: tokens per window, 2 to 2^20 */
static inline int tool_parse_window(const char *s, size_t *v)
{
	return nv_parse_size(s, 2, (size_t)1 << 20, v);
}

/* -l, --layer: 0 to 2^20 */
static inline int tool_parse_layer(const char *s, long *v)
{
	return nv_parse_long(s, 0, 1L << 20, v);
}

/* --fit-tokens, --sel-tokens: 2 to SIZE_MAX / 8 */
static inline int tool_parse_tokens(const char *s, size_t *v)
{
	return nv_parse_size(s, 2, SIZE_MAX / 8, v);
}

/*
 * "tool: what 'subject': reason" with the library's reason; returns 1.  A
 * failure to write an output file (a full disk) names that file instead:
 * "tool: cannot write 'output': reason", whatever the step was about.
 */
static inline int tool_fail(const char *what, const char *subject)
{
	const char *out = nv_err_output_path();

	if (out)
		fprintf(stderr, "%s: cannot write '%s': %s\n", tool_name, out, nv_err());
	else if (subject)
		fprintf(stderr, "%s: %s '%s': %s\n", tool_name, what, subject, nv_err());
	else
		fprintf(stderr, "%s: %s: %s\n", tool_name, what, nv_err());
	return EXIT_FAIL;
}

/* "tool: message" (printf-style, no reason appended); returns 1 */
static inline int tool_failf(const char *fmt, ...) NV_PRINTF(1, 2);
static inline int tool_failf(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_FAIL;
}

/* "tool: message" then the synopsis hint; returns 2 */
static inline int tool_usage_error(const char *fmt, ...) NV_PRINTF(1, 2);
static inline int tool_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s -h' for usage.\n", tool_name);
	return EXIT_USAGE;
}

/* "bad NAME 'ARG': reason" as a usage error when its parse failed (rc < 0), else 0 */
static inline int tool_bad_opt(const char *name, const char *arg, int rc)
{
	return rc < 0 ? tool_usage_error("bad %s '%s': %s", name, arg, nv_err()) : 0;
}

/*
 * the version, then the OpenBLAS core the products run on, and a "note:"
 * line when its kernels are slower than the CPU allows (nv_blas_core)
 */
static inline void tool_version(void)
{
	char hint[256];
	const char *core = nv_blas_core(hint, sizeof hint);

	printf("%s (nvgkit) %s\n", tool_name, NVGKIT_VERSION);
	printf("OpenBLAS core: %s\n", core);
	if (hint[0])
		printf("note: %s\n", hint);
}

/* flush and close stdout, turning a failed write into exit status 1 (git.c) */
static inline int tool_finish(int status)
{
	static int finished;

	/* idempotent: a second call (an early return after -h) must not fclose twice */
	if (finished)
		return status;
	finished = 1;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (status == EXIT_OK)
			fprintf(stderr, "%s: write to standard output failed: %s\n",
				tool_name, strerror(errno));
		return status == EXIT_OK ? EXIT_FAIL : status;
	}
	if (fclose(stdout) != 0 && status == EXIT_OK) {
		fprintf(stderr, "%s: closing standard output failed: %s\n", tool_name,
			strerror(errno));
		return EXIT_FAIL;
	}
	return status;
}

/* 1 when a and b name one existing file (NULL and "-" name none: a stream) */
static inline int tool_same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return a && b && strcmp(a, "-") != 0 && strcmp(b, "-") != 0 && stat(a, &sa) == 0 &&
	       stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* a --patch NAME=PAYLOAD: *name fresh, *file into arg; a usage status on a bad one */
static inline int tool_patch_arg(const char *arg, char **name, const char **file)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || !eq[1])
		return tool_usage_error("bad --patch '%s': want name=payload", arg);
	*name = strndup(arg, (size_t)(eq - arg));
	*file = eq + 1;
	return 0;
}

/* the model at path opened and made ready to run; 1 (reported) on failure */
static inline int tool_open_model(const char *path, cmf_file *f, fw_model *m)
{
	if (cmf_open(path, f) < 0)
		return tool_fail("cannot open model", path);
	if (fw_open(m, f) < 0) {
		cmf_close(f);
		return tool_fail("cannot run model", path);
	}
	return 0;
}

/* progress is on when stderr is a terminal, or forced with -v / off with -q */
static inline int tool_progress_default(void)
{
	return isatty(STDERR_FILENO);
}

/* seconds on the monotonic clock */
static inline double tool_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the windows-done progress line of the forward tools, at most four updates a second */
typedef struct {
	double t0, last;
} tool_prog;

/* a progress line: done of n (windows, passes), the tokens/s and the time left */
static inline void tool_progress_at(tool_prog *p, const char *unit, size_t done, size_t n,
				    size_t rows, size_t total)
{
	double t = tool_now(), rate = (double)rows / (t - p->t0 + 1e-9);

	if (done < n && t - p->last < 0.25)
		return;
	p->last = t;
	fprintf(stderr, "\r%s: %s %zu/%zu, %.0f tokens/s, ETA %.0fs ", tool_name, unit, done, n,
		rate, (double)(total - rows) / (rate + 1e-9));
	if (done == n)
		fputc('\n', stderr);
}

static inline void tool_window_progress(void *ctx, size_t done, size_t nwin, size_t rows,
					size_t total)
{
	tool_progress_at(ctx, "window", done, nwin, rows, total);
}

/* cmf-eval's layer-major passes: one a layer of each model, then the scoring */
static inline void tool_pass_progress(void *ctx, size_t done, size_t nsteps, size_t rows,
				      size_t total)
{
	tool_progress_at(ctx, "pass", done, nsteps, rows, total);
}

#endif
