/*
 * clops.h - device operations on one command queue: clBLAST products, the
 * kernels of cl/nvg.cl, transfers and buffers.  f32, row-major.
 *
 * Errors are sticky: the first failure on a queue sets q->err and keeps
 * its reason (q->why); every later operation on that queue does nothing, so
 * a sequence of operations is checked once, at its end (nvcl_q_ok).  One
 * nvcl_q belongs to one thread.
 */
#ifndef NV_CLOPS_H
#define NV_CLOPS_H

#include "clctx.h"
#include "err.h"

enum {
	K_SCALE_RC, K_SUB, K_HADAMARD, K_ROWDOT, K_COLDOT, K_SIGN_W, K_PERM_T, K_PERM_ROWS,
	K_FLIP_ROWS, K_GPTQ_BLOCK, K_COUNT
};

typedef struct {
	nvcl_ctx *c;
	cl_command_queue q;
	cl_kernel k[K_COUNT];
	int err;
	char why[512];
	size_t wg; /* local size for the work-group kernels (a power of two) */
	double flops; /* 2·M·N·K summed over the clBLAST products enqueued */
} nvcl_q;

/* a queue and its kernels on c; -1 with reason */
int nvcl_q_init(nvcl_q *q, nvcl_ctx *c);
/* the same on an existing in-order queue `on` (retained; several nvcl_q may share one) */
int nvcl_q_init_on(nvcl_q *q, nvcl_ctx *c, cl_command_queue on);
void nvcl_q_free(nvcl_q *q);

/* wait for the queue; 0 when every operation so far succeeded, else -1 with reason */
int nvcl_q_ok(nvcl_q *q);

/* record a failure (the first one wins) */
void nvcl_q_fail(nvcl_q *q, const char *fmt, ...) NV_PRINTF(2, 3);

/* buffers (NULL and q->err set on failure; release NULL is a no-op) */
cl_mem nvcl_q_buf(nvcl_q *q, size_t floats, const char *what);
cl_mem nvcl_q_upload(nvcl_q *q, const float *src, size_t floats, const char *what);
cl_mem nvcl_q_upload_d(nvcl_q *q, const double *src, size_t floats, const char *what);
void nvcl_release(cl_mem *m);

/* transfers (blocking); _d converts f64 to f32 on the host, and a value
 * that is not finite as an f32 (NaN, infinite, or beyond ±FLT_MAX) fails
 * the queue naming it: the device never computes on what it cannot hold */
void nvcl_q_write(nvcl_q *q, cl_mem dst, size_t off, const float *src, size_t floats);
void nvcl_q_write_d(nvcl_q *q, cl_mem dst, size_t off, const double *src, size_t floats);
void nvcl_q_read(nvcl_q *q, cl_mem src, size_t off, float *dst, size_t floats);
void nvcl_q_read_d(nvcl_q *q, cl_mem src, size_t off, double *dst, size_t floats);
void nvcl_q_copy(nvcl_q *q, cl_mem dst, size_t doff, cl_mem src, size_t soff, size_t floats);
void nvcl_q_zero(nvcl_q *q, cl_mem dst, size_t floats);
void nvcl_q_fill(nvcl_q *q, cl_mem dst, float value, size_t floats);
/* the rows × cols block at element off of buf (leading dimension ld) from
 * (write = 0) or to a dense host block (blocking) */
void nvcl_q_rect(nvcl_q *q, cl_mem buf, size_t off, size_t ld, size_t rows, size_t cols,
		 float *host, int write);
/* the rows × cols block at soff of src (leading dimension lds) to doff of dst (ldd) */
void nvcl_q_copy_rect(nvcl_q *q, cl_mem dst, size_t doff, size_t ldd, cl_mem src, size_t soff,
		      size_t lds, size_t rows, size_t cols);

/*
 * C (M × N, ldc, offc) = alpha · op(A) · op(B) + beta · C, op(X) = X or Xᵀ;
 * A is (M × K) or (K × M) when ta, B is (K × N) or (N × K) when tb.
 */
void nvcl_gemm_ld(nvcl_q *q, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
		  cl_mem A, size_t offa, size_t lda, cl_mem B, size_t offb, size_t ldb,
		  float beta, cl_mem C, size_t offc, size_t ldc);
/* the same with dense leading dimensions and no offsets */
void nvcl_gemm(nvcl_q *q, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
	       cl_mem A, cl_mem B, float beta, cl_mem C);

/* the lower triangle of C (n × n, ldc, offc) = alpha · A Aᵀ + beta · C, A (n × k, lda, offa) */
void nvcl_syrk_lower(nvcl_q *q, size_t n, size_t k, float alpha, cl_mem A, size_t offa,
		     size_t lda, float beta, cl_mem C, size_t offc, size_t ldc);
/* y (from offy) = alpha · op(A) x (from offx) + beta · y, A (m × n, lda, offa), op(A) = A
 * or Aᵀ when trans (then x has m entries and y n) */
void nvcl_gemv_ld(nvcl_q *q, int trans, size_t m, size_t n, float alpha, cl_mem A,
		  size_t offa, size_t lda, cl_mem x, size_t offx, float beta, cl_mem y,
		  size_t offy);
/* xᵀy (n), through the one-float device buffer scratch (waits for the queue) */
double nvcl_dot(nvcl_q *q, size_t n, cl_mem x, cl_mem y, cl_mem scratch);
/* y += alpha · x (n) */
void nvcl_axpy(nvcl_q *q, size_t n, float alpha, cl_mem x, cl_mem y);
/* the same on x[offx + i·incx] and y[offy + i·incy] */
void nvcl_axpy_inc(nvcl_q *q, size_t n, float alpha, cl_mem x, size_t offx, size_t incx,
		   cl_mem y, size_t offy, size_t incy);
/* ‖x‖₂ (n), through the one-float device buffer scratch (waits for the queue) */
double nvcl_nrm2(nvcl_q *q, size_t n, cl_mem x, cl_mem scratch);
/* ‖a − I‖_F/√r of a (r × r), a left as it was; ones: r floats of 1, scratch
 * one float (waits for the queue) */
double nvcl_off_identity(nvcl_q *q, cl_mem a, size_t r, cl_mem ones, cl_mem scratch);
/* x *= alpha (n) */
void nvcl_scal(nvcl_q *q, size_t n, float alpha, cl_mem x);
/* y (n, dense) = x[offx + i·incx] */
void nvcl_copy_inc(nvcl_q *q, size_t n, cl_mem x, size_t offx, size_t incx, cl_mem y);

/* out (rows × cols, ldo, from offo) = diag(rs) · in (rows × cols, ldi) · diag(cs);
 * rs/cs NULL = 1; out may be in (offo 0, ldo = ldi) */
void nvcl_scale_rc(nvcl_q *q, cl_mem out, size_t offo, size_t ldo, cl_mem in, size_t ldi,
		   cl_mem rs, cl_mem cs, size_t rows, size_t cols);
/* out = a − b (len) */
void nvcl_sub(nvcl_q *q, cl_mem out, cl_mem a, cl_mem b, size_t len);
/* a ∘= b (len) */
void nvcl_hadamard(nvcl_q *q, cl_mem a, cl_mem b, size_t len);
/* out (rows) = row sums of a ∘ b; a (rows × cols, lda, offa), b (ldb, offb) */
void nvcl_rowdot(nvcl_q *q, cl_mem out, cl_mem a, size_t offa, size_t lda, cl_mem b,
		 size_t offb, size_t ldb, size_t rows, size_t cols);
/* out (cols) = column sums of a ∘ b */
void nvcl_coldot(nvcl_q *q, cl_mem out, cl_mem a, size_t offa, size_t lda, cl_mem b,
		 size_t offb, size_t ldb, size_t rows, size_t cols);
/* out = sgn(in) · w per row (rows × cols), sgn(0) = +1 */
void nvcl_sign_w(nvcl_q *q, cl_mem out, cl_mem in, cl_mem w, size_t rows, size_t cols);
/* out (n × m) row j = column perm[j] of in (m × n) */
void nvcl_perm_t(nvcl_q *q, cl_mem out, cl_mem in, cl_mem perm, size_t m, size_t n);
/* gather (scatter = 0) out row j = in row perm[j]; scatter: out row perm[j] = in row j */
void nvcl_perm_rows(nvcl_q *q, cl_mem out, cl_mem in, cl_mem perm, int scatter, size_t rows,
		    size_t cols);
/* the row flips (cl/nvg.cl flip_rows); flips (m) per-row counts */
void nvcl_flip_rows(nvcl_q *q, cl_mem su, cl_mem qs, cl_mem qm, cl_mem whb, cl_mem l,
		    cl_mem qd, cl_mem h, cl_mem flips, size_t m, size_t r, float thr);
/* the column search of one block (cl/nvg.cl gptq_block) */
void nvcl_gptq_block(nvcl_q *q, cl_mem bv0, cl_mem ks0, cl_mem s, cl_mem pe, cl_mem g,
		     cl_mem k, cl_mem kd, cl_mem uc, size_t n, size_t b0, size_t nb, size_t r,
		     float thr, cl_mem flips);

/* local memory the column search needs at rank r */
size_t nvcl_gptq_local_bytes(const nvcl_q *q, size_t r);

#endif
