/* parse.c - strict number parsing (see parse.h) */
#include "parse.h"
#include "err.h"
#include "mem.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int parse_double_raw(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s) {
		nv_seterr("empty number");
		return -1;
	}
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0') {
		nv_seterr("'%s' is not a number", s);
		return -1;
	}
	if (errno == ERANGE || !isfinite(v)) {
		nv_seterr("'%s' is out of range", s);
		return -1;
	}
	*out = v;
	return 0;
}

int nv_parse_double(const char *s, double lo, double hi, double *out)
{
	double v;

	if (parse_double_raw(s, &v) < 0)
		return -1;
	if (v < lo || v > hi) {
		nv_seterr("%s is outside [%g, %g]", s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int nv_parse_double_open(const char *s, double lo, double hi, double *out)
{
	double v;

	if (parse_double_raw(s, &v) < 0)
		return -1;
	if (!(v > lo && v < hi)) {
		nv_seterr("%s is outside (%g, %g)", s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int nv_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s) {
		nv_seterr("empty number");
		return -1;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end != '\0') {
		nv_seterr("'%s' is not an integer", s);
		return -1;
	}
	if (errno == ERANGE || v < lo || v > hi) {
		nv_seterr("%s is outside [%ld, %ld]", s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int nv_parse_size(const char *s, size_t lo, size_t hi, size_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+') {
		nv_seterr("'%s' is not a size", s ? s : "");
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end != '\0') {
		nv_seterr("'%s' is not a size", s);
		return -1;
	}
	if (errno == ERANGE || v > SIZE_MAX || (size_t)v < lo || (size_t)v > hi) {
		nv_seterr("%s is outside [%zu, %zu]", s, lo, hi);
		return -1;
	}
	*out = (size_t)v;
	return 0;
}

int nv_parse_shape(const char *s, size_t *m, size_t *n)
{
	char buf[64], *x;
	size_t prod, sep = 1;

	if (!s || strlen(s) >= sizeof(buf)) {
		nv_seterr("shape '%s' is not MxN", s ? s : "");
		return -1;
	}
	strcpy(buf, s);
	x = strchr(buf, 'x');
	if (!x) {
		x = strstr(buf, "\xc3\x97"); /* × in UTF-8 */
		sep = 2;
	}
	if (!x) {
		nv_seterr("shape '%s' is not MxN", s);
		return -1;
	}
	*x = '\0';
	if (nv_parse_size(buf, 1, SIZE_MAX, m) < 0 ||
	    nv_parse_size(x + sep, 1, SIZE_MAX, n) < 0) {
		nv_seterr("shape '%s' is not MxN with M, N ≥ 1", s);
		return -1;
	}
	return nv_mul(*m, *n, &prod);
}
