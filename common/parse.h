/*
 * parse.h - strict number parsing for options and text files.
 *
 * The whole string must be a number (no trailing bytes, no empty string);
 * values are range-checked by the caller's bounds.  Failures set the reason
 * (err.h) and return -1.  Never atoi/atof: a typo must not become a zero.
 */
#ifndef NV_PARSE_H
#define NV_PARSE_H

#include <stddef.h>

/* a finite double in [lo, hi] */
int nv_parse_double(const char *s, double lo, double hi, double *out);

/* a double in the open interval (lo, hi) */
int nv_parse_double_open(const char *s, double lo, double hi, double *out);

/* a decimal integer in [lo, hi] */
int nv_parse_long(const char *s, long lo, long hi, long *out);

/* a decimal size in [lo, hi] */
int nv_parse_size(const char *s, size_t lo, size_t hi, size_t *out);

/* "MxN" (or "M×N"): two sizes ≥ 1 whose product fits in size_t */
int nv_parse_shape(const char *s, size_t *m, size_t *n);

#endif
