/*
 * cleig.h - the latents' eigenproblem on the device: the top r eigenpairs
 * of a symmetric positive semi-definite s × s Gram (s = min(m, n) of the
 * tensor) by block subspace iteration, which used to come to the host whole
 * and be solved there by an f64 LAPACK eigensolver (4s³/3 flops, half of
 * them matrix–vector: 4096³ for a 7B layer's tensors, once a path).
 *
 * A k-dimensional subspace, k = r + max(8, r/4) rounded up to a multiple of
 * 8, starts from a fixed pseudo-random s × k block (the same bytes each
 * run) and is multiplied by the Gram `iters` times, orthonormalized after
 * each product; then Rayleigh–Ritz: the k × k projection QᵀGQ goes to the
 * host, where its top r eigenpairs are taken in f64 (k³ against s³), and
 * the Ritz vectors are Q times them, on the device.  A Ritz value never
 * exceeds the eigenvalue of the same place (Cauchy's interlacing), and
 * the gap to it closes as (λ_(k+1)/λ_r)^iters: on SmolLM2's layer-3 Grams
 * four iterations past the first product keep 99.96% or more of the top
 * r eigenvalues' sum at every r up to 2s/3 (f32, k as above).
 *
 * The orthonormalization is Cholesky QR twice (CholeskyQR2): C = YᵀY,
 * C + δI = L·Lᵀ by the device's blocked Cholesky (clsolve.h), Y ← Y·L⁻ᵀ
 * block column by block column through the inverted diagonal blocks; δ
 * starts at 1e-6·mean(diag C) (an f32 Gram's rounding costs definiteness
 * below that) and grows ×100 up to three times.  The first pass leaves a
 * basis whose condition is at most about √(mean diag/δ), the second makes
 * it orthonormal.  Where the subspace would be the whole space (k ≥ s),
 * the Cholesky fails at every ridge (a Gram of rank below k), or the
 * final basis is not orthonormal to 1e-3 (‖QᵀQ − I‖_F/√k), the caller
 * takes the host's eigensolver, as before.
 */
#ifndef NV_CLEIG_H
#define NV_CLEIG_H

#include "clops.h"

/* the products with the Gram before Rayleigh–Ritz */
#define NVCL_EIG_ITERS 5

/* the subspace's dimension for r pairs of an s × s Gram (s when it is all of it) */
size_t nvcl_eig_dim(size_t s, size_t r);

typedef struct {
	size_t k;    /* the subspace's dimension */
	double orth; /* ‖QᵀQ − I‖_F/√k of the final basis */
	int grows;   /* ridge growths the orthonormalizations took */
} nvcl_eig_info;

/*
 * lam (host, r, descending) and vec (device, s × r, orthonormal columns)
 * ← the top r eigenpairs of g (device, s × s, symmetric; kept) by `iters`
 * products in the subspace of nvcl_eig_dim: 0; 1 when the caller should
 * take the host's eigensolver (see above; lam and vec unset); -1 when the
 * queue failed (also for a Gram that is not finite).  info may be NULL.
 */
int nvcl_eig_top(nvcl_q *q, cl_mem g, size_t s, size_t r, int iters, double *lam, cl_mem vec,
		 nvcl_eig_info *info);

#endif
