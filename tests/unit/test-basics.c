/* test-basics.c - err, mem, parse (common/ basics) */
#include "err.h"
#include "mem.h"
#include "par.h"
#include "parse.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* nv_par_range's parts: each index's visits and the start of the part that visited it */
typedef struct {
	int *visits;
	size_t *start, *end;
} range_log;

static void range_visit(void *ctx, size_t lo, size_t hi)
{
	range_log *g = ctx;

	for (size_t i = lo; i < hi; i++) {
		g->visits[i]++;
		g->start[i] = lo;
		g->end[i] = hi;
	}
}

/* n indices in up to nt parts of at least grain: each visited once, parts contiguous */
static void check_range(size_t n, size_t nt, size_t grain, size_t most)
{
	range_log g = { calloc(n + 1, sizeof(int)), calloc(n + 1, sizeof(size_t)),
			calloc(n + 1, sizeof(size_t)) };
	size_t parts = 0, shortest = n;
	int once = 1;

	nv_par_range(n, nt, grain, range_visit, &g);
	for (size_t i = 0; i < n; i++) {
		once &= g.visits[i] == 1 && g.start[i] <= i && i < g.end[i];
		if (i == 0 || g.start[i] != g.start[i - 1]) {
			once &= g.start[i] == i && (i == 0 || g.end[i - 1] == i);
			parts++;
			shortest = g.end[i] - g.start[i] < shortest ? g.end[i] - g.start[i] : shortest;
		}
	}
	ok(once && parts <= most && (parts <= 1 || shortest >= grain),
	   "nv_par_range(%zu, %zu threads, grain %zu): each index once, %zu contiguous parts of "
	   "at least %zu", n, nt, grain, parts, shortest);
	free(g.visits);
	free(g.start);
	free(g.end);
}

/* nv_par_items: each item's visits and the largest thread index seen */
typedef struct {
	int *visits;
	size_t *thread;
} items_log;

static void item_visit(void *ctx, size_t item, size_t thread)
{
	items_log *g = ctx;

	g->visits[item]++;
	g->thread[item] = thread;
}

static void check_items(size_t n, size_t nt)
{
	items_log g = { calloc(n + 1, sizeof(int)), calloc(n + 1, sizeof(size_t)) };
	size_t most = nt > n ? n : nt, top = 0;
	int once = 1;

	most = most < 1 ? 1 : most > NV_PAR_MAX ? NV_PAR_MAX : most;
	nv_par_items(n, nt, item_visit, &g);
	for (size_t i = 0; i < n; i++) {
		once &= g.visits[i] == 1;
		top = g.thread[i] > top ? g.thread[i] : top;
	}
	ok(once && top < most, "nv_par_items(%zu, %zu threads): each item once, thread index < %zu",
	   n, nt, most);
	free(g.visits);
	free(g.thread);
}

int main(void)
{
	double d;
	size_t m, n;
	long l;

	check_range(1000, 4, 100, 4);
	check_range(150, 4, 100, 1);            /* under two grains: one part */
	check_range(0, 4, 100, 0);
	check_range(100000, 1000, 1, NV_PAR_MAX); /* at most NV_PAR_MAX threads */
	check_range(7, 3, 0, 3);                /* grain 0 reads as 1 */
	check_items(1000, 4);
	check_items(3, 8);                      /* no more threads than items */
	check_items(0, 4);
	check_items(5000, 1000);                /* at most NV_PAR_MAX threads */
	ok(nv_parse_double("0.55", 0, 16, &d) == 0 && d == 0.55, "parse 0.55");
	ok(nv_parse_double("0.55x", 0, 16, &d) < 0, "trailing bytes refused");
	ok(nv_parse_double("", 0, 16, &d) < 0, "empty refused");
	ok(nv_parse_double("nan", 0, 16, &d) < 0, "nan refused");
	ok(nv_parse_double("17", 0, 16, &d) < 0, "out of range refused");
	ok(nv_parse_double_open("0", 0, 16, &d) < 0, "open interval excludes its end");
	ok(nv_parse_long("-3", -5, 5, &l) == 0 && l == -3, "parse -3");
	ok(nv_parse_long("3.0", -5, 5, &l) < 0, "3.0 is not an integer");
	ok(nv_parse_size("-1", 0, 10, &m) < 0, "negative size refused");
	ok(nv_parse_shape("576x1536", &m, &n) == 0 && m == 576 && n == 1536, "shape 576x1536");
	ok(nv_parse_shape("0x5", &m, &n) < 0, "zero dimension refused");
	ok(nv_parse_shape("5", &m, &n) < 0, "shape without x refused");
	ok(nv_parse_shape("4294967296x4294967296", &m, &n) < 0, "overflowing shape refused");
	ok(nv_parse_shape("3×4", &m, &n) == 0 && m == 3 && n == 4, "shape 3×4 (the multiplication sign)");
	ok(nv_parse_shape("3x4x5", &m, &n) < 0, "three dimensions refused");
	ok(nv_parse_shape("x4", &m, &n) < 0, "a missing dimension refused");
	ok(nv_parse_size("18446744073709551616", 0, SIZE_MAX, &m) < 0, "a size beyond SIZE_MAX refused");
	ok(nv_mul(SIZE_MAX / 2 + 1, 2, &m) < 0 && strstr(nv_err(), "overflows"), "mul overflow named");
	ok(nv_mul(SIZE_MAX / 2, 2, &m) == 0 && m == SIZE_MAX - 1, "the largest product that fits");
	ok(nv_add(SIZE_MAX, 1, &m) < 0, "add overflow refused");
	ok(nv_calloc(SIZE_MAX / 2, 4) == NULL, "overflowing calloc refused");
	/* zeroed whatever the block held before: a small one the heap hands
	 * back dirty, a large one of its own pages */
	for (size_t bytes = 4096; bytes <= (size_t)8 << 20; bytes *= 2048) {
		unsigned char *p = nv_malloc(bytes, 1), *z;
		size_t nz = 0;

		memset(p, 0xab, bytes);
		free(p);
		z = nv_calloc(bytes / 8, 8);
		for (size_t i = 0; z && i < bytes; i++)
			nz += z[i] != 0;
		ok(z && nz == 0, "calloc of %zu bytes zeroed (%zu nonzero)", bytes, nz);
		free(z);
	}
	{
		char *d = nv_strdup("rank");

		ok(d && strcmp(d, "rank") == 0, "strdup");
		free(d);
	}
	ok(nv_malloc(SIZE_MAX / 4, 8) == NULL, "overflowing allocation refused");
	nv_seterr("bad value %d", 7);
	nv_preerr("field %s", "rank");
	ok(strcmp(nv_err(), "field rank: bad value 7") == 0, "reason prefixed: %s", nv_err());
	ok(nv_err_output_path() == NULL, "a failure is no output's until marked");
	nv_seterr("write failed: full");
	nv_err_output("out.cmf");
	nv_preerr("context");
	ok(nv_err_output_path() && strcmp(nv_err_output_path(), "out.cmf") == 0,
	   "the output marked stays through a prefix");
	nv_seterr("another failure");
	ok(nv_err_output_path() == NULL, "a new reason unmarks it");
	return done_testing();
}
