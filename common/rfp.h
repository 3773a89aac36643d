/* rfp.h - the ALS g step's system: a symmetric matrix held in half its
 * memory (LAPACK's rectangular full packed form), its Cholesky factor, the
 * factor kept in f32 as a preconditioner, and conjugate gradients on it */
#ifndef NV_RFP_H
#define NV_RFP_H

#include <stddef.h>

#include "linalg.h"

/*
 * A symmetric matrix A of order n in LAPACK's rectangular full packed form
 * (RFP, TRANSR 'N', UPLO 'L'): an (N + 1) × N/2 column-major array holding
 * the lower triangle, N(N+1)/2 entries, where N is n or n + 1, whichever is
 * even.  An odd n gains a last row and column apart from the rest: 1 on
 * the diagonal, 0 off it, so that one layout serves every order and a
 * solve leaves that coordinate 0.  Entry (i, j), i ≥ j, of the even order
 * N = 2k is a[nv_rfp_idx(N, i, j)]: column j < k holds A[j..N-1][j] from
 * row j + 1, and column q of the trailing k × k block's lower triangle,
 * A[k+p][k+q] (p ≥ q), sits at row q of column p.
 */
typedef struct {
	size_t n, nn; /* order, and the even order stored */
	double *a;
} nv_rfp;

size_t nv_rfp_idx(size_t nn, size_t i, size_t j);
void nv_rfp_free(nv_rfp *c);

/* c ← B·Bᵀ for B (n × r, row-major), the padding of an odd n as above:
 * LAPACK's dsfrk's three blocks (two syrk, one gemm) in fixed tiles
 * (linalg.h), so on our threads.  -1 with reason on exhaustion or a factor
 * entry that is not finite */
int nv_rfp_syrk(const nv_mat *b, nv_rfp *c);
/* the same with B rounded to f32 and the products in f32 arithmetic (fixed
 * tiles too), widened: each entry within γ_(r+2)·(|B|·|Bᵀ|)_ij of the exact
 * one (γ_j = j·u/(1 − j·u), u = 2⁻²⁴, B's rounding on both sides included) */
int nv_rfp_syrk32(const nv_mat *b, nv_rfp *c);

/* c ← c ∘ H, H (n × n) symmetric in f32 with its f64 diagonal (h->diag,
 * else its own): each entry of H read from the triangle where its run is
 * contiguous (the upper in the layout's leading columns, the lower in its
 * trailing ones), so H must be symmetric to the bit, as every context's is */
void nv_rfp_hadamard32(nv_rfp *c, const nv_mat32 *h);

/* A + shift·I = L·Lᵀ in place (dpftrf, level 3): a becomes L in the same
 * layout.  0; 1 when not positive definite (reason set, a then undefined);
 * -1 with reason when an entry or the shift is not finite */
int nv_rfp_chol(nv_rfp *a, double shift);

/* x (n) ← (L·Lᵀ)⁻¹·x for the factor l of nv_rfp_chol.  -1 on exhaustion */
int nv_rfp_chol_solve(const nv_rfp *l, double *x);

/* a Cholesky factor kept as a preconditioner: L (n × n, lower) packed by
 * rows (row i: L[i][0..i]) in f32, a quarter of the f64 matrix */
typedef struct {
	size_t n;
	float *p;
} nv_pchol;

/* f ← the factor l (nv_rfp_chol) of order n, rounded to f32.  0; 1 when an
 * entry is beyond f32 or a diagonal one rounds to 0 (f then empty: nothing
 * kept); -1 on exhaustion */
int nv_pchol_keep(const nv_rfp *l, nv_pchol *f);
void nv_pchol_free(nv_pchol *f);

/* x ← (L̃·L̃ᵀ)⁻¹·x in f64 arithmetic, L̃ the f32 factor f: the exact solve
 * with the rounded factor, up to f64 rounding (BLAS has no mixed-precision
 * triangular solve; f32 halves the memory that bounds it) */
void nv_pchol_apply(const nv_pchol *f, double *x);
/* nv_pchol_apply's kernel from now on: on 1, AVX2 where the CPU has it
 * (what the first apply chooses), 0 the portable loops; both give the same
 * bits.  Returns 1 when AVX2 was the kernel before the call. */
int nv_pchol_simd(int on);

/* *q = xᵀ·A·x (order n, the system not factored).  -1 on exhaustion */
int nv_rfp_quad(const nv_rfp *a, const double *x, double *q);

/* (A + shift·I)·x = b (order n) by conjugate gradients preconditioned with
 * M = L̃·L̃ᵀ, the kept factor f of a nearby matrix (of the same one: a step
 * or two), from the x given.  It stops when the residual r's energy rᵀM⁻¹r
 * is at most tol² · bᵀM⁻¹b: with M near A, that is the excess of the
 * quadratic xᵀAx − 2bᵀx over its minimum, relative to the minimum's size.
 * 0 when that happens within maxit steps (*its: how many); 1 when not, or
 * when a direction shows the matrix not positive definite (x is then the
 * last iterate: solve directly); -1 with reason on exhaustion.  One
 * OpenBLAS thread: the same bits at any thread count. */
int nv_pcg_rfp(const nv_rfp *a, double shift, const nv_pchol *f, const double *b, double *x,
	       double tol, int maxit, int *its);

#endif
