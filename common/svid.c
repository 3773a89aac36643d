/* svid.c - SVID paths and the dual-SVID encoder (see svid.h) */
#include "svid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "err.h"
#include "mem.h"

void nv_rank1_pos(const nv_mat *mabs, double *left, double *right)
{
	size_t rows = mabs->r, c = mabs->c;
	double *v = right, *v2 = nv_malloc(c, sizeof(double)), *u = left, s, lmax = 0, rmax = 0;

	for (size_t k = 0; k < c; k++)
		v[k] = 1.0 / sqrt((double)c);
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

/* signs (rows × r) of x into s, |x| into a */
static void split_sign(const nv_mat *x, nv_mat *s, nv_mat *a)
{
	for (size_t i = 0; i < x->r * x->c; i++) {
		s->d[i] = x->d[i] >= 0.0 ? 1.0 : -1.0;
		a->d[i] = fabs(x->d[i]);
	}
}

int nv_svid_path(const nv_mat *up, const nv_mat *vp, nv_path *q)
{
	size_t m = up->r, n = vp->r, r = up->c;
	nv_mat ua = {0}, va = {0};
	double *lu = nv_malloc(r, sizeof(double)), *lv = nv_malloc(r, sizeof(double));
	int rc = -1;

	if (!lu || !lv || nv_path_alloc(q, m, n, r) < 0)
		goto out;
	if (nv_mat_zeros(&ua, m, r) < 0 || nv_mat_zeros(&va, n, r) < 0) {
		nv_path_free(q);
		goto out;
	}
	split_sign(up, &q->su, &ua);
	split_sign(vp, &q->sv, &va);
	nv_rank1_pos(&ua, q->h, lu);
	nv_rank1_pos(&va, q->g, lv);
	for (size_t k = 0; k < r; k++)
		q->l[k] = lu[k] * lv[k];
	rc = 0;
out:
	free(lu);
	free(lv);
	nv_mat_free(&ua);
	nv_mat_free(&va);
	return rc;
}

int nv_build_dual_svid(const nv_mat *w, size_t r, size_t np, nv_bm *md)
{
	nv_mat up = {0}, vp = {0}, res = {0};

	memset(md, 0, sizeof(*md));
	md->m = w->r;
	md->n = w->c;
	md->r = r;
	if (nv_latents(w, r, NULL, NULL, &up, &vp) < 0 || nv_svid_path(&up, &vp, &md->p[0]) < 0)
		goto fail;
	md->np = 1;
	nv_mat_free(&up);
	nv_mat_free(&vp);
	if (np == 2) {
		if (nv_bm_recon(md, -1, &res) < 0)
			goto fail;
		for (size_t i = 0; i < res.r * res.c; i++)
			res.d[i] = w->d[i] - res.d[i];
		if (nv_latents(&res, r, NULL, NULL, &up, &vp) < 0 ||
		    nv_svid_path(&up, &vp, &md->p[1]) < 0)
			goto fail;
		md->np = 2;
	}
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&res);
	return 0;
fail:
	nv_mat_free(&up);
	nv_mat_free(&vp);
	nv_mat_free(&res);
	nv_bm_free(md);
	return -1;
}

/* ‖W − Ŵ‖_F / ‖W‖_F */
static int frob_rel(const nv_mat *w, const nv_bm *md, double *out)
{
	nv_mat rec;
	double e = 0.0, t = 0.0;

	if (nv_bm_recon(md, -1, &rec) < 0)
		return -1;
	for (size_t i = 0; i < rec.r * rec.c; i++) {
		double d = w->d[i] - rec.d[i];
		e += d * d;
		t += w->d[i] * w->d[i];
	}
	nv_mat_free(&rec);
	*out = sqrt(e / fmax(t, 1e-300));
	return 0;
}

/* the stored model's relative errors: Frobenius, and on hsel when given */
static int stored_errors(const nv_mat *w, const nv_mat *hsel, const nv_bm *st,
			 nv_enc_result *res)
{
	nv_metric sel;
	int rc;

	if (frob_rel(w, st, &res->frob) < 0)
		return -1;
	if (!hsel)
		return 0;
	if (nv_metric_init(&sel, w, hsel) < 0)
		return -1;
	rc = nv_rel(&sel, st, &res->sel_err);
	nv_metric_free(&sel);
	return rc;
}

int nv_encode_dual_svid(const nv_mat *w, const nv_mat *hsel, const nv_enc_opts *o,
			nv_enc_result *res)
{
	size_t m = w->r, n = w->c, np = o->paths == 1 ? 1 : 2, r;
	nv_bm md, st;
	blr_clip clip = BLR_CLIP_NONE;
	int rc, k;

	memset(res, 0, sizeof(*res));
	res->fit_err = res->sel_err = res->frob = NAN;
	if (hsel && (hsel->r != n || hsel->c != n)) {
		nv_seterr("W has %zu columns but the SEL Gram is %zux%zu", n, hsel->r, hsel->c);
		return -1;
	}
	if (o->rank) {
		r = o->rank;
	} else if (blr_rank(m, n, o->bpw, np, o->kv, &r, &clip) < 0) {
		nv_seterr("shape %zux%zu: min(m,n) < 8 is not encodable", m, n);
		return -1;
	}
	if (nv_build_dual_svid(w, r, np, &md) < 0)
		return -1;
	rc = nv_pack(&md, &res->bytes, &res->len, &st);
	nv_bm_free(&md);
	if (rc)
		return rc;
	rc = stored_errors(w, hsel, &st, res);
	nv_bm_free(&st);
	if (rc < 0) {
		nv_enc_result_free(res);
		return -1;
	}
	res->m = m;
	res->n = n;
	res->r = r;
	res->paths = (int)np;
	res->clip = clip;
	res->bits = blr_bits(m, n, r, np);
	k = snprintf(res->line, sizeof(res->line), "P%zu r%zu frob %.4f", np, r, res->frob);
	if (hsel)
		snprintf(res->line + k, sizeof(res->line) - (size_t)k, " sel %.4f", res->sel_err);
	return 0;
}
