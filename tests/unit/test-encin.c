/* test-encin.c - an encode's inputs read again after their first read: the
 * SEL Gram for each measure, the SEL moments for the transport objective (TAP) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blr.h"
#include "encin.h"
#include "err.h"
#include "nvg.h"
#include "nvgg.h"
#include "tap.h"

enum { M = 16, N = 8, COUNT = 100 };

static char dir[256];
static tap_rng rng = {11};

/* dir/name, in one of 16 buffers used in turn */
static const char *tmp(const char *name)
{
	static char buf[16][512];
	static int k;

	k = (k + 1) % 16;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* an n × n moment X·Yᵀ/T of random rows (symmetric when cross is 0) into g */
static void moment(float *g, int cross)
{
	double x[N][24], y[N][24];

	for (size_t i = 0; i < N; i++)
		for (size_t t = 0; t < 24; t++) {
			x[i][t] = rng_normal(&rng);
			y[i][t] = cross ? x[i][t] + 0.3 * rng_normal(&rng) : x[i][t];
		}
	for (size_t i = 0; i < N; i++)
		for (size_t j = 0; j < N; j++) {
			double s = 0;
			for (size_t t = 0; t < 24; t++)
				s += x[i][t] * y[j][t];
			g[i * N + j] = (float)(s / 24);
		}
}

static int write_moment(const char *path, const float *g, uint64_t count, int cross)
{
	nvgg gg = { N, count, (float *)g, NULL, cross };

	return nvgg_write(path, &gg);
}

static void write_w(const char *path, float *w)
{
	FILE *f = fopen(path, "wb");

	for (size_t i = 0; i < M * N; i++)
		w[i] = (float)rng_normal(&rng);
	fwrite(w, sizeof(float), M * N, f);
	fclose(f);
}

/* the matrix and the SEL Gram, the latter read later */
static void spec_of(nv_encin_spec *s)
{
	s->w = tmp("w.raw");
	s->sel = tmp("sel.gram");
	s->m = M;
	s->n = N;
	s->sel_later = 1;
}

/*
 * with sel_later the SEL Gram is validated at the load and not held; each
 * later read gives its values, and one of a file that changed since (a
 * value, the count) or that is gone is refused with the file named
 */
static void test_sel_later(const float *g)
{
	nv_encin_spec s = { 0 };
	nv_encin in;
	nv_mat32 h = { 0 };
	float g2[N * N];

	spec_of(&s);
	is_int(nv_encin_load(&s, NULL, &in, NULL), 0, "load with the SEL Gram read later");
	ok(!in.hsel.d && in.sel_src.path && in.sel_count == COUNT, "not held, its count %llu noted",
	   (unsigned long long)in.sel_count);
	is_int(nv_encin_sel_load(&in.sel_src, &h), 0, "read again");
	ok(h.r == N && h.c == N && !memcmp(h.d, g, sizeof(g2)), "the values the file holds");
	nv_mat32_free(&h);
	memcpy(g2, g, sizeof(g2));
	g2[1] = g2[N] = g2[1] * 1.5f;
	write_moment(s.sel, g2, COUNT, 0);
	is_int(nv_encin_sel_load(&in.sel_src, &h), -1, "a value changed since: refused");
	ok(strstr(nv_err(), "changed since") && strstr(nv_err(), "sel.gram"), "%s", nv_err());
	write_moment(s.sel, g, COUNT + 1, 0);
	is_int(nv_encin_sel_load(&in.sel_src, &h), -1, "the count changed since: refused");
	ok(strstr(nv_err(), "count 101") != NULL, "%s", nv_err());
	unlink(s.sel);
	is_int(nv_encin_sel_load(&in.sel_src, &h), -1, "the file gone: refused");
	ok(strstr(nv_err(), "sel.gram") != NULL, "%s", nv_err());
	ok(h.d == NULL, "and nothing is handed back");
	write_moment(s.sel, g, COUNT, 0);
	nv_encin_free(&in);
	s.sel_later = 0;
	is_int(nv_encin_load(&s, NULL, &in, NULL), 0, "load with the SEL Gram held");
	ok(in.hsel.d && !memcmp(in.hsel.d, g, sizeof(g2)) && in.sel_count == COUNT, "held, as read");
	nv_encin_free(&in);
}

/* tr(A·X·Bᵀ) for A, B (M × N) and X (N × N) in f64 loops */
static double tr3(const double *a, const float *x, const double *b)
{
	double s = 0;

	for (size_t i = 0; i < M; i++)
		for (size_t j = 0; j < N; j++)
			for (size_t k = 0; k < N; k++)
				s += a[i * N + j] * (double)x[j * N + k] * b[i * N + k];
	return s;
}

/*
 * the transport objective E‖Ŵx_q − W x_src‖² / E‖W x_src‖², its three
 * moments read one at a time after the payload is made, against the same
 * formula in f64 loops on the files' values (f32 products: 1e-12); a SEL
 * moment of another count is refused at the load, before any encode
 */
static void test_transport_err(const float *w, const float *g)
{
	float c[N * N], sm[N * N], wq[M * N];
	double wd[M * N], wh[M * N], want, got;
	nv_encin_spec s = { 0 };
	nv_encin in;
	nv_enc_opts o;
	nv_enc_result res;

	moment(c, 1);
	moment(sm, 0);
	write_moment(tmp("sel.cross"), c, COUNT, 1);
	write_moment(tmp("src.gram"), sm, COUNT, 0);
	spec_of(&s);
	s.cross_sel = tmp("sel.cross");
	s.src_sel = tmp("src.gram");
	is_int(nv_encin_load(&s, NULL, &in, NULL), 0, "load with the SEL moments");
	nv_enc_opts_default(&o);
	o.method = NV_METHOD_DUAL_SVID;
	o.bpw = 4.0;
	is_int(nv_encode(&in.w, NULL, NULL, &o, &res), 0, "a payload to measure");
	is_int(nv_encin_transport_err(&in, res.bytes, res.len, &got), 0, "transport_err");
	blr_dequantize(res.bytes, res.len, wq);
	for (size_t i = 0; i < M * N; i++) {
		wd[i] = w[i];
		wh[i] = wq[i];
	}
	/* E[(W x_src)ᵀ Ŵ x_q] = tr(Ŵ C Wᵀ), C = E[x_q x_srcᵀ] */
	want = (tr3(wh, g, wh) - 2 * tr3(wh, c, wd) + tr3(wd, sm, wd)) / tr3(wd, sm, wd);
	near(got, want, 1e-12 * fabs(want) + 1e-12, "transport_err: the formula on the files' values");
	nv_enc_result_free(&res);
	nv_encin_free(&in);
	write_moment(tmp("src.gram"), sm, COUNT + 5, 0);
	is_int(nv_encin_load(&s, NULL, &in, NULL), -1, "a SEL source Gram of another count: refused");
	ok(strstr(nv_err(), "105 positions") && strstr(nv_err(), "src.gram"), "%s", nv_err());
	nv_encin_free(&in);
}

int main(void)
{
	float w[M * N], g[N * N];

	snprintf(dir, sizeof(dir), "%s/test-encin.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	write_w(tmp("w.raw"), w);
	moment(g, 0);
	write_moment(tmp("sel.gram"), g, COUNT, 0);
	test_sel_later(g);
	test_transport_err(w, g);
	unlink(tmp("w.raw"));
	unlink(tmp("sel.gram"));
	unlink(tmp("sel.cross"));
	unlink(tmp("src.gram"));
	rmdir(dir);
	return done_testing();
}
