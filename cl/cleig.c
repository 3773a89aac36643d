/* cleig.c - the top eigenpairs of the latents' Gram on the device (see cleig.h) */
#include "cleig.h"

#include <math.h>
#include <stdlib.h>

#include "clsolve.h"
#include "linalg.h"
#include "mem.h"
#include "rng.h"

#define RIDGE 1e-6    /* the orthonormalization's first ridge, relative to mean(diag) */
#define GROW 100.0
#define TRIES 4
#define ORTH_TOL 1e-3 /* ‖QᵀQ − I‖_F/√k the Rayleigh–Ritz step needs */
#define SEED 0x4c6174656e747321ull
#define NB NVCL_CHOL_NB

size_t nvcl_eig_dim(size_t s, size_t r)
{
	size_t p = r / 4 > 8 ? r / 4 : 8, k = (r + p + 7) / 8 * 8;

	return k < s ? k : s;
}

/* the device buffers of one run: the basis a and the product b (s × k),
 * C (k × k), the factor's inverted diagonal blocks, a panel (s × nb), and
 * the scratch of the norms */
typedef struct {
	cl_mem a, b, c, inv, x, d, ones, one;
	size_t s, k;
	double *dh; /* host, k */
} eig_bufs;

static void bufs_free(eig_bufs *w)
{
	nvcl_release(&w->a), nvcl_release(&w->b), nvcl_release(&w->c), nvcl_release(&w->inv);
	nvcl_release(&w->x), nvcl_release(&w->d), nvcl_release(&w->ones), nvcl_release(&w->one);
	free(w->dh);
}

static int bufs_init(nvcl_q *q, size_t s, size_t k, eig_bufs *w)
{
	*w = (eig_bufs){ nvcl_q_buf(q, s * k, "the subspace"), nvcl_q_buf(q, s * k, "G·Q"),
			 nvcl_q_buf(q, k * k, "QᵀQ"), nvcl_q_buf(q, k * NB, "the factor's blocks"),
			 nvcl_q_buf(q, s * NB, "a block column"), nvcl_q_buf(q, k, "a diagonal"),
			 nvcl_q_buf(q, k, "ones"), nvcl_q_buf(q, 1, "a norm"), s, k,
			 nv_malloc(k, sizeof(double)) };
	if (!w->dh)
		nvcl_q_fail(q, "host memory for %zu values: %s", k, nv_err());
	nvcl_q_fill(q, w->ones, 1.0f, k);
	return q->err ? -1 : 0;
}

/* the fixed start: s × k entries uniform in [−1, 1) */
static void start_block(nvcl_q *q, const eig_bufs *w)
{
	size_t len = w->s * w->k;
	float *o = nv_malloc(len, sizeof(float));
	uint64_t st = SEED;

	if (!o) {
		nvcl_q_fail(q, "host memory for a %zu × %zu start: %s", w->s, w->k, nv_err());
		return;
	}
	for (size_t i = 0; i < len; i++)
		o[i] = (float)((double)(nv_mix64(&st) >> 40) * 0x1p-23 - 1.0);
	nvcl_q_write(q, w->a, 0, o, len);
	free(o);
}

/* mean(diag C) */
static double mean_diag(nvcl_q *q, const eig_bufs *w)
{
	double sum = 0.0;

	nvcl_copy_inc(q, w->k, w->c, 0, w->k + 1, w->d);
	nvcl_q_read_d(q, w->d, 0, w->dh, w->k);
	for (size_t i = 0; i < w->k && !q->err; i++)
		sum += w->dh[i];
	return sum / (double)w->k;
}

/* out ← in·L⁻ᵀ, L from nvcl_chol in C, block column by block column:
 * out_J = (in_J − out_<J·L_J,<Jᵀ)·L_JJ⁻ᵀ */
static void right_solve(nvcl_q *q, const eig_bufs *w, cl_mem in, cl_mem out)
{
	size_t s = w->s, k = w->k;

	for (size_t j0 = 0, b; j0 < k; j0 += b) {
		b = k - j0 < NB ? k - j0 : NB;
		nvcl_q_copy_rect(q, w->x, 0, b, in, j0, k, s, b);
		if (j0)
			nvcl_gemm_ld(q, 0, 1, s, b, j0, -1.0f, out, 0, k, w->c, j0 * k, k, 1.0f, w->x,
				     0, b);
		nvcl_gemm_ld(q, 0, 1, s, b, b, 1.0f, w->x, 0, b, w->inv, j0 * NB, b, 0.0f, out, j0,
			     k);
	}
}

/* one Cholesky QR: out ← in·L⁻ᵀ, inᵀin + δI = L·Lᵀ, δ growing from
 * RIDGE·mean(diag): 0; 1 when no ridge made it definite; -1 queue failed */
static int chol_pass(nvcl_q *q, const eig_bufs *w, cl_mem in, cl_mem out, int *grows)
{
	double ridge = 0.0;

	for (int t = 0; t < TRIES && !q->err; t++) {
		int rc;

		nvcl_gemm(q, 1, 0, w->k, w->k, w->s, 1.0f, in, in, 0.0f, w->c);
		if (t == 0) {
			double md = mean_diag(q, w);
			if (!q->err && !isfinite(md))
				nvcl_q_fail(q, "the latents' subspace is not finite");
			if (q->err || !(md > 0.0))
				break;
			ridge = RIDGE * md;
		} else {
			ridge *= GROW;
			++*grows;
		}
		rc = nvcl_chol(q, w->c, w->inv, w->k, NB, ridge);
		if (rc == 0) {
			right_solve(q, w, in, out);
			break;
		}
		if (rc < 0 || t + 1 == TRIES)
			return rc;
	}
	return q->err ? -1 : (ridge > 0.0 ? 0 : 1);
}

/* `iters` products with g, each orthonormalized by two passes (the basis
 * back in w->a): 0; 1 for the host; -1 */
static int iterate(nvcl_q *q, eig_bufs *w, cl_mem g, int iters, nvcl_eig_info *info)
{
	int rc = 0;

	for (int it = 0; it < iters && rc == 0; it++) {
		cl_mem t;

		nvcl_gemm(q, 0, 0, w->s, w->k, w->s, 1.0f, g, w->a, 0.0f, w->b);
		rc = chol_pass(q, w, w->b, w->a, &info->grows);
		if (rc == 0)
			rc = chol_pass(q, w, w->a, w->b, &info->grows);
		t = w->a, w->a = w->b, w->b = t;
	}
	if (rc == 0) {
		/* ‖aᵀa − I‖_F/√k of the basis, through C */
		nvcl_gemm(q, 1, 0, w->k, w->k, w->s, 1.0f, w->a, w->a, 0.0f, w->c);
		info->orth = nvcl_off_identity(q, w->c, w->k, w->ones, w->one);
		if (!q->err && !(info->orth <= ORTH_TOL))
			rc = 1;
	}
	return q->err ? -1 : rc;
}

/* Rayleigh–Ritz: B = QᵀGQ (k × k) to the host in f64, its top r pairs
 * (lam, Z), vec = Q·Z on the device */
static void ritz(nvcl_q *q, const eig_bufs *w, cl_mem g, size_t r, double *lam, cl_mem vec)
{
	size_t k = w->k;
	double *bh = nv_malloc(k * k, sizeof(double)), *zh = nv_malloc(k * r, sizeof(double));
	cl_mem z = NULL;

	if (!bh || !zh)
		nvcl_q_fail(q, "host memory for a %zu × %zu projection: %s", k, k, nv_err());
	nvcl_gemm(q, 0, 0, w->s, k, w->s, 1.0f, g, w->a, 0.0f, w->b);
	nvcl_gemm(q, 1, 0, k, k, w->s, 1.0f, w->a, w->b, 0.0f, w->c);
	nvcl_q_read_d(q, w->c, 0, bh, k * k);
	if (!q->err) {
		for (size_t i = 0; i < k; i++)
			for (size_t j = 0; j < i; j++)
				bh[i * k + j] = bh[j * k + i] = 0.5 * (bh[i * k + j] + bh[j * k + i]);
		if (nv_sym_eig_top_in(bh, k, r, lam, zh) < 0)
			nvcl_q_fail(q, "the top %zu pairs of a %zu × %zu projection: %s", r, k, k,
				    nv_err());
	}
	z = nvcl_q_upload_d(q, zh, k * r, "the Ritz coefficients");
	nvcl_gemm(q, 0, 0, w->s, r, k, 1.0f, w->a, z, 0.0f, vec);
	nvcl_release(&z);
	free(bh);
	free(zh);
}

int nvcl_eig_top(nvcl_q *q, cl_mem g, size_t s, size_t r, int iters, double *lam, cl_mem vec,
		 nvcl_eig_info *info)
{
	nvcl_eig_info own = { nvcl_eig_dim(s, r), NAN, 0 };
	eig_bufs w;
	int rc = 1;

	if (!info)
		info = &own;
	*info = own;
	if (q->err)
		return -1;
	if (r == 0 || iters < 1 || info->k >= s)
		return 1;
	if (bufs_init(q, s, info->k, &w) == 0) {
		start_block(q, &w);
		rc = iterate(q, &w, g, iters, info);
		if (rc == 0)
			ritz(q, &w, g, r, lam, vec);
	}
	bufs_free(&w);
	return q->err ? -1 : rc;
}
