/* pack.c - settling the scales and building the payload, for both encoders (see pack.h) */
#include "pack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "f16.h"
#include "mem.h"
#include "nvg.h"

static double f16_round(double v)
{
	return (double)nv_f16_to_f32(nv_f32_to_f16((float)v));
}

static double rms(const double *v, size_t n)
{
	double s = 0.0;

	for (size_t i = 0; i < n; i++)
		s += v[i] * v[i];
	return sqrt(s / (double)n);
}

int nv_pack_settle(double *h, double *l, double *g, size_t m, size_t n, size_t r, size_t p)
{
	double a = rms(h, m), c = rms(g, n);

	if (!(a > 0 && c > 0 && isfinite(a) && isfinite(c))) {
		nv_seterr("path %zu: scale rms (h %g, g %g) is not finite and positive", p + 1, a, c);
		return 1;
	}
	for (size_t i = 0; i < m; i++)
		h[i] /= a;
	for (size_t j = 0; j < n; j++)
		g[j] /= c;
	for (size_t k = 0; k < r; k++) {
		double v = l[k] * a * c;
		if (!isfinite(v)) {
			nv_seterr("path %zu: rank scale %zu is not finite", p + 1, k);
			return 1;
		}
		/* below f16 these are dead rank components: zeroed, not refused */
		if (v != 0.0 && (f16_round(v) == 0.0 || fabs(v) < 6.1e-5))
			v = 0.0;
		l[k] = f16_round(v);
		if (!isfinite(l[k])) {
			nv_seterr("path %zu: rank scale %zu = %g exceeds the f16 range", p + 1, k, v);
			return 1;
		}
	}
	for (size_t i = 0; i < m + n; i++) {
		double *v = i < m ? &h[i] : &g[i - m];
		if (!isfinite(*v) || fabs(*v) > 65000.0) {
			nv_seterr("path %zu: %s scale %zu = %g is beyond ±65000", p + 1,
				  i < m ? "row" : "column", i < m ? i : i - m, *v);
			return 1;
		}
		*v = f16_round(*v);
	}
	return 0;
}

static uint16_t *to_f16(const double *v, size_t k)
{
	uint16_t *o = nv_malloc(k ? k : 1, sizeof(uint16_t));

	if (o)
		for (size_t i = 0; i < k; i++)
			o[i] = nv_f32_to_f16((float)v[i]);
	return o;
}

/* the payload of settled paths */
static int build(size_t m, size_t n, size_t r, size_t np, const nv_pack_path *p,
		 uint8_t **bytes, size_t *len)
{
	uint16_t *f[2][3] = { { 0 } };
	blr_path_in in[2];
	size_t sz = blr_payload_size(m, n, r, np);
	int rc = -1;

	if (!sz) {
		nv_seterr("payload of %zux%zu rank %zu does not fit in memory", m, n, r);
		return -1;
	}
	for (size_t q = 0; q < np; q++) {
		f[q][0] = to_f16(p[q].h, m);
		f[q][1] = to_f16(p[q].g, n);
		f[q][2] = to_f16(p[q].l, r);
		if (!f[q][0] || !f[q][1] || !f[q][2])
			goto out;
		in[q] = (blr_path_in){ f[q][0], f[q][1], f[q][2], p[q].su, p[q].sv };
	}
	if (!(*bytes = nv_malloc(sz, 1)))
		goto out;
	if (blr_build(m, n, r, np, in, *bytes) < 0) {
		nv_preerr("packing the payload");
		free(*bytes);
		*bytes = NULL;
		goto out;
	}
	*len = sz;
	rc = 0;
out:
	for (size_t q = 0; q < 2; q++)
		for (int k = 0; k < 3; k++)
			free(f[q][k]);
	return rc;
}

int nv_pack_paths(size_t m, size_t n, size_t r, size_t np, nv_pack_path *p, uint8_t **bytes,
		  size_t *len)
{
	*bytes = NULL;
	for (size_t q = 0; q < np; q++) {
		int rc = nv_pack_settle(p[q].h, p[q].l, p[q].g, m, n, r, q);
		if (rc)
			return rc;
	}
	return build(m, n, r, np, p, bytes, len);
}

int nv_pack(const nv_bm *md, uint8_t **bytes, size_t *len, nv_bm *stored)
{
	nv_pack_path pp[2];
	nv_bm st;
	int rc;

	*bytes = NULL;
	if (nv_bm_copy(&st, md) < 0)
		return -1;
	for (size_t p = 0; p < st.np; p++)
		pp[p] = (nv_pack_path){ st.p[p].h, st.p[p].l, st.p[p].g, st.p[p].su.d, st.p[p].sv.d };
	rc = nv_pack_paths(st.m, st.n, st.r, st.np, pp, bytes, len);
	if (rc == 0 && stored)
		*stored = st;
	else
		nv_bm_free(&st);
	return rc;
}
