/*
 * nvgg.h - NVGG, a calibration Gram (man/man5/nvgg.5).
 *
 *   offset 0   u32  magic 0x4E564747
 *   offset 4   u32  n        input width
 *   offset 8   u64  count    tokens accumulated
 *   offset 16  f32  G[n*n]   row-major mean Gram (1/count)·Σ x xᵀ
 *
 * Size exactly 16 + 4n².  Readers check the magic, n ≥ 1, count ≥ 1 (a Gram
 * of no tokens has no mean), the size, finiteness, symmetry
 * (|G_ij − G_ji| ≤ NVGG_SYM_TOL · max(G_ii, G_jj, 1e-30)) and a non-negative
 * diagonal.  Failures set a reason (err.h) naming the field, its value and
 * what was allowed; the caller adds the file name.
 *
 * NVGC, the cross-moment of two streams at the same positions
 * (man/man5/nvgc.5), has the same layout with magic 0x4E564743 ("NVGC"):
 * C[i][j] = (1/count)·Σ x_q[i]·x_src[j], not symmetric; its readers check
 * everything above but symmetry and the diagonal's sign.  It merges by count
 * like NVGG; the two kinds never mix.
 */
#ifndef NV_NVGG_H
#define NV_NVGG_H

#include <stddef.h>
#include <stdint.h>

#define NVGG_MAGIC 0x4E564747u
#define NVGC_MAGIC 0x4E564743u
#define NVGG_SYM_TOL 1e-5

typedef struct {
	uint32_t n;
	uint64_t count;
	float *g; /* (n × n) row-major, owned */
	double *d; /* the same in f64 when read so (nvgg_read_f64), g then NULL */
	int cross; /* 1: an NVGC cross-moment (written with its magic) */
} nvgg;

/* validate and decode a whole file's bytes (len bytes) into out (g owned) */
int nvgg_parse(const uint8_t *buf, size_t len, nvgg *out);

/* read and validate path ("-" = stdin) */
int nvgg_read(const char *path, nvgg *out);

/* the same for an NVGG (cross 0) or an NVGC (cross 1), with the CRC-32 of
 * its values' bytes as stored into crc (may be NULL) */
int nvgg_read_f32(const char *path, int cross, nvgg *out, uint32_t *crc);

/* the same for an NVGC cross-moment */
int nvgc_parse(const uint8_t *buf, size_t len, nvgg *out);
int nvgc_read(const char *path, nvgg *out);

/* an NVGG or an NVGC file, by its magic (out->cross says which) */
int nvgg_read_any(const char *path, nvgg *out);

/* read and validate an NVGG (cross 0) or an NVGC (cross 1) into out->d, f64,
 * with no f32 copy and never the whole file held; crc (may be NULL) gets
 * the CRC-32 of the values' bytes as stored (what an HCTX's gram_crc is) */
int nvgg_read_f64(const char *path, int cross, nvgg *out, uint32_t *crc);

/* an NVGG's header (checked: magic, n, count, size) and the CRC-32 of its
 * values' bytes, the values neither decoded nor checked (out->g, d NULL):
 * for a reader that needs the Gram only to match a context built from it */
int nvgg_read_crc(const char *path, nvgg *out, uint32_t *crc);

/* write atomically ("-" = stdout, refused on a terminal) */
int nvgg_write(const char *path, const nvgg *g);

/*
 * out = count-weighted mean of k Grams of one width, Σ count_s·G_s / Σ count_s
 * in f64, stored f32; out->count = Σ count_s.  Refuses k = 0, differing
 * widths, a zero count or a count total beyond u64.
 */
int nvgg_merge(const nvgg *in, size_t k, nvgg *out);

void nvgg_free(nvgg *g);

#endif
