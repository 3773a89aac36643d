/*
 * import.h - models into CMF: Hugging Face safetensors, llama.cpp GGUF and
 * llama2.c checkpoints (cmf-patch import; man/man1/cmf-patch.1).
 *
 * Every importer renames to Hugging Face's tensor names and layouts (row =
 * output) and brings q_proj/k_proj rows from the interleaved RoPE order
 * (llama2.c, GGUF: pairs (2i, 2i+1) of a head rotate together) to
 * rotate-half (pairs (i, i + d/2)), the inverse of llama.cpp's convert
 * permutation: within each head, rotate-half row j·d/2 + i is interleaved
 * row 2i + j (j ∈ {0,1}, i < d/2).  So one forward (rotate-half) serves all
 * sources.  Quantized GGUF blocks are dequantized exactly as ggml's
 * reference dequantize_row_* does (f32 arithmetic, no fused multiply-add).
 *
 * The model is collected as a list of tensors (imp_model) that point into
 * the mapped source or produce their values on demand, and written by
 * imp_model_write through the CMF writer (atomic: nothing is left on
 * error), so memory stays near one tensor whatever the model's size.
 * Every weight must be finite: a NaN or infinity fails the import.
 */
#ifndef NV_IMPORT_H
#define NV_IMPORT_H

#include <stddef.h>

#include "cmf.h"
#include "vocab.h"

/* a lazy tensor's values as f32 (the product of its shape), or -1 with reason set */
typedef int (*imp_f32_fn)(const void *ctx, float *out);

typedef struct {
	char *name;
	cmf_dtype dtype;
	size_t ndim, shape[CMF_MAX_DIMS];
	const void *data; /* (nbytes) little-endian elements: owned or into a source mapping */
	void *owned;
	size_t nbytes;
	imp_f32_fn f32;   /* lazy (data NULL): produced at write time, converted to dtype */
	void *ctx;        /* owned by the tensor */
} nv_itensor;

typedef struct {
	size_t n, cap;
	nv_itensor *t;     /* in output order */
	cmf_arch arch;
	char *tokenizer;   /* cmf.tokenizer JSON (vocab.h), NULL when the source has none */
	char *provenance;  /* cmf.provenance JSON */
	size_t nsrc;
	cmf_file *src;     /* safetensors sources kept mapped (tensors borrow from them) */
	void *keep;        /* another source the lazy tensors read, freed by keep_free */
	void (*keep_free)(void *);
} imp_model;

typedef enum { NV_FROM_AUTO = 0, NV_FROM_SAFETENSORS, NV_FROM_GGUF, NV_FROM_LLAMA2C } nv_from;

typedef struct {
	nv_from from;
	int dtype;          /* -1: keep the source's float dtype (F32 for quantized); else CMF_F32/CMF_F16 */
	/*
	 * the tokenizer in place of the source's, or NULL: a GGUF's
	 * tokenizer.ggml.* (its tensors unread; a vocab-only file will do), a
	 * tokenizer.json (with the tokenizer_config.json beside it), or for a
	 * llama2c source its tokenizer file (tok512.bin)
	 */
	const char *vocab;
} nv_import_opts;

/* import nsrc source files into m; -1 with reason naming file, field and value */
int nv_import(size_t nsrc, char *const *src, const nv_import_opts *o, imp_model *m);
/* write m as a CMF file (format, arch, tokenizer, provenance, CRCs) */
int imp_model_write(const imp_model *m, const char *path);
void imp_model_free(imp_model *m);

/* "safetensors", "gguf", "llama2c" -> nv_from; -1 when unknown */
int nv_from_parse(const char *s);

/* ---- pieces the importers share (import_model.c), and the checks import.c makes ---- */

void imp_model_init(imp_model *m);
/*
 * add a lazy tensor of shape[ndim] and dtype (F32, F16, BF16): fn(ctx, out)
 * gives its f32 values when the file is written, one tensor at a time, so
 * an import never holds the whole model; ctx (malloc'd) is taken
 */
int imp_model_add_lazy(imp_model *m, const char *name, cmf_dtype dtype, size_t ndim,
		       const size_t *shape, imp_f32_fn fn, void *ctx);
/* add a tensor of any CMF dtype; data borrowed (owned = NULL) or taken (owned = data) */
int imp_model_add_raw(imp_model *m, const char *name, cmf_dtype dtype, size_t ndim,
		     const size_t *shape, const void *data, void *owned, size_t nbytes);
/* -1 naming the tensor and element when one of n F32/F16/BF16 values is not finite */
int imp_check_finite(const char *name, cmf_dtype dtype, const void *data, size_t n);
/* every llama-family tensor present has the shape the arch gives (1-d norms); no layer beyond the arch */
int imp_model_check(const imp_model *m);
/* tensors in the canonical order: embeddings, layers (HF order within), norm, head, the rest */
void imp_model_sort(imp_model *m);
/* the tensor called name, or NULL */
nv_itensor *imp_model_find(imp_model *m, const char *name);

/*
 * interleaved -> rotate-half, in place, on rows × row_bytes bytes holding
 * heads heads of rows/heads rows each (an even count): -1 when the rows do
 * not split into heads of even size.
 */
int nv_unpermute_rope(void *w, size_t rows, size_t row_bytes, size_t heads);

/* the importers (one file each) */
int nv_import_llama2c(const char *path, const char *vocab, int dtype, imp_model *m);
int nv_import_gguf(const char *path, int dtype, imp_model *m);
int nv_import_safetensors(size_t nsrc, char *const *src, int dtype, imp_model *m);

/* the tokenizer of a GGUF (tokenizer.ggml.*) into v (fresh); -1 when it has none */
int nv_gguf_vocab(const char *path, nv_vocab *v);
/*
 * the tokenizer.json at path and the tokenizer_config.json beside it into v
 * (fresh), for a model of arch a (no more tokens than a->vocab; bos/eos
 * from a when the files name none)
 */
int nv_hf_vocab(const char *path, const cmf_arch *a, nv_vocab *v);

#endif
