/*
 * blr.h - the BLR payload: one encoded tensor (man/man5/blr.5).
 *
 *   offset 0  u32 magic 0x31524C42 "BLR1"   offset 4 u32 m (d_out)
 *   offset 8  u32 n (d_in)   offset 12 u16 r   offset 14 u8 paths   offset 15 u8 flags (0)
 *   per path: h m×f16, g n×f16, ℓ r×f16, S_U m×r bits, S_V n×r bits
 *   bit (i·r+k) of the packed array is entry (i,k): bit k mod 8 of byte ⌊(i·r+k)/8⌋,
 *   1 = +1, 0 = −1.
 *
 *   Ŵ = Σ_p diag(h_p) · S_U,p · diag(ℓ_p) · S_V,pᵀ · diag(g_p)
 *
 * The rank contract (DESIGN.md, the seed's Delivered):
 *   bits(m,n,r,p)   = p·(r(m+n) + 16(m+n+r))
 *   target(m,n,b,k) = b·k·m·n
 *   r* = ⌊(target/p − 16(m+n)) / (m+n+16)⌋, r = 8·⌊r* / 8⌋
 *   r < 8 → 8 ("floor");  r > cap = 8·⌊min(m,n)/8⌋ → cap ("cap");  min(m,n) < 8 → not encodable
 */
#ifndef NV_BLR_H
#define NV_BLR_H

#include <stddef.h>
#include <stdint.h>

#define BLR_MAGIC 0x31524C42u
#define BLR_HEADER 16

typedef struct {
	uint32_t m, n;  /* d_out, d_in */
	uint16_t r;     /* rank, multiple of 8 */
	uint8_t paths;  /* 1 or 2 */
} blr_header;

/* pointers into a validated payload, one set per path */
typedef struct {
	const uint8_t *h;  /* m f16 */
	const uint8_t *g;  /* n f16 */
	const uint8_t *l;  /* r f16 */
	const uint8_t *su; /* m×r bits */
	const uint8_t *sv; /* n×r bits */
} blr_view;

/* one path to pack: f16 scales (already rounded) and ±1 signs */
typedef struct {
	const uint16_t *h; /* (m) */
	const uint16_t *g; /* (n) */
	const uint16_t *l; /* (r) */
	const int8_t *su;  /* (m × r) entries ±1 */
	const int8_t *sv;  /* (n × r) entries ±1 */
} blr_path_in;

typedef enum { BLR_CLIP_NONE = 0, BLR_CLIP_FLOOR, BLR_CLIP_CAP } blr_clip;

/* payload bytes for a shape, rank and path count (0 on overflow, r not a multiple of 8, p not 1 or 2) */
size_t blr_payload_size(size_t m, size_t n, size_t r, size_t p);

/* budget bits, header excluded: p·(r(m+n) + 16(m+n+r)) */
double blr_bits(size_t m, size_t n, size_t r, size_t p);

/*
 * the rank for a request of bpw bits per weight (kv multiplier k) with p
 * paths, and which bound clipped it; -1 with reason set when min(m,n) < 8,
 * p is not 1 or 2, or bpw (≥ 0) or k (> 0) is not finite
 */
int blr_rank(size_t m, size_t n, double bpw, size_t p, double k, size_t *r, blr_clip *clip);

/* bits per weight between adjacent ranks: p·8·(m+n+16)/(m·n) */
double blr_step(size_t m, size_t n, size_t p);

/* the least bits per weight a shape can be stored at (rank 8) */
double blr_min_bpw(size_t m, size_t n, size_t p);

/* "", "floor", "cap" */
const char *blr_clip_name(blr_clip c);

/*
 * write a payload of blr_payload_size() bytes; -1 with reason set on a bad
 * shape, rank or path count, a sign other than ±1, or a non-finite scale
 */
int blr_build(size_t m, size_t n, size_t r, size_t p, const blr_path_in *paths, uint8_t *out);

/* parse and validate a payload (size, magic, flags, paths, rank, finite scales) */
int blr_parse(const uint8_t *buf, size_t len, blr_header *hd, blr_view views[2]);

/* the same, and the shape must be m × n */
int blr_verify_shape(const uint8_t *buf, size_t len, size_t m, size_t n);

/*
 * Ŵ (m × n) as f32 (w holds m·n floats), from a payload it validates (blrdeq.c):
 * Ŵ_ij = Σ_p h_p[i]·g_p[j]·T_p[i,j] with T_p = S_U,p·diag(ℓ_p)·S_V,pᵀ summed
 * exactly (f32 products of integers, in groups of ranks that share an
 * exponent; exact at any rank up to 8192), h·g·T rounded once in f64, the
 * paths added in f64 and the sum rounded to f32: the same bits on every
 * machine and at every thread count (blocks of 256 rows on nv_get_threads()
 * threads).  Scratch: about (n + 256)·p·r floats, and 2.5 × 256·n doubles a
 * thread.
 */
int blr_dequantize(const uint8_t *buf, size_t len, float *w);

/*
 * the factors of Ŵ = A·Bᵀ as f32, exactly (a product of two f16 is exact in
 * f32), from a payload it validates, the paths side by side (pr = p·r):
 *   a (m × pr): a[i, p·r+k] = h_p[i]·S_U,p[i,k]·ℓ_p[k]
 *   b (n × pr): b[j, p·r+k] = g_p[j]·S_V,p[j,k]
 * so that y = Ŵx is a·(bᵀx): (m+n)·pr multiplies instead of m·n.
 */
int blr_factors(const uint8_t *buf, size_t len, float *a, float *b);

/* the sign bit (i,k) of a packed m×r array as ±1 */
static inline int blr_sign(const uint8_t *bits, size_t i, size_t k, size_t r)
{
	size_t b = i * r + k;
	return (bits[b >> 3] >> (b & 7)) & 1 ? 1 : -1;
}

/* the largest rank a shape can store: 8·⌊min(m,n)/8⌋, and at most 65528 (u16) */
size_t blr_cap(size_t m, size_t n);

/* the request in bits: b·k·m·n */
double blr_target_bits(size_t m, size_t n, double bpw, double k);

/* the ranges of one path's scales, for reports (absolute values of h and g) */
typedef struct {
	double h_min, h_max; /* min and max |h_i| */
	double g_min, g_max; /* min and max |g_j| */
	double l_min, l_max; /* min and max ℓ_k */
} blr_scale_range;

/* the scale ranges of path p of a validated payload */
void blr_path_range(const blr_header *hd, const blr_view *v, blr_scale_range *out);

/*
 * undo a row gauge on a payload in place: every path's h_i becomes
 * f16(f32(h_i / d_i)) (the quotient taken in f64), d (m) finite and nonzero.
 * The one undo of both nvg-encode --row-gauge and blr-pack gauge --undo.
 * The payload is validated first; -1 with reason set, and the bytes left as
 * they were, when a factor is bad or a new scale would not be a finite f16.
 */
int blr_gauge_undo(uint8_t *buf, size_t len, const double *d, size_t nd);

#endif
