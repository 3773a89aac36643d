/* test-hctx.c - the per-input context and its file (TAP) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "err.h"
#include "fileio.h"
#include "hctx.h"
#include "le.h"
#include "synth.h"
#include "tap.h"

/* the same damped Gram: its f32 entries off the diagonal and its f64 diagonal */
static int same_hf(const nv_hctx *a, const nv_hctx *b)
{
	size_t n = a->n;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			if (i != j && a->hf.d[i * n + j] != b->hf.d[i * n + j])
				return 0;
	return !memcmp(a->hf.diag, b->hf.diag, n * sizeof(double));
}

static void test_uc(const nv_mat *h)
{
	nv_hctx hc;
	size_t n = h->r;
	nv_mat hp, utu, id, ucf;
	double gap = 0, tr = 0, dgap = 0;
	int upper = 1, desc = 1;

	is_int(nv_hctx_build(h->d, n, 1e-2, &hc), 0, "context of the synthetic Gram (rho 1e-2)");
	for (size_t i = 0; i < n; i++)
		tr += h->d[i * n + i];
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			dgap = fmax(dgap, fabs(nv_mat32_at(&hc.hf, i, j) -
					       (h->d[i * n + j] + (i == j ? 1e-2 * (tr / (double)n) : 0.0))));
	ok(dgap == 0.0, "hf = G + rho·(tr G/n)·I exactly");
	nv_mat_zeros(&hp, n, n);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			hp.d[i * n + j] = nv_mat32_at(&hc.hf, hc.perm[i], hc.perm[j]);
	nv_hctx_uc_full(&hc, &ucf);
	nv_gemm_new(&ucf, 1, &ucf, 0, &utu);
	nv_gemm_new(&utu, 0, &hp, 0, &id);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++)
			gap = fmax(gap, fabs(id.d[i * n + j] - (i == j)));
		for (size_t j = 0; j < n; j++)
			upper &= nv_hctx_uc_at(&hc, i, j) == ucf.d[i * n + j] &&
				 (j >= i || ucf.d[i * n + j] == 0.0);
		if (i)
			desc &= hp.d[i * n + i] <= hp.d[(i - 1) * n + i - 1];
	}
	/* the seed's tolerance: the Gram spans 400² in scale */
	ok(gap < 1e-6, "Ucᵀ·Uc·Hp = I (max gap %.2g)", gap);
	ok(upper, "Uc packed by rows: nv_hctx_uc_at is its widening, 0 below the diagonal");
	ok(desc, "act order: permuted diagonal descending");
	{
		nv_mat llt, hff;
		double lg = 0;
		nv_gemm_new(&hc.l, 0, &hc.l, 1, &llt);
		nv_mat32_widen(&hc.hf, &hff);
		for (size_t i = 0; i < n * n; i++)
			lg = fmax(lg, fabs(llt.d[i] - hff.d[i]) / hff.d[0]);
		ok(lg < 1e-12, "L·Lᵀ = hf (relative gap %.2g)", lg);
		nv_mat_free(&llt), nv_mat_free(&hff);
	}
	ok(fabs(hc.sqd[5] - sqrt(hc.hf.diag[5])) == 0.0, "sqd = √diag(hf)");
	nv_mat_free(&hp), nv_mat_free(&utu), nv_mat_free(&id), nv_mat_free(&ucf);
	nv_hctx_free(&hc);
}

/* the same bytes through a file: kept whole, or l checked and not kept */
static void test_read(uint8_t *buf, size_t len, const nv_hctx *hc)
{
	char path[] = "/tmp/test-hctx.XXXXXX";
	int fd = mkstemp(path);
	size_t n = hc->n, l0 = 32 + 8 * (n * (n + 1) / 2); /* where l starts */
	nv_hctx back;
	uint8_t keep[8];

	ok(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0, "a context file");
	is_int(nv_hctx_read(path, 1, &back), 0, "read with l");
	ok(back.l.d && !memcmp(back.l.d, hc->l.d, n * n * 8) &&
		   !memcmp(back.uc, hc->uc, n * (n + 1) / 2 * 8),
	   "the parse's fields");
	nv_hctx_free(&back);
	is_int(nv_hctx_read(path, 0, &back), 0, "read without l");
	ok(back.l.d == NULL && same_hf(&back, hc) &&
		   !memcmp(back.uc, hc->uc, n * (n + 1) / 2 * 8) && !memcmp(back.perm, hc->perm, n * 4),
	   "l not kept, the rest as parsed");
	nv_hctx_free(&back);
	/* a CRC-valid l with a wild diagonal: refused even when not kept */
	memcpy(keep, buf + l0, 8);
	put_f64(buf + l0, 1e300);
	put_u32(buf + len - 4, nv_crc32(buf, len - 4));
	fd = open(path, O_WRONLY | O_TRUNC);
	ok(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0, "l(0,0) made 1e300");
	is_int(nv_hctx_read(path, 0, &back), -1, "refused without l kept");
	ok(strstr(nv_err(), "field l") != NULL, "reason: %s", nv_err());
	buf[200] ^= 1;
	fd = open(path, O_WRONLY | O_TRUNC);
	ok(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0, "and a bit flipped");
	is_int(nv_hctx_read(path, 0, &back), -1, "the CRC is checked first");
	ok(strstr(nv_err(), "crc") != NULL, "reason: %s", nv_err());
	buf[200] ^= 1;
	memcpy(buf + l0, keep, 8);
	put_u32(buf + len - 4, nv_crc32(buf, len - 4));
	unlink(path);
}

/* rows [b0, b1) of two contexts' uc the same bits */
static int same_strip(const nv_hctx *a, const nv_hctx *b, size_t b0, size_t b1)
{
	double *x = nv_hctx_uc_rows(a, b0, b1), *y = nv_hctx_uc_rows(b, b0, b1);
	int same = x && y && !memcmp(x, y, (b1 - b0) * (a->n - b0) * sizeof(double));

	free(x);
	free(y);
	return same;
}

/*
 * nv_hctx_read_lazy: uc not held, its strips read again from the file the
 * bits of the held uc's; a file whose uc changed after the read gives a
 * strip that is refused with a reason, not wrong numbers
 */
static void test_lazy(uint8_t *buf, size_t len, const nv_hctx *hc)
{
	char path[] = "/tmp/test-hctx-lazy.XXXXXX";
	int fd = mkstemp(path);
	size_t n = hc->n, u0 = len - 4 - 8 * (n * (n + 1) / 2); /* where uc starts */
	nv_hctx lazy;
	nv_mat full, want;

	ok(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0, "a context file");
	is_int(nv_hctx_read_lazy(path, 0, &lazy), 0, "read lazily");
	ok(lazy.uc == NULL && lazy.uc_path && same_hf(&lazy, hc), "uc not held, the rest as parsed");
	ok(same_strip(&lazy, hc, 0, 5) && same_strip(&lazy, hc, 17, 40) &&
		   same_strip(&lazy, hc, 63, 64), "strips 0-5, 17-40, 63-64 from the file: uc's bits");
	is_int(nv_hctx_uc_full(&lazy, &full), 0, "the full uc from the file");
	nv_hctx_uc_full(hc, &want);
	ok(!memcmp(full.d, want.d, n * n * sizeof(double)), "  the held one's bits");
	nv_mat_free(&full), nv_mat_free(&want);
	/* row 20's last entry changed in place, CRCs made valid again */
	buf[u0 + 8 * (nv_hctx_uc_row(n, 21) - 1)] ^= 1;
	put_u32(buf + len - 4, nv_crc32(buf, len - 4));
	fd = open(path, O_WRONLY);
	ok(fd >= 0 && write(fd, buf, len) == (ssize_t)len && close(fd) == 0, "uc(20, 63) changed");
	ok(same_strip(&lazy, hc, 0, 20), "rows before it still read");
	ok(nv_hctx_uc_rows(&lazy, 17, 40) == NULL, "a strip holding it is refused");
	ok(strstr(nv_err(), "row 20") && strstr(nv_err(), "changed"), "reason: %s", nv_err());
	buf[u0 + 8 * (nv_hctx_uc_row(n, 21) - 1)] ^= 1;
	put_u32(buf + len - 4, nv_crc32(buf, len - 4));
	unlink(path);
	ok(nv_hctx_uc_rows(&lazy, 0, 5) == NULL && strstr(nv_err(), "cannot open"),
	   "the file gone: refused (%s)", nv_err());
	nv_hctx_free(&lazy);
}

static void test_file(const nv_mat *h)
{
	nv_hctx hc, back;
	uint8_t *buf;
	size_t len, n = h->r;
	int same = 1;

	nv_hctx_build(h->d, n, 0.03, &hc);
	hc.count = 1024;
	hc.gram_crc = 0xdeadbeef;
	is_int(nv_hctx_serialize(&hc, &buf, &len), 0, "serialize");
	is_int(len, nv_hctx_file_size(n), "size = 36 + 12n(n+1) + 12n");
	is_int(len, 36 + 12 * 64 * 65 + 12 * 64, "size by the layout");
	is_int(nv_hctx_parse(buf, len, &back), 0, "parse back");
	same = back.n == n && back.rho == 0.03 && back.count == 1024 && back.gram_crc == 0xdeadbeef;
	same &= same_hf(&back, &hc) && !memcmp(back.l.d, hc.l.d, n * n * 8) &&
		!memcmp(back.uc, hc.uc, n * (n + 1) / 2 * 8) && !memcmp(back.sqd, hc.sqd, n * 8) &&
		!memcmp(back.perm, hc.perm, n * 4);
	ok(same, "round trip is exact");
	nv_hctx_free(&back);
	test_read(buf, len, &hc);
	test_lazy(buf, len, &hc);
	buf[100] ^= 1;
	is_int(nv_hctx_parse(buf, len, &back), -1, "a flipped bit is refused");
	ok(strstr(nv_err(), "crc") != NULL, "reason: %s", nv_err());
	buf[100] ^= 1;
	is_int(nv_hctx_parse(buf, len - 8, &back), -1, "a short file is refused");
	ok(strstr(nv_err(), "size") != NULL, "reason: %s", nv_err());
	buf[0] = 'X';
	is_int(nv_hctx_parse(buf, len, &back), -1, "a wrong magic is refused");
	ok(strstr(nv_err(), "magic") != NULL, "reason: %s", nv_err());
	free(buf);
	nv_hctx_free(&hc);
}

static void test_not_pd(void)
{
	double g[16] = {1, 2, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
	nv_hctx hc;

	is_int(nv_hctx_build(g, 4, 0.03, &hc), -1, "an indefinite Gram is refused");
	ok(strstr(nv_err(), "rho 0.03") && strstr(nv_err(), "larger --rho"), "reason: %s",
	   nv_err());
	/* eigenvalues 3, -1, 1, 1 and mean diagonal 1: rho 1.5 makes it definite */
	is_int(nv_hctx_build(g, 4, 1.5, &hc), 0, "a larger rho makes it definite");
	nv_hctx_free(&hc);
	/* hf is held as f32 off the diagonal: a Gram's values only, nothing rounded */
	g[1] = g[4] = 0.1;
	is_int(nv_hctx_build(g, 4, 1.5, &hc), -1, "an off-diagonal entry that is not f32 is refused");
	ok(strstr(nv_err(), "(0,1)") && strstr(nv_err(), "not an f32 value"), "reason: %s", nv_err());
	g[1] = g[4] = 0.1f;
	g[0] = 1.1; /* the diagonal is f64: the ridge lands there */
	is_int(nv_hctx_build(g, 4, 1.5, &hc), 0, "an f64 diagonal is taken");
	ok(hc.hf.diag[0] == 1.1 + 1.5 * ((1.1 + 3.0) / 4.0), "and kept exactly with its ridge");
	nv_hctx_free(&hc);
}

/* a Gram that differs across its diagonal (as a Gram file may, within
 * NVGG_SYM_TOL): the damped hf is symmetric to the bit, its lower
 * triangle's values, and the context round-trips through its file (which
 * keeps that triangle) unchanged, so that --rho and --hctx agree */
static void test_asymmetric(const nv_mat *h)
{
	size_t n = h->r, off = 0;
	double *g = malloc(n * n * sizeof(double));
	nv_hctx hc, back;
	uint8_t *buf;
	size_t len;

	for (size_t i = 0; i < n * n; i++)
		g[i] = h->d[i];
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			g[i * n + j] = (float)(g[i * n + j] * (1.0 + 1e-6));
	is_int(nv_hctx_build(g, n, 0.03, &hc), 0, "context of a Gram asymmetric by 1e-6");
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			off += hc.hf.d[i * n + j] != (float)g[i * n + j] ||
			       hc.hf.d[j * n + i] != hc.hf.d[i * n + j];
	is_int((int)off, 0, "hf symmetric to the bit, its lower triangle the Gram's");
	is_int(nv_hctx_serialize(&hc, &buf, &len), 0, "serialize it");
	is_int(nv_hctx_parse(buf, len, &back), 0, "parse it back");
	ok(same_hf(&back, &hc) && !memcmp(back.uc, hc.uc, n * (n + 1) / 2 * 8),
	   "the context read back is the one built (hf, uc)");
	free(buf);
	nv_hctx_free(&back);
	nv_hctx_free(&hc);
	free(g);
}

/* a Gram's f32 values, fresh (what nv_hctx_build_write takes) */
static float *gram_f32(const double *g, size_t n)
{
	float *d = malloc(n * n * sizeof(float));

	for (size_t i = 0; d && i < n * n; i++)
		d[i] = (float)g[i];
	return d;
}

/* nv_hctx_build_write: nv_hctx_build's context as nv_hctx_serialize gives
 * it, byte for byte, written without the file held; a failure leaves
 * nothing at the path */
static void test_build_write(const nv_mat *h)
{
	double bad[16] = {1, 2, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
	char dir[] = "/tmp/test-hctx-bw.XXXXXX", path[64], missing[80];
	size_t n = h->r, len, got_len;
	uint8_t *buf, *got;
	nv_hctx hc;

	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/a.hctx", dir);
	snprintf(missing, sizeof(missing), "%s/no/such/dir/a.hctx", dir);
	nv_hctx_build(h->d, n, 0.03, &hc);
	hc.count = (1ull << 33) + 7; /* both halves of the u64 */
	hc.gram_crc = 0xdeadbeef;
	nv_hctx_serialize(&hc, &buf, &len);
	is_int(nv_hctx_build_write(gram_f32(h->d, n), n, 0.03, hc.count, 0xdeadbeef, path), 0,
	       "build_write: built and written");
	ok(nv_read_file(path, &got, &got_len) == 0 && got_len == len && !memcmp(got, buf, len),
	   "its bytes are nv_hctx_serialize's of nv_hctx_build's context (%zu bytes)", len);
	free(got);
	{
		nv_hctx back;
		ok(nv_hctx_read(path, 0, &back) == 0 && back.count == hc.count &&
			   back.gram_crc == 0xdeadbeef && back.rho == 0.03,
		   "read back: its count (both halves), Gram CRC and rho");
		nv_hctx_free(&back);
	}
	is_int(nv_hctx_build_write(gram_f32(bad, 4), 4, 0.03, 1, 0, path), -1,
	       "build_write: an indefinite Gram is refused as nv_hctx_build refuses it");
	ok(strstr(nv_err(), "larger --rho") != NULL, "reason: %s", nv_err());
	ok(nv_read_file(path, &got, &got_len) == 0 && got_len == len && !memcmp(got, buf, len),
	   "and the file already there is untouched");
	free(got);
	unlink(path);
	is_int(nv_hctx_build_write(gram_f32(bad, 4), 4, 0.03, 1, 0, path), -1,
	       "refused again with no file there");
	ok(access(path, F_OK) != 0, "and nothing is left at the path");
	is_int(nv_hctx_build_write(gram_f32(h->d, n), n, 0.03, 1, 0, missing), -2,
	       "an output that cannot be opened: -2 (%s)", nv_err());
	ok(rmdir(dir) == 0, "no temporary file left beside it");
	free(buf);
	nv_hctx_free(&hc);
}

int main(void)
{
	nv_mat w, h;
	nv_mat32 h32;

	nv_set_threads(1);
	synth(&w, &h);
	synth_f32(&h, &h32); /* a Gram's values, as the context takes them */
	test_uc(&h);
	test_file(&h);
	test_build_write(&h);
	test_not_pd();
	test_asymmetric(&h);
	nv_mat_free(&w);
	nv_mat_free(&h);
	nv_mat32_free(&h32);
	return done_testing();
}
