/*
 * fuzz-curves.c - libFuzzer target for alloc_parse (plan-alloc's error
 * curves): any text either fails with a reason or gives curves sorted by
 * layer and name, each with distinct ascending budgets in (0, 16), finite
 * errors ≥ 0 and an integer weight count in [1, 2^53]; solved at their
 * ceiling (every curve at its top point, so a plan exists) the allocator
 * finds a plan within the budget whose choices are points of the curves,
 * and alloc_write_plan writes it as a plan that plan_parse accepts.
 */
#include "fuzz.h"
#include "alloc.h"
#include "err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_curves(const alloc_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const alloc_curve *c = &s->c[i];

		if (!c->name || c->npts == 0 || !(c->weights >= 1) || c->weights > 0x1p53 ||
		    c->weights != floor(c->weights))
			abort();
		if (i && (s->c[i - 1].layer > c->layer ||
			  (s->c[i - 1].layer == c->layer && strcmp(s->c[i - 1].name, c->name) >= 0)))
			abort();
		for (size_t k = 0; k < c->npts; k++)
			if (!(c->pts[k].bpw > 0 && c->pts[k].bpw < 16) || !(c->pts[k].err >= 0) ||
			    !isfinite(c->pts[k].err) || (k && !(c->pts[k - 1].bpw < c->pts[k].bpw)))
				abort();
	}
}

/* the plan of r written and parsed: a valid plan */
static void check_plan(const alloc_set *s, const alloc_result *r, double target)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	plan p;

	if (!f || alloc_write_plan(f, s, r, target) < 0 || fclose(f) != 0 ||
	    plan_parse(text, len, &p) < 0)
		abort();
	plan_free(&p);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	alloc_opts o = { 0, 0, 2000 };
	alloc_result r;
	alloc_set s;

	if (alloc_parse((const char *)data, size, &s) < 0)
		return 0;
	check_curves(&s);
	o.bpw = alloc_ceiling(&s);
	if (alloc_solve(&s, &o, &r) < 0)
		abort();
	if (!(r.bits <= o.bpw * r.weights * (1 + 1e-9)))
		abort();
	for (size_t i = 0; i < s.n; i++)
		if (r.choice[i] >= s.c[i].npts)
			abort();
	check_plan(&s, &r, o.bpw);
	alloc_result_free(&r);
	alloc_free(&s);
	return 0;
}
