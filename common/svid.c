/* svid.c - SVID paths and the dual-SVID model (see svid.h) */
#include "svid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "mem.h"

void nv_rank1_pos(const nv_mat *mabs, double *left, double *right)
{
	size_t rows = mabs->r, c = mabs->c;
	double *v = right, *v2 = nv_malloc(c, sizeof(double)), *u = left, s, lmax = 0, rmax = 0;

	for (size_t k = 0; k < c; k++)
		v[k] = 1.0 / sqrt((double)c);
	nv_serial(); /* threaded gemv splits its sums by the thread count */
	for (int it = 0; it < 60 && v2; it++) {
		double nv, diff = 0.0;
		cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)c, 1.0, mabs->d, (int)c, v,
			    1, 0.0, u, 1);
		cblas_dgemv(CblasRowMajor, CblasTrans, (int)rows, (int)c, 1.0, mabs->d, (int)c, u,
			    1, 0.0, v2, 1);
		nv = fmax(cblas_dnrm2((int)c, v2, 1), 1e-300);
		for (size_t k = 0; k < c; k++) {
			v2[k] /= nv;
			diff += (v2[k] - v[k]) * (v2[k] - v[k]);
		}
		memcpy(v, v2, c * sizeof(double));
		if (sqrt(diff) < 1e-9)
			break;
	}
	free(v2);
	cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)c, 1.0, mabs->d, (int)c, v, 1,
		    0.0, u, 1);
	s = cblas_dnrm2((int)rows, u, 1);
	nv_unserial();
	for (size_t i = 0; i < rows; i++) {
		left[i] = sqrt(s) * (u[i] / fmax(s, 1e-300));
		lmax = fmax(lmax, left[i]);
	}
	for (size_t k = 0; k < c; k++) {
		right[k] = sqrt(s) * v[k];
		rmax = fmax(rmax, right[k]);
	}
	for (size_t i = 0; i < rows; i++)
		left[i] = fmax(left[i], 1e-12 * lmax);
	for (size_t k = 0; k < c; k++)
		right[k] = fmax(right[k], 1e-12 * rmax);
}

/* signs of x into s, and x made |x| in place */
static void split_sign_take(nv_mat *x, nv_sgn *s)
{
	for (size_t i = 0; i < x->r * x->c; i++) {
		s->d[i] = x->d[i] >= 0.0 ? 1 : -1;
		x->d[i] = fabs(x->d[i]);
	}
}

int nv_svid_path_take(nv_mat *up, nv_mat *vp, nv_path *q)
{
	size_t m = up->r, n = vp->r, r = up->c;
	double *lu = nv_malloc(r, sizeof(double)), *lv = nv_malloc(r, sizeof(double));
	int rc = -1;

	if (!lu || !lv || nv_path_alloc(q, m, n, r) < 0)
		goto out;
	split_sign_take(up, &q->su);
	split_sign_take(vp, &q->sv);
	nv_rank1_pos(up, q->h, lu);
	nv_rank1_pos(vp, q->g, lv);
	for (size_t k = 0; k < r; k++)
		q->l[k] = lu[k] * lv[k];
	rc = 0;
out:
	free(lu);
	free(lv);
	return rc;
}

int nv_svid_path(const nv_mat *up, const nv_mat *vp, nv_path *q)
{
	nv_mat ua = {0}, va = {0};
	int rc = nv_mat_copy(&ua, up) < 0 || nv_mat_copy(&va, vp) < 0 ? -1
									: nv_svid_path_take(&ua, &va, q);

	nv_mat_free(&ua);
	nv_mat_free(&va);
	return rc;
}

/* the second path is taken from W − A₀·B₀ᵀ a block of rows at a time, never
 * an m × n residual (nv_latents_minus) */
int nv_build_dual_svid(const nv_mat *w, size_t r, size_t np, nv_bm *md)
{
	nv_mat up = {0}, vp = {0}, a = {0}, b = {0};

	memset(md, 0, sizeof(*md));
	md->m = w->r;
	md->n = w->c;
	md->r = r;
	if (nv_latents(w, r, NULL, NULL, &up, &vp) < 0 || nv_svid_path_take(&up, &vp, &md->p[0]) < 0)
		goto fail;
	md->np = 1;
	nv_mat_free(&up);
	nv_mat_free(&vp);
	if (np == 2) {
		if (nv_path_hsl(md, 0, &a) < 0 || nv_path_gs(md, 0, &b) < 0 ||
		    nv_latents_minus(w, &a, &b, r, NULL, NULL, &up, &vp) < 0 ||
		    nv_svid_path_take(&up, &vp, &md->p[1]) < 0)
			goto fail;
		md->np = 2;
	}
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&a);
	nv_mat_free(&b);
	return 0;
fail:
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&a);
	nv_mat_free(&b);
	nv_bm_free(md);
	return -1;
}
