/*
 * hctx.h - one input's context (man/man5/hctx.5): everything the NVG
 * encoder derives from a FIT Gram G (n × n), shared by the tensors that read
 * that input.
 *
 *   hf   = G + ρ·(tr G / n)·I          the damped Gram
 *   l    = chol(hf), lower              hf = l·lᵀ
 *   sqd  = √diag(hf)
 *   perm = act order: diag(hf) descending, ties by index
 *   uc   = J·inv(chol(J·Hp·J))·J        Hp = hf[perm][perm], J the reversal;
 *                                       the upper Cholesky factor of Hp⁻¹:
 *                                       ucᵀ·uc = Hp⁻¹, uc upper triangular
 *
 * The file stores the triangles of hf, l and uc packed (rows of the lower
 * triangle for hf and l, rows of the upper triangle for uc), little-endian
 * f64, then a CRC-32 (zlib) of every byte before it:
 *
 *   0  u32 magic 0x58544348 ("HCTX")    4  u32 version 1
 *   8  u32 n                            12 u32 gram_crc (CRC-32 of the NVGG's G bytes)
 *   16 f64 ρ                            24 u64 count (the Gram's tokens)
 *   32 f64 hf[n(n+1)/2]  f64 l[n(n+1)/2]  f64 sqd[n]  u32 perm[n]  f64 uc[n(n+1)/2]
 *   then u32 crc
 */
#ifndef NV_HCTX_H
#define NV_HCTX_H

#include <stddef.h>
#include <stdint.h>

#include "linalg.h"

#define HCTX_MAGIC 0x58544348u
#define HCTX_VERSION 1u

typedef struct {
	size_t n;
	double rho;
	uint64_t count;
	uint32_t gram_crc;
	nv_mat32 hf;    /* (n × n) damped Gram: the Gram's f32 values off the diagonal,
			 * the diagonal with the ridge in f64 (hf.diag) */
	nv_mat l;       /* (n × n) lower Cholesky factor of hf (empty when not kept) */
	double *sqd;    /* (n) √diag(hf) */
	uint32_t *perm; /* (n) act order */
	double *uc;     /* (n(n+1)/2) upper Cholesky factor of the permuted inverse,
			 * its triangle by rows as the file stores it: row i holds
			 * uc[i][i..n-1] from nv_hctx_uc_row(n, i) on; NULL when
			 * read by nv_hctx_read_lazy: then its rows come from uc_path */
	char *uc_path;      /* the file uc's rows are read from again, or NULL */
	size_t uc_off;      /* where uc starts in it */
	uint32_t *uc_crc;   /* (n) each row's CRC-32 at the first read */
} nv_hctx;

/* where row i of the packed upper triangle starts (entry (i, i)) */
static inline size_t nv_hctx_uc_row(size_t n, size_t i)
{
	return i * n - i * (i - 1) / 2;
}

/* uc[i][j], 0 below the diagonal (uc held: not after nv_hctx_read_lazy) */
double nv_hctx_uc_at(const nv_hctx *hc, size_t i, size_t j);
/* rows [b0, b1) of uc from column b0 on, dense ((b1 − b0) × (n − b0), zeros
 * below the diagonal; fresh, NULL on exhaustion): what a GPTQ block reads */
double *nv_hctx_uc_rows(const nv_hctx *hc, size_t b0, size_t b1);
/* nv_hctx_uc_rows reads them from the file when uc is not held (each row
 * checked against its first read's CRC): NULL with reason when the file has
 * changed or cannot be read */
/* uc as a full n × n matrix (fresh): for the device and for tests */
int nv_hctx_uc_full(const nv_hctx *hc, nv_mat *out);

/* build from a mean Gram g (n × n, f64, symmetric, f32 values off the
 * diagonal as a Gram file's are); -1 with reason when an entry is not, or
 * when hf is not positive definite ("... after damping with rho R: try a
 * larger --rho") */
int nv_hctx_build(const double *g, size_t n, double rho, nv_hctx *hc);

/* the ridge δ = ρ·tr(G)/n that hf adds to the Gram's diagonal, from hf
 * itself (tr hf = (1 + ρ)·tr G), so that errors on the raw Gram follow
 * from hf: tr(E G Eᵀ) = tr(E hf Eᵀ) − δ‖E‖²_F */
double nv_hctx_ridge(const nv_hctx *hc);

/* bytes of the file for width n (0 on overflow) */
size_t nv_hctx_file_size(size_t n);

/* serialize into a fresh buffer */
int nv_hctx_serialize(const nv_hctx *hc, uint8_t **buf, size_t *len);

/* build from a mean Gram's f32 values g (n × n, taken: freed here, also on
 * failure) and write it atomically to path ("-" = stdout), count and
 * gram_crc into its header: the bytes nv_hctx_serialize gives for
 * nv_hctx_build's context, holding hf's f32 values beside the f64 l, then
 * the f64 permuted system, never the file's bytes whole.  -1 with reason as nv_hctx_build's, -2 when the
 * output cannot be opened or written; path is left as it was then */
int nv_hctx_build_write(float *g, size_t n, double rho, uint64_t count, uint32_t gram_crc,
			const char *path);

/* validate and decode (magic, version, size, CRC, finiteness, factor
 * diagonals, permutation); -1 with reason naming the field */
int nv_hctx_parse(const uint8_t *buf, size_t len, nv_hctx *hc);
/* the same from a file, never held whole (its pages are given back as they
 * are read); with keep_l 0 the factor l is checked but not kept (hc->l
 * empty): the CPU encoder of a matrix no taller than wide does not read it */
int nv_hctx_read(const char *path, int keep_l, nv_hctx *hc);
/* the same, then uc let go (hc->uc NULL): checked whole at this read, its
 * rows are read again from the file where they are wanted, never held
 * whole (n(n+1)/2 doubles: the encoder's refinement reads a strip at a time).
 * From a pipe, uc is held as nv_hctx_read holds it */
int nv_hctx_read_lazy(const char *path, int keep_l, nv_hctx *hc);

void nv_hctx_free(nv_hctx *hc);

#endif
