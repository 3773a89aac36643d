/* clhost.c - host factorizations, rank-1 fits and the packer (see clhost.h) */
#include "clhost.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "linalg.h"
#include "mem.h"

int clh_eig_top(double *g, size_t s, size_t k, double *lam, double *vec)
{
	if (nv_check_finite(g, s, s, 'U', "latent Gram entry") < 0)
		return -1;
	for (size_t i = 0; i < s; i++) /* the upper triangle is the one read */
		for (size_t j = 0; j < i; j++)
			g[i * s + j] = g[j * s + i];
	if (nv_sym_eig_top_in(g, s, k, lam, vec) < 0) {
		nv_preerr("the top %zu eigenpairs of a %zu × %zu latent Gram", k, s, s);
		return -1;
	}
	return 0;
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
	if (info == 0) {
		nv_serial();
		info = nv_lapack_info(LAPACKE_dtrtri(LAPACK_ROW_MAJOR, 'U', 'N', (lapack_int)nb, t,
						     (lapack_int)nb));
		nv_unserial();
	}
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
