/*
 * cltest.h - what the OpenCL unit tests share: LeakSanitizer's leak check
 * off (PoCL's worker threads and its stop-the-world tracer do not mix; see
 * test-cl.c) and a device with a queue, or the reason there is none.
 * Include after tap.h.
 */
#ifndef NV_CLTEST_H
#define NV_CLTEST_H

#include "clops.h"
#include "err.h"

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "detect_leaks=0";
}

/* open the default device (PoCL here) and a queue on it: 1, or 0 with a diagnostic */
static int cl_open_q(nvcl_ctx *c, nvcl_q *q)
{
	if (!ok(nvcl_open(-1, -1, c) == 0, "an OpenCL device opens (PoCL)")) {
		diag("%s", nv_err());
		return 0;
	}
	if (!ok(nvcl_q_init(q, c) == 0, "a queue and the kernels")) {
		nvcl_close(c);
		return 0;
	}
	return 1;
}

#endif
