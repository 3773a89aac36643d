/*
 * clsolve.h - the device encoder's normal equations solved on the device:
 * the g step's n × n system (n the tensor's columns: 11008 for a 7B
 * down_proj) and the rank scales' (2r × 2r at most), which used to go to
 * the host whole and be factored there in f64.  The factor also makes the
 * latents' subspace orthonormal (cleig.c: Cholesky QR).
 *
 * The factor: a blocked Cholesky, right-looking.  Each diagonal block (nb ×
 * nb) comes to the host, is factored and its factor inverted in f64 LAPACK
 * (nb³/2 flops, nb² floats each way); the panel below it (a product with
 * that inverse) and the trailing update (ssyrk) run on the device.  The
 * n³/3 flops are the device's; the host's share is n·nb²/2.  clBLAST's own
 * triangular solves (strsm, strsv) are not used: on PoCL they return NaN
 * from memory they never wrote, now and then (CNugteren/CLBlast#152 is
 * of their kind).  The triangular solves of the preconditioner go block by
 * block through the inverted diagonal blocks, two sgemv a block.
 *
 * The solve: conjugate gradients in f32 on the device, preconditioned with
 * that factor, from the caller's current values (the CPU encoder's PCG does
 * the same in f64).  An f32 factor has a backward error near n·2⁻²⁴ of the
 * system's norm, so the preconditioned system is close to, not exactly,
 * the identity, and the iteration takes the solution past what the factor
 * alone gives.
 *
 * Safeguards, as the CPU encoder's solves (linalg.h nv_solve_spd) have them:
 * the system solved is a + ridge·I with ridge = eps·mean(diag a); the factor's
 * own ridge starts at 1e-6·mean(diag a) (f32 rounding costs definiteness
 * far above eps) and grows ×100 up to three times before the system is
 * called not positive definite; a direction of non-positive curvature
 * grows the system's ridge ×100, as the host's would have been, up to
 * three times; a value that is not finite fails the queue.
 */
#ifndef NV_CLSOLVE_H
#define NV_CLSOLVE_H

#include "clops.h"

/* the default block of the factor (the host factors nb × nb blocks) */
#define NVCL_CHOL_NB 256

typedef struct {
	int factors;   /* factorizations tried */
	int iters;     /* conjugate-gradient steps */
	double ridge;  /* the ridge of the system solved */
	double fridge; /* the ridge of the factor used */
	double excess; /* rᵀM⁻¹r / |bᵀx| at the end: the objective's excess over its
			  minimum, relative to the minimum */
} nvcl_solve_info;

/*
 * f (n × n, row-major) ← the lower Cholesky factor of f + ridge·I, read
 * from and written to its lower triangle (its strict upper triangle is left
 * as it was, except within the diagonal blocks, where it becomes 0), in
 * blocks of nb; inv (n·nb floats) ← the inverses of its diagonal blocks
 * (block k0: b × b from k0·nb, leading dimension b).  0; 1 when a diagonal
 * block is not positive definite (f is then part-factored); -1 when the
 * queue failed (q->why), also for an entry that is not finite.
 */
int nvcl_chol(nvcl_q *q, cl_mem f, cl_mem inv, size_t n, size_t nb, double ridge);

/* x (n) ← (L·Lᵀ)⁻¹ x with L, inv from nvcl_chol; t: nb floats of scratch */
void nvcl_chol_apply(nvcl_q *q, cl_mem f, cl_mem inv, size_t n, size_t nb, cl_mem x,
		     cl_mem t);

/* a preconditioner kept from one solve to the next: the factor of an
 * earlier system (f NULL: none yet); nb set by the caller, the rest zero */
typedef struct {
	cl_mem f, inv;
	size_t n, nb;
} nvcl_pc;

void nvcl_pc_free(nvcl_pc *pc);

/*
 * nvcl_solve_spd with a kept preconditioner: when pc holds a factor of
 * the same size (an earlier sweep's system, which a sweep moves little),
 * CG starts with it, and only when 30 steps do not reach tol is the system
 * factored afresh (into pc, kept for the next solve), as the CPU's PCG
 * does.  A system that is not positive definite empties pc.
 */
int nvcl_solve_spd_pc(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double eps, double tol,
		      nvcl_pc *pc, double *x, nvcl_solve_info *info);

/*
 * x ← (a + ridge·I)⁻¹ b, ridge = eps·mean(diag a), for a symmetric a
 * (n × n on the device, both triangles), b (n) on the device, x (n, host
 * f64) the start on entry.  The excess of the quadratic's value over its
 * minimum ends at most tol relative to it (at most 50 steps).  0; 1 when
 * the system is not positive definite (x unchanged: the caller keeps its
 * values, as the CPU encoder does); -1 when the queue failed.
 * info may be NULL.
 */
int nvcl_solve_spd(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double eps, double tol,
		   size_t nb, double *x, nvcl_solve_info *info);

#endif
