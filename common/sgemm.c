/*
 * sgemm.c - the f32 products of the forward and the block backward, in
 * fixed tiles so that their bytes do not depend on the thread count.
 *
 * OpenBLAS's threaded sgemm splits its work by the thread count, and some
 * of its kernels (Haswell's, measured) sum a row's products in an order
 * that depends on the shape of the part a thread gets: the same product
 * gave different bits with 1 and 2 threads.  Here C is cut into tiles of
 * at most NV_SGEMM_ROWS × NV_SGEMM_COLS, of a shape that depends on M and N
 * alone (near-equal parts, multiples of 16 but the last), each tile is one
 * single-threaded sgemm, and the tiles are shared among OpenBLAS's thread
 * count of our own threads.  A tile's bits then depend on its data and its
 * shape only.  At one thread the tiles cost 4-10% against one call
 * (OpenBLAS's Haswell kernels, 512-row windows of SmolLM2's widths).
 */
#include "linalg.h"
#include "par.h"

#include <cblas.h>

/* large enough for OpenBLAS's kernels to run near full speed on one core */
#define NV_SGEMM_ROWS 256
#define NV_SGEMM_COLS 512
/* below this many multiply-adds the tiles run on the calling thread */
#define NV_SGEMM_PAR_WORK (1u << 22)

typedef struct {
	int ta, tb;
	size_t M, N, K, lda, ldb, ldc;
	float alpha, beta;
	const float *A, *B;
	float *C;
	size_t bm, bn, tm, tn; /* the tiles' rows and columns, their counts */
	size_t first, stride;  /* the tiles first, first + stride, … */
} sg_job;

/* the part of n ≤ most·k in k near-equal parts, a multiple of 16 but the last */
static size_t sg_part(size_t n, size_t most, size_t *k)
{
	size_t parts = (n + most - 1) / most, b = (n + parts - 1) / parts;

	b = (b + 15) / 16 * 16;
	if (b > n)
		b = n;
	*k = (n + b - 1) / b;
	return b;
}

static void sg_tile(const sg_job *j, size_t t)
{
	size_t r0 = t / j->tn * j->bm, c0 = t % j->tn * j->bn;
	size_t m = j->M - r0 < j->bm ? j->M - r0 : j->bm;
	size_t n = j->N - c0 < j->bn ? j->N - c0 : j->bn;
	/* op(A)'s rows r0.. are A's rows, or its columns when A is transposed;
	 * op(B)'s columns c0.. likewise */
	const float *a = j->ta ? j->A + r0 : j->A + r0 * j->lda;
	const float *b = j->tb ? j->B + c0 * j->ldb : j->B + c0;

	cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
		    (int)m, (int)n, (int)j->K, j->alpha, a, (int)j->lda, b, (int)j->ldb, j->beta,
		    j->C + r0 * j->ldc + c0, (int)j->ldc);
}

static void sg_run(void *arg)
{
	const sg_job *j = arg;

	for (size_t t = j->first; t < j->tm * j->tn; t += j->stride)
		sg_tile(j, t);
}

/* the job's tiles shared among nt threads, the caller being one of them */
static void sg_share(const sg_job *proto, size_t nt)
{
	sg_job jobs[NV_PAR_MAX];

	for (size_t t = 0; t < nt; t++) {
		jobs[t] = *proto;
		jobs[t].first = t;
		jobs[t].stride = nt;
	}
	nv_par(jobs, nt, sizeof jobs[0], sg_run);
}

void nv_sgemm(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A,
	      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	sg_job j = {ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C, 0, 0, 0, 0, 0, 1};
	int blas = openblas_get_num_threads();
	size_t nt = blas < 1 ? 1 : (size_t)blas;

	if (M == 0 || N == 0)
		return;
	j.bm = sg_part(M, NV_SGEMM_ROWS, &j.tm);
	j.bn = sg_part(N, NV_SGEMM_COLS, &j.tn);
	if (nt > j.tm * j.tn)
		nt = j.tm * j.tn;
	if (nt > NV_PAR_MAX)
		nt = NV_PAR_MAX;
	if ((double)M * (double)N * (double)K < NV_SGEMM_PAR_WORK)
		nt = 1;
	nv_serial();
	if (nt > 1)
		sg_share(&j, nt);
	else
		sg_run(&j);
	nv_unserial();
}
