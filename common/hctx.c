/* hctx.c - the per-input context and its file (see hctx.h, hctx.5) */
#include "hctx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aout.h"
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"

#define HCTX_HEAD 32

void nv_hctx_free(nv_hctx *hc)
{
	nv_mat32_free(&hc->hf);
	nv_mat_free(&hc->l);
	free(hc->uc);
	free(hc->uc_path);
	free(hc->uc_crc);
	free(hc->sqd);
	free(hc->perm);
	memset(hc, 0, sizeof(*hc));
}

double nv_hctx_ridge(const nv_hctx *hc)
{
	double tr = 0.0;

	for (size_t i = 0; i < hc->n; i++)
		tr += hc->hf.diag[i];
	return hc->rho * tr / ((double)hc->n * (1.0 + hc->rho));
}

/* diag descending, ties by index: a stable order; ctx is hf's diagonal */
static int by_diag_desc(const void *pa, const void *pb, void *ctx)
{
	const double *d = ctx;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	double da = d[a], db = d[b];

	if (da > db)
		return -1;
	if (da < db)
		return 1;
	return a < b ? -1 : a > b;
}

/* ji = J·Hp·J (n × n), from hf */
static int uc_system(const nv_hctx *hc, nv_mat *ji)
{
	size_t n = hc->n;

	if (nv_mat_zeros(ji, n, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t pi = hc->perm[n - 1 - i];
		for (size_t j = 0; j < n; j++)
			ji->d[i * n + j] = nv_mat32_at(&hc->hf, pi, hc->perm[n - 1 - j]);
	}
	return 0;
}

/* ji ← inv(chol(ji)), lower: uc[i][j] = ji[n−1−i][n−1−j] (uc_of); freed on failure */
static int uc_invert(nv_mat *ji)
{
	if (nv_potrf_lower(ji) != 0 || nv_trtri_lower(ji) < 0) {
		nv_mat_free(ji);
		nv_preerr("permuted Gram");
		return -1;
	}
	return 0;
}

/* uc[i][j] (j ≥ i) of uc = J·ji·J */
static inline double uc_of(const nv_mat *ji, size_t i, size_t j)
{
	size_t n = ji->r;

	return ji->d[(n - 1 - i) * n + (n - 1 - j)];
}

/* uc = J·inv(chol(J·Hp·J))·J, packed by rows */
static int build_uc(nv_hctx *hc)
{
	size_t n = hc->n;
	nv_mat ji;

	if (uc_system(hc, &ji) < 0 || uc_invert(&ji) < 0)
		return -1;
	if (!(hc->uc = nv_malloc(n * (n + 1) / 2, sizeof(double)))) {
		nv_mat_free(&ji);
		return -1;
	}
	for (size_t i = 0, k = 0; i < n; i++)
		for (size_t j = i; j < n; j++, k++)
			hc->uc[k] = uc_of(&ji, i, j);
	nv_mat_free(&ji);
	return 0;
}

double nv_hctx_uc_at(const nv_hctx *hc, size_t i, size_t j)
{
	return j < i ? 0.0 : hc->uc[nv_hctx_uc_row(hc->n, i) + (j - i)];
}

/* rows [b0, b1) of uc from the file into the strip s (ld n − b0), each
 * row's bytes checked against the CRC of the first read */
static int uc_rows_read(const nv_hctx *hc, size_t b0, size_t b1, double *s)
{
	size_t n = hc->n, w = n - b0;
	uint8_t *buf = nv_malloc(w ? w : 1, 8);
	FILE *f = fopen(hc->uc_path, "rb");
	int rc = -1;

	if (!buf || !f) {
		if (!f)
			nv_seterr("'%s': cannot open it again for uc's rows", hc->uc_path);
		goto out;
	}
	for (size_t j = b0; j < b1; j++) {
		size_t len = (n - j) * 8;
		if (fseeko(f, (off_t)(hc->uc_off + 8 * nv_hctx_uc_row(n, j)), SEEK_SET) != 0 ||
		    fread(buf, 1, len, f) != len || nv_crc32(buf, len) != hc->uc_crc[j]) {
			nv_seterr("'%s': uc's row %zu is not what it was at the first read (the "
				  "file changed since)", hc->uc_path, j);
			goto out;
		}
		for (size_t x = 0; x < n - j; x++)
			s[(j - b0) * w + (j - b0) + x] = le_f64(buf + 8 * x);
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	free(buf);
	return rc;
}

double *nv_hctx_uc_rows(const nv_hctx *hc, size_t b0, size_t b1)
{
	size_t n = hc->n, w = n - b0;
	double *s = nv_calloc((b1 - b0) * w, sizeof(double));

	if (!s)
		return NULL;
	if (!hc->uc) {
		if (uc_rows_read(hc, b0, b1, s) < 0) {
			free(s);
			return NULL;
		}
		return s;
	}
	for (size_t j = b0; j < b1; j++)
		memcpy(s + (j - b0) * w + (j - b0), hc->uc + nv_hctx_uc_row(n, j),
		       (n - j) * sizeof(double));
	return s;
}

int nv_hctx_uc_full(const nv_hctx *hc, nv_mat *out)
{
	out->r = out->c = hc->n;
	out->d = nv_hctx_uc_rows(hc, 0, hc->n);
	return out->d ? 0 : -1;
}

/* hf from the Gram's f32 values d (n × n), which it takes: they become
 * hf's off the diagonal (freed with hf, also on failure); its diagonal is
 * g's where g is given (an f64 Gram's may be any double), else d's */
static int damped_take(float *d, const double *g, size_t n, double rho, nv_mat32 *hf)
{
	double tr = 0.0;

	hf->r = hf->c = n;
	hf->d = d;
	if (!(hf->diag = nv_malloc(n, sizeof(double))))
		return -1;
	for (size_t i = 0; i < n; i++)
		hf->diag[i] = g ? g[i * n + i] : d[i * n + i];
	for (size_t i = 0; i < n; i++)
		tr += hf->diag[i];
	for (size_t i = 0; i < n; i++)
		hf->diag[i] += rho * (tr / (double)n);
	/* exactly symmetric, its lower triangle's (a Gram file may differ across
	 * the diagonal by NVGG_SYM_TOL): whichever triangle a reader takes, and a
	 * context written (its lower triangle) and read back, the same matrix */
	for (size_t i0 = 0; i0 < n; i0 += 32) /* in 32 × 32 tiles: the stores strided */
		for (size_t j0 = 0; j0 <= i0; j0 += 32)
			for (size_t i = i0; i < n && i < i0 + 32; i++)
				for (size_t j = j0; j < i && j < j0 + 32; j++)
					d[j * n + i] = d[i * n + j];
	return 0;
}

/* hf = g + ρ·(tr g / n)·I held as f32 off the diagonal: g's entries there
 * must be f32 values (a Gram file's), so that nothing is rounded */
static int damped(const double *g, size_t n, double rho, nv_mat32 *hf)
{
	float *d;

	for (size_t i = 0; i < n * n; i++)
		if (i % (n + 1) && (double)(float)g[i] != g[i]) {
			nv_seterr("Gram entry (%zu,%zu) = %.17g is not an f32 value, as a Gram file's are",
				  i / n, i % n, g[i]);
			return -1;
		}
	if (!(d = nv_malloc(n * n, sizeof(float))))
		return -1;
	for (size_t i = 0; i < n * n; i++)
		d[i] = (float)g[i];
	return damped_take(d, g, n, rho, hf);
}

/* l = chol(hf), sqd and the act order perm, from hc->hf */
static int factor(nv_hctx *hc)
{
	size_t n = hc->n;

	if (nv_mat32_widen(&hc->hf, &hc->l) < 0)
		return -1;
	if (nv_potrf_lower(&hc->l) != 0) {
		nv_seterr("calibration Gram not positive definite after damping with rho %g: "
			  "try a larger --rho", hc->rho);
		return -1;
	}
	hc->sqd = nv_malloc(n, sizeof(double));
	hc->perm = nv_malloc(n, sizeof(uint32_t));
	if (!hc->sqd || !hc->perm)
		return -1;
	for (size_t i = 0; i < n; i++) {
		hc->sqd[i] = sqrt(hc->hf.diag[i]);
		hc->perm[i] = (uint32_t)i;
	}
	qsort_r(hc->perm, n, sizeof(uint32_t), by_diag_desc, hc->hf.diag);
	return 0;
}

int nv_hctx_build(const double *g, size_t n, double rho, nv_hctx *hc)
{
	memset(hc, 0, sizeof(*hc));
	hc->n = n;
	hc->rho = rho;
	if (damped(g, n, rho, &hc->hf) < 0 || factor(hc) < 0 || build_uc(hc) < 0) {
		nv_hctx_free(hc);
		return -1;
	}
	return 0;
}

size_t nv_hctx_file_size(size_t n)
{
	size_t tri, s;

	if (nv_mul(n, n + 1, &tri) < 0 || nv_mul(tri / 2, 24, &s) < 0 ||
	    nv_add(s, HCTX_HEAD + 4, &s) < 0 || n > SIZE_MAX / 12 || nv_add(s, 12 * n, &s) < 0)
		return 0;
	return s;
}

/*
 * The file's bytes go through a sink, a buffer at a time: into a buffer of
 * the whole file (nv_hctx_serialize) or to an output file, so that one
 * encoding of each field serves both, and a file is written without its
 * bytes held whole.  crc: of every byte through the sink so far.
 */
#define SINK_BUF 65536
typedef struct {
	aout *o;      /* the file, or NULL: into mem */
	uint8_t *mem; /* (the whole file) */
	size_t off;
	uint32_t crc;
	int rc;       /* -1 once a write failed */
	size_t nb;
	uint8_t buf[SINK_BUF];
} sink;

static void sink_flush(sink *s)
{
	s->crc = nv_crc32_update(s->crc, s->buf, s->nb);
	if (!s->o) {
		memcpy(s->mem + s->off, s->buf, s->nb);
		s->off += s->nb;
	} else if (s->rc == 0 && aout_write(s->o, s->buf, s->nb) < 0) {
		s->rc = -1;
	}
	s->nb = 0;
}

static void sink_f64(sink *s, double v)
{
	if (s->nb + 8 > SINK_BUF)
		sink_flush(s);
	put_f64(s->buf + s->nb, v);
	s->nb += 8;
}

static void sink_u32(sink *s, uint32_t v)
{
	if (s->nb + 4 > SINK_BUF)
		sink_flush(s);
	put_u32(s->buf + s->nb, v);
	s->nb += 4;
}

static void sink_u64(sink *s, uint64_t v)
{
	if (s->nb + 8 > SINK_BUF)
		sink_flush(s);
	put_u64(s->buf + s->nb, v);
	s->nb += 8;
}

/* the header, then hf's and l's triangles, sqd and perm: everything before uc */
static void emit_front(sink *s, const nv_hctx *hc)
{
	size_t n = hc->n;

	sink_u32(s, HCTX_MAGIC);
	sink_u32(s, HCTX_VERSION);
	sink_u32(s, (uint32_t)n);
	sink_u32(s, hc->gram_crc);
	sink_f64(s, hc->rho);
	sink_u64(s, hc->count);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			sink_f64(s, nv_mat32_at(&hc->hf, i, j));
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			sink_f64(s, hc->l.d[i * n + j]);
	for (size_t i = 0; i < n; i++)
		sink_f64(s, hc->sqd[i]);
	for (size_t i = 0; i < n; i++)
		sink_u32(s, hc->perm[i]);
}

/* uc's triangle by rows, from hc->uc or (ji not NULL) from ji (uc_of); then
 * the CRC-32 of every byte before it */
static void emit_back(sink *s, const nv_hctx *hc, const nv_mat *ji)
{
	size_t n = hc->n;
	uint32_t crc;

	for (size_t i = 0, k = 0; i < n; i++)
		for (size_t j = i; j < n; j++, k++)
			sink_f64(s, ji ? uc_of(ji, i, j) : hc->uc[k]);
	sink_flush(s);
	crc = s->crc;
	sink_u32(s, crc);
	sink_flush(s);
}

static sink *sink_new(aout *o, uint8_t *mem)
{
	sink *s = nv_calloc(1, sizeof(sink));

	if (s) {
		s->o = o;
		s->mem = mem;
	}
	return s;
}

int nv_hctx_serialize(const nv_hctx *hc, uint8_t **buf, size_t *len)
{
	size_t sz = nv_hctx_file_size(hc->n);
	uint8_t *b;
	sink *s;

	if (!sz || !(b = nv_malloc(sz, 1)))
		return -1;
	if (!(s = sink_new(NULL, b))) {
		free(b);
		return -1;
	}
	emit_front(s, hc);
	emit_back(s, hc, NULL);
	free(s);
	*buf = b;
	*len = sz;
	return 0;
}

/* hf, l, sqd and perm to s, l let go after it is written, then uc from hf
 * (hf let go once the permuted system is formed from it); -2 when a write
 * failed */
static int build_emit(sink *s, nv_hctx *hc)
{
	nv_mat ji;

	if (factor(hc) < 0)
		return -1;
	emit_front(s, hc);
	nv_mat_free(&hc->l);
	if (s->rc < 0)
		return -2;
	if (uc_system(hc, &ji) < 0)
		return -1;
	nv_mat32_free(&hc->hf);
	if (uc_invert(&ji) < 0)
		return -1;
	emit_back(s, hc, &ji);
	nv_mat_free(&ji);
	return s->rc < 0 ? -2 : 0;
}

int nv_hctx_build_write(float *g, size_t n, double rho, uint64_t count, uint32_t gram_crc,
			const char *path)
{
	nv_hctx hc = {0};
	sink *s = NULL;
	aout o;
	int rc = -1;

	hc.n = n;
	hc.rho = rho;
	hc.count = count;
	hc.gram_crc = gram_crc;
	if (damped_take(g, NULL, n, rho, &hc.hf) < 0 || !(s = sink_new(&o, NULL)))
		goto out;
	if (aout_open(&o, path, AOUT_BINARY) < 0) {
		rc = -2;
		goto out;
	}
	if ((rc = build_emit(s, &hc)) < 0)
		aout_abort(&o);
	else if (aout_commit(&o) < 0)
		rc = -2;
out:
	free(s);
	nv_hctx_free(&hc);
	return rc;
}

/* hf's packed lower triangle into its f32 form: off the diagonal, f32 values */
static const uint8_t *get_hf(const uint8_t *p, nv_mat32 *hf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++, p += 8) {
			double v = le_f64(p);
			if (!isfinite(v)) {
				nv_seterr("field hf: entry (%zu,%zu) is not finite", i, j);
				return NULL;
			}
			if (j == i) {
				hf->diag[i] = v;
				continue;
			}
			if ((double)(float)v != v) {
				nv_seterr("field hf: entry (%zu,%zu) = %.17g is not an f32 value, as a "
					  "Gram's are", i, j, v);
				return NULL;
			}
			hf->d[i * n + j] = hf->d[j * n + i] = (float)v;
		}
	return p;
}

/* read a packed lower triangle (j ≤ i) of width n into a full matrix a
 * (NULL: checked, not kept); diag (n) gets its diagonal and row2 (n) its
 * rows' sums of squares */
static const uint8_t *get_tri(const uint8_t *p, nv_mat *a, size_t n, const char *field,
			      double *diag, double *row2)
{
	for (size_t i = 0; i < n; i++) {
		double s = 0.0;
		for (size_t j = 0; j <= i; j++, p += 8) {
			double v = le_f64(p);
			if (!isfinite(v)) {
				nv_seterr("field %s: entry (%zu,%zu) is not finite", field, i, j);
				return NULL;
			}
			s += v * v;
			if (j == i)
				diag[i] = v;
			if (a)
				a->d[i * n + j] = v;
		}
		row2[i] = s;
	}
	return p;
}

/* magic, version, n and the size; the CRC is the caller's */
/* a packed upper triangle of width n as it is stored (by rows), checked finite */
static const uint8_t *get_packed_upper(const uint8_t *p, double *a, size_t n, const char *field)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i; j < n; j++, p += 8) {
			double v = le_f64(p);
			if (!isfinite(v)) {
				nv_seterr("field %s: entry (%zu,%zu) is not finite", field, i, j);
				return NULL;
			}
			*a++ = v;
		}
	return p;
}

static int check_header(const uint8_t *buf, size_t len, size_t *n)
{
	size_t want;

	if (len < HCTX_HEAD + 4) {
		nv_seterr("size %zu bytes is shorter than the %d-byte header", len, HCTX_HEAD + 4);
		return -1;
	}
	if (le_u32(buf) != HCTX_MAGIC) {
		nv_seterr("magic 0x%08x is not 0x%08x (HCTX)", le_u32(buf), HCTX_MAGIC);
		return -1;
	}
	if (le_u32(buf + 4) != HCTX_VERSION) {
		nv_seterr("version %u is not %u", le_u32(buf + 4), HCTX_VERSION);
		return -1;
	}
	*n = le_u32(buf + 8);
	want = nv_hctx_file_size(*n);
	if (*n == 0 || want != len) {
		nv_seterr("size %zu bytes does not match n %zu (want %zu)", len, *n, want);
		return -1;
	}
	return 0;
}

static int check_crc(uint32_t got, const uint8_t *buf, size_t len)
{
	if (got != le_u32(buf + len - 4)) {
		nv_seterr("crc 0x%08x does not match the content (0x%08x): file corrupted",
			  le_u32(buf + len - 4), got);
		return -1;
	}
	return 0;
}

/* ldiag (n): the diagonal of l, read whether l is kept or not */
static int check_factors(const nv_hctx *hc, const double *ldiag)
{
	size_t n = hc->n;
	uint8_t *seen = nv_calloc(n, 1);

	if (!seen)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint32_t p = hc->perm[i];
		if (p >= n || seen[p]) {
			nv_seterr("field perm: entry %zu = %u is %s", i, p,
				  p >= n ? "out of range" : "a duplicate");
			free(seen);
			return -1;
		}
		seen[p] = 1;
		if (!(ldiag[i] > 0) || !(hc->uc[nv_hctx_uc_row(n, i)] > 0) ||
		    !(hc->sqd[i] > 0) || !isfinite(hc->sqd[i])) {
			nv_seterr("entry %zu of the factor diagonals (l, uc, sqd) is not positive", i);
			free(seen);
			return -1;
		}
	}
	free(seen);
	return 0;
}

/* the columns of uc have finite norms, summed down each column as before */
static int uc_columns(const nv_hctx *hc)
{
	size_t n = hc->n;
	double *s = nv_calloc(n, sizeof(double));
	const double *p = hc->uc;

	if (!s)
		return -1;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i; j < n; j++, p++)
			s[j] += *p * *p;
	for (size_t j = 0; j < n; j++)
		if (!isfinite(s[j])) {
			free(s);
			return nv_seterr("field uc: column %zu has a norm beyond f64", j), -1;
		}
	free(s);
	return 0;
}

/*
 * what hf determines, checked in O(n²) so that a CRC-valid file with a wild
 * value is refused here, not deep in the encoder: sqd_i² = hf_ii, the row
 * norms of l are hf's diagonal (hf = l·lᵀ), |hf_ij| ≤ √(hf_ii·hf_jj)
 * (positive definite), and the columns of uc have finite norms (ucᵀ·uc is
 * the permuted inverse); lrow2 (n) holds l's rows' sums of squares, read
 * whether l is kept or not.  Tolerances sit far above the rounding of the
 * factorizations (≤ n·2⁻⁵² relative).
 */
static int check_consistency(const nv_hctx *hc, const double *lrow2)
{
	size_t n = hc->n;
	const nv_mat32 *hf = &hc->hf;

	for (size_t i = 0; i < n; i++) {
		double d = hf->diag[i], s = lrow2[i];
		if (!(fabs(hc->sqd[i] * hc->sqd[i] - d) <= 1e-9 * d))
			return nv_seterr("field sqd: entry %zu = %g is not √hf(%zu,%zu) = √%g", i,
					 hc->sqd[i], i, i, d), -1;
		if (!(fabs(s - d) <= 1e-6 * d))
			return nv_seterr("field l: row %zu has Σ l² = %g, not hf(%zu,%zu) = %g", i, s,
					 i, i, d), -1;
		for (size_t j = 0; j < i; j++)
			if (!(fabs(hf->d[i * n + j]) <= sqrt(d * hf->diag[j]) * (1 + 1e-9)))
				return nv_seterr("field hf: entry (%zu,%zu) = %g exceeds √(hf_ii·hf_jj) "
						 "(not positive definite)", i, j, hf->d[i * n + j]), -1;
	}
	return uc_columns(hc);
}

/* the fields after the header (checked), l kept when keep_l; each section's
 * pages of the mapping m (NULL: a buffer) are given back once read */
static int parse_body(const uint8_t *buf, size_t n, int keep_l, const nv_map *m, nv_hctx *hc)
{
	const uint8_t *p;
	double *ld = nv_malloc(2 * n, sizeof(double));
	int rc = -1;

	hc->n = n;
	hc->gram_crc = le_u32(buf + 12);
	hc->rho = le_f64(buf + 16);
	hc->count = le_u64(buf + 24);
	if (!ld)
		return -1;
	if (!isfinite(hc->rho) || hc->rho < 0) {
		nv_seterr("field rho: %g is not a finite value >= 0", hc->rho);
		goto out;
	}
	hc->hf = (nv_mat32){ n, n, nv_calloc(n * n, sizeof(float)), nv_malloc(n, sizeof(double)) };
	if (!hc->hf.d || !hc->hf.diag || (keep_l && nv_mat_zeros(&hc->l, n, n) < 0) ||
	    !(hc->uc = nv_malloc(n * (n + 1) / 2, sizeof(double))) ||
	    !(hc->sqd = nv_malloc(n, sizeof(double))) ||
	    !(hc->perm = nv_malloc(n, sizeof(uint32_t))))
		goto out;
	p = get_hf(buf + HCTX_HEAD, &hc->hf, n);
	if (p && m)
		nv_map_drop(m, (size_t)(p - buf));
	if (p)
		p = get_tri(p, keep_l ? &hc->l : NULL, n, "l", ld, ld + n);
	if (!p)
		goto out;
	for (size_t i = 0; i < n; i++, p += 8)
		hc->sqd[i] = le_f64(p);
	for (size_t i = 0; i < n; i++, p += 4)
		hc->perm[i] = le_u32(p);
	if (m)
		nv_map_drop(m, (size_t)(p - buf));
	if (get_packed_upper(p, hc->uc, n, "uc") && check_factors(hc, ld) == 0 &&
	    check_consistency(hc, ld + n) == 0)
		rc = 0;
out:
	free(ld);
	return rc;
}

int nv_hctx_parse(const uint8_t *buf, size_t len, nv_hctx *hc)
{
	size_t n;

	memset(hc, 0, sizeof(*hc));
	if (check_header(buf, len, &n) < 0 || check_crc(nv_crc32(buf, len - 4), buf, len) < 0)
		return -1;
	if (parse_body(buf, n, 1, NULL, hc) < 0) {
		nv_hctx_free(hc);
		return -1;
	}
	return 0;
}

/* uc let go, its place in the mapping and its rows' CRCs kept */
static int uc_later(const char *path, const nv_map *m, nv_hctx *hc)
{
	size_t n = hc->n;

	hc->uc_off = m->len - 4 - 8 * (n * (n + 1) / 2);
	if (!(hc->uc_path = strdup(path)) || !(hc->uc_crc = nv_malloc(n ? n : 1, sizeof(uint32_t)))) {
		nv_seterr("out of memory");
		return -1;
	}
	for (size_t j = 0; j < n; j++)
		hc->uc_crc[j] = nv_crc32(m->data + hc->uc_off + 8 * nv_hctx_uc_row(n, j), (n - j) * 8);
	free(hc->uc);
	hc->uc = NULL;
	return 0;
}

static int hctx_read(const char *path, int keep_l, int lazy, nv_hctx *hc)
{
	nv_map m;
	size_t n;
	int rc = -1;

	memset(hc, 0, sizeof(*hc));
	if (nv_map_file(path, &m) < 0)
		return -1;
	if (!m.mapped) /* a pipe cannot be read again: uc is held */
		lazy = 0;
	/* the CRC first, over pages given back as it goes: a file is read
	 * twice, and never held whole */
	if (check_header(m.data, m.len, &n) == 0 &&
	    check_crc(nv_map_crc32(&m, m.len - 4), m.data, m.len) == 0 &&
	    parse_body(m.data, n, keep_l, &m, hc) == 0 && (!lazy || uc_later(path, &m, hc) == 0))
		rc = 0;
	nv_map_free(&m);
	if (rc < 0)
		nv_hctx_free(hc);
	return rc;
}

int nv_hctx_read(const char *path, int keep_l, nv_hctx *hc)
{
	return hctx_read(path, keep_l, 0, hc);
}

int nv_hctx_read_lazy(const char *path, int keep_l, nv_hctx *hc)
{
	return hctx_read(path, keep_l, 1, hc);
}
