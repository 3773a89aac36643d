/* test-nvgg.c - the NVGG Gram: layout, validation, merge by count */
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "nvgg.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* a valid Gram file image of width n: mean of x xᵀ over `count` random rows */
static uint8_t *gram_bytes(uint32_t n, uint64_t count, tap_rng *rng, size_t *len)
{
	double *acc = calloc((size_t)n * n, sizeof(double));
	uint8_t *b;

	*len = 16 + 4 * (size_t)n * n;
	b = malloc(*len);
	for (uint64_t t = 0; t < count; t++) {
		double x[64];

		for (uint32_t i = 0; i < n; i++)
			x[i] = rng_normal(rng);
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < n; j++)
				acc[i * n + j] += x[i] * x[j];
	}
	put_u32(b, NVGG_MAGIC);
	put_u32(b + 4, n);
	put_u64(b + 8, count);
	for (size_t i = 0; i < (size_t)n * n; i++)
		put_f32(b + 16 + 4 * i, (float)(acc[i] / (double)count));
	free(acc);
	return b;
}

static int rejects(const uint8_t *b, size_t len, const char *needle)
{
	nvgg g;
	int rc = nvgg_parse(b, len, &g);

	if (rc == 0) {
		nvgg_free(&g);
		return 0;
	}
	if (!strstr(nv_err(), needle)) {
		diag("reason '%s' lacks '%s'", nv_err(), needle);
		return 0;
	}
	return 1;
}

/*
 * the f64 and CRC-only readers of a Gram's file against the f32 parse g of
 * its bytes b: every entry widened exactly, the CRC that of the stored
 * values' bytes, the header alone from nvgg_read_crc, the checks applied
 */
static void read_f64(uint8_t *b, size_t len, const nvgg *g)
{
	char path[] = "/tmp/test-nvgg.XXXXXX";
	int fd = mkstemp(path), same = 1;
	uint32_t crc = 0, crc2 = 0, want = nv_crc32(b + 16, len - 16);
	nvgg d, h;

	ok(fd >= 0 && write(fd, b, len) == (ssize_t)len && close(fd) == 0, "a Gram file");
	is_int(nvgg_read_f64(path, 0, &d, &crc), 0, "nvgg_read_f64 reads it");
	for (size_t i = 0; i < 25 && d.d; i++)
		same &= d.d[i] == (double)g->g[i];
	ok(d.g == NULL && d.d && same && d.n == g->n && d.count == g->count,
	   "f64 only, every entry the f32 one widened exactly");
	ok(crc == want, "its CRC is that of the stored values' bytes");
	is_int(nvgg_read_crc(path, &h, &crc2), 0, "nvgg_read_crc reads it");
	ok(h.g == NULL && h.d == NULL && h.n == 5 && h.count == g->count && crc2 == want,
	   "the header and the same CRC, no values");
	is_int(nvgg_read_f64(path, 1, &h, NULL), -1, "read as an NVGC it is refused (%s)",
	       nv_err());
	put_f32(b + 16 + 4 * 1, 7.0f); /* G[0,1] ≠ G[1,0] */
	fd = open(path, O_WRONLY | O_TRUNC);
	ok(fd >= 0 && write(fd, b, len) == (ssize_t)len && close(fd) == 0, "made asymmetric");
	is_int(nvgg_read_f64(path, 0, &h, NULL), -1, "the f64 reader checks the values too");
	ok(strstr(nv_err(), "not symmetric") != NULL, "reason: %s", nv_err());
	is_int(nvgg_read_crc(path, &h, &crc2), 0, "the CRC reader does not");
	ok(crc2 != want, "and its CRC tells the change");
	nvgg_free(&d);
	unlink(path);
}

static void parse_layout(tap_rng *rng)
{
	size_t len;
	uint8_t *b = gram_bytes(5, 40, rng, &len);
	static const uint8_t head[16] = { 0x47, 0x47, 0x56, 0x4E, 5, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0 };
	nvgg g;
	int same = 1;

	ok(memcmp(b, head, 16) == 0, "the header bytes are magic 47 47 56 4E, n, count (LE)");
	ok(nvgg_parse(b, len, &g) == 0, "a valid 5×5 Gram parses");
	is_int(g.n, 5, "n");
	is_int((long long)g.count, 40, "count");
	for (size_t i = 0; i < 25; i++)
		same &= g.g[i] == le_f32(b + 16 + 4 * i);
	ok(same, "G is the body, row-major, bit for bit");
	read_f64(b, len, &g);
	nvgg_free(&g);
	free(b);
}

static void parse_rejects(tap_rng *rng)
{
	size_t len;
	uint8_t *b = gram_bytes(4, 10, rng, &len), *c = malloc(len + 4);
	int all = 1;

	for (size_t cut = 0; cut < len; cut++)
		all &= rejects(b, cut, cut < 16 ? "shorter than the 16-byte" : "disagrees");
	ok(all, "every truncation (0..%zu bytes) is rejected and says why", len - 1);
	memcpy(c, b, len);
	memset(c + len, 0, 4);
	ok(rejects(c, len + 4, "disagrees"), "a trailing extra f32 is rejected");
#define MUTATE(what, stmt, needle)                                \
	do {                                                      \
		memcpy(c, b, len);                                \
		stmt;                                             \
		ok(rejects(c, len, needle), "rejected: %s", what); \
	} while (0)
	MUTATE("wrong magic", put_u32(c, 0x4E564748), "magic");
	MUTATE("n = 0", put_u32(c + 4, 0), "n 0");
	MUTATE("n·n overflowing (n = 2^32-1)", put_u32(c + 4, UINT32_MAX), "overflows");
	MUTATE("n larger than the body", put_u32(c + 4, 5), "disagrees");
	MUTATE("count 0", put_u64(c + 8, 0), "count 0");
	MUTATE("NaN off the diagonal", put_f32(c + 16 + 4 * 6, NAN), "not finite");
	MUTATE("inf on the diagonal", put_f32(c + 16 + 4 * 5, INFINITY), "not finite");
	MUTATE("negative diagonal", put_f32(c + 16 + 4 * 10, -1e-3f), "negative");
	MUTATE("asymmetric", put_f32(c + 16 + 4 * 7, le_f32(c + 16 + 4 * 13) + 0.5f), "not symmetric");
#undef MUTATE
	/* the tolerance: |G_ij − G_ji| ≤ 1e-5 · max(G_ii, G_jj) */
	{
		uint8_t d[16 + 16];
		nvgg g;

		put_u32(d, NVGG_MAGIC);
		put_u32(d + 4, 2);
		put_u64(d + 8, 1);
		put_f32(d + 16, 4.0f);
		put_f32(d + 28, 2.0f);
		put_f32(d + 20, 1.0f);
		put_f32(d + 24, 1.0f + 3.5e-5f); /* 3.5e-5 ≤ 1e-5·4 */
		ok(nvgg_parse(d, sizeof(d), &g) == 0, "an asymmetry within 1e-5 of the larger diagonal is accepted");
		nvgg_free(&g);
		put_f32(d + 24, 1.0f + 4.5e-5f); /* 4.5e-5 > 1e-5·4 */
		ok(rejects(d, sizeof(d), "not symmetric"), "an asymmetry beyond it is rejected");
	}
	free(b);
	free(c);
}

static void write_read(tap_rng *rng, const char *dir)
{
	size_t len, got_len;
	uint8_t *b = gram_bytes(7, 33, rng, &len), *got;
	char path[4096];
	nvgg g, h;

	snprintf(path, sizeof(path), "%s/g.nvgg", dir);
	nvgg_parse(b, len, &g);
	ok(nvgg_write(path, &g) == 0, "nvgg_write");
	ok(nv_read_file(path, &got, &got_len) == 0 && got_len == len && memcmp(got, b, len) == 0,
	   "the written file is byte for byte the image it was parsed from");
	ok(nvgg_read(path, &h) == 0 && h.n == 7 && h.count == 33, "nvgg_read reads it back");
	nvgg_free(&h);
	snprintf(path, sizeof(path), "%s/missing.nvgg", dir);
	ok(nvgg_read(path, &h) < 0 && strstr(nv_err(), "No such file"), "a missing file is an error");
	nvgg_free(&g);
	nvgg_free(&h);
	free(got);
	free(b);
}

/* shards of one row stream merge to the Gram of the whole stream */
static void merge(tap_rng *rng)
{
	enum { N = 6 };
	static const uint64_t counts[3] = { 5, 17, 1 };
	double whole[N * N] = { 0 };
	nvgg sh[3], m;
	double worst = 0;

	for (int s = 0; s < 3; s++) {
		double acc[N * N] = { 0 };

		sh[s] = (nvgg){ 0 };
		sh[s].n = N;
		sh[s].count = counts[s];
		sh[s].g = malloc(sizeof(float) * N * N);
		for (uint64_t t = 0; t < counts[s]; t++) {
			double x[N];

			for (int i = 0; i < N; i++)
				x[i] = rng_normal(rng);
			for (int i = 0; i < N * N; i++)
				acc[i] += x[i / N] * x[i % N];
		}
		for (int i = 0; i < N * N; i++) {
			sh[s].g[i] = (float)(acc[i] / (double)counts[s]);
			whole[i] += acc[i];
		}
	}
	ok(nvgg_merge(sh, 3, &m) == 0, "merge three shards");
	is_int((long long)m.count, 23, "the merged count is the sum of counts");
	for (int i = 0; i < N * N; i++) {
		double want = whole[i] / 23.0, spread = 0, tol;

		/*
		 * each shard mean was rounded to f32 (at most 2^-24 relative)
		 * before the merge, and the merged mean once more after it; f64
		 * sums add nothing visible at this size
		 */
		for (int s = 0; s < 3; s++)
			spread += (double)counts[s] * fabs(sh[s].g[i]);
		tol = 0x1p-24 * (spread / 23.0 + fabs(want)) * 1.0001;
		if (fabs(m.g[i] - want) > tol)
			worst = fmax(worst, fabs(m.g[i] - want) / tol);
	}
	ok(worst == 0, "the merged mean equals the Gram of all 23 rows (within f32 storage rounding)");
	nvgg_free(&m);
	sh[1].n = N - 1;
	ok(nvgg_merge(sh, 3, &m) < 0 && strstr(nv_err(), "shard 1 has n 5"), "shards of different widths are refused");
	sh[1].n = N;
	sh[2].count = 0;
	ok(nvgg_merge(sh, 3, &m) < 0 && strstr(nv_err(), "count 0"), "a shard of count 0 is refused");
	ok(nvgg_merge(sh, 0, &m) < 0, "merging nothing is refused");
	for (int s = 0; s < 3; s++)
		free(sh[s].g);
}

/* random damage to a valid Gram: rejected, or every documented promise holds */
static void mutations(tap_rng *rng)
{
	size_t len;
	uint8_t *b = gram_bytes(3, 5, rng, &len);
	int broken = 0, accepted = 0;

	for (int it = 0; it < 20000; it++) {
		size_t l = len, k = 1 + rng_u64(rng) % 3;
		uint8_t *c;
		nvgg g;

		if (rng_u64(rng) % 10 == 0)
			l = rng_u64(rng) % (len + 1);
		c = malloc(l ? l : 1);
		memcpy(c, b, l);
		for (size_t j = 0; j < k && l > 0; j++)
			c[rng_u64(rng) % l] = (uint8_t)rng_u64(rng);
		if (nvgg_parse(c, l, &g) == 0) {
			accepted++;
			broken += l != 16 + 4 * (size_t)g.n * g.n || g.count == 0;
			for (size_t i = 0; i < (size_t)g.n * g.n; i++)
				broken += !isfinite(g.g[i]) || (i % (g.n + 1) == 0 && g.g[i] < 0) ||
					  fabs(g.g[i] - g.g[(i % g.n) * g.n + i / g.n]) >
						  NVGG_SYM_TOL * fmax(fmax(g.g[(i / g.n) * (g.n + 1)],
									   g.g[(i % g.n) * (g.n + 1)]), 1e-30);
			nvgg_free(&g);
		}
		free(c);
	}
	is_int(broken, 0, "20,000 damaged Grams: each rejected, or valid as documented (%d accepted)", accepted);
	free(b);
}

/*
 * test-nvgg --check FILE: read FILE with nvgg_read and print "n N count C
 * sum S" or the reason (exit 1), for t0105, which checks the numpy fixtures
 * of tests/nvgg-fixtures.py against this reader
 */
static int check_file(const char *path)
{
	nvgg g;
	double sum = 0;

	if (nvgg_read(path, &g) < 0) {
		printf("%s\n", nv_err());
		return 1;
	}
	for (size_t i = 0; i < (size_t)g.n * g.n; i++)
		sum += g.g[i];
	printf("n %u count %llu sum %.9g\n", g.n, (unsigned long long)g.count, sum);
	nvgg_free(&g);
	return 0;
}

/* NVGC: the NVGG layout with its own magic; not symmetric; the kinds never mix */
static void cross_kind(tap_rng *rng)
{
	size_t len;
	uint8_t *b = gram_bytes(4, 9, rng, &len);
	nvgg g, h, gg, m[2], out;

	ok(nvgc_parse(b, len, &g) < 0 && strstr(nv_err(), "is not NVGC"),
	   "an NVGG is not a cross-moment: %s", nv_err());
	put_u32(b, NVGC_MAGIC);
	put_f32(b + 16 + 4 * 1, 5.0f); /* C[0][1] ≠ C[1][0], a diagonal < 0 */
	put_f32(b + 16 + 4 * 5, -1.0f);
	ok(nvgc_parse(b, len, &g) == 0 && g.cross && g.g[1] == 5.0f && g.g[5] == -1.0f,
	   "an NVGC needs no symmetry and no sign on its diagonal");
	ok(nvgg_parse(b, len, &h) < 0 && strstr(nv_err(), "is not NVGG"), "and is not a Gram: %s",
	   nv_err());
	put_f32(b + 16 + 4 * 7, NAN);
	ok(nvgc_parse(b, len, &h) < 0 && strstr(nv_err(), "C[1,3]"), "a NaN is named: %s", nv_err());
	free(b);
	b = gram_bytes(4, 9, rng, &len);
	nvgg_parse(b, len, &gg);
	m[0] = gg;
	m[1] = g;
	ok(nvgg_merge(m, 2, &out) < 0 && strstr(nv_err(), "shard 1 is NVGC, shard 0 is NVGG"),
	   "an NVGC never merges with an NVGG: %s", nv_err());
	m[0] = g;
	ok(nvgg_merge(m, 2, &out) == 0 && out.cross && out.count == 18 && out.g[1] == 5.0f,
	   "two NVGCs merge by count into an NVGC");
	nvgg_free(&out);
	nvgg_free(&g);
	nvgg_free(&gg);
	free(b);
}

int main(int argc, char **argv)
{
	tap_rng rng = { 42 };
	char dir[] = "/tmp/test-nvgg.XXXXXX";

	if (argc == 3 && strcmp(argv[1], "--check") == 0)
		return check_file(argv[2]);
	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	parse_layout(&rng);
	parse_rejects(&rng);
	write_read(&rng, dir);
	merge(&rng);
	cross_kind(&rng);
	mutations(&rng);
	{
		char p[4096];

		snprintf(p, sizeof(p), "%s/g.nvgg", dir);
		unlink(p);
		rmdir(dir);
	}
	return done_testing();
}
