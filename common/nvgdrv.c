/* nvgdrv.c - the one-call encoder (nvg and dual-svid) and the per-head row gauge (see nvg.h) */
#include "nvg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "mem.h"
#include "parse.h"
#include "repline.h"
#include "svid.h"

void nv_enc_opts_default(nv_enc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->bpw = 0.55;
	o->kv = 1.0;
	o->sweeps = NV_SWEEPS_DEFAULT;
	o->g_pcg = 1;
	o->itq_tol = NV_ITQ_TOL_DEFAULT;
	o->hb_f32 = 1;
	o->try_sweeps = NV_TRY_SWEEPS_DEFAULT;
	o->try_abort = 1;
	o->g_every = 1;
	o->als_tol = NV_ALS_TOL_DEFAULT;
	o->pick_lead = NV_PICK_LEAD_DEFAULT;
	o->hold_max = NV_HOLD_MAX_DEFAULT;
	o->threads = 1;
}

void nv_enc_result_free(nv_enc_result *res)
{
	free(res->bytes);
	res->bytes = NULL;
	res->len = 0;
}

/* the rank for np paths; with a fixed rank, P=1 of an auto choice gets the
 * rank rule at the bits of P=2 at that rank */
static int rank_for(const nv_enc_opts *o, size_t m, size_t n, size_t np, size_t *r,
		    blr_clip *clip)
{
	size_t cap = 8 * ((m < n ? m : n) / 8);

	*clip = BLR_CLIP_NONE;
	if (o->rank) {
		if (o->rank % 8 || o->rank < 8 || o->rank > cap) {
			nv_seterr("rank %zu is not a multiple of 8 in [8, %zu]", o->rank, cap);
			return -1;
		}
		if (np == 2 || o->paths)
			return *r = o->rank, 0;
		return blr_rank(m, n, blr_bits(m, n, o->rank, 2) / ((double)m * (double)n), 1, 1.0,
				r, clip) < 0 ? -1 : 0;
	}
	if (blr_rank(m, n, o->bpw, np, o->kv, r, clip) < 0) {
		nv_seterr("shape %zux%zu: min(m,n) < 8 is not encodable", m, n);
		return -1;
	}
	return 0;
}

/* the candidates of one encode, each with its refinement's g-step factors */
typedef struct {
	nv_bm md[2];
	nv_pchol pc[2][2];
	nv_hbk hk[2];   /* the refinement's H·B products, from one call to the next */
	double fit[2];  /* its fit error likewise (NaN: not known) */
	size_t np[2];
	blr_clip clip[2];
	size_t k;
	char notes[256];
} cands;

/* candidate i's refinement state: its g-step factors and kept products */
static void cand_release(cands *cs, size_t i)
{
	nv_pchol_free(&cs->pc[i][0]);
	nv_pchol_free(&cs->pc[i][1]);
	nv_hbk_free(&cs->hk[i]);
}

static void cands_free(cands *cs)
{
	for (size_t i = 0; i < cs->k; i++) {
		nv_bm_free(&cs->md[i]);
		cand_release(cs, i);
	}
}

static void note(cands *cs, const char *name, double e)
{
	nv_rep_note(cs->notes, sizeof(cs->notes), name, e);
}

/* start the candidate with np paths: its rank and its first path from W */
static int start_cand(cands *cs, const nv_tctx *c, const nv_enc_opts *o, size_t np)
{
	size_t r;
	blr_clip clip;

	if (rank_for(o, c->w->r, c->w->c, np, &r, &clip) < 0 ||
	    nv_build_nvg_start(c, r, &cs->md[cs->k]) < 0)
		return -1;
	cs->np[cs->k] = np;
	cs->clip[cs->k] = clip;
	cs->fit[cs->k] = NAN;
	cs->k++;
	return 0;
}

/* finish candidate i's init (not yet refined); a failed one is freed and
 * dropped, so that cands_free frees the rest.  The two-path init's SEL error
 * is noted where there is a choice to make (two candidates): a candidate
 * alone has its SEL error measured once, on the payload stored (finish) */
static int finish_cand(cands *cs, const nv_tctx *c, const nv_metric *sel, size_t i)
{
	nv_bm *md = &cs->md[i];

	if (nv_build_nvg_finish(c, cs->np[i], md) < 0) {
		for (size_t j = i + 1; j < cs->k; j++)
			nv_bm_free(&cs->md[j]);
		cs->k = i;
		return -1;
	}
	if (cs->np[i] == 2 && cs->k == 2) {
		double e, t = nv_now();
		if (nv_rel(sel, md, &e) < 0)
			return -1;
		nv_metric_release(sel);
		nv_prof_add(c->prof, "select", nv_now() - t, 0);
		note(cs, "init", e);
	}
	return 0;
}

/* the candidates' inits: every first path while W's whitened basis is held
 * (an m × n and an n × n matrix when W is tall), then the basis let go and
 * the ALS and second paths run without it (the bytes of one init after the
 * other) */
static int init_cands(cands *cs, const nv_tctx *c, const nv_metric *sel, const nv_enc_opts *o)
{
	size_t want = 0;
	nv_enc_opts au = *o;

	/* the basis keeps the pairs of the largest rank a candidate asks, and
	 * those of paths auto's too when the paths are forced: its eigenpairs
	 * then have the bits of auto's, and so the candidate's latents (whose
	 * last bits the FIT Gram's f32 products would carry into the payload) */
	au.paths = 0;
	for (size_t np = 1; np <= 2; np++) {
		size_t r;
		blr_clip clip;
		if (o->paths != (int)(3 - np) && rank_for(o, c->w->r, c->w->c, np, &r, &clip) == 0 &&
		    r > want)
			want = r;
		if (rank_for(&au, c->w->r, c->w->c, np, &r, &clip) == 0 && r > want)
			want = r;
	}
	c->wlat->want = want;
	if ((o->paths != 1 && start_cand(cs, c, o, 2) < 0) ||
	    (o->paths != 2 && start_cand(cs, c, o, 1) < 0))
		return -1;
	nv_lat_basis_free(c->wlat);
	for (size_t i = 0; i < cs->k; i++)
		if (finish_cand(cs, c, sel, i) < 0)
			return -1;
	return 0;
}

/* the candidate with the least SEL error (the first on a tie) among those
 * of only (all when only is k), each noted as P1 or P2 with tag after it */
static int pick(cands *cs, const nv_metric *sel, nv_prof *prof, size_t only, const char *tag,
		size_t *best)
{
	double be = INFINITY, t = nv_now();

	for (size_t i = 0; i < cs->k; i++) {
		double e;
		char name[16];
		if (only < cs->k && i != only)
			continue;
		if (nv_rel(sel, &cs->md[i], &e) < 0)
			return -1;
		snprintf(name, sizeof(name), "P%zu%s", cs->np[i], tag);
		note(cs, name, e);
		if (e < be) {
			be = e;
			*best = i;
		}
	}
	nv_metric_release(sel);
	nv_prof_add(prof, "select", nv_now() - t, 0);
	return 0;
}

/* sweeps more of candidate i's refinement, continuing the calls before */
static int refine_more(cands *cs, const nv_tctx *c, size_t i, int sweeps)
{
	/* where W's products are not held (a large tensor), the others' kept
	 * H·B products go first: made again to the bit when their refinement
	 * goes on (2n²·pr flops), held beside this one's they were a
	 * candidate's products too many at the encode's peak (a 7B q_proj's
	 * two candidates, --pick-lead: 747 MiB against 654 MiB refined one
	 * after the other) */
	if (!c->hold)
		for (size_t j = 0; j < cs->k; j++)
			if (j != i)
				nv_hbk_free(&cs->hk[j]);
	return nv_refine_kept(&cs->md[i], c, sweeps, cs->pc[i], &cs->hk[i], &cs->fit[i]);
}

/* sweeps more of every candidate's refinement; last: none to come after,
 * so that their factors and products go now */
static int refine_all(cands *cs, const nv_tctx *c, int sweeps, int last)
{
	for (size_t i = 0; i < cs->k; i++) {
		if (refine_more(cs, c, i, sweeps) < 0)
			return -1;
		if (last)
			cand_release(cs, i);
	}
	return 0;
}

/* the factors and products of every candidate but bi, which alone goes on */
static void keep_only(cands *cs, size_t bi)
{
	for (size_t i = 0; i < cs->k; i++)
		if (i != bi)
			cand_release(cs, i);
}

/*
 * o->pick_lead's early choice, after the first sweep of both candidates: 1
 * with *bi the one-path candidate when its SEL error is below the two-path
 * one's by at least the fraction lead of it (both noted, P2@1 and P1@1);
 * else 0, nothing noted.  The sweeps after the first gained the one-path
 * candidate more than the two-path one on 158 of 168 SmolLM2 encodes, the
 * two-path one at most 0.39% of its error more (README), so such a lead
 * holds and the choice is the full refinement's.  The SEL errors are not
 * measured where the one-path candidate trails on the fit errors the sweep
 * left: a lead on SEL is then rare, and the measure would cost an
 * encode that refines both through a product with the SEL Gram each
 */
static int lead_one(cands *cs, const nv_tctx *c, const nv_metric *sel, double lead,
		    size_t *bi)
{
	size_t one = cs->np[0] == 1 ? 0 : 1;
	double e[2], t = nv_now();

	if (!(cs->fit[one] <= cs->fit[1 - one]))
		return 0;
	for (size_t i = 0; i < 2; i++)
		if (nv_rel(sel, &cs->md[i], &e[i]) < 0)
			return -1;
	nv_metric_release(sel);
	nv_prof_add(c->prof, "select", nv_now() - t, 0);
	if (!(e[one] <= (1.0 - lead) * e[1 - one]))
		return 0;
	for (size_t i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "P%zu@1", cs->np[i]);
		note(cs, name, e[i]);
	}
	*bi = one;
	return 1;
}

/*
 * refine every candidate by o->sweeps and pick on SEL; with o->pick_after
 * below that and two candidates, pick after pick_after sweeps of both
 * (noted P2@N, P1@N), then the chosen one alone completes its sweeps with
 * its own factors: the bytes of the full refinement whenever the choice is
 * the one it would have made.  Without pick_after, o->pick_lead (≥ 0) may
 * make that choice after the first sweep (lead_one), else both complete
 * their sweeps.  A candidate alone is not measured (noted "P2 only" or "P1
 * only"): there is nothing to choose
 */
static int refine_pick(cands *cs, const nv_tctx *c, const nv_metric *sel, const nv_enc_opts *o,
		       size_t *bi)
{
	int first = o->sweeps, lead = 0, rc;
	char tag[16] = "";

	if (cs->k == 2 && o->pick_after > 0 && o->pick_after < o->sweeps) {
		first = o->pick_after;
		snprintf(tag, sizeof(tag), "@%d", first);
	} else if (cs->k == 2 && o->pick_lead >= 0.0 && o->sweeps > 1) {
		first = 1;
		lead = 1;
	}
	if (refine_all(cs, c, first, first == o->sweeps) < 0)
		return -1;
	if (cs->k == 1) {
		nv_rep_only(cs->notes, sizeof(cs->notes), cs->np[0]);
		*bi = 0;
		return 0;
	}
	if (lead) {
		if ((rc = lead_one(cs, c, sel, o->pick_lead, bi)) < 0)
			return -1;
		if (rc == 0) /* both complete their sweeps: the full refinement */
			return refine_all(cs, c, o->sweeps - first, 1) < 0 ||
			       pick(cs, sel, c->prof, cs->k, "", bi) < 0 ? -1 : 0;
	} else {
		if (pick(cs, sel, c->prof, cs->k, tag, bi) < 0)
			return -1;
		if (first == o->sweeps)
			return 0;
	}
	keep_only(cs, *bi);
	return refine_more(cs, c, *bi, o->sweeps - first) < 0 ||
	       pick(cs, sel, c->prof, *bi, "", bi) < 0 ? -1 : 0;
}

/* stored errors on the raw Grams (FIT's from the damped one c->fit is on),
 * then the report line */
static int finish(const nv_tctx *c, const nv_metric *sel, const nv_bm *st, const cands *cs,
		  size_t bi, nv_enc_result *res)
{
	const nv_mat *w = c->w;
	double t = nv_now();

	if (nv_rel_raw(&c->fit, nv_hctx_ridge(c->hc), st, &res->fit_err) < 0 ||
	    nv_rel(sel, st, &res->sel_err) < 0)
		return -1;
	nv_metric_release(sel);
	nv_prof_add(c->prof, "select", nv_now() - t, 0);
	res->m = w->r;
	res->n = w->c;
	res->r = st->r;
	res->paths = (int)cs->np[bi];
	res->clip = cs->clip[bi];
	res->bits = blr_bits(w->r, w->c, st->r, cs->np[bi]);
	nv_rep_line(res->line, sizeof(res->line), cs->np[bi], st->r, cs->notes, res->fit_err,
		    res->sel_err);
	return 0;
}

/* the SEL metric: on hsel, or on what o->sel_load reads (hsel NULL) */
static int sel_metric(nv_metric *mt, const nv_mat *w, const nv_mat32 *hsel, const nv_enc_opts *o)
{
	if (hsel && (hsel->r != w->c || hsel->c != w->c)) {
		nv_seterr("W has %zu columns but the SEL Gram is %zux%zu", w->c, hsel->r, hsel->c);
		return -1;
	}
	return hsel ? nv_metric_init32(mt, w, hsel) : nv_metric_init_load(mt, w, o->sel_load, o->sel_arg);
}

static int check_nvg_inputs(const nv_mat *w, const nv_hctx *hc, const nv_mat32 *hsel,
			    const nv_enc_opts *o)
{
	if (!hc || (!hsel && !o->sel_load)) {
		nv_seterr("nvg needs the FIT context and the SEL Gram");
		return -1;
	}
	if (hc->n != w->c) {
		nv_seterr("W has %zu columns but the context is %zu wide", w->c, hc->n);
		return -1;
	}
	return 0;
}

static int encode_nvg(const nv_mat *w, const nv_hctx *hc, const nv_mat32 *hsel,
		      const nv_enc_opts *o, nv_enc_result *res)
{
	nv_tctx c;
	nv_metric sel = {0};
	cands cs = {0};
	nv_bm st = {0};
	size_t bi = 0;
	double t;
	int rc = -1;

	if (check_nvg_inputs(w, hc, hsel, o) < 0 ||
	    nv_tctx_init(&c, w, hc, o->prof, o->threads) < 0)
		return -1;
	c.g_pcg = o->g_pcg;
	c.itq_tol = o->itq_tol;
	c.itq_f32 = o->itq_f32;
	c.fit.hb32 = o->hb_f32;
	c.try_sweeps = o->try_sweeps;
	c.try_abort = o->try_abort;
	c.als_tol = o->als_tol;
	c.g_every = o->g_every;
	c.hold = nv_hold_mn(w->r, w->c, o->hold_max);
	if (o->als_f32 && nv_tctx_als32(&c) < 0)
		goto out;
	t = nv_now();
	if (sel_metric(&sel, w, hsel, o) < 0)
		goto out;
	nv_prof_add(o->prof, "select", nv_now() - t, 0);
	c.l_spend = o->spend_l == hc ? &o->spend_l->l : NULL;
	if (init_cands(&cs, &c, &sel, o) < 0)
		goto out;
	if (c.l_spend) /* the paths' latents were l's last readers */
		nv_mat_free(c.l_spend);
	if (refine_pick(&cs, &c, &sel, o, &bi) < 0)
		goto out;
	rc = nv_pack(&cs.md[bi], &res->bytes, &res->len, &st);
	if (rc == 0 && finish(&c, &sel, &st, &cs, bi, res) < 0) {
		nv_enc_result_free(res);
		rc = -1;
	}
out:
	nv_bm_free(&st);
	cands_free(&cs);
	nv_metric_free(&sel);
	nv_tctx_free(&c);
	return rc;
}

/* ‖W − Ŵ‖_F / ‖W‖_F */
static int frob_rel(const nv_mat *w, const nv_bm *md, double *out)
{
	double e, t;

	if (nv_frob2(w, md, &e, &t) < 0)
		return -1;
	*out = sqrt(e / fmax(t, 1e-300));
	return 0;
}

/* the stored model's relative errors: Frobenius, and on the SEL Gram when given */
static int stored_errors(const nv_mat *w, const nv_mat32 *hsel, const nv_enc_opts *o,
			 const nv_bm *st, nv_enc_result *res)
{
	nv_metric sel;
	int rc;

	if (frob_rel(w, st, &res->frob) < 0)
		return -1;
	if (!hsel && !o->sel_load)
		return 0;
	if (sel_metric(&sel, w, hsel, o) < 0)
		return -1;
	rc = nv_rel(&sel, st, &res->sel_err);
	nv_metric_free(&sel);
	return rc;
}

/* encode with dual-SVID (o->paths 0 means 2); report "P2 r… frob …".
 * hsel (n × n raw SEL Gram, may be NULL) is only measured: the stored
 * payload's relative error on it goes to res->sel_err and " sel …" ends the
 * line; the payload is the same with or without it */
static int encode_dual_svid(const nv_mat *w, const nv_mat32 *hsel, const nv_enc_opts *o,
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
	rc = stored_errors(w, hsel, o, &st, res);
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
	if (hsel || o->sel_load)
		snprintf(res->line + k, sizeof(res->line) - (size_t)k, " sel %.4f", res->sel_err);
	return 0;
}

int nv_encode(const nv_mat *w, const nv_hctx *hc, const nv_mat32 *hsel, const nv_enc_opts *o,
	      nv_enc_result *res)
{
	memset(res, 0, sizeof(*res));
	res->fit_err = res->sel_err = res->frob = NAN;
	if (w->r < 8 || w->c < 8) {
		nv_seterr("shape %zux%zu: min(m,n) < 8 is not encodable", w->r, w->c);
		return -1;
	}
	if (o->rank && (o->rank % 8 || o->rank > 8 * ((w->r < w->c ? w->r : w->c) / 8))) {
		nv_seterr("rank %zu is not a multiple of 8 in [8, %zu]", o->rank,
			  8 * ((w->r < w->c ? w->r : w->c) / 8));
		return -1;
	}
	if (o->method == NV_METHOD_DUAL_SVID)
		return encode_dual_svid(w, hsel, o, res);
	return encode_nvg(w, hc, hsel, o, res);
}

int nv_encode_f32(const float *w, size_t m, size_t n, const nv_hctx *hc, const nv_mat32 *hsel,
		  const nv_enc_opts *o, nv_enc_result *res)
{
	nv_mat wd;
	int rc;

	if (nv_mat_zeros(&wd, m, n) < 0)
		return -1;
	for (size_t i = 0; i < m * n; i++)
		wd.d[i] = w[i];
	rc = nv_encode(&wd, hc, hsel, o, res);
	nv_mat_free(&wd);
	return rc;
}

/* -------------------------------------------------------------- row gauge */

int nv_parse_head_blocks(const char *spec, size_t m, size_t **starts, size_t *nb)
{
	char *s = nv_strdup(spec), *save = NULL, *tok;
	size_t cap = 8, k = 0, at = 0, *b = nv_malloc(cap + 1, sizeof(size_t));

	if (!s || !b)
		goto fail;
	b[0] = 0;
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t count, dim;
		if (nv_parse_shape(tok, &count, &dim) < 0) {
			nv_preerr("block '%s' is not COUNTxDIM", tok);
			goto fail;
		}
		for (size_t j = 0; j < count; j++) {
			if (k == cap) {
				size_t *nb2 = nv_realloc(b, 2 * cap + 1, sizeof(size_t));
				if (!nb2)
					goto fail;
				b = nb2;
				cap *= 2;
			}
			if (dim > m || at > m - dim) {
				nv_seterr("blocks cover more than the %zu rows", m);
				goto fail;
			}
			at += dim;
			b[++k] = at;
		}
	}
	if (at != m || k == 0) {
		nv_seterr("blocks cover %zu rows, not the %zu rows of W", at, m);
		goto fail;
	}
	free(s);
	*starts = b;
	*nb = k;
	return 0;
fail:
	free(s);
	free(b);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int nv_row_gauge(const nv_mat *w, const nv_mat *h, const size_t *starts, size_t nb,
		 uint64_t shuffle, double *d)
{
	nv_metric mt;
	double *en = nv_calloc(nb, sizeof(double)), *sorted = nv_malloc(nb, sizeof(double)), eref;

	if (!en || !sorted || nv_metric_init(&mt, w, h) < 0) {
		free(en);
		free(sorted);
		return -1;
	}
	for (size_t j = 0; j < nb; j++)
		for (size_t i = starts[j]; i < starts[j + 1]; i++)
			for (size_t c = 0; c < w->c; c++)
				en[j] += mt.wh.d[i * w->c + c] * w->d[i * w->c + c];
	nv_metric_free(&mt);
	memcpy(sorted, en, nb * sizeof(double));
	qsort(sorted, nb, sizeof(double), cmp_double);
	eref = sorted[nb / 2];
	for (size_t j = 0; j < nb; j++)
		en[j] = fmin(fmax(eref / fmax(en[j], 1e-300), 1.0 / 32.0), 32.0);
	if (shuffle) {
		uint64_t s = shuffle | 1;
		for (size_t i = nb - 1; i >= 1; i--) {
			size_t j;
			double tmp;
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			j = (size_t)((s >> 33) % (i + 1));
			tmp = en[i];
			en[i] = en[j];
			en[j] = tmp;
		}
	}
	for (size_t j = 0; j < nb; j++)
		for (size_t i = starts[j]; i < starts[j + 1]; i++)
			d[i] = sqrt(en[j]);
	free(en);
	free(sorted);
	return 0;
}
