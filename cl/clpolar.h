/*
 * clpolar.h - the orthogonal polar factor on the device by the Newton–Schulz
 * iteration, GEMMs only: the ITQ rotation's r × r factor, which the device
 * encoder used to take on the host by an f64 SVD every step (50 a path; at
 * a 7B tensor's ranks, r in the thousands, the SVDs outweigh the rest).
 *
 * X₀ = M/‖M‖_F puts every singular value in (0, 1]; X ← X(3I − XᵀX)/2 takes
 * each σ to σ(3 − σ²)/2, which grows a small σ by 1.5 a step and converges
 * quadratically near 1, so X → U·Vᵀ, the polar factor of M = UΣVᵀ.  A σ of
 * 10⁻⁴ relative to ‖M‖_F takes about 30 steps.  The iteration stops when
 * ‖XᵀX − I‖_F, relative to √r, is at most tol, or stops falling once it is
 * below 1e-3 (f32 rounding's floor, near r·2⁻²⁴).  A singular M (a σ of 0
 * never grows) or one too ill-conditioned for max_steps is returned as 1,
 * and the caller takes the polar factor on the host.
 */
#ifndef NV_CLPOLAR_H
#define NV_CLPOLAR_H

#include "clops.h"

/*
 * x (r × r) ← the polar factor of m (r × r; m is kept): 0, with *steps the
 * iterations taken and *orth the last ‖XᵀX − I‖_F/√r; 1 when it did not
 * converge in max_steps (or m is 0); -1 when the queue failed (also for an
 * m that is not finite).  steps and orth may be NULL.
 */
int nvcl_polar_ns(nvcl_q *q, cl_mem m, size_t r, cl_mem x, int max_steps, double tol,
		  int *steps, double *orth);

#endif
