/*
 * mem.h - checked allocation and size arithmetic.
 *
 * Every allocation whose size comes from a file goes through these: the
 * product is checked against SIZE_MAX before anything is allocated, and a
 * failure sets the error reason (err.h) instead of aborting.
 */
#ifndef NV_MEM_H
#define NV_MEM_H

#include <stddef.h>
#include <stdint.h>

/* *out = a * b; returns -1 (reason set) on overflow */
int nv_mul(size_t a, size_t b, size_t *out);

/* *out = a + b; returns -1 (reason set) on overflow */
int nv_add(size_t a, size_t b, size_t *out);

/* malloc/calloc of count × size bytes; NULL with reason set on overflow or
 * exhaustion.  nv_calloc writes its zeros itself (mem.c says why) */
void *nv_malloc(size_t count, size_t size);
void *nv_calloc(size_t count, size_t size);
void *nv_realloc(void *p, size_t count, size_t size);

/* the heap holds what is freed (blocks up to 32 MiB, glibc's ceiling for
 * its mmap threshold, and the free top of the heap up to 1 GiB), for a
 * process that frees and allocates the same large temporaries over and
 * over (mem.c says why); the bytes computed do not depend on it */
void nv_heap_hold(void);

/* strdup that sets the reason on failure */
char *nv_strdup(const char *s);

#endif
