/*
 * pack.h - the packer both encoders share: the f64 CPU encoder (nv_pack,
 * nvg.h) and the f32 device encoder (cl/nvg_cl.c) settle their scales and
 * build the payload through these two functions, so that one set of
 * refusals holds for both.
 *
 * Settling one path (the seed's pack): a = rms(h), c = rms(g); h/a, g/c,
 * ℓ·a·c; an ℓ below f16 (it rounds to 0 or |ℓ| < 6.1e-5) is a dead rank
 * component and becomes 0; every scale is rounded to f16 in place.  The
 * path is refused when a or c is not finite and positive, an ℓ is not
 * finite or overflows f16, or an |h| or |g| exceeds 65000.
 */
#ifndef NV_PACK_H
#define NV_PACK_H

#include <stddef.h>
#include <stdint.h>

/* one path to pack */
typedef struct {
	double *h, *l, *g; /* (m), (r), (n): settled in place */
	const int8_t *su;  /* (m × r) ±1 */
	const int8_t *sv;  /* (n × r) ±1 */
} nv_pack_path;

/* settle path p (0-based, for the reason) in place: 0, or 1 refused with reason */
int nv_pack_settle(double *h, double *l, double *g, size_t m, size_t n, size_t r, size_t p);

/*
 * settle np paths (1 or 2) of an m × n rank-r model in place and pack them
 * into a fresh payload (*bytes, *len).  0 done; 1 refused (reason set,
 * *bytes NULL); -1 with reason on another failure.
 */
int nv_pack_paths(size_t m, size_t n, size_t r, size_t np, nv_pack_path *p, uint8_t **bytes,
		  size_t *len);

#endif
