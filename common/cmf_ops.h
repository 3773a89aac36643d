/*
 * cmf_ops.h - the operations of cmf-patch on an opened CMF file
 * (man/man1/cmf-patch.1): listing, totals, extraction, applying BLR
 * payloads, truncation, export to plain safetensors, the bit report.
 * Text goes to the stream the tool passes; nothing here exits.
 */
#ifndef NV_CMF_OPS_H
#define NV_CMF_OPS_H

#include <stdio.h>

#include "cmf.h"

/* one line per tensor: name, dtype, shape (a×b, the logical m×n for BLR), bytes, codec, L<n> <short> */
int cmf_op_list(const cmf_file *f, FILE *out);

/* "key: value" lines: arch fields, tensors, parameters, bytes, blr tensors, tokenizer, provenance */
int cmf_op_info(const cmf_file *f, FILE *out);

/* the tensor as raw f32 (rows × cols) to path ("-" = stdout; binary refused on a terminal) */
int cmf_op_extract(const cmf_file *f, const char *name, const char *path);

/* one NAME=PAYLOAD argument, or a payload in memory */
typedef struct {
	const char *name;
	const char *payload; /* file holding the BLR bytes (named in errors) */
	const uint8_t *bytes; /* when not NULL: the BLR bytes themselves (len of them) */
	size_t len;
} cmf_patch;

/*
 * a copy of f with each named tensor replaced by its payload (dtype U8,
 * codec blr), every payload checked against its tensor's m × n first:
 * an unknown name, a repeated name, a bad payload or a wrong shape fails
 * the whole operation and writes nothing
 */
int cmf_op_apply(const cmf_file *f, const cmf_patch *p, size_t np, const char *out);

/*
 * added for pipelines/convert.mk: cmf_op_apply that also merges prov (a JSON
 * object: the conversion's provenance) into cmf.provenance (provenance.h);
 * prov NULL is cmf_op_apply
 */
int cmf_op_apply_prov(const cmf_file *f, const cmf_patch *p, size_t np, const char *prov,
		      const char *out);

/* layers 0..n-1 and every non-layer tensor but the mtp.* heads, cmf.arch's layer count set to n */
int cmf_op_truncate(const cmf_file *f, size_t n, const char *out);

/*
 * a plain Hugging Face safetensors file (every BLR tensor dequantized,
 * all tensors in dtype: CMF_F32, CMF_F16 or CMF_BF16; a value beyond the
 * dtype's range is an error) and config.json beside it: both or neither
 * (a full disk leaves no model without its config)
 */
int cmf_op_export(const cmf_file *f, cmf_dtype dtype, const char *out);
/* export's default dtype: the one every float tensor has, else F32 */
cmf_dtype cmf_op_export_dtype(const cmf_file *f);

/* per layer projection: codec, rank, paths, bpw; then the two totals */
int cmf_op_report(const cmf_file *f, FILE *out);

/* the totals of the report: blr body (BLR tensors only) and every layer projection */
typedef struct {
	double blr_bits, blr_weights;
	double all_bits, all_weights;
} cmf_bits;
int cmf_op_bits(const cmf_file *f, cmf_bits *b);

/* v rounded to dtype dt as it would be stored (F32 unchanged) */
float cmf_round_dtype(cmf_dtype dt, float v);

/*
 * a copy of f with the float tensor name's values replaced by v (rows·cols
 * f32, stored in the tensor's own dtype) and prov (a JSON object, or NULL)
 * merged into cmf.provenance; a value the dtype cannot hold is an error
 * naming its element, and nothing is written
 */
int cmf_op_set_tensor(const cmf_file *f, const char *name, const float *v, const char *prov,
		      const char *out);

#endif
