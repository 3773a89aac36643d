/* perturb.c - each payload's KL at the model's output, alone in the source (perturb.h) */
#include "perturb.h"

#include "err.h"
#include "mem.h"
#include "normcal.h"

#include <stdlib.h>
#include <string.h>

/* in[i] is a projection of layer l: else an error naming it */
static int in_layer(const fw_model *m, int l, const tn_input *in)
{
	char name[160];

	for (int k = 0; k < FW_NMAT; k++)
		if (fw_tensor_name(name, sizeof name, l, k) == 0 && strcmp(name, in->name) == 0)
			return 0;
	nv_seterr("'%s' is not a projection of layer %d", in->name, l);
	return -1;
}

/* the windows of plane x (rows × d) through layer ly, in place */
static int run_plane(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x,
		     const fw_window *w, size_t nw)
{
	for (size_t i = 0, off = 0; i < nw; off += w[i].len - 1, i++)
		if (fw_layer_run(m, ly, s, x + off * m->d, w[i].len - 1, NULL) < 0)
			return -1;
	return 0;
}

/* layer l: plane 0 through the source's, plane p ≥ 1 through the source's with in[p − 1] */
static int first_layer(const fw_model *m, int l, const tn_input *in, size_t nin, float *X,
		       size_t plane, fw_scratch *s, const fw_window *w, size_t nw)
{
	for (size_t p = 0; p <= nin; p++) {
		fw_override ov;
		fw_layer ly;
		int rc;

		if (p > 0) {
			if (in_layer(m, l, &in[p - 1]) < 0)
				return -1;
			ov = (fw_override){ in[p - 1].name, in[p - 1].payload, in[p - 1].len };
		}
		if (fw_layer_load(m, l, p ? &ov : NULL, p ? 1 : 0, &ly) < 0) {
			if (p)
				nv_preerr("payload %zu (%s)", p, in[p - 1].name);
			return -1;
		}
		rc = run_plane(m, &ly, s, X + p * plane, w, nw);
		fw_layer_free(&ly);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* the later layers, each loaded once, through every plane */
static int later_layers(const fw_model *m, int l, size_t np, float *X, size_t plane,
			fw_scratch *s, const fw_window *w, size_t nw)
{
	for (int k = l + 1; k < m->a.layers; k++) {
		fw_layer ly;
		int rc = 0;

		if (fw_layer_load(m, k, NULL, 0, &ly) < 0)
			return -1;
		for (size_t p = 0; p < np && rc == 0; p++)
			rc = run_plane(m, &ly, s, X + p * plane, w, nw);
		fw_layer_free(&ly);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* each plane p ≥ 1 against plane 0 at the head: the source's final states × w°, the others' unit */
static int head_kl(const fw_model *m, const tn_input *in, size_t nin, float *X, size_t rows,
		   const float *E, double *kl, double *flops)
{
	size_t d = m->d, plane = rows * d;

	fw_rmsnorm(X, m->final_w, X, rows, d, m->a.rms_eps);
	for (size_t p = 1; p <= nin; p++) {
		nc_data D = { d, m->vocab, E, E, X + p * plane, X, 0, rows };

		fw_rmsnorm(X + p * plane, NULL, X + p * plane, rows, d, m->a.rms_eps);
		if (nc_kl(&D, m->final_w, 0, NULL, rows, &kl[p - 1], NULL, flops) < 0) {
			nv_preerr("payload %zu (%s)", p, in[p - 1].name);
			return -1;
		}
	}
	return 0;
}

int pt_kl(const fw_model *m, int l, const tn_input *in, size_t nin, const float *x,
	  const fw_window *w, size_t nw, const float *E, double *kl, double *flops)
{
	size_t rows = 0, np = nin + 1, plane;
	fw_scratch s;
	float *X;
	int rc = -1;

	if (l < 0 || l >= m->a.layers || nin == 0 || nw == 0) {
		nv_seterr("layer %d of %d, %zu payloads, %zu windows: nothing to perturb", l,
			  m->a.layers, nin, nw);
		return -1;
	}
	for (size_t i = 0; i < nw; i++)
		rows += w[i].len - 1;
	plane = rows * m->d;
	if (!(X = nv_malloc(np * rows, m->d * sizeof(float))))
		return -1;
	if (fw_scratch_init(&s, m, fw_windows_tmax(w, nw)) < 0) {
		free(X);
		return -1;
	}
	for (size_t p = 0; p < np; p++)
		memcpy(X + p * plane, x, plane * sizeof(float));
	if (first_layer(m, l, in, nin, X, plane, &s, w, nw) == 0 &&
	    later_layers(m, l, np, X, plane, &s, w, nw) == 0)
		rc = head_kl(m, in, nin, X, rows, E, kl, flops);
	*flops += s.flops;
	fw_scratch_free(&s);
	free(X);
	return rc;
}
