/*
 * fuzz-import.h - what the importer targets share: the import of the input
 * as a file, and the run of an imported model's tensors as the writer
 * would run them.
 */
#ifndef NV_FUZZ_IMPORT_H
#define NV_FUZZ_IMPORT_H

#include "fuzz.h"
#include "import.h"

/* import size bytes as a source of the given kind (nv_import); -1 when refused */
static inline int fuzz_import(nv_from from, const uint8_t *data, size_t size, imp_model *m)
{
	char *src[1] = { (char *)fuzz_file(data, size) };
	nv_import_opts o = { from, -1, NULL };

	return nv_import(1, src, &o, m);
}

/* every tensor's shape gives its bytes; every lazy one produces its values */
static inline void fuzz_produce(const imp_model *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const nv_itensor *t = &m->t[i];
		size_t n = t->nbytes / cmf_dtype_size(t->dtype), prod = 1;
		float *w;

		for (size_t d = 0; d < t->ndim; d++)
			prod *= t->shape[d];
		if (prod != n || n * cmf_dtype_size(t->dtype) != t->nbytes)
			abort();
		if (!t->f32 || n > (1u << 22) || !(w = malloc(n * sizeof(float) + 1)))
			continue;
		t->f32(t->ctx, w);
		free(w);
	}
}

#endif
