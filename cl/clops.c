/* clops.c - device operations on one queue (see clops.h) */
#include "clops.h"

#include <clblast_c.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

static const char *const kernel_names[K_COUNT] = {
	"scale_rc", "sub", "hadamard", "rowdot", "coldot", "sign_w", "perm_t", "perm_rows",
	"flip_rows", "gptq_block",
};

void nvcl_q_fail(nvcl_q *q, const char *fmt, ...)
{
	va_list ap;

	if (q->err)
		return;
	q->err = 1;
	va_start(ap, fmt);
	vsnprintf(q->why, sizeof(q->why), fmt, ap);
	va_end(ap);
}

int nvcl_q_init_on(nvcl_q *q, nvcl_ctx *c, cl_command_queue on)
{
	cl_int st = CL_SUCCESS;

	memset(q, 0, sizeof(*q));
	q->c = c;
	if (on)
		st = clRetainCommandQueue(q->q = on);
	else
		q->q = clCreateCommandQueue(c->ctx, c->device, 0, &st);
	if (st != CL_SUCCESS) {
		q->q = NULL;
		nv_seterr("creating a queue on '%s': %s", c->dev_name, nvcl_strerror(st));
		return -1;
	}
	for (int i = 0; i < K_COUNT; i++) {
		q->k[i] = clCreateKernel(c->prog, kernel_names[i], &st);
		if (st != CL_SUCCESS) {
			nv_seterr("kernel '%s' from '%s': %s", kernel_names[i], c->src_path,
				  nvcl_strerror(st));
			nvcl_q_free(q);
			return -1;
		}
	}
	q->wg = 1;
	while (q->wg * 2 <= c->max_wg && q->wg < 256)
		q->wg *= 2;
	return 0;
}

int nvcl_q_init(nvcl_q *q, nvcl_ctx *c)
{
	return nvcl_q_init_on(q, c, NULL);
}

void nvcl_q_free(nvcl_q *q)
{
	for (int i = 0; i < K_COUNT; i++)
		if (q->k[i])
			clReleaseKernel(q->k[i]);
	if (q->q)
		clReleaseCommandQueue(q->q);
	memset(q->k, 0, sizeof(q->k));
	q->q = NULL;
}

int nvcl_q_ok(nvcl_q *q)
{
	if (!q->err) {
		cl_int st = clFinish(q->q);
		if (st != CL_SUCCESS)
			nvcl_q_fail(q, "waiting for '%s': %s", q->c->dev_name, nvcl_strerror(st));
	}
	if (q->err) {
		nv_seterr("%s", q->why);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- buffers */

cl_mem nvcl_q_buf(nvcl_q *q, size_t floats, const char *what)
{
	size_t bytes;
	cl_mem m;

	if (q->err)
		return NULL;
	if (nv_mul(floats, sizeof(float), &bytes) < 0) {
		nvcl_q_fail(q, "%s: %s", what, nv_err());
		return NULL;
	}
	m = nvcl_buffer(q->c, bytes, what);
	if (!m)
		nvcl_q_fail(q, "%s", nv_err());
	return m;
}

cl_mem nvcl_q_upload(nvcl_q *q, const float *src, size_t floats, const char *what)
{
	cl_mem m = nvcl_q_buf(q, floats, what);

	nvcl_q_write(q, m, 0, src, floats);
	return m;
}

void nvcl_release(cl_mem *m)
{
	if (*m)
		clReleaseMemObject(*m);
	*m = NULL;
}

/* ---------------------------------------------------------------- transfers */

void nvcl_q_write(nvcl_q *q, cl_mem dst, size_t off, const float *src, size_t floats)
{
	cl_int st;

	if (q->err || floats == 0)
		return;
	st = clEnqueueWriteBuffer(q->q, dst, CL_TRUE, off * sizeof(float), floats * sizeof(float),
				  src, 0, NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "writing %zu floats to the device: %s", floats, nvcl_strerror(st));
}

/* the f64 → f32 staging of both writes below */
static void write_d(nvcl_q *q, cl_mem dst, size_t off, const double *src, size_t floats,
		    const char *what)
{
	float *tmp;

	if (q->err || floats == 0)
		return;
	tmp = nv_malloc(floats, sizeof(float));
	if (!tmp) {
		nvcl_q_fail(q, "host staging of %zu floats: %s", floats, nv_err());
		return;
	}
	for (size_t i = 0; i < floats; i++) {
		tmp[i] = (float)src[i];
		if (!isfinite(tmp[i])) {
			nvcl_q_fail(q, "%s: value %zu = %g is beyond f32", what, i, src[i]);
			break;
		}
	}
	nvcl_q_write(q, dst, off, tmp, floats);
	free(tmp);
}

void nvcl_q_write_d(nvcl_q *q, cl_mem dst, size_t off, const double *src, size_t floats)
{
	write_d(q, dst, off, src, floats, "a host vector");
}

cl_mem nvcl_q_upload_d(nvcl_q *q, const double *src, size_t floats, const char *what)
{
	cl_mem m = nvcl_q_buf(q, floats, what);

	write_d(q, m, 0, src, floats, what);
	return m;
}

void nvcl_q_read(nvcl_q *q, cl_mem src, size_t off, float *dst, size_t floats)
{
	cl_int st;

	if (q->err || floats == 0)
		return;
	st = clEnqueueReadBuffer(q->q, src, CL_TRUE, off * sizeof(float), floats * sizeof(float),
				 dst, 0, NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "reading %zu floats from the device: %s", floats, nvcl_strerror(st));
}

void nvcl_q_read_d(nvcl_q *q, cl_mem src, size_t off, double *dst, size_t floats)
{
	float *tmp;

	if (q->err || floats == 0)
		return;
	tmp = nv_malloc(floats, sizeof(float));
	if (!tmp) {
		nvcl_q_fail(q, "host staging of %zu floats: %s", floats, nv_err());
		return;
	}
	nvcl_q_read(q, src, off, tmp, floats);
	if (!q->err)
		for (size_t i = 0; i < floats; i++)
			dst[i] = tmp[i];
	free(tmp);
}

void nvcl_q_copy(nvcl_q *q, cl_mem dst, size_t doff, cl_mem src, size_t soff, size_t floats)
{
	cl_int st;

	if (q->err || floats == 0)
		return;
	st = clEnqueueCopyBuffer(q->q, src, dst, soff * sizeof(float), doff * sizeof(float),
				 floats * sizeof(float), 0, NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "copying %zu floats on the device: %s", floats, nvcl_strerror(st));
}

void nvcl_q_fill(nvcl_q *q, cl_mem dst, float value, size_t floats)
{
	cl_int st;

	if (q->err || floats == 0)
		return;
	st = clEnqueueFillBuffer(q->q, dst, &value, sizeof(value), 0, floats * sizeof(float), 0,
				 NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "filling %zu floats on the device: %s", floats, nvcl_strerror(st));
}

void nvcl_q_zero(nvcl_q *q, cl_mem dst, size_t floats)
{
	nvcl_q_fill(q, dst, 0.0f, floats);
}

/* a rows × cols block at element off of a buffer of leading dimension ld,
 * to (write) or from a dense host block */
void nvcl_q_rect(nvcl_q *q, cl_mem buf, size_t off, size_t ld, size_t rows, size_t cols,
		 float *host, int write)
{
	const size_t F = sizeof(float);
	const size_t bo[3] = { off % ld * F, off / ld, 0 }, ho[3] = { 0, 0, 0 };
	const size_t reg[3] = { cols * F, rows, 1 };
	cl_int st;

	if (q->err || rows == 0 || cols == 0)
		return;
	if (write)
		st = clEnqueueWriteBufferRect(q->q, buf, CL_TRUE, bo, ho, reg, ld * F, 0,
					      cols * F, 0, host, 0, NULL, NULL);
	else
		st = clEnqueueReadBufferRect(q->q, buf, CL_TRUE, bo, ho, reg, ld * F, 0, cols * F,
					     0, host, 0, NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "%s a %zu × %zu block %s the device: %s",
			    write ? "writing" : "reading", rows, cols, write ? "to" : "from",
			    nvcl_strerror(st));
}

void nvcl_q_copy_rect(nvcl_q *q, cl_mem dst, size_t doff, size_t ldd, cl_mem src, size_t soff,
		      size_t lds, size_t rows, size_t cols)
{
	const size_t F = sizeof(float);
	const size_t so[3] = { soff % lds * F, soff / lds, 0 }, dO[3] = { doff % ldd * F, doff / ldd, 0 };
	const size_t reg[3] = { cols * F, rows, 1 };
	cl_int st;

	if (q->err || rows == 0 || cols == 0)
		return;
	st = clEnqueueCopyBufferRect(q->q, src, dst, so, dO, reg, lds * F, 0, ldd * F, 0, 0, NULL,
				     NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "copying a %zu × %zu block on the device: %s", rows, cols,
			    nvcl_strerror(st));
}

/* ---------------------------------------------------------------- clBLAST */

/*
 * clBLAST's routine set-up (its tuning database and program caches) is not
 * safe when several threads call it at once (CNugteren/CLBlast#486; a crash
 * in Database::Database here): the calls are serialised.  A call only
 * enqueues work, so queues of different threads still run side by side.
 */
static pthread_mutex_t blast_lock = PTHREAD_MUTEX_INITIALIZER;

void nvcl_gemm_ld(nvcl_q *q, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
		  cl_mem A, size_t offa, size_t lda, cl_mem B, size_t offb, size_t ldb,
		  float beta, cl_mem C, size_t offc, size_t ldc)
{
	CLBlastStatusCode st;

	if (q->err || M == 0 || N == 0)
		return;
	if (K == 0) {
		/* an empty product: C = beta·C, which clBLAST refuses as a zero dimension */
		K = 1;
		alpha = 0.0f;
	}
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSgemm(CLBlastLayoutRowMajor, ta ? CLBlastTransposeYes : CLBlastTransposeNo,
			  tb ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, alpha, A, offa,
			  lda, B, offb, ldb, beta, C, offc, ldc, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	q->flops += 2.0 * (double)M * (double)N * (double)K;
	if (st != CLBlastSuccess)
		nvcl_q_fail(q, "clBLAST sgemm (%zu × %zu × %zu) on '%s': %s", M, N, K,
			    q->c->dev_name, nvcl_blast_strerror(st));
}

void nvcl_gemm(nvcl_q *q, int ta, int tb, size_t M, size_t N, size_t K, float alpha,
	       cl_mem A, cl_mem B, float beta, cl_mem C)
{
	nvcl_gemm_ld(q, ta, tb, M, N, K, alpha, A, 0, ta ? M : K, B, 0, tb ? K : N, beta, C, 0,
		     N);
}

/* after a clBLAST call: the queue fails naming the routine and its shape */
static void blast_check(nvcl_q *q, CLBlastStatusCode st, const char *what, size_t a, size_t b)
{
	if (st != CLBlastSuccess)
		nvcl_q_fail(q, "clBLAST %s (%zu × %zu) on '%s': %s", what, a, b, q->c->dev_name,
			    nvcl_blast_strerror(st));
}

void nvcl_syrk_lower(nvcl_q *q, size_t n, size_t k, float alpha, cl_mem A, size_t offa,
		     size_t lda, float beta, cl_mem C, size_t offc, size_t ldc)
{
	CLBlastStatusCode st;

	if (q->err || n == 0 || k == 0)
		return;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSsyrk(CLBlastLayoutRowMajor, CLBlastTriangleLower, CLBlastTransposeNo, n, k,
			  alpha, A, offa, lda, beta, C, offc, ldc, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	q->flops += (double)n * (double)n * (double)k;
	blast_check(q, st, "ssyrk", n, k);
}

void nvcl_gemv_ld(nvcl_q *q, int trans, size_t m, size_t n, float alpha, cl_mem A,
		  size_t offa, size_t lda, cl_mem x, size_t offx, float beta, cl_mem y,
		  size_t offy)
{
	CLBlastStatusCode st;

	if (q->err || m == 0 || n == 0)
		return;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSgemv(CLBlastLayoutRowMajor, trans ? CLBlastTransposeYes : CLBlastTransposeNo,
			  m, n, alpha, A, offa, lda, x, offx, 1, beta, y, offy, 1, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	q->flops += 2.0 * (double)m * (double)n;
	blast_check(q, st, "sgemv", m, n);
}

double nvcl_dot(nvcl_q *q, size_t n, cl_mem x, cl_mem y, cl_mem scratch)
{
	CLBlastStatusCode st;
	float v = 0.0f;

	if (q->err || n == 0)
		return 0.0;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSdot(n, scratch, 0, x, 0, 1, y, 0, 1, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	blast_check(q, st, "sdot", n, 1);
	nvcl_q_read(q, scratch, 0, &v, 1);
	return v;
}

void nvcl_axpy_inc(nvcl_q *q, size_t n, float alpha, cl_mem x, size_t offx, size_t incx,
		   cl_mem y, size_t offy, size_t incy)
{
	CLBlastStatusCode st;

	if (q->err || n == 0)
		return;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSaxpy(n, alpha, x, offx, incx, y, offy, incy, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	blast_check(q, st, "saxpy", n, 1);
}

void nvcl_axpy(nvcl_q *q, size_t n, float alpha, cl_mem x, cl_mem y)
{
	nvcl_axpy_inc(q, n, alpha, x, 0, 1, y, 0, 1);
}

double nvcl_off_identity(nvcl_q *q, cl_mem a, size_t r, cl_mem ones, cl_mem scratch)
{
	double e;

	nvcl_axpy_inc(q, r, -1.0f, ones, 0, 1, a, 0, r + 1);
	e = nvcl_nrm2(q, r * r, a, scratch);
	nvcl_axpy_inc(q, r, 1.0f, ones, 0, 1, a, 0, r + 1);
	return e / sqrt((double)r);
}

double nvcl_nrm2(nvcl_q *q, size_t n, cl_mem x, cl_mem scratch)
{
	CLBlastStatusCode st;
	float v = 0.0f;

	if (q->err || n == 0)
		return 0.0;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSnrm2(n, scratch, 0, x, 0, 1, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	blast_check(q, st, "snrm2", n, 1);
	nvcl_q_read(q, scratch, 0, &v, 1);
	return v;
}

void nvcl_scal(nvcl_q *q, size_t n, float alpha, cl_mem x)
{
	CLBlastStatusCode st;

	if (q->err || n == 0)
		return;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastSscal(n, alpha, x, 0, 1, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	blast_check(q, st, "sscal", n, 1);
}

void nvcl_copy_inc(nvcl_q *q, size_t n, cl_mem x, size_t offx, size_t incx, cl_mem y)
{
	CLBlastStatusCode st;

	if (q->err || n == 0)
		return;
	pthread_mutex_lock(&blast_lock);
	st = CLBlastScopy(n, x, offx, incx, y, 0, 1, &q->q, NULL);
	pthread_mutex_unlock(&blast_lock);
	blast_check(q, st, "scopy", n, incx);
}

/* ---------------------------------------------------------------- kernels */

/* set the arguments of kernel id from a list of (size, pointer) pairs */
static int set_args(nvcl_q *q, int id, int nargs, const size_t *sz, const void *const *val)
{
	for (int i = 0; i < nargs; i++) {
		cl_int st = clSetKernelArg(q->k[id], (cl_uint)i, sz[i], val[i]);
		if (st != CL_SUCCESS) {
			nvcl_q_fail(q, "argument %d of kernel '%s': %s", i, kernel_names[id],
				    nvcl_strerror(st));
			return -1;
		}
	}
	return 0;
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) / to * to;
}

static void launch(nvcl_q *q, int id, cl_uint dims, const size_t *global, const size_t *local)
{
	size_t g[2];
	cl_int st;

	for (cl_uint d = 0; d < dims; d++) {
		g[d] = local ? round_up(global[d], local[d]) : global[d];
		if (g[d] == 0)
			return;
	}
	st = clEnqueueNDRangeKernel(q->q, q->k[id], dims, NULL, g, local, 0, NULL, NULL);
	if (st != CL_SUCCESS)
		nvcl_q_fail(q, "running kernel '%s' on '%s': %s", kernel_names[id], q->c->dev_name,
			    nvcl_strerror(st));
}

#define ARGS(...)                                                                        \
	const void *const val_[] = { __VA_ARGS__ };                                      \
	enum { NARGS_ = sizeof(val_) / sizeof(val_[0]) }

void nvcl_scale_rc(nvcl_q *q, cl_mem out, size_t offo, size_t ldo, cl_mem in, size_t ldi,
		   cl_mem rs, cl_mem cs, size_t rows, size_t cols)
{
	cl_ulong oo = offo;
	cl_uint ldo_ = (cl_uint)ldo, ldi_ = (cl_uint)ldi, urs = rs != NULL, ucs = cs != NULL;
	cl_uint r_ = (cl_uint)rows, c_ = (cl_uint)cols;
	cl_mem rs_ = rs ? rs : in, cs_ = cs ? cs : in;
	const size_t sz[] = { sizeof(cl_mem), 8, 4, sizeof(cl_mem), 4, sizeof(cl_mem),
			      sizeof(cl_mem), 4, 4, 4, 4 };
	ARGS(&out, &oo, &ldo_, &in, &ldi_, &rs_, &cs_, &urs, &ucs, &r_, &c_);
	const size_t gl[2] = { rows, cols }, lo[2] = { 1, 64 };

	(void)NARGS_;
	if (q->err || set_args(q, K_SCALE_RC, 11, sz, val_) < 0)
		return;
	launch(q, K_SCALE_RC, 2, gl, cols >= 64 ? lo : NULL);
}

static void elementwise(nvcl_q *q, int id, cl_mem *bufs, int nb, size_t len)
{
	cl_ulong l = len;
	size_t sz[4];
	const void *val[4];

	for (int i = 0; i < nb; i++) {
		sz[i] = sizeof(cl_mem);
		val[i] = &bufs[i];
	}
	sz[nb] = sizeof(cl_ulong);
	val[nb] = &l;
	if (q->err || set_args(q, id, nb + 1, sz, val) < 0)
		return;
	launch(q, id, 1, &len, NULL);
}

void nvcl_sub(nvcl_q *q, cl_mem out, cl_mem a, cl_mem b, size_t len)
{
	cl_mem bufs[3] = { out, a, b };

	elementwise(q, K_SUB, bufs, 3, len);
}

void nvcl_hadamard(nvcl_q *q, cl_mem a, cl_mem b, size_t len)
{
	cl_mem bufs[2] = { a, b };

	elementwise(q, K_HADAMARD, bufs, 2, len);
}

void nvcl_rowdot(nvcl_q *q, cl_mem out, cl_mem a, size_t offa, size_t lda, cl_mem b,
		 size_t offb, size_t ldb, size_t rows, size_t cols)
{
	cl_ulong oa = offa, ob = offb;
	cl_uint la = (cl_uint)lda, lb = (cl_uint)ldb, c_ = (cl_uint)cols;
	const size_t M = sizeof(cl_mem);
	const size_t sz[] = { M, M, 8, 4, M, 8, 4, 4, q->wg * sizeof(float) };
	const size_t gl = rows * q->wg, lo = q->wg;
	ARGS(&out, &a, &oa, &la, &b, &ob, &lb, &c_, NULL);

	(void)NARGS_;
	if (q->err || rows == 0 || set_args(q, K_ROWDOT, 9, sz, val_) < 0)
		return;
	launch(q, K_ROWDOT, 1, &gl, &lo);
}

void nvcl_coldot(nvcl_q *q, cl_mem out, cl_mem a, size_t offa, size_t lda, cl_mem b,
		 size_t offb, size_t ldb, size_t rows, size_t cols)
{
	cl_ulong oa = offa, ob = offb;
	cl_uint la = (cl_uint)lda, lb = (cl_uint)ldb, r_ = (cl_uint)rows, c_ = (cl_uint)cols;
	const size_t M = sizeof(cl_mem);
	const size_t sz[] = { M, M, 8, 4, M, 8, 4, 4, 4 };
	ARGS(&out, &a, &oa, &la, &b, &ob, &lb, &r_, &c_);

	(void)NARGS_;
	if (q->err || rows == 0 || set_args(q, K_COLDOT, 9, sz, val_) < 0)
		return;
	launch(q, K_COLDOT, 1, &cols, NULL);
}

/* kernel id over a 2-D grid (g0 × g1) whose arguments are three buffers,
 * then nu (2 or 3) uints */
static void bufs3_2d(nvcl_q *q, int id, cl_mem a, cl_mem b, cl_mem c, const cl_uint *u,
		     int nu, size_t g0, size_t g1)
{
	const size_t sz[] = { sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem), 4, 4, 4 };
	const void *const val[] = { &a, &b, &c, &u[0], &u[1], nu > 2 ? &u[2] : NULL };
	const size_t gl[2] = { g0, g1 };

	if (q->err || set_args(q, id, 3 + nu, sz, val) < 0)
		return;
	launch(q, id, 2, gl, NULL);
}

void nvcl_sign_w(nvcl_q *q, cl_mem out, cl_mem in, cl_mem w, size_t rows, size_t cols)
{
	const cl_uint u[] = { (cl_uint)rows, (cl_uint)cols };

	bufs3_2d(q, K_SIGN_W, out, in, w, u, 2, rows, cols);
}

void nvcl_perm_t(nvcl_q *q, cl_mem out, cl_mem in, cl_mem perm, size_t m, size_t n)
{
	const cl_uint u[] = { (cl_uint)m, (cl_uint)n };

	bufs3_2d(q, K_PERM_T, out, in, perm, u, 2, n, m);
}

void nvcl_perm_rows(nvcl_q *q, cl_mem out, cl_mem in, cl_mem perm, int scatter, size_t rows,
		    size_t cols)
{
	const cl_uint u[] = { scatter != 0, (cl_uint)rows, (cl_uint)cols };

	bufs3_2d(q, K_PERM_ROWS, out, in, perm, u, 3, rows, cols);
}

void nvcl_flip_rows(nvcl_q *q, cl_mem su, cl_mem qs, cl_mem qm, cl_mem whb, cl_mem l,
		    cl_mem qd, cl_mem h, cl_mem flips, size_t m, size_t r, float thr)
{
	cl_uint m_ = (cl_uint)m, r_ = (cl_uint)r;
	const size_t M = sizeof(cl_mem);
	const size_t sz[] = { M, M, M, M, M, M, M, M, 4, 4, sizeof(float) };
	ARGS(&su, &qs, &qm, &whb, &l, &qd, &h, &flips, &m_, &r_, &thr);

	(void)NARGS_;
	if (q->err || set_args(q, K_FLIP_ROWS, 11, sz, val_) < 0)
		return;
	launch(q, K_FLIP_ROWS, 1, &m, NULL);
}

size_t nvcl_gptq_local_bytes(const nvcl_q *q, size_t r)
{
	return 2 * r * sizeof(float) + q->wg * (sizeof(float) + sizeof(cl_uint));
}

void nvcl_gptq_block(nvcl_q *q, cl_mem bv0, cl_mem ks0, cl_mem s, cl_mem pe, cl_mem g,
		     cl_mem k, cl_mem kd, cl_mem uc, size_t n, size_t b0, size_t nb, size_t r,
		     float thr, cl_mem flips)
{
	cl_uint n_ = (cl_uint)n, b0_ = (cl_uint)b0, nb_ = (cl_uint)nb, r_ = (cl_uint)r;
	const size_t M = sizeof(cl_mem), W = q->wg;
	const size_t sz[] = { M, M, M, M, M, M, M, M, 4, 4, 4, 4, sizeof(float), M,
			      r * sizeof(float), r * sizeof(float), W * sizeof(float),
			      W * sizeof(cl_uint) };
	ARGS(&bv0, &ks0, &s, &pe, &g, &k, &kd, &uc, &n_, &b0_, &nb_, &r_, &thr, &flips, NULL, NULL,
	     NULL, NULL);

	(void)NARGS_;
	if (q->err || set_args(q, K_GPTQ_BLOCK, 18, sz, val_) < 0)
		return;
	launch(q, K_GPTQ_BLOCK, 1, &W, &W);
}
