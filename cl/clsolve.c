/* clsolve.c - the g step's SPD system on the device (see clsolve.h) */
#include "clsolve.h"

#include <math.h>
#include <stdlib.h>

#include "linalg.h"
#include "mem.h"

#define FACTOR_RIDGE 1e-6 /* the factor's first ridge, relative to mean(diag) */
#define GROW 100.0
#define TRIES 4
#define MAX_STEPS 50 /* from a fresh factor */
#define KEEP_STEPS 30 /* from a kept one, before factoring afresh (the CPU's count) */

/* the diagonal block blk (b × b, f32) ← its lower Cholesky factor (+ ridge),
 * and inv ← that factor's inverse, both in f64 on the host: 0, 1 when not
 * positive definite, -1 when not finite */
static int block_factor(float *blk, float *inv, size_t b, double ridge)
{
	nv_mat a = { b, b, nv_malloc(b * b, sizeof(double)) };
	int rc = 0;

	if (!a.d)
		return -1;
	for (size_t i = 0; i < b * b && rc == 0; i++)
		if (!isfinite(a.d[i] = blk[i]))
			rc = -1;
	for (size_t i = 0; i < b && rc == 0; i++)
		a.d[i * b + i] += ridge;
	if (rc == 0 && nv_potrf_lower(&a) != 0)
		rc = 1; /* finite entries: the factorization failed for want of definiteness */
	for (size_t i = 0; i < b * b && rc == 0; i++)
		blk[i] = (float)a.d[i];
	if (rc == 0 && nv_trtri_lower(&a) < 0)
		rc = -1;
	for (size_t i = 0; i < b * b && rc == 0; i++)
		inv[i] = (float)a.d[i];
	free(a.d);
	return rc;
}

/* the panel below the diagonal block at k0 (rest × b) ← itself · L₁₁⁻ᵀ, and the
 * trailing block's lower triangle ← itself − panel · panelᵀ */
static void panel(nvcl_q *q, cl_mem f, cl_mem inv, cl_mem tmp, size_t n, size_t nb, size_t k0,
		  size_t b)
{
	size_t off = k0 * n + k0, rest = n - k0 - b;

	nvcl_gemm_ld(q, 0, 1, rest, b, b, 1.0f, f, off + b * n, n, inv, k0 * nb, b, 0.0f, tmp, 0,
		     b);
	nvcl_syrk_lower(q, rest, b, -1.0f, tmp, 0, b, 1.0f, f, off + b * (n + 1), n);
	nvcl_q_copy_rect(q, f, off + b * n, n, tmp, 0, b, rest, b);
}

int nvcl_chol(nvcl_q *q, cl_mem f, cl_mem inv, size_t n, size_t nb, double ridge)
{
	float *blk = nv_malloc(nb * nb, sizeof(float)), *bi = nv_malloc(nb * nb, sizeof(float));
	cl_mem tmp = n > nb ? nvcl_q_buf(q, (n - nb) * nb, "the factor's panel") : NULL;
	int rc = 0;

	if (!blk || !bi)
		nvcl_q_fail(q, "host memory for a %zu × %zu block: %s", nb, nb, nv_err());
	for (size_t k0 = 0, b; k0 < n && rc == 0 && !q->err; k0 += b) {
		b = n - k0 < nb ? n - k0 : nb;
		nvcl_q_rect(q, f, k0 * n + k0, n, b, b, blk, 0);
		if (q->err)
			break;
		rc = block_factor(blk, bi, b, ridge);
		if (rc < 0)
			nvcl_q_fail(q, "a %zu × %zu normal system: an entry of its factor is not "
				    "finite", n, n);
		if (rc != 0)
			break;
		nvcl_q_rect(q, f, k0 * n + k0, n, b, b, blk, 1);
		nvcl_q_write(q, inv, k0 * nb, bi, b * b);
		panel(q, f, inv, tmp, n, nb, k0, b);
	}
	nvcl_release(&tmp);
	free(blk);
	free(bi);
	return q->err ? -1 : rc;
}

void nvcl_chol_apply(nvcl_q *q, cl_mem f, cl_mem inv, size_t n, size_t nb, cl_mem x,
		     cl_mem t)
{
	size_t k0, b;

	/* L y = x, block by block from the top: y_k = L_kk⁻¹ (x_k − L_k,<k y_<k) */
	for (k0 = 0; k0 < n; k0 += b) {
		b = n - k0 < nb ? n - k0 : nb;
		nvcl_q_copy(q, t, 0, x, k0, b);
		nvcl_gemv_ld(q, 0, b, k0, -1.0f, f, k0 * n, n, x, 0, 1.0f, t, 0);
		nvcl_gemv_ld(q, 0, b, b, 1.0f, inv, k0 * nb, b, t, 0, 0.0f, x, k0);
	}
	/* Lᵀ z = y, from the bottom: z_k = L_kk⁻ᵀ (y_k − L_>k,kᵀ z_>k) */
	for (k0 = (n - 1) / nb * nb;; k0 -= nb) {
		b = n - k0 < nb ? n - k0 : nb;
		nvcl_q_copy(q, t, 0, x, k0, b);
		nvcl_gemv_ld(q, 1, n - k0 - b, b, -1.0f, f, (k0 + b) * n + k0, n, x, k0 + b, 1.0f,
			     t, 0);
		nvcl_gemv_ld(q, 1, b, b, 1.0f, inv, k0 * nb, b, t, 0, 0.0f, x, k0);
		if (k0 == 0)
			break;
	}
}

/* the vectors of one solve, and its preconditioner */
typedef struct {
	cl_mem x, r, z, p, v, one, t;
	nvcl_pc *pc;
} pcg_vecs;

/* z ← M⁻¹ r with M = L·Lᵀ */
static void precond(nvcl_q *q, size_t n, const pcg_vecs *w)
{
	nvcl_q_copy(q, w->z, 0, w->r, 0, n);
	nvcl_chol_apply(q, w->pc->f, w->pc->inv, n, w->pc->nb, w->z, w->t);
}

/* v ← (a + ridge·I) u */
static void apply(nvcl_q *q, cl_mem a, size_t n, double ridge, cl_mem u, cl_mem v)
{
	nvcl_gemv_ld(q, 0, n, n, 1.0f, a, 0, n, u, 0, 0.0f, v, 0);
	nvcl_axpy(q, n, (float)ridge, u, v);
}

/*
 * PCG on (a + ridge·I) x = b from w->x: 0 at the tolerance, 2 at the step
 * limit short of it, 1 on a direction of non-positive curvature; the steps
 * are added to in->iters
 */
static int pcg(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double ridge, double tol, int limit,
	       pcg_vecs *w, nvcl_solve_info *in)
{
	double rz, bx;
	int k;

	apply(q, a, n, ridge, w->x, w->v);
	nvcl_q_copy(q, w->r, 0, b, 0, n);
	nvcl_axpy(q, n, -1.0f, w->v, w->r);
	precond(q, n, w);
	nvcl_q_copy(q, w->p, 0, w->z, 0, n);
	rz = nvcl_dot(q, n, w->r, w->z, w->one);
	bx = nvcl_dot(q, n, b, w->x, w->one);
	for (k = 0; !q->err && k < limit && rz > tol * fabs(bx); k++, in->iters++) {
		apply(q, a, n, ridge, w->p, w->v);
		double pv = nvcl_dot(q, n, w->p, w->v, w->one);
		if (!(pv > 0))
			return q->err ? 0 : 1;
		double alpha = rz / pv, rz0 = rz;
		nvcl_axpy(q, n, (float)alpha, w->p, w->x);
		nvcl_axpy(q, n, (float)-alpha, w->v, w->r);
		precond(q, n, w);
		rz = nvcl_dot(q, n, w->r, w->z, w->one);
		bx = nvcl_dot(q, n, b, w->x, w->one);
		nvcl_scal(q, n, (float)(rz / rz0), w->p);
		nvcl_axpy(q, n, 1.0f, w->z, w->p);
	}
	in->excess = rz / fmax(fabs(bx), 1e-300);
	return rz > tol * fabs(bx) ? 2 : 0;
}

void nvcl_pc_free(nvcl_pc *pc)
{
	nvcl_release(&pc->f);
	nvcl_release(&pc->inv);
}

/* pc ← the factor of a + ridge·I for the first ridge (from *ridge, ×100) that
 * factors: 0, 1 when none does (pc then empty), -1 on failure */
static int factor(nvcl_q *q, cl_mem a, size_t n, nvcl_pc *pc, double *ridge,
		  nvcl_solve_info *in)
{
	int rc = 1;

	if (pc->f && pc->n != n)
		nvcl_pc_free(pc);
	pc->n = n;
	if (!pc->f) {
		pc->f = nvcl_q_buf(q, n * n, "a normal system's factor");
		pc->inv = nvcl_q_buf(q, n * pc->nb, "the factor's block inverses");
	}
	for (int t = 0; t < TRIES && rc == 1 && !q->err; t++, *ridge *= GROW) {
		nvcl_q_copy(q, pc->f, 0, a, 0, n * n);
		in->factors++;
		rc = nvcl_chol(q, pc->f, pc->inv, n, pc->nb, *ridge);
	}
	if (rc != 0)
		nvcl_pc_free(pc);
	return q->err ? -1 : rc;
}
/* mean(diag a) on the host: -1 when the queue failed or it is not finite */
static int diag_mean(nvcl_q *q, cl_mem a, size_t n, cl_mem tmp, double *mean)
{
	float *d = nv_malloc(n, sizeof(float));
	double s = 0;

	if (!d) {
		nvcl_q_fail(q, "host memory for %zu floats: %s", n, nv_err());
		return -1;
	}
	nvcl_copy_inc(q, n, a, 0, n + 1, tmp);
	nvcl_q_read(q, tmp, 0, d, n);
	for (size_t i = 0; i < n && !q->err; i++)
		s += d[i];
	free(d);
	if (!q->err && !isfinite(s))
		nvcl_q_fail(q, "a %zu × %zu normal system: its diagonal is not finite", n, n);
	*mean = fmax(s / (double)n, 1e-300);
	return q->err ? -1 : 0;
}

/* x (host) ← w->x, failing the queue on a value that is not finite */
static void take(nvcl_q *q, cl_mem dx, size_t n, double *x)
{
	double *got = nv_malloc(n, sizeof(double));

	if (!got)
		nvcl_q_fail(q, "host memory for %zu values: %s", n, nv_err());
	nvcl_q_read_d(q, dx, 0, got, n);
	for (size_t i = 0; i < n && !q->err; i++)
		if (!isfinite(got[i]))
			nvcl_q_fail(q, "a %zu × %zu normal system: its solution is not finite",
				    n, n);
	for (size_t i = 0; i < n && !q->err; i++)
		x[i] = got[i];
	free(got);
}

/*
 * PCG from x with w's preconditioner, at most limit steps: 0, 2 at the limit,
 * 1 not positive definite, -1 failure; x takes the answer (also at 2)
 */
static int solve_with(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double ridge, double tol,
		      int limit, pcg_vecs *w, double *x, nvcl_solve_info *in)
{
	int rc = 1;

	for (int t = 0; t < TRIES && rc == 1 && !q->err; t++, ridge *= GROW) {
		nvcl_q_write_d(q, w->x, 0, x, n);
		in->ridge = ridge;
		rc = pcg(q, a, b, n, ridge, tol, limit, w, in);
	}
	if (rc == 0 || rc == 2)
		take(q, w->x, n, x);
	return q->err ? -1 : rc;
}

/* a fresh factor, then PCG from x: 0, 1, -1 */
static int solve_fresh(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double eps, double mean,
		       double tol, pcg_vecs *w, double *x, nvcl_solve_info *in)
{
	double fridge = fmax(eps, FACTOR_RIDGE) * mean;
	int rc = factor(q, a, n, w->pc, &fridge, in);

	in->fridge = fridge;
	if (rc == 0)
		rc = solve_with(q, a, b, n, eps * mean, tol, MAX_STEPS, w, x, in);
	return rc == 2 ? 0 : rc;
}

int nvcl_solve_spd_pc(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double eps, double tol,
		      nvcl_pc *pc, double *x, nvcl_solve_info *info)
{
	nvcl_solve_info tmp, *in = info ? info : &tmp;
	pcg_vecs w = { nvcl_q_buf(q, n, "x"), nvcl_q_buf(q, n, "r"), nvcl_q_buf(q, n, "z"),
		       nvcl_q_buf(q, n, "p"), nvcl_q_buf(q, n, "A·p"), nvcl_q_buf(q, 1, "dot"),
		       nvcl_q_buf(q, pc->nb, "a block"), pc };
	double mean = 0;
	int rc = -1;

	*in = (nvcl_solve_info){ 0 };
	if (diag_mean(q, a, n, w.v, &mean) == 0) {
		rc = 2;
		/* a kept factor first: a sweep moves the system little */
		if (pc->f && pc->n == n)
			rc = solve_with(q, a, b, n, eps * mean, tol, KEEP_STEPS, &w, x, in);
		if (rc == 2)
			rc = solve_fresh(q, a, b, n, eps, mean, tol, &w, x, in);
	}
	nvcl_release(&w.x), nvcl_release(&w.r), nvcl_release(&w.z), nvcl_release(&w.p);
	nvcl_release(&w.v), nvcl_release(&w.one), nvcl_release(&w.t);
	return q->err ? -1 : rc;
}

int nvcl_solve_spd(nvcl_q *q, cl_mem a, cl_mem b, size_t n, double eps, double tol,
		   size_t nb, double *x, nvcl_solve_info *info)
{
	nvcl_pc pc = { .nb = nb };
	int rc = nvcl_solve_spd_pc(q, a, b, n, eps, tol, &pc, x, info);

	nvcl_pc_free(&pc);
	return rc;
}
