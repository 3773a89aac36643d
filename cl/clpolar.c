/* clpolar.c - the polar factor by Newton–Schulz on the device (see clpolar.h) */
#include "clpolar.h"

#include <math.h>

#define FLOOR_START 1e-3 /* below this, a step that does not halve the error ends it */

/* the scratch of one iteration */
typedef struct {
	cl_mem a, b, ones, one;
} ns_bufs;

/* the iteration from x = m/‖m‖_F: 0 converged, 1 not */
static int iterate(nvcl_q *q, size_t r, cl_mem x, int max_steps, double tol, const ns_bufs *w,
		   int *steps, double *orth)
{
	double last = INFINITY;

	for (*steps = 0; !q->err; ++*steps) {
		nvcl_gemm(q, 1, 0, r, r, r, 1.0f, x, x, 0.0f, w->a);
		*orth = nvcl_off_identity(q, w->a, r, w->ones, w->one);
		if (*orth <= tol || (last < FLOOR_START && *orth > 0.5 * last))
			return 0;
		if (*steps == max_steps || !isfinite(*orth))
			return 1;
		last = *orth;
		/* x ← 1.5·x − 0.5·x·(xᵀx) */
		nvcl_gemm(q, 0, 0, r, r, r, 1.0f, x, w->a, 0.0f, w->b);
		nvcl_scal(q, r * r, 1.5f, x);
		nvcl_axpy(q, r * r, -0.5f, w->b, x);
	}
	return 1;
}

int nvcl_polar_ns(nvcl_q *q, cl_mem m, size_t r, cl_mem x, int max_steps, double tol,
		  int *steps, double *orth)
{
	ns_bufs w = { nvcl_q_buf(q, r * r, "XᵀX"), nvcl_q_buf(q, r * r, "X·XᵀX"),
		      nvcl_q_buf(q, r, "ones"), nvcl_q_buf(q, 1, "norm") };
	int st = 0, rc = 1;
	double e = 0, norm;

	nvcl_q_fill(q, w.ones, 1.0f, r);
	norm = nvcl_nrm2(q, r * r, m, w.one);
	if (!q->err && !isfinite(norm))
		nvcl_q_fail(q, "the ITQ product is not finite");
	if (!q->err && norm > 0) {
		nvcl_q_copy(q, x, 0, m, 0, r * r);
		nvcl_scal(q, r * r, (float)(1.0 / norm), x);
		rc = iterate(q, r, x, max_steps, tol, &w, &st, &e);
	}
	if (steps)
		*steps = st;
	if (orth)
		*orth = e;
	nvcl_release(&w.a), nvcl_release(&w.b), nvcl_release(&w.ones), nvcl_release(&w.one);
	return q->err ? -1 : rc;
}
