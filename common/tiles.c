/*
 * tiles.c - the level-3 products in fixed tiles, so that their bytes do not
 * depend on the thread count.
 *
 * OpenBLAS's threaded products split their work by the thread count, and
 * some of its kernels sum a row's products in an order that depends on the
 * shape of the part a thread gets: sgemm with the Haswell kernels gave
 * different bits at 1 and 2 threads, and dgemm did too wherever a part's
 * rows are not a multiple of the kernel's (100 × 576 × 1536 and 577 × 1535
 * × 577 at 2 and 3 threads, 256 × 1536 × 1536 at 3, with OpenBLAS 0.3.21's
 * Haswell and SkylakeX kernels alike).  Here the output is cut into tiles
 * of a shape that depends on the product's shape alone (near-equal parts of
 * at most NV_TILE_ROWS_* × NV_TILE_COLS_* or NV_TILE_SYRK square,
 * multiples of 16 but the last), each
 * tile is one BLAS call on one thread (OpenBLAS's own count is held at one,
 * linalg.h), and the tiles are taken by nv_get_threads() threads of our
 * own.  A tile's bits then depend on its data and its shape only.  At one
 * thread the tiles cost 4-10% against one sgemm (OpenBLAS's Haswell
 * kernels, 512-row windows of SmolLM2's widths) and nothing measurable in
 * the encoder; at two threads an encode of a 576x1536 took 1.04× the time
 * of OpenBLAS's threads (the 2-core VM, SkylakeX kernels).
 */
#include "linalg.h"
#include "par.h"

#include <cblas.h>

/* large enough for OpenBLAS's kernels to run near full speed on one core:
 * the f32 products' rows and columns (the forward's windows: 4-10% against
 * one sgemm at one thread); the f64 ones' rows from NV_TILE_ROWS_D down to
 * NV_TILE_ROWS_DMIN until there are NV_TILE_FEW tiles, and their columns.
 * One thread, against one dgemm: 128 × 512 tiles took 1.19× its time on
 * 4096 × 1000 × 4096 and 1000 × 1000 × 4096 (a 7B layer's H·B and r × r
 * products), 512 × 1024 1.02×; but 256-row tiles left a 576x1536's products
 * of 129 to 256 rows (the rank's) on one thread, and three tiles of 576
 * rows on two threads (such an encode took 1.12× the time of 128's) */
#define NV_TILE_ROWS_S 256
#define NV_TILE_COLS_S 512
#define NV_TILE_ROWS_D 512
#define NV_TILE_ROWS_DMIN 128
#define NV_TILE_COLS_D 1024
#define NV_TILE_FEW 4
/* a syrk's square tiles: each packs two panels of op(A), so larger ones
 * (one thread, k = 512: 1.09× and 1.12× one dsyrk's time at n = 1536 and
 * 4096 with 512, 1.26× and 1.38× with 128) */
#define NV_TILE_SYRK 512
/* below this many multiply-adds the tiles run on the calling thread */
#define NV_TILE_PAR_WORK (1u << 22)

typedef struct tl_job tl_job;
struct tl_job {
	void (*tile)(const tl_job *j, size_t t);
	int ta, tb, upper, unit, f32; /* unit: a solve's diagonal taken as ones */
	size_t M, N, K, lda, ldb, ldc;
	double alpha, beta;
	const void *A, *B;
	void *C;
	size_t bm, bn, tm, tn, tiles; /* the tiles' rows and columns, their counts */
};

/* the part of n ≤ most·k in k near-equal parts, a multiple of 16 but the
 * last, k even where above one (two or four threads share them evenly) */
static size_t tl_part(size_t n, size_t most, size_t *k)
{
	size_t parts = (n + most - 1) / most, b;

	parts += parts > 1 && parts % 2;
	b = (n + parts - 1) / parts;
	b = (b + 15) / 16 * 16;
	if (b > n)
		b = n;
	*k = (n + b - 1) / b;
	return b;
}

static size_t tl_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

static CBLAS_TRANSPOSE tl_op(int t)
{
	return t ? CblasTrans : CblasNoTrans;
}

/* tile t of a product: C's rows r0.., columns c0..; op(A)'s rows r0.. are
 * A's rows, or its columns when A is transposed; op(B)'s columns likewise;
 * the entries f32 where f32 is set, f64 otherwise */
static void gemm_tile(const tl_job *j, size_t t)
{
	size_t r0 = t / j->tn * j->bm, c0 = t % j->tn * j->bn;
	size_t m = tl_min(j->M - r0, j->bm), n = tl_min(j->N - c0, j->bn);
	size_t oa = j->ta ? r0 : r0 * j->lda, ob = j->tb ? c0 * j->ldb : c0;
	size_t oc = r0 * j->ldc + c0;

	if (j->f32)
		cblas_sgemm(CblasRowMajor, tl_op(j->ta), tl_op(j->tb), (int)m, (int)n, (int)j->K,
			    (float)j->alpha, (const float *)j->A + oa, (int)j->lda,
			    (const float *)j->B + ob, (int)j->ldb, (float)j->beta,
			    (float *)j->C + oc, (int)j->ldc);
	else
		cblas_dgemm(CblasRowMajor, tl_op(j->ta), tl_op(j->tb), (int)m, (int)n, (int)j->K,
			    j->alpha, (const double *)j->A + oa, (int)j->lda,
			    (const double *)j->B + ob, (int)j->ldb, j->beta,
			    (double *)j->C + oc, (int)j->ldc);
}

/* tile t of the stored triangle, the square tiles of a bm-partition of n
 * taken row by row: (i, k) with k ≤ i, transposed for the upper triangle;
 * a diagonal tile is a syrk, the others products of op(A)'s row blocks;
 * the entries f32 where f32 is set, f64 otherwise */
static void syrk_tile(const tl_job *j, size_t t)
{
	size_t i = 0, k, r0, c0, m, n, ea = j->f32 ? sizeof(float) : sizeof(double);
	const char *a = j->A, *ar, *ac;
	char *c;

	while ((i + 1) * (i + 2) / 2 <= t)
		i++;
	k = t - i * (i + 1) / 2;
	r0 = (j->upper ? k : i) * j->bm;
	c0 = (j->upper ? i : k) * j->bm;
	m = tl_min(j->N - r0, j->bm), n = tl_min(j->N - c0, j->bm);
	c = (char *)j->C + (r0 * j->ldc + c0) * ea;
	ar = a + (j->ta ? r0 : r0 * j->lda) * ea, ac = a + (j->ta ? c0 : c0 * j->lda) * ea;
	if (i == k && j->f32)
		cblas_ssyrk(CblasRowMajor, j->upper ? CblasUpper : CblasLower, tl_op(j->ta),
			    (int)m, (int)j->K, (float)j->alpha, (const float *)ar, (int)j->lda,
			    (float)j->beta, (float *)c, (int)j->ldc);
	else if (i == k)
		cblas_dsyrk(CblasRowMajor, j->upper ? CblasUpper : CblasLower, tl_op(j->ta),
			    (int)m, (int)j->K, j->alpha, (const double *)ar, (int)j->lda, j->beta,
			    (double *)c, (int)j->ldc);
	else if (j->f32)
		cblas_sgemm(CblasRowMajor, tl_op(j->ta), tl_op(!j->ta), (int)m, (int)n, (int)j->K,
			    (float)j->alpha, (const float *)ar, (int)j->lda, (const float *)ac,
			    (int)j->lda, (float)j->beta, (float *)c, (int)j->ldc);
	else
		cblas_dgemm(CblasRowMajor, tl_op(j->ta), tl_op(!j->ta), (int)m, (int)n,
			    (int)j->K, j->alpha, (const double *)ar, (int)j->lda,
			    (const double *)ac, (int)j->lda, j->beta, (double *)c, (int)j->ldc);
}

/* tile t of a left-side solve: B's columns c0.. */
static void dtrsm_tile(const tl_job *j, size_t t)
{
	size_t c0 = t * j->bn, n = tl_min(j->N - c0, j->bn);

	cblas_dtrsm(CblasRowMajor, CblasLeft, j->upper ? CblasUpper : CblasLower, tl_op(j->ta),
		    j->unit ? CblasUnit : CblasNonUnit, (int)j->M, (int)n, j->alpha, j->A,
		    (int)j->lda, (double *)j->C + c0, (int)j->ldc);
}

static void tl_item(void *ctx, size_t t, size_t thread)
{
	const tl_job *j = ctx;

	(void)thread;
	j->tile(j, t);
}

/* the job's tiles taken in turn by up to nv_get_threads() threads, the
 * caller one of them (one where the work is small) */
static void tl_run(tl_job *j, double work)
{
	size_t nt = (size_t)nv_get_threads();

	if (work < NV_TILE_PAR_WORK)
		nt = 1;
	nv_serial();
	nv_par_items(j->tiles, nt, tl_item, j);
	nv_unserial();
}

/* the product's tiles: rows of at most rows, halved while there are fewer
 * than few tiles and more than least rows, columns of at most cols */
static void tl_gemm(tl_job *j, size_t rows, size_t least, size_t cols, size_t few)
{
	if (j->M == 0 || j->N == 0)
		return;
	j->bn = tl_part(j->N, cols, &j->tn);
	for (;; rows /= 2) {
		j->bm = tl_part(j->M, rows, &j->tm);
		if (j->tm * j->tn >= few || rows / 2 < least)
			break;
	}
	j->tiles = j->tm * j->tn;
	tl_run(j, (double)j->M * (double)j->N * (double)j->K);
}

void nv_sgemm(int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *A,
	      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	tl_job j = {.tile = gemm_tile, .f32 = 1, .ta = ta, .tb = tb, .M = M, .N = N, .K = K,
		    .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta,
		    .A = A, .B = B, .C = C};

	tl_gemm(&j, NV_TILE_ROWS_S, NV_TILE_ROWS_S, NV_TILE_COLS_S, 1);
}

void nv_dgemm(int ta, int tb, size_t M, size_t N, size_t K, double alpha, const double *A,
	      size_t lda, const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
	tl_job j = {.tile = gemm_tile, .ta = ta, .tb = tb, .M = M, .N = N, .K = K,
		    .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta,
		    .A = A, .B = B, .C = C};

	tl_gemm(&j, NV_TILE_ROWS_D, NV_TILE_ROWS_DMIN, NV_TILE_COLS_D, NV_TILE_FEW);
}

static void tl_syrk(tl_job *j)
{
	if (j->N == 0)
		return;
	j->tile = syrk_tile;
	j->bm = tl_part(j->N, NV_TILE_SYRK, &j->tm);
	j->tiles = j->tm * (j->tm + 1) / 2;
	tl_run(j, (double)j->N * (double)j->N * (double)j->K / 2);
}

void nv_dsyrk(int upper, int ta, size_t N, size_t K, double alpha, const double *A,
	      size_t lda, double beta, double *C, size_t ldc)
{
	tl_job j = {.ta = ta, .upper = upper, .N = N, .K = K, .lda = lda, .ldc = ldc,
		    .alpha = alpha, .beta = beta, .A = A, .C = C};

	tl_syrk(&j);
}

void nv_ssyrk(int upper, int ta, size_t N, size_t K, float alpha, const float *A, size_t lda,
	      float beta, float *C, size_t ldc)
{
	tl_job j = {.f32 = 1, .ta = ta, .upper = upper, .N = N, .K = K, .lda = lda, .ldc = ldc,
		    .alpha = alpha, .beta = beta, .A = A, .C = C};

	tl_syrk(&j);
}

void nv_dtrsm_left(int upper, int ta, int unit, size_t M, size_t N, double alpha,
		   const double *A, size_t lda, double *B, size_t ldb)
{
	tl_job j = {.tile = dtrsm_tile, .ta = ta, .unit = unit, .upper = upper, .M = M, .N = N,
		    .lda = lda, .ldc = ldb, .alpha = alpha, .A = A, .C = B};

	if (M == 0 || N == 0)
		return;
	j.bn = tl_part(N, NV_TILE_COLS_D, &j.tiles);
	tl_run(&j, (double)M * (double)M * (double)N / 2);
}
