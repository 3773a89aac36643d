/*
 * clhost.h - the host side of the device encoder: the small dense
 * factorizations it leaves to LAPACKE (f64, LAPACK_ROW_MAJOR), the rank-1
 * magnitude fits of svid_path; the packer is the CPU encoder's (pack.h).
 */
#ifndef NV_CLHOST_H
#define NV_CLHOST_H

#include <stddef.h>
#include <stdint.h>

/*
 * the top k eigenpairs of a symmetric g (s × s, its upper triangle read,
 * overwritten): lam (k) descending, vec (s × k) the eigenvectors as
 * columns; -1 with reason, also when an entry in or out is not finite
 */
int clh_eig_top(double *g, size_t s, size_t k, double *lam, double *vec);

/* the orthogonal polar factor U·Vᵀ of m (r × r) into rot (r × r) (nv_polar) */
int clh_polar(double *m, size_t r, double *rot);

/* the non-negative rank-1 fit |a| ≈ left·rightᵀ (a rows × c) by power iteration */
void clh_rank1_pos(const double *a, size_t rows, size_t c, double *left, double *right);

/* inv (nb × nb) = (U⁻¹)ᵀ of the upper triangular u (nb × nb, ld ldu); -1 with reason */
int clh_upper_inv_t(const double *u, size_t ldu, size_t nb, double *inv);

#endif
