/* err.c - thread-local failure reasons (see err.h) */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char reason[1024];
static _Thread_local char output[1024]; /* the output the failure is writing, or "" */

void nv_seterr(const char *fmt, ...)
{
	va_list ap;

	output[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
}

/* reason = "a: b", cut to fit */
static void join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), cap = sizeof(reason) - 1;

	if (la > cap)
		la = cap;
	memcpy(reason, a, la);
	if (la + 2 <= cap) {
		memcpy(reason + la, ": ", 2);
		la += 2;
	}
	if (lb > cap - la)
		lb = cap - la;
	memcpy(reason + la, b, lb);
	reason[la + lb] = '\0';
}

void nv_preerr(const char *fmt, ...)
{
	char old[sizeof(reason)], pre[sizeof(reason)];
	va_list ap;

	memcpy(old, reason, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	join(pre, old[0] ? old : "unknown error");
}

const char *nv_err(void)
{
	return reason[0] ? reason : "unknown error";
}

void nv_err_output(const char *path)
{
	snprintf(output, sizeof(output), "%s", path);
}

const char *nv_err_output_path(void)
{
	return output[0] ? output : NULL;
}
