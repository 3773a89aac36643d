/*
 * tap.h - a tiny TAP producer for the C unit tests (one file per common/
 * module).  Each check prints "ok N - title" or "not ok N - title" with the
 * values that disagreed; done_testing() prints the plan and returns the exit
 * status.  Random inputs come from a fixed-seed splitmix64 so that a failure
 * reproduces.
 */
#ifndef NV_TAP_H
#define NV_TAP_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int tap_n, tap_failed;

static void tap_vresult(int pass, const char *fmt, va_list ap)
{
	tap_n++;
	if (!pass)
		tap_failed++;
	printf("%sok %d - ", pass ? "" : "not ", tap_n);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

/* ok(condition, title...) */
static int ok(int pass, const char *fmt, ...) __attribute__((format(printf, 2, 3), unused));
static int ok(int pass, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vresult(pass, fmt, ap);
	va_end(ap);
	return pass;
}

/* is_int(got, want, title...) */
static int is_int(long long got, long long want, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), unused));
static int is_int(long long got, long long want, const char *fmt, ...)
{
	va_list ap;
	int pass = got == want;

	va_start(ap, fmt);
	tap_vresult(pass, fmt, ap);
	va_end(ap);
	if (!pass)
		printf("#   got %lld, want %lld\n", got, want);
	return pass;
}

/* near(got, want, tol, title...): |got - want| <= tol */
static int near(double got, double want, double tol, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), unused));
static int near(double got, double want, double tol, const char *fmt, ...)
{
	va_list ap;
	int pass = fabs(got - want) <= tol;

	va_start(ap, fmt);
	tap_vresult(pass, fmt, ap);
	va_end(ap);
	if (!pass)
		printf("#   got %.17g, want %.17g, |diff| %.3g > tol %.3g\n", got, want,
		       fabs(got - want), tol);
	return pass;
}

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static int done_testing(void) __attribute__((unused));
static int done_testing(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* splitmix64: fixed-seed random numbers for reproducible inputs */
typedef struct { uint64_t s; } tap_rng;

static uint64_t rng_u64(tap_rng *r) __attribute__((unused));
static uint64_t rng_u64(tap_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double rng_unif(tap_rng *r) __attribute__((unused));
static double rng_unif(tap_rng *r)
{
	return (double)(rng_u64(r) >> 11) * 0x1.0p-53;
}

/* standard normal (Box-Muller) */
static double rng_normal(tap_rng *r) __attribute__((unused));
static double rng_normal(tap_rng *r)
{
	double u = rng_unif(r), v = rng_unif(r);

	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(2.0 * 3.14159265358979323846 * v);
}

#endif
