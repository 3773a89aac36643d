/* mem.c - checked allocation (see mem.h) */
#include "mem.h"
#include "err.h"

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
