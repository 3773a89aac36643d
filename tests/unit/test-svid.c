/* test-svid.c - latents, the ITQ gauge, SVID paths and dual-SVID (TAP) */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nvg.h"
#include "svid.h"
#include "synth.h"
#include "tap.h"

static tap_rng rng = {7};

static void test_rank1(void)
{
	nv_mat a;
	double u[12], v[5], left[12], right[5], gap = 0;

	nv_mat_zeros(&a, 12, 5);
	for (int i = 0; i < 12; i++)
		u[i] = 0.5 + rng_unif(&rng);
	for (int k = 0; k < 5; k++)
		v[k] = 0.5 + rng_unif(&rng);
	for (int i = 0; i < 12; i++)
		for (int k = 0; k < 5; k++)
			a.d[i * 5 + k] = u[i] * v[k];
	nv_rank1_pos(&a, left, right);
	for (int i = 0; i < 12; i++)
		for (int k = 0; k < 5; k++)
			gap = fmax(gap, fabs(left[i] * right[k] - a.d[i * 5 + k]));
	ok(gap < 1e-12, "rank1_pos recovers an exact positive rank-1 matrix (gap %.2g)", gap);
	nv_mat_free(&a);
}

/* ‖W − up·vpᵀ‖²_M (metric M = L·Lᵀ, or identity) */
static double lat_err(const nv_mat *w, const nv_mat *up, const nv_mat *vp, const nv_mat *m)
{
	nv_mat rec;
	double e = 0;

	nv_gemm_new(up, 0, vp, 1, &rec);
	for (size_t i = 0; i < rec.r * rec.c; i++)
		rec.d[i] = w->d[i] - rec.d[i];
	if (m)
		nv_herr_direct(&rec, m, &e);
	else
		e = nv_dot_all(&rec, &rec);
	nv_mat_free(&rec);
	return e;
}

/* Σ_{k ≥ r} σ_k² of t: the Eckart-Young error, from the eigenvalues of tᵀ·t */
static double tail(const nv_mat *t, size_t r)
{
	nv_mat g, e;
	double lam[96], s = 0;

	nv_gemm_new(t, 1, t, 0, &g);
	nv_sym_eig(&g, lam, &e);
	for (size_t k = r; k < g.r; k++)
		s += lam[k];
	nv_mat_free(&g), nv_mat_free(&e);
	return s;
}

/* a wide matrix's latents come from H (t·H·tᵀ), L unused; a tall one's need L */
static void test_wide_metric(const nv_mat *w, const nv_mat *h, const nv_mat *l,
			     const nv_mat *llt)
{
	nv_mat a = { 40, 64, w->d }, al, ah, up, vp, up2, vp2, hr;
	nv_mat32 h32;
	nv_lat_metric mh = { &h32, NULL, NULL, 0, 0 }, mth = { &h32, NULL, NULL, 0, 0 };
	double e, want;

	nv_mat_copy(&hr, h); /* h is f32-exact (main): h32 holds the same numbers */
	synth_f32(&hr, &h32);
	is_int(nv_latents(&a, 16, &mh, NULL, &up, &vp), 0, "latents of a 40 × 64 W from H alone");
	nv_gemm_new(&a, 0, l, 0, &al);
	e = lat_err(&a, &up, &vp, llt);
	want = tail(&al, 16);
	/* through t·H·tᵀ, whose rounding is that of (t·L)(t·L)ᵀ: 1e-8 as above */
	ok(fabs(e - want) <= 1e-8 * want, "they are best in the metric (%.8g = %.8g)", e, want);
	nv_gemm_new(&a, 0, h, 0, &ah);
	mth.th = &ah;
	nv_latents(&a, 16, &mth, NULL, &up2, &vp2);
	ok(up.r * up.c == up2.r * up2.c && vp.r * vp.c == vp2.r * vp2.c &&
		   !memcmp(up.d, up2.d, up.r * up.c * sizeof(double)) &&
		   !memcmp(vp.d, vp2.d, vp.r * vp.c * sizeof(double)),
	   "t·H given gives the same latents bit for bit");
	nv_mat_free(&up), nv_mat_free(&vp), nv_mat_free(&up2), nv_mat_free(&vp2);
	is_int(nv_latents(w, 16, &mh, NULL, &up, &vp), -1, "a 96 × 64 W without L is refused");
	ok(strstr(nv_err(), "taller than wide") != NULL, "saying why: %s", nv_err());
	nv_mat_free(&al), nv_mat_free(&ah), nv_mat_free(&hr);
	nv_mat32_free(&h32);
}

/* the largest entry of up·vpᵀ − uo·voᵀ, relative to the largest of up·vpᵀ */
static double prod_gap(const nv_mat *up, const nv_mat *vp, const nv_mat *uo, const nv_mat *vo)
{
	nv_mat a, b;
	double gap;

	nv_gemm_new(up, 0, vp, 1, &a);
	nv_gemm_new(uo, 0, vo, 1, &b);
	gap = synth_rel_gap(&b, &a);
	nv_mat_free(&a), nv_mat_free(&b);
	return gap;
}

/*
 * W taller than wide: t·L made a block of rows at a time (blocks of 1, 7 and
 * 50 of W's 96 rows) gives latents as good in the metric (Eckart-Young, 1e-8
 * as above) whose product up·vpᵀ is the whole computation's (up, vp) to
 * 1e-10 of its largest entry: only the order of the Gram's f64 sums differs
 */
static void test_tl_blocks(const nv_mat *w, const nv_mat *l, const nv_mat *llt,
			   const nv_mat *up, const nv_mat *vp, double want)
{
	size_t blocks[] = {1, 7, 50};

	for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
		nv_lat_metric ml = { NULL, l, NULL, blocks[b], 0 };
		nv_mat u2, v2;
		double e, gap;
		nv_latents(w, 16, &ml, NULL, &u2, &v2);
		e = lat_err(w, &u2, &v2, llt);
		gap = prod_gap(up, vp, &u2, &v2);
		ok(fabs(e - want) <= 1e-8 * want && gap <= 1e-10,
		   "t·L in blocks of %zu rows: best in the metric (%.8g), the whole's product (%.1e)",
		   blocks[b], e, gap);
		nv_mat_free(&u2), nv_mat_free(&v2);
	}
}

/*
 * a basis that keeps the top 24 pairs gives at ranks 8 and 24 the latents
 * of the whole basis (the same pairs, MRRR on a subset: 1e-10 of the
 * product's largest entry), and refuses rank 25 with a reason
 */
static void test_basis_top(const nv_mat *w)
{
	nv_lat_basis all, top;
	size_t ranks[] = {8, 24};
	nv_mat up, vp;

	is_int(nv_lat_basis_build(w, NULL, 0, NULL, &all), 0, "the whole basis of W");
	is_int(nv_lat_basis_build(w, NULL, 24, NULL, &top), 0, "a basis of its top 24 pairs");
	ok(all.vec.c == 64 && top.vec.c == 24, "pairs kept: %zu and %zu", all.vec.c, top.vec.c);
	for (size_t k = 0; k < 2; k++) {
		nv_mat ua, va;
		double gap;
		nv_latents_from(&all, w, ranks[k], NULL, &ua, &va);
		nv_latents_from(&top, w, ranks[k], NULL, &up, &vp);
		gap = prod_gap(&ua, &va, &up, &vp);
		ok(gap <= 1e-10, "rank %zu from the top pairs: the whole basis's (%.1e)", ranks[k], gap);
		nv_mat_free(&ua), nv_mat_free(&va);
		nv_mat_free(&up), nv_mat_free(&vp);
	}
	is_int(nv_latents_from(&top, w, 25, NULL, &up, &vp), -1, "rank 25 from 24 pairs refused");
	ok(strstr(nv_err(), "rank 25 from a basis of 24") && !up.d && !vp.d, "reason: %s",
	   nv_err());
	nv_lat_basis_free(&all);
	nv_lat_basis_free(&top);
}

/* t = w − a·bᵀ formed whole; a, b (k = 5 columns) drawn at random */
static void minus_case(const nv_mat *w, nv_mat *a, nv_mat *b, nv_mat *t)
{
	nv_mat_zeros(a, w->r, 5);
	nv_mat_zeros(b, w->c, 5);
	for (size_t i = 0; i < a->r * a->c; i++)
		a->d[i] = rng_unif(&rng) - 0.5;
	for (size_t i = 0; i < b->r * b->c; i++)
		b->d[i] = rng_unif(&rng) - 0.5;
	nv_gemm_new(a, 0, b, 1, t);
	for (size_t i = 0; i < t->r * t->c; i++)
		t->d[i] = w->d[i] - t->d[i];
}

/* one nv_latents_minus against nv_latents of the formed t: the same product
 * up·vpᵀ to 1e-10 of its largest entry (only the order of f64 sums in the
 * Gram and in tᵀ·U differs; the top 16 are well apart in these spectra) */
static void minus_vs_whole(const nv_mat *w, const nv_mat *a, const nv_mat *b, const nv_mat *t,
			   const nv_lat_metric *mt, const char *what)
{
	nv_mat up, vp, uo, vo;
	double gap;

	is_int(nv_latents_minus(w, a, b, 16, mt, NULL, &up, &vp), 0, "latents of W − A·Bᵀ: %s",
	       what);
	nv_latents(t, 16, mt, NULL, &uo, &vo);
	gap = prod_gap(&uo, &vo, &up, &vp);
	ok(up.r == w->r && vp.r == w->c && gap <= 1e-10,
	   "  are those of the formed difference (%.1e of the largest entry)", gap);
	nv_mat_free(&up), nv_mat_free(&vp), nv_mat_free(&uo), nv_mat_free(&vo);
}

/* the refusals: shapes that disagree, a caller's t·H, by rows with L alone */
static void minus_refused(const nv_mat *w, const nv_mat *a, const nv_mat *b, const nv_mat *l,
			  const nv_mat *h32t)
{
	nv_mat up = {0}, vp = {0}, bad = { b->r - 1, b->c, b->d };
	nv_lat_metric ml = { NULL, l, NULL, 0, 0 }, mth = { NULL, NULL, h32t, 0, 0 };

	is_int(nv_latents_minus(w, a, &bad, 16, NULL, NULL, &up, &vp), -1,
	       "a B of the wrong height is refused");
	ok(strstr(nv_err(), "shapes disagree") && !up.d && !vp.d, "  saying why: %s", nv_err());
	is_int(nv_latents_minus(w, a, b, 16, &mth, NULL, &up, &vp), -1, "a caller's t·H is refused");
	ok(strstr(nv_err(), "not the caller's") != NULL, "  saying why: %s", nv_err());
	is_int(nv_latents_minus(w, a, b, 16, &ml, NULL, &up, &vp), -1,
	       "by rows with the metric's L alone: refused");
	ok(strstr(nv_err(), "not L alone") && !up.d && !vp.d, "  saying why: %s", nv_err());
}

/*
 * nv_latents_minus: W − A·Bᵀ made a block of rows at a time gives the latents
 * of the formed difference, wide (40 × 64: by H, by the identity; blocks of
 * all, 7 and 1 rows) and tall (96 × 64 by L; blocks of 1, 7 and 50 rows)
 */
static void test_latents_minus(const nv_mat *w, const nv_mat *h, const nv_mat *l)
{
	nv_mat wide = { 40, 64, w->d }, a, b, t, hr;
	nv_mat32 h32;
	size_t blocks[] = {0, 7, 1, 50};
	char what[80];

	nv_mat_copy(&hr, h);
	synth_f32(&hr, &h32);
	minus_case(&wide, &a, &b, &t);
	for (size_t k = 0; k < 3; k++) {
		nv_lat_metric mh = { &h32, NULL, NULL, blocks[k], 0 };
		snprintf(what, sizeof what, blocks[k] ? "40 × 64 by H, blocks of %zu rows" :
			 "40 × 64 by H, the default block (all %zu rows)", blocks[k] ? blocks[k] : 40);
		minus_vs_whole(&wide, &a, &b, &t, &mh, what);
	}
	minus_vs_whole(&wide, &a, &b, &t, NULL, "40 × 64, no metric");
	minus_refused(&wide, &a, &b, l, &t);
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&t);
	minus_case(w, &a, &b, &t);
	for (size_t k = 1; k < 4; k++) {
		nv_lat_metric ml = { NULL, l, NULL, blocks[k], 0 };
		snprintf(what, sizeof what, "96 × 64 by L, blocks of %zu rows", blocks[k]);
		minus_vs_whole(w, &a, &b, &t, &ml, what);
	}
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&t), nv_mat_free(&hr);
	nv_mat32_free(&h32);
}

/* two matrices of one shape with the same bits */
static int same_bits(const nv_mat *a, const nv_mat *b)
{
	return a->r == b->r && a->c == b->c && !memcmp(a->d, b->d, a->r * a->c * sizeof(double));
}

/* latents of W at rank r from bases bk and bh: the same bits */
static int same_latents(const nv_lat_basis *bk, const nv_lat_basis *bh, const nv_mat *w, size_t r)
{
	nv_mat uk, vk, uh, vh;
	int same = nv_latents_from(bk, w, r, NULL, &uk, &vk) == 0 &&
		   nv_latents_from(bh, w, r, NULL, &uh, &vh) == 0 && same_bits(&uk, &uh) &&
		   same_bits(&vk, &vh);

	nv_mat_free(&uk), nv_mat_free(&vk), nv_mat_free(&uh), nv_mat_free(&vh);
	return same;
}

/*
 * a basis asked to hold t·L (nv_lat_metric.hold) holds it (m × n, a tall t
 * only) and gives the bits of one that makes it again for each rank: the
 * same eigenpairs, latents at ranks 8 and 16, at three block sizes; the same
 * for a difference W − A·Bᵀ; a wide t, whose basis is by rows, holds none
 */
static void test_tl_held(const nv_mat *w, const nv_mat *l)
{
	size_t blocks[] = {0, 7, 50};
	nv_mat wide = { 40, 64, w->d }, a, b, t;
	int held = 1, same = 1, minus = 1;

	minus_case(w, &a, &b, &t);
	for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
		nv_lat_metric mk = { NULL, l, NULL, blocks[k], 0 }, mh = mk;
		nv_lat_basis bk = {0}, bh = {0};
		nv_mat uk, vk, uh, vh;
		mh.hold = 1;
		if (nv_lat_basis_build(w, &mk, 16, NULL, &bk) < 0 ||
		    nv_lat_basis_build(w, &mh, 16, NULL, &bh) < 0) {
			ok(0, "bases of W: %s", nv_err());
			nv_lat_basis_free(&bk), nv_lat_basis_free(&bh);
			held = same = minus = 0;
			break;
		}
		held &= bh.tl.d && bh.tl.r == 96 && bh.tl.c == 64 && !bk.tl.d;
		same &= same_bits(&bk.vec, &bh.vec) && !memcmp(bk.sig, bh.sig, 16 * sizeof(double)) &&
			same_latents(&bk, &bh, w, 8) && same_latents(&bk, &bh, w, 16);
		nv_lat_basis_free(&bk), nv_lat_basis_free(&bh);
		minus &= nv_latents_minus(w, &a, &b, 16, &mk, NULL, &uk, &vk) == 0 &&
			 nv_latents_minus(w, &a, &b, 16, &mh, NULL, &uh, &vh) == 0 &&
			 same_bits(&uk, &uh) && same_bits(&vk, &vh);
		nv_mat_free(&uk), nv_mat_free(&vk), nv_mat_free(&uh), nv_mat_free(&vh);
	}
	ok(held, "t·L held (96 × 64) where asked, at three block sizes, and not where not");
	ok(same, "a held t·L: the eigenpairs and the latents at ranks 8 and 16 of one made again");
	ok(minus, "and the latents of W − A·Bᵀ, held or not, the same bits");
	{
		nv_lat_metric mh = { NULL, l, NULL, 0, 1 };
		nv_lat_basis bw;
		ok(nv_lat_basis_build(&wide, &mh, 16, NULL, &bw) == 0 && bw.byrows && !bw.tl.d,
		   "a wide t's basis (by rows) holds no t·L");
		nv_lat_basis_free(&bw);
	}
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&t);
}

static void test_latents(const nv_mat *w, const nv_mat *h)
{
	nv_mat up, vp, wt, l, wl;
	double e, want;

	is_int(nv_latents(w, 16, NULL, NULL, &up, &vp), 0, "latents of W (96 × 64, m > n)");
	e = lat_err(w, &up, &vp, NULL);
	want = tail(w, 16);
	/* Eckart-Young through an eigensolver: 1e-9 relative */
	ok(fabs(e - want) <= 1e-9 * want, "up·vpᵀ is the best rank 16 (%.10g = %.10g)", e, want);
	nv_mat_free(&up), nv_mat_free(&vp);
	nv_mat_zeros(&wt, 64, 96);
	for (size_t i = 0; i < 96; i++)
		for (size_t j = 0; j < 64; j++)
			wt.d[j * 96 + i] = w->d[i * 64 + j];
	nv_latents(&wt, 16, NULL, NULL, &up, &vp);
	e = lat_err(&wt, &up, &vp, NULL);
	ok(fabs(e - want) <= 1e-9 * want, "and of Wᵀ (m < n): the same error");
	nv_mat_free(&up), nv_mat_free(&vp), nv_mat_free(&wt);

	/* the whitened latents are the best rank r in the metric L·Lᵀ */
	nv_mat_copy(&l, h);
	nv_potrf_lower(&l);
	{
		nv_lat_metric ml = { NULL, &l, NULL, 0, 0 };
		nv_latents(w, 16, &ml, NULL, &up, &vp);
	}
	nv_gemm_new(w, 0, &l, 0, &wl);
	{
		nv_mat llt;
		nv_gemm_new(&l, 0, &l, 1, &llt);
		e = lat_err(w, &up, &vp, &llt);
		want = tail(&wl, 16);
		ok(fabs(e - want) <= 1e-8 * want, "whitened latents are best in the metric (%.8g = %.8g)",
		   e, want);
		test_tl_blocks(w, &l, &llt, &up, &vp, want);
		test_wide_metric(w, h, &l, &llt);
		test_latents_minus(w, h, &l);
		test_tl_held(w, &l);
		nv_mat_free(&llt);
	}
	{
		double wu[96], wv[64];
		nv_mat uo, vo, a, b;
		double gap = 0;
		for (int i = 0; i < 96; i++)
			wu[i] = 1 + rng_unif(&rng);
		for (int j = 0; j < 64; j++)
			wv[j] = 1 + rng_unif(&rng);
		is_int(nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, 0.0, 0, 0 }, NULL, &uo, &vo, NULL), 0, "weighted ITQ");
		nv_gemm_new(&up, 0, &vp, 1, &a);
		nv_gemm_new(&uo, 0, &vo, 1, &b);
		for (size_t i = 0; i < a.r * a.c; i++)
			gap = fmax(gap, fabs(a.d[i] - b.d[i]));
		ok(gap < 1e-10, "the ITQ rotation keeps up·vpᵀ (gap %.2g)", gap);
		nv_mat_free(&uo), nv_mat_free(&vo), nv_mat_free(&a), nv_mat_free(&b);
	}
	nv_mat_free(&up), nv_mat_free(&vp), nv_mat_free(&l), nv_mat_free(&wl);
}

static void test_path(void)
{
	nv_mat up, vp;
	nv_path q;
	int signs = 1;

	nv_mat_zeros(&up, 10, 8);
	nv_mat_zeros(&vp, 9, 8);
	for (size_t i = 0; i < 80; i++)
		up.d[i] = rng_normal(&rng);
	for (size_t i = 0; i < 72; i++)
		vp.d[i] = rng_normal(&rng);
	up.d[3] = 0.0;
	is_int(nv_svid_path(&up, &vp, &q), 0, "svid_path");
	for (size_t i = 0; i < 80; i++)
		signs &= q.su.d[i] == (up.d[i] >= 0 ? 1.0 : -1.0);
	for (size_t i = 0; i < 72; i++)
		signs &= q.sv.d[i] == (vp.d[i] >= 0 ? 1.0 : -1.0);
	ok(signs, "signs of the latents (zero is +1)");
	{
		int pos = 1;
		for (int i = 0; i < 10; i++)
			pos &= q.h[i] > 0;
		for (int j = 0; j < 9; j++)
			pos &= q.g[j] > 0;
		for (int k = 0; k < 8; k++)
			pos &= q.l[k] > 0;
		ok(pos, "magnitudes positive");
	}
	{
		/* the spending form: the same path, bit for bit, and |up|, |vp| left */
		nv_mat ua = {0}, va = {0};
		nv_path t;
		int same, absd = 1;
		nv_mat_copy(&ua, &up);
		nv_mat_copy(&va, &vp);
		is_int(nv_svid_path_take(&ua, &va, &t), 0, "svid_path_take");
		same = !memcmp(t.su.d, q.su.d, 80) && !memcmp(t.sv.d, q.sv.d, 72) &&
		       !memcmp(t.h, q.h, 10 * sizeof(double)) &&
		       !memcmp(t.g, q.g, 9 * sizeof(double)) && !memcmp(t.l, q.l, 8 * sizeof(double));
		ok(same, "svid_path_take: the path of svid_path, bit for bit");
		for (size_t i = 0; i < 80; i++)
			absd &= ua.d[i] == fabs(up.d[i]);
		for (size_t i = 0; i < 72; i++)
			absd &= va.d[i] == fabs(vp.d[i]);
		ok(absd, "svid_path_take leaves |up| and |vp| in its inputs");
		nv_path_free(&t);
		nv_mat_free(&ua), nv_mat_free(&va);
	}
	nv_path_free(&q);
	nv_mat_free(&up), nv_mat_free(&vp);
}

/* --sel only measures: the same bytes, and its error is the direct
 * tr(E H Eᵀ)/tr(W H Wᵀ) of the dequantized payload */
static void test_dual_sel(const nv_mat *w, const nv_mat *h, const nv_enc_result *plain)
{
	nv_enc_opts o;
	nv_enc_result r;
	nv_mat e = { 0 };
	nv_mat hr;
	nv_mat32 h32, e32 = { 8, 8, NULL, NULL };
	float *deq = malloc(96 * 64 * sizeof(float));
	double ehe = 0, whw = 0;

	nv_enc_opts_default(&o);
	o.method = NV_METHOD_DUAL_SVID;
	o.bpw = 2.0;
	/* the SEL Gram as a file holds it: f32, and h rounded to it to measure */
	nv_mat_copy(&hr, h);
	synth_f32(&hr, &h32);
	h = &hr;
	is_int(nv_encode(w, NULL, &h32, &o, &r), 0, "dual-svid with a SEL Gram");
	ok(r.len == plain->len && !memcmp(r.bytes, plain->bytes, r.len),
	   "the SEL Gram leaves the bytes as they were");
	blr_dequantize(r.bytes, r.len, deq);
	nv_mat_zeros(&e, 96, 64);
	for (size_t i = 0; i < 96 * 64; i++)
		e.d[i] = w->d[i] - deq[i];
	nv_herr_direct(&e, h, &ehe);
	nv_herr_direct(w, h, &whw);
	/* the dequantizer rounds in f32, the encoder measures the f64 model */
	near(r.sel_err, sqrt(ehe / whw), 1e-5, "reported sel = the payload's (%.4f)", r.sel_err);
	ok(fabs(r.frob - plain->frob) == 0, "frob unchanged");
	ok(!strncmp(r.line, plain->line, strlen(plain->line)) &&
	   !strncmp(r.line + strlen(plain->line), " sel 0.", 7), "line: %s", r.line);
	nv_enc_result_free(&r);
	nv_mat_free(&e);
	e32.d = calloc(64, sizeof(float));
	is_int(nv_encode(w, NULL, &e32, &o, &r), -1, "a SEL Gram of another width is refused");
	ok(strstr(nv_err(), "64 columns but the SEL Gram is 8x8") != NULL, "reason: %s", nv_err());
	nv_mat32_free(&e32);
	nv_mat32_free(&h32);
	nv_mat_free(&hr);
	free(deq);
}

static void test_dual(const nv_mat *w, const nv_mat *h)
{
	nv_enc_opts o;
	nv_enc_result r1, r2;
	float *deq = malloc(96 * 64 * sizeof(float));
	double e = 0, t = 0;

	nv_enc_opts_default(&o);
	o.method = NV_METHOD_DUAL_SVID;
	o.bpw = 2.0;
	is_int(nv_encode(w, NULL, NULL, &o, &r1), 0, "dual-svid at 2 bpw");
	blr_dequantize(r1.bytes, r1.len, deq);
	for (size_t i = 0; i < 96 * 64; i++) {
		e += (w->d[i] - deq[i]) * (w->d[i] - deq[i]);
		t += w->d[i] * w->d[i];
	}
	/* the reported frob is of the stored model; the dequantizer rounds in f32 */
	near(r1.frob, sqrt(e / t), 1e-5, "reported frob = the payload's (%.4f)", r1.frob);
	is_int(nv_encode(w, NULL, NULL, &o, &r2), 0, "again");
	ok(r1.len == r2.len && !memcmp(r1.bytes, r2.bytes, r1.len), "deterministic bytes");
	ok(isnan(r1.sel_err), "no SEL Gram, no SEL error");
	nv_enc_result_free(&r2);
	test_dual_sel(w, h, &r1);
	o.paths = 1;
	is_int(nv_encode(w, NULL, NULL, &o, &r2), 0, "dual-svid forced to one path");
	ok(r2.paths == 1 && !strncmp(r2.line, "P1 r", 4), "line: %s", r2.line);
	nv_enc_result_free(&r1), nv_enc_result_free(&r2);
	free(deq);
}

/* J(R) = Σ_i w_i² |x_i·R|₁ for x the row-normalised [up; vp], from uo = up·R, vo = vp·R */
static double itq_objective(const nv_mat *up, const nv_mat *vp, const nv_mat *uo,
			    const nv_mat *vo, const double *wu, const double *wv)
{
	double j = 0;

	for (size_t i = 0; i < up->r + vp->r; i++) {
		const nv_mat *a = i < up->r ? up : vp, *b = i < up->r ? uo : vo;
		size_t row = i < up->r ? i : i - up->r;
		double w = i < up->r ? wu[row] : wv[row], nrm = 0, l1 = 0;
		for (size_t k = 0; k < a->c; k++) {
			nrm += nv_row(a, row)[k] * nv_row(a, row)[k];
			l1 += fabs(nv_row(b, row)[k]);
		}
		j += w * w * l1 / sqrt(nrm);
	}
	return j;
}

/* the ITQ tests' inputs: latents 40 × 12 and 30 × 12, row weights in [1, 2) */
static void itq_case(nv_mat *up, nv_mat *vp, double wu[40], double wv[30])
{
	nv_mat_zeros(up, 40, 12);
	nv_mat_zeros(vp, 30, 12);
	for (size_t i = 0; i < 40 * 12; i++)
		up->d[i] = rng_normal(&rng);
	for (size_t i = 0; i < 30 * 12; i++)
		vp->d[i] = rng_normal(&rng);
	for (int i = 0; i < 40; i++)
		wu[i] = 1 + rng_unif(&rng);
	for (int j = 0; j < 30; j++)
		wv[j] = 1 + rng_unif(&rng);
}

/*
 * the ITQ stop: its objective never falls from step to step (each half-step
 * maximises it), tol 0 stops only at a fixed point (the bits of every step
 * run), tol > 0 stops no later, and a stopped run is the run of that many
 * steps
 */
static void test_itq_stop(void)
{
	nv_mat up, vp, uo, vo, u2, v2;
	double wu[40], wv[30], prev = 0;
	int used0 = 0, used = 0, rise = 1;

	itq_case(&up, &vp, wu, wv);
	for (int k = 1; k <= 12; k++) {
		double jk;
		nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ k, -1.0, 0, 0 }, NULL, &uo, &vo, &used);
		jk = itq_objective(&up, &vp, &uo, &vo, wu, wv);
		rise &= used == k && jk >= prev * (1 - 1e-12);
		prev = jk;
		nv_mat_free(&uo), nv_mat_free(&vo);
	}
	ok(rise, "the ITQ objective never falls over 12 steps (%.6g at the last)", prev);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, -1.0, 0, 0 }, NULL, &uo, &vo, &used);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, 0.0, 0, 0 }, NULL, &u2, &v2, &used0);
	ok(used == 50 && used0 < 50, "tol < 0 runs all 50 steps, tol 0 stopped at a fixed point (%d)",
	   used0);
	ok(same_bits(&uo, &u2) && same_bits(&vo, &v2), "and they give the same bits");
	nv_mat_free(&u2), nv_mat_free(&v2);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, 0.005, 0, 0 }, NULL, &u2, &v2, &used);
	ok(used >= 2 && used <= used0, "tol 0.005 stops no later (%d steps)", used);
	nv_mat_free(&uo), nv_mat_free(&vo);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ used, -1.0, 0, 0 }, NULL, &uo, &vo, NULL);
	ok(same_bits(&uo, &u2) && same_bits(&vo, &v2), "and gives the bits of %d steps run", used);
	nv_mat_free(&uo), nv_mat_free(&vo), nv_mat_free(&u2), nv_mat_free(&v2);
	{
		/* the two halves: the rotation from spent latents, then applied */
		nv_mat us = {0}, vs = {0}, rot = {0};
		int spent, used2 = 0;
		nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, 0.005, 0, 0 }, NULL, &u2, &v2, &used);
		nv_mat_copy(&us, &up);
		nv_mat_copy(&vs, &vp);
		is_int(nv_itq_rotation_spend(&us, &vs, wu, wv, &(nv_itq_cfg){ 50, 0.005, 0, 0 }, NULL, &rot, &used2), 0,
		       "ITQ rotation from spent latents");
		spent = us.d == NULL && vs.d == NULL;
		nv_mat_copy(&uo, &up);
		nv_mat_copy(&vo, &vp);
		nv_itq_apply_in(&uo, &vo, &rot, 0, NULL);
		ok(spent && used2 == used && same_bits(&uo, &u2) && same_bits(&vo, &v2),
		   "its latents freed, its %d steps and rotated latents nv_itq_weighted's, bit for bit",
		   used2);
		nv_mat_free(&rot);
		nv_mat_free(&uo), nv_mat_free(&vo), nv_mat_free(&u2), nv_mat_free(&v2);
	}
	nv_mat_free(&up), nv_mat_free(&vp);
}

/* the ITQ of before, whole: x = row-normalised [up; vp], R ← polar(xᵀ·(sgn(x·R)∘w2))
 * for steps steps from R = I; returns up·R, vp·R (the reference for the blocks)
 * and, with changes, the number of signs each step changed from the last
 * (from all negative before the first) */
static void itq_whole(const nv_mat *up, const nv_mat *vp, const double *wu, const double *wv,
		      int steps, nv_mat *uo, nv_mat *vo, size_t *changes)
{
	static signed char last[256 * 16];
	size_t m = up->r, nn = up->r + vp->r, r = up->c;
	nv_mat x, rot, xr, mm, nr;
	double w2[256], mean = 0;

	assert(nn <= sizeof w2 / sizeof w2[0] && nn * r <= sizeof last);
	nv_mat_zeros(&x, nn, r);
	memcpy(x.d, up->d, m * r * sizeof(double));
	memcpy(x.d + m * r, vp->d, vp->r * r * sizeof(double));
	for (size_t i = 0; i < nn; i++) {
		double n2 = 0;
		for (size_t k = 0; k < r; k++)
			n2 += x.d[i * r + k] * x.d[i * r + k];
		for (size_t k = 0; k < r; k++)
			x.d[i * r + k] /= sqrt(n2);
		w2[i] = i < m ? wu[i] * wu[i] : wv[i - m] * wv[i - m];
		mean += w2[i] / (double)nn;
	}
	nv_mat_eye(&rot, r);
	memset(last, -1, sizeof last);
	for (int t = 0; t < steps; t++) {
		nv_gemm_new(&x, 0, &rot, 0, &xr);
		if (changes)
			changes[t] = 0;
		for (size_t i = 0; i < nn; i++)
			for (size_t k = 0; k < r; k++) {
				signed char sg = xr.d[i * r + k] >= 0 ? 1 : -1;
				if (changes)
					changes[t] += sg != last[i * r + k];
				last[i * r + k] = sg;
				xr.d[i * r + k] = sg * (w2[i] / mean);
			}
		nv_gemm_new(&x, 1, &xr, 0, &mm);
		nv_polar(&mm, &nr);
		nv_mat_free(&rot), nv_mat_free(&xr), nv_mat_free(&mm);
		rot = nr;
	}
	nv_gemm_new(up, 0, &rot, 0, uo);
	nv_gemm_new(vp, 0, &rot, 0, vo);
	nv_mat_free(&x), nv_mat_free(&rot);
}

/* the largest |a − b| over the largest |b|, and whether a and b have the same signs */
static double rel_diff(const nv_mat *a, const nv_mat *b, int *same_signs)
{
	double d = 0, s = 0;

	for (size_t i = 0; i < a->r * a->c; i++) {
		d = fmax(d, fabs(a->d[i] - b->d[i]));
		s = fmax(s, fabs(b->d[i]));
		*same_signs &= (a->d[i] >= 0) == (b->d[i] >= 0);
	}
	return d / s;
}

/*
 * ITQ's products a block of rows at a time (x·R and xᵀ·B never whole), and
 * xᵀ·B after the first step moved by the signs that changed alone: for
 * blocks of 1, 7, 40 (up's rows: the blocks meet the seam of up and vp), 64
 * and more than all rows, 12 steps give the rotated latents of the whole
 * computation above, to 1e-12 of their largest entry (only the order of the
 * f64 sums differs: ~1e-16 a step, grown by 12 polar factors), with every
 * sign the same
 */
static void test_itq_blocks(void)
{
	nv_mat up, vp, uo, vo, ur, vr;
	double wu[40], wv[30];
	size_t blocks[] = {1, 7, 40, 64, 1000};

	itq_case(&up, &vp, wu, wv);
	itq_whole(&up, &vp, wu, wv, 12, &ur, &vr, NULL);
	for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
		int same = 1, used = 0;
		double du, dv;
		nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 12, -1.0, blocks[b], 0 }, NULL, &uo, &vo, &used);
		du = rel_diff(&uo, &ur, &same);
		dv = rel_diff(&vo, &vr, &same);
		ok(used == 12 && du < 1e-12 && dv < 1e-12 && same,
		   "ITQ in blocks of %zu rows: the whole run's latents (%.1e, %.1e), the same signs",
		   blocks[b], du, dv);
		nv_mat_free(&uo), nv_mat_free(&vo);
	}
	nv_mat_free(&ur), nv_mat_free(&vr), nv_mat_free(&up), nv_mat_free(&vp);
}

/*
 * the stop counts the signs a step changed, 64 to a word of bits, whatever
 * the row blocks (blocks of 1, 7 and 40 rows start mid-word): for a
 * tolerance set from the reference's counts, each block size stops at the
 * first step after the first whose count is at most tol·(entries), as the
 * whole computation above counts them
 */
static void test_itq_counts(void)
{
	nv_mat up, vp, ur, vr, uo, vo;
	double wu[40], wv[30];
	size_t ch[12], blocks[] = {1, 7, 40, 64, 1000}, nn, cells;
	int all = 1, tried = 0;

	itq_case(&up, &vp, wu, wv);
	nn = up.r + vp.r;
	cells = nn * up.c;
	itq_whole(&up, &vp, wu, wv, 12, &ur, &vr, ch);
	for (int t = 1; t < 12; t++) {
		double tol = ((double)ch[t] + 0.5) / (double)cells;
		int want = 12;
		for (int k = 1; k < 12; k++)
			if ((double)ch[k] <= tol * (double)cells) {
				want = k + 1;
				break;
			}
		for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
			int used = 0;
			nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 12, tol, blocks[b], 0 }, NULL,
					&uo, &vo, &used);
			all &= used == want;
			nv_mat_free(&uo), nv_mat_free(&vo);
			tried++;
		}
	}
	ok(all && ch[0] > 0 && ch[1] > 0, "the stop's sign counts are the reference's (%d runs; "
	   "%zu, %zu, %zu changed in steps 1-3)", tried, ch[0], ch[1], ch[2]);
	nv_mat_free(&ur), nv_mat_free(&vr), nv_mat_free(&up), nv_mat_free(&vp);
}

/*
 * the ITQ in f32 (nv_itq_cfg.f32): x's rows are unit vectors and R is
 * orthogonal, so each step's products are good to a few f32 ulps (~1e-7
 * relative); where no sign falls that near zero the run is the f64 run's to
 * that, grown through the polar factors of 12 steps: 1e-5 allows a
 * hundredfold growth.  R stays orthogonal (its polar factor is f64), the
 * objective never falls beyond f32's rounding, the row blocks move only the
 * f32 sums, the stop at a fixed point gives the bits of every step, and the
 * two halves give nv_itq_weighted's bits with the latents freed
 */
static void test_itq_f32(void)
{
	nv_mat up, vp, u64, v64, uo, vo, u2, v2, a, b;
	double wu[40], wv[30], prev = 0, gap = 0, du, dv;
	size_t blocks[] = {1, 7, 1000};
	int same = 1, rise = 1, used = 0, used0 = 0;

	itq_case(&up, &vp, wu, wv);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 12, -1.0, 0, 0 }, NULL, &u64, &v64, NULL);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 12, -1.0, 0, 1 }, NULL, &uo, &vo, &used);
	du = rel_diff(&uo, &u64, &same);
	dv = rel_diff(&vo, &v64, &same);
	ok(used == 12 && du < 1e-5 && dv < 1e-5 && same,
	   "ITQ in f32: the f64 run's latents (%.1e, %.1e), the same signs", du, dv);
	nv_gemm_new(&up, 0, &vp, 1, &a);
	nv_gemm_new(&uo, 0, &vo, 1, &b);
	for (size_t i = 0; i < a.r * a.c; i++)
		gap = fmax(gap, fabs(a.d[i] - b.d[i]));
	ok(gap < 1e-10, "its rotation keeps up·vpᵀ (gap %.2g)", gap);
	nv_mat_free(&a), nv_mat_free(&b), nv_mat_free(&uo), nv_mat_free(&vo);
	for (int k = 1; k <= 12; k++) {
		double jk;
		nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ k, -1.0, 0, 1 }, NULL, &uo, &vo, NULL);
		jk = itq_objective(&up, &vp, &uo, &vo, wu, wv);
		rise &= jk >= prev * (1 - 1e-6);
		prev = jk;
		nv_mat_free(&uo), nv_mat_free(&vo);
	}
	ok(rise, "its objective never falls over 12 steps beyond 1e-6 (%.6g at the last)", prev);
	for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
		same = 1;
		nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 12, -1.0, blocks[k], 1 }, NULL, &uo,
				&vo, NULL);
		du = rel_diff(&uo, &u64, &same);
		dv = rel_diff(&vo, &v64, &same);
		ok(du < 1e-5 && dv < 1e-5 && same, "in f32 by blocks of %zu rows: the same (%.1e, %.1e)",
		   blocks[k], du, dv);
		nv_mat_free(&uo), nv_mat_free(&vo);
	}
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, -1.0, 0, 1 }, NULL, &uo, &vo, NULL);
	nv_itq_weighted(&up, &vp, wu, wv, &(nv_itq_cfg){ 50, 0.0, 0, 1 }, NULL, &u2, &v2, &used0);
	ok(used0 < 50 && same_bits(&uo, &u2) && same_bits(&vo, &v2),
	   "in f32 tol 0 stops at a fixed point (%d steps) with the bits of 50", used0);
	nv_mat_free(&u2), nv_mat_free(&v2);
	{
		nv_mat us = {0}, vs = {0}, rot = {0};
		nv_mat_copy(&us, &up);
		nv_mat_copy(&vs, &vp);
		nv_itq_rotation_spend(&us, &vs, wu, wv, &(nv_itq_cfg){ 50, -1.0, 0, 1 }, NULL, &rot, NULL);
		nv_mat_copy(&u2, &up);
		nv_mat_copy(&v2, &vp);
		nv_itq_apply_in(&u2, &v2, &rot, 0, NULL);
		ok(us.d == NULL && vs.d == NULL && same_bits(&uo, &u2) && same_bits(&vo, &v2),
		   "in f32 the two halves: latents freed, nv_itq_weighted's bits");
		nv_mat_free(&rot), nv_mat_free(&u2), nv_mat_free(&v2);
	}
	nv_mat_free(&uo), nv_mat_free(&vo), nv_mat_free(&u64), nv_mat_free(&v64);
	nv_mat_free(&up), nv_mat_free(&vp);
}

/* a unit-norm row x with x·rot_c = t (rot_c a column of rot, r × r
 * orthogonal): a random vector less its rot_c part, scaled to √(1 − t²) */
static void row_at(const nv_mat *rot, size_t c, double t, double *x)
{
	size_t r = rot->r;
	double pc = 0.0, nn = 0.0;

	for (size_t u = 0; u < r; u++)
		x[u] = rng_normal(&rng);
	for (size_t u = 0; u < r; u++)
		pc += x[u] * rot->d[u * r + c];
	for (size_t u = 0; u < r; u++) {
		x[u] -= pc * rot->d[u * r + c];
		nn += x[u] * x[u];
	}
	for (size_t u = 0; u < r; u++)
		x[u] = x[u] * sqrt((1.0 - t * t) / nn) + t * rot->d[u * r + c];
}

/*
 * nv_itq_signs32: the signs of x·rot by sgemm, taken again in f64 within
 * γ_(r+2) of 0.  64 rows of unit norm, 24 of them with one entry of x·rot
 * at ±1e-9 (far inside the f32 product's error, ~1e-6 here): every sign is
 * the f64 product's, those 24 entries at least were taken again, and the
 * f32 product alone has some of their signs wrong (so that the test would
 * see a slack too small)
 */
static void test_itq_signs32(void)
{
	size_t r = 48, rows = 64, redo = 0, wrong32 = 0, diff = 0;
	nv_mat a, rot, x, ref;
	float rf[48 * 48], xf[2 * 64 * 48];
	double o[64 * 48];

	nv_mat_zeros(&a, r, r);
	for (size_t i = 0; i < r * r; i++)
		a.d[i] = rng_normal(&rng);
	nv_polar(&a, &rot);
	nv_mat_zeros(&x, rows, r);
	for (size_t i = 0; i < rows; i++)
		row_at(&rot, (i * 7) % r, i < 24 ? (i % 2 ? 1e-9 : -1e-9) : 0.3, nv_row(&x, i));
	nv_gemm_new(&x, 0, &rot, 0, &ref);
	nv_f32_round(rot.d, r * r, rf);
	nv_itq_signs32(&x, &rot, rf, xf, o, &redo);
	for (size_t e = 0; e < rows * r; e++) {
		diff += (o[e] >= 0.0) != (ref.d[e] >= 0.0);
		if (e / r < 24 && e % r == ((e / r) * 7) % r)
			wrong32 += (xf[rows * r + e] >= 0.0f) != (ref.d[e] >= 0.0);
	}
	ok(diff == 0 && redo >= 24 && redo < 48 && wrong32 > 0,
	   "ITQ signs by sgemm: the f64 product's, %zu entries again in f64 (f32 alone: %zu of 24 wrong)",
	   redo, wrong32);
	nv_mat_free(&a), nv_mat_free(&rot), nv_mat_free(&x), nv_mat_free(&ref);
}

int main(void)
{
	nv_mat w, h;
	nv_mat32 h32;

	nv_set_threads(1);
	synth(&w, &h);
	synth_f32(&h, &h32); /* a Gram's values: the f32 metrics then hold the same numbers */
	nv_mat32_free(&h32);
	test_rank1();
	test_latents(&w, &h);
	test_basis_top(&w);
	test_path();
	test_itq_stop();
	test_itq_blocks();
	test_itq_signs32();
	test_itq_counts();
	test_itq_f32();
	test_dual(&w, &h);
	nv_mat_free(&w);
	nv_mat_free(&h);
	return done_testing();
}
