/* clhost.c - host factorizations, rank-1 fits and the packer (see clhost.h) */
#include "clhost.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "f16.h"
#include "linalg.h"
#include "mem.h"

int clh_eig_top(double *g, size_t s, size_t k, double *lam, double *vec)
{
	double *w;
	int info;

	if (nv_check_finite(g, s, s, 'U', "latent Gram entry") < 0 ||
	    !(w = nv_malloc(s, sizeof(double))))
		return -1;
	/* ascending eigenvalues, eigenvectors as the columns of g (s × s) */
	info = nv_lapack_info(LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)s, g,
					     (lapack_int)s, w));
	if (info > 0)
		nv_seterr("the eigensolver did not converge on a %zu × %zu Gram", s, s);
	if (info == 0 && (nv_check_finite(w, 1, s, 0, "eigenvalue") < 0 ||
			  nv_check_finite(g, s, s, 0, "eigenvector entry") < 0))
		info = -1;
	for (size_t c = 0; c < k && info == 0; c++) {
		lam[c] = w[s - 1 - c];
		for (size_t i = 0; i < s; i++)
			vec[i * k + c] = g[i * s + (s - 1 - c)];
	}
	free(w);
	return info == 0 ? 0 : -1;
}

int clh_polar(double *m, size_t r, double *rot)
{
	nv_mat a = { r, r, m }, q;

	if (nv_polar(&a, &q) < 0) {
		nv_preerr("the polar factor of the %zu × %zu ITQ product", r, r);
		return -1;
	}
	memcpy(rot, q.d, r * r * sizeof(double));
	nv_mat_free(&q);
	return 0;
}

int clh_solve_spd(double *a, const double *b, size_t k, double eps, double *x)
{
	double tr = 0, ridge;
	double *f = nv_malloc(k * k, sizeof(double));
	int info = 1;

	if (!f)
		return -1;
	for (size_t i = 0; i < k; i++)
		tr += a[i * k + i];
	ridge = eps * fmax(tr / (double)k, 1e-300);
	for (int attempt = 0; attempt < 4 && info > 0; attempt++, ridge *= 100) {
		memcpy(x, b, k * sizeof(double));
		info = nv_posv_rm(a, k, 'U', ridge, f, x);
	}
	free(f);
	if (info > 0)
		nv_seterr("a %zu × %zu normal system is not positive definite", k, k);
	return info;
}

/* u = a·v (rows) */
static void matvec(const double *a, size_t rows, size_t c, const double *v, double *u)
{
	for (size_t i = 0; i < rows; i++) {
		double s = 0;
		for (size_t j = 0; j < c; j++)
			s += a[i * c + j] * v[j];
		u[i] = s;
	}
}

void clh_rank1_pos(const double *a, size_t rows, size_t c, double *left, double *right)
{
	double *v = malloc(c * sizeof(double)), *v2 = malloc(c * sizeof(double));
	double *u = left, s = 0, lmax = 0, rmax = 0;

	for (size_t j = 0; j < c; j++)
		v[j] = 1.0 / sqrt((double)c);
	for (int it = 0; it < 60; it++) {
		double nv = 0, diff = 0;
		matvec(a, rows, c, v, u);
		memset(v2, 0, c * sizeof(double));
		for (size_t i = 0; i < rows; i++)
			for (size_t j = 0; j < c; j++)
				v2[j] += a[i * c + j] * u[i];
		for (size_t j = 0; j < c; j++)
			nv += v2[j] * v2[j];
		nv = fmax(sqrt(nv), 1e-300);
		for (size_t j = 0; j < c; j++) {
			v2[j] /= nv;
			diff += (v2[j] - v[j]) * (v2[j] - v[j]);
		}
		memcpy(v, v2, c * sizeof(double));
		if (sqrt(diff) < 1e-9)
			break;
	}
	matvec(a, rows, c, v, u);
	for (size_t i = 0; i < rows; i++)
		s += u[i] * u[i];
	s = sqrt(s);
	for (size_t i = 0; i < rows; i++)
		left[i] = sqrt(s) * u[i] / fmax(s, 1e-300);
	for (size_t j = 0; j < c; j++)
		right[j] = sqrt(s) * v[j];
	for (size_t i = 0; i < rows; i++)
		lmax = fmax(lmax, left[i]);
	for (size_t j = 0; j < c; j++)
		rmax = fmax(rmax, right[j]);
	for (size_t i = 0; i < rows; i++)
		left[i] = fmax(left[i], 1e-12 * lmax);
	for (size_t j = 0; j < c; j++)
		right[j] = fmax(right[j], 1e-12 * rmax);
	free(v);
	free(v2);
}

int clh_upper_inv_t(const double *u, size_t ldu, size_t nb, double *inv)
{
	double *t = nv_calloc(nb * nb, sizeof(double));
	int info;

	if (!t)
		return -1;
	for (size_t i = 0; i < nb; i++)
		for (size_t j = i; j < nb; j++)
			t[i * nb + j] = u[i * ldu + j];
	info = nv_check_finite(t, nb, nb, 'U', "the factor of the permuted inverse Gram: entry");
	if (info == 0)
		info = nv_lapack_info(LAPACKE_dtrtri(LAPACK_ROW_MAJOR, 'U', 'N', (lapack_int)nb, t,
						     (lapack_int)nb));
	if (info > 0)
		nv_seterr("the factor of the permuted inverse Gram is singular at %d", info);
	if (info == 0)
		info = nv_check_finite(t, nb, nb, 'U', "the inverse of a block of that factor: entry");
	if (info != 0) {
		free(t);
		return -1;
	}
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < nb; j++)
			inv[i * nb + j] = t[j * nb + i];
	free(t);
	return 0;
}

static double rms(const double *v, size_t k)
{
	double s = 0;
	for (size_t i = 0; i < k; i++)
		s += v[i] * v[i];
	return sqrt(s / (double)k);
}

static double f16_round(double v)
{
	return nv_f16_to_f32(nv_f32_to_f16((float)v));
}

/* rebalance and round one path; 1 when a scale cannot be stored */
static int settle_path(clh_path *p, size_t m, size_t n, size_t r)
{
	double a = rms(p->h, m), c = rms(p->g, n);

	if (!(a > 0 && c > 0 && isfinite(a) && isfinite(c)))
		return 1;
	for (size_t i = 0; i < m; i++)
		p->h[i] /= a;
	for (size_t j = 0; j < n; j++)
		p->g[j] /= c;
	for (size_t k = 0; k < r; k++) {
		double *v = &p->l[k];
		*v *= a * c;
		if (!isfinite(*v))
			return 1;
		/* sub-f16 rank terms are dead components: zeroed, not refused */
		if (*v != 0 && (f16_round(*v) == 0 || fabs(*v) < 6.1e-5))
			*v = 0;
	}
	for (size_t i = 0; i < m; i++)
		if (!isfinite(p->h[i]) || fabs(p->h[i]) > 65000.0)
			return 1;
	for (size_t j = 0; j < n; j++)
		if (!isfinite(p->g[j]) || fabs(p->g[j]) > 65000.0)
			return 1;
	for (size_t i = 0; i < m; i++)
		p->h[i] = f16_round(p->h[i]);
	for (size_t j = 0; j < n; j++)
		p->g[j] = f16_round(p->g[j]);
	for (size_t k = 0; k < r; k++)
		p->l[k] = f16_round(p->l[k]);
	return 0;
}

static uint16_t *to_f16(const double *v, size_t k)
{
	uint16_t *o = nv_malloc(k, sizeof(uint16_t));
	if (o)
		for (size_t i = 0; i < k; i++)
			o[i] = nv_f32_to_f16((float)v[i]);
	return o;
}

int clh_pack(size_t m, size_t n, size_t r, size_t np, clh_path *p, uint8_t **out, size_t *len)
{
	blr_path_in in[2];
	uint16_t *hs[2] = { 0 }, *gs[2] = { 0 }, *ls[2] = { 0 };
	int rc = -1;

	*out = NULL;
	for (size_t q = 0; q < np; q++)
		if (settle_path(&p[q], m, n, r))
			return 1;
	*len = blr_payload_size(m, n, r, np);
	for (size_t q = 0; q < np; q++) {
		hs[q] = to_f16(p[q].h, m);
		gs[q] = to_f16(p[q].g, n);
		ls[q] = to_f16(p[q].l, r);
		if (!hs[q] || !gs[q] || !ls[q])
			goto done;
		in[q] = (blr_path_in){ hs[q], gs[q], ls[q], p[q].su, p[q].sv };
	}
	*out = nv_malloc(*len ? *len : 1, 1);
	if (!*out || *len == 0)
		goto done;
	if (blr_build(m, n, r, np, in, *out) < 0) {
		nv_preerr("packing the payload");
		goto done;
	}
	rc = 0;
done:
	if (rc) {
		free(*out);
		*out = NULL;
	}
	for (size_t q = 0; q < 2; q++) {
		free(hs[q]);
		free(gs[q]);
		free(ls[q]);
	}
	return rc;
}
