/* mem.c - checked allocation (see mem.h) */
#include "mem.h"
#include "err.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

int nv_mul(size_t a, size_t b, size_t *out)
{
	if (a != 0 && b > SIZE_MAX / a) {
		nv_seterr("size %zu × %zu overflows", a, b);
		return -1;
	}
	*out = a * b;
	return 0;
}

int nv_add(size_t a, size_t b, size_t *out)
{
	if (b > SIZE_MAX - a) {
		nv_seterr("size %zu + %zu overflows", a, b);
		return -1;
	}
	*out = a + b;
	return 0;
}

void *nv_malloc(size_t count, size_t size)
{
	size_t n;
	void *p;

	if (nv_mul(count, size, &n) < 0)
		return NULL;
	p = malloc(n ? n : 1);
	if (!p)
		nv_seterr("out of memory allocating %zu bytes", n);
	return p;
}

/*
 * malloc and memset, not calloc: calloc leaves a large block's fresh pages
 * unmapped, so that a product that reads before it writes (a Gram's
 * accumulator, G += XᵀX) faults each page twice, the second a copy of the
 * shared zero page that flushes the TLB on every core the process runs on
 * (an interrupt to each, a VM exit in a virtual machine): 0.2 s of system
 * time in each layer's capture on SmolLM2 (2 cores).  Writing the zeros
 * first faults each page once, with nothing to flush
 */
void *nv_calloc(size_t count, size_t size)
{
	size_t n;
	void *p;

	if (nv_mul(count, size, &n) < 0)
		return NULL;
	p = malloc(n ? n : 1);
	if (!p)
		nv_seterr("out of memory allocating %zu bytes", n);
	else
		memset(p, 0, n);
	return p;
}

/*
 * glibc maps each block above its mmap threshold afresh and unmaps it at
 * free, and trims the heap's free top past twice that threshold (which
 * moves with the blocks freed): an encode's per-sweep temporaries (the g
 * system in RFP, 9.4 MB at order 1536, the n × r products) went back to
 * the kernel at each free and faulted in again, page by page, at the next
 * allocation.  43 thousand faults and 0.15 s of system time in a SmolLM2
 * down_proj encode of 4.4 s, 17 thousand (the heap's first touch) and
 * 0.04 s held; 1.39 million and 3.5 s in a synthetic 512x4096's of 44 s
 * (a 7B down_proj's width), 0.31 million and 0.7 s held, its peak RSS
 * 281 → 298 MiB.  Blocks above 32 MiB are still mapped: a 7B tensor's
 * inputs and its g system
 */
void nv_heap_hold(void)
{
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

void *nv_realloc(void *p, size_t count, size_t size)
{
	size_t n;
	void *q;

	if (nv_mul(count, size, &n) < 0)
		return NULL;
	q = realloc(p, n ? n : 1);
	if (!q)
		nv_seterr("out of memory allocating %zu bytes", n);
	return q;
}

char *nv_strdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		nv_seterr("out of memory copying a string");
	return p;
}
