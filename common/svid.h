/*
 * svid.h - the SVID building blocks and the data-free dual-SVID model
 * (the LittleBit initialiser, Lee et al., NeurIPS 2025), the baseline NVG
 * is measured against; nv_encode() (nvgdrv.c) encodes with it.
 *
 *   dual-svid: latents of W without a metric (exact truncated SVD through
 *   the eigendecomposition of W·Wᵀ or Wᵀ·W), svid_path on them; for P = 2 a
 *   second svid_path on the latents of the residual W − Ŵ_pri.
 */
#ifndef NV_SVID_H
#define NV_SVID_H

#include "nvg.h"

/* the non-negative rank-1 fit mabs ≈ left·rightᵀ (rows × c), power
 * iteration from 1/√c (≤ 60 steps), both floored at 1e-12 × their max */
void nv_rank1_pos(const nv_mat *mabs, double *left, double *right);

/* path from latents up (m × r), vp (n × r): S = sgn (0 → +1), h and g the
 * rank-1 fits of |up| and |vp|, ℓ the product of their rank sides */
int nv_svid_path(const nv_mat *up, const nv_mat *vp, nv_path *q);
/* the same from latents it may spend: up and vp are left holding |up| and
 * |vp|, so that no third copy of the latents is made (the encoder's init) */
int nv_svid_path_take(nv_mat *up, nv_mat *vp, nv_path *q);

/* the dual-SVID model at rank r with np paths */
int nv_build_dual_svid(const nv_mat *w, size_t r, size_t np, nv_bm *md);

#endif
