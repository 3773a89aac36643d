/*
 * import_model.c - the in-memory model the importers fill: its tensors,
 * their checks and the RoPE row order (import.h).  A floor below import.c
 * and the importers, so that neither calls the other back.
 */
#include "import.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void imp_model_init(imp_model *m)
{
	memset(m, 0, sizeof(*m));
	cmf_arch_init(&m->arch);
}

void imp_model_free(imp_model *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->t[i].name);
		free(m->t[i].owned);
		free(m->t[i].ctx);
	}
	free(m->t);
	free(m->tokenizer);
	free(m->provenance);
	for (size_t i = 0; i < m->nsrc; i++)
		cmf_close(&m->src[i]);
	free(m->src);
	if (m->keep_free)
		m->keep_free(m->keep);
	imp_model_init(m);
}

nv_itensor *imp_model_find(imp_model *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return &m->t[i];
	return NULL;
}

int imp_model_add_raw(imp_model *m, const char *name, cmf_dtype dtype, size_t ndim,
		     const size_t *shape, const void *data, void *owned, size_t nbytes)
{
	nv_itensor *t;

	if (imp_model_find(m, name)) {
		free(owned);
		return nv_seterr("duplicate tensor '%s'", name), -1;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		nv_itensor *nt = nv_realloc(m->t, cap, sizeof(*nt));

		if (!nt) {
			free(owned);
			return -1;
		}
		m->t = nt;
		m->cap = cap;
	}
	t = &m->t[m->n];
	memset(t, 0, sizeof(*t));
	if (!(t->name = nv_strdup(name))) {
		free(owned);
		return -1;
	}
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(size_t));
	t->data = data;
	t->owned = owned;
	t->nbytes = nbytes;
	m->n++;
	return 0;
}

int imp_model_add_lazy(imp_model *m, const char *name, cmf_dtype dtype, size_t ndim,
		       const size_t *shape, imp_f32_fn fn, void *ctx)
{
	size_t nbytes = cmf_dtype_size(dtype);
	nv_itensor *t;

	for (size_t d = 0; d < ndim; d++)
		if (nv_mul(nbytes, shape[d], &nbytes) < 0) {
			free(ctx);
			return nv_preerr("tensor '%s'", name), -1;
		}
	if (imp_model_add_raw(m, name, dtype, ndim, shape, NULL, NULL, nbytes) < 0) {
		free(ctx);
		return -1;
	}
	t = &m->t[m->n - 1];
	t->f32 = fn;
	t->ctx = ctx;
	return 0;
}

int nv_unpermute_rope(void *w, size_t rows, size_t row_bytes, size_t heads)
{
	size_t d, half;
	uint8_t *b = w, *tmp;

	if (heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
		return nv_seterr("%zu rows do not split into %zu heads of even size", rows, heads), -1;
	d = rows / heads;
	half = d / 2;
	if (!(tmp = nv_malloc(d, row_bytes)))
		return -1;
	for (size_t h = 0; h < heads; h++) {
		uint8_t *head = b + h * d * row_bytes;

		/* rotate-half row j·d/2 + i comes from interleaved row 2i + j */
		for (size_t j = 0; j < 2; j++)
			for (size_t i = 0; i < half; i++)
				memcpy(tmp + (j * half + i) * row_bytes, head + (2 * i + j) * row_bytes,
				       row_bytes);
		memcpy(head, tmp, d * row_bytes);
	}
	free(tmp);
	return 0;
}

int imp_check_finite(const char *name, cmf_dtype dtype, const void *data, size_t n)
{
	const uint8_t *b = data;

	for (size_t i = 0; i < n; i++) {
		float v = dtype == CMF_F32 ? le_f32(b + 4 * i)
			: dtype == CMF_F16 ? nv_f16_to_f32(le_u16(b + 2 * i))
					   : nv_bf16_to_f32(le_u16(b + 2 * i));

		if (!isfinite(v))
			return nv_seterr("tensor '%s': element %zu is %s", name, i,
					 isnan(v) ? "nan" : "infinite"), -1;
	}
	return 0;
}
