/* test-alloc.c - the bit-budget allocator (common/alloc.c) against brute force */
#include "alloc.h"
#include "err.h"
#include "tap.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, alloc_set *a)
{
	return alloc_parse(s, strlen(s), a);
}

static void parses_curves(void)
{
	alloc_set s;

	ok(parse("tensor layer weights bpw error\n"
		 "# comment\n"
		 "t.b 1 50 2.0 0.5   # trailing\n"
		 "t.a 0 100 1.0 3\n"
		 "\n"
		 "t.b 1 50 0.5 2\r\n"
		 "t.a 0 100 0.5 5\n", &s) == 0, "curves parse: %s", nv_err());
	is_int(s.n, 2, "two tensors");
	ok(!strcmp(s.c[0].name, "t.a") && s.c[0].layer == 0 && s.c[0].weights == 100 &&
	   s.c[0].npts == 2 && s.c[0].pts[0].bpw == 0.5 && s.c[0].pts[0].err == 5 &&
	   s.c[0].pts[1].bpw == 1.0 && s.c[0].pts[1].err == 3, "t.a read, points by bpw");
	ok(!strcmp(s.c[1].name, "t.b") && s.c[1].layer == 1 && s.c[1].npts == 2 &&
	   s.c[1].pts[1].bpw == 2.0 && s.c[1].pts[1].err == 0.5, "t.b read");
	ok(s.c[0].pts[0].spent == 0.5 && s.c[1].pts[1].spent == 2.0,
	   "five fields: spent is the bpw");
	alloc_free(&s);
}

/*
 * the sixth field: the budget counts spent bits, the plan names the
 * requests.  a spends 1.25 at 1 bpw and 1.25 at 1.5 (the rank rule rounds
 * both to one rank), b 0.75 at 1 and 1.5 at 1.5.  At 1.25 bpw over 200
 * weights (250 bits) a costs 125 at either request, so it takes 1.5 (error
 * 2.5), and leaves b 125, enough for b at 1 (75) only: error 2.5 + 2, spent
 * 200 bits.  By bpw alone a at 1.5 and b at 1 would count 250 bits.  By
 * layer the two sum at the budgets they share, their spent bits weighted by
 * their weights.
 */
static void spent_counts(void)
{
	alloc_set s, l;
	alloc_result res;
	alloc_opts o = { .bpw = 1.25 };

	ok(parse("tensor layer weights bpw error spent\n"
		 "a 0 100 1 3 1.25\na 0 100 1.5 2.5 1.25\nb 0 100 1 2 0.75\nb 0 100 1.5 1 1.5\n",
		 &s) == 0, "six fields parse: %s", nv_err());
	ok(s.c[0].pts[1].spent == 1.25 && s.c[1].pts[0].spent == 0.75, "spent read");
	ok(alloc_solve(&s, &o, &res) == 0, "solved");
	ok(res.choice[0] == 1 && res.choice[1] == 0 && res.err == 2.5 + 2 && res.bits == 200,
	   "a at its better request of the same bits, b at 1: error %g, %g bits", res.err, res.bits);
	ok(alloc_ceiling(&s) == (125.0 + 150.0) / 200, "the ceiling counts the dearest spent bits");
	alloc_result_free(&res);
	if (alloc_by_layer(&s, &l) < 0) {
		ok(0, "by layer: %s", nv_err());
		alloc_free(&s);
		return;
	}
	ok(l.n == 1 && l.c[0].npts == 2 && l.c[0].pts[0].spent == 1.0 &&
		   l.c[0].pts[1].spent == 1.375,
	   "by layer: spent weighted by weights (%g, %g)", l.c[0].pts[0].spent,
	   l.c[0].pts[1].spent);
	alloc_free(&l);
	alloc_free(&s);
}

static void rejects_bad_curves(void)
{
	static const struct { const char *text, *msg; } bad[] = {
		{ "a 0 10 1\n", "line 1: 4 fields" },
		{ "a 0 10 1 2 3 4\n", "line 1: 7 fields" },
		/* a plan splits at \v and \f: a curve must, or plan-alloc writes an unreadable plan */
		{ "a\vb 0 10 1 2 1\n", "line 1: 7 fields" },
		{ "a x 10 1 2\n", "line 1: layer 'x'" },
		{ "a -1 10 1 2\n", "line 1: layer '-1'" },
		{ "a 0 0 1 2\n", "line 1: weights '0'" },
		{ "a 0 1.5 1 2\n", "line 1: weights '1.5'" },
		{ "a 0 10 0 2\n", "line 1: bpw '0'" },
		{ "a 0 10 16 2\n", "line 1: bpw '16'" },
		{ "a 0 10 nan 2\n", "line 1: bpw 'nan'" },
		{ "a 0 10 1 -1\n", "line 1: error '-1'" },
		{ "a 0 10 1 inf\n", "line 1: error 'inf'" },
		{ "a 0 10 1 2 0\n", "line 1: spent '0'" },
		{ "a 0 10 1 2 16\n", "line 1: spent '16'" },
		{ "a 0 10 1 2 nan\n", "line 1: spent 'nan'" },
		{ "tensor layer weights bpw error bits\n", "line 1: layer 'layer'" },
		{ "a 0 10 1 2\nb 0 5 1 1\na 1 10 2 1\n", "line 3: tensor 'a' in layer 1" },
		{ "a 0 10 1 2\na 0 11 2 1\n", "line 2: tensor 'a' has 11 weights" },
		{ "a 0 10 1 2\n\na 0 10 1 1\n", "line 3: tensor 'a' at 1 bpw already" },
		{ "# nothing\n", "no curve points" },
	};
	alloc_set s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(parse(bad[i].text, &s) < 0 && !strncmp(nv_err(), bad[i].msg, strlen(bad[i].msg)) &&
		   s.n == 0, "rejects case %zu: %s", i, nv_err());
	ok(alloc_parse("a 0 10 1 2\0", 11, &s) < 0 && strstr(nv_err(), "NUL"), "NUL refused");
	ok(parse("a 0 10\f1\v2\n", &s) == 0 && s.n == 1 && s.c[0].pts[0].err == 2,
	   "form feed and vertical tab separate fields: %s", nv_err());
	alloc_free(&s);
}

/*
 * a random instance: ng tensors over nl layers, np budgets each; with
 * apart, each point's spent bits are its bpw times 0.7 to 1.3 (so not
 * always ascending with bpw, as a rank rule's rounding may make them)
 */
static void make_set(tap_rng *r, size_t ng, size_t nl, size_t np, int convex, int apart,
		     alloc_set *s)
{
	static const double grid[] = { 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0 };

	s->n = ng;
	s->c = calloc(ng, sizeof(alloc_curve));
	for (size_t i = 0; i < ng; i++) {
		alloc_curve *c = &s->c[i];
		double a = 1 + 9 * rng_unif(r), k = 0.5 + 2 * rng_unif(r);
		char nm[32];

		snprintf(nm, sizeof(nm), "t%02zu", i);
		c->name = strdup(nm);
		c->layer = i * nl / ng;
		c->weights = (double)(16 + (rng_u64(r) % 5000));
		c->npts = np;
		c->pts = calloc(np, sizeof(alloc_point));
		for (size_t j = 0; j < np; j++) {
			double b = grid[j];
			/* a·e^{-kb} is convex in b, hence in bits; the other draws anything */
			c->pts[j] = (alloc_point){ b, b, convex ? a * exp(-k * b) : 10 * rng_unif(r) };
			if (apart)
				c->pts[j].spent = b * (0.7 + 0.6 * rng_unif(r));
		}
	}
}

/* the least summed error over every combination within the budget */
static double brute(const alloc_set *s, const unsigned char *kept, double budget_bits)
{
	size_t n = s->n, idx[16] = { 0 };
	double best = INFINITY;

	for (;;) {
		double bits = 0, err = 0;
		size_t i;

		for (i = 0; i < n; i++) {
			if (kept && kept[i]) {
				bits += 16 * s->c[i].weights;
				continue;
			}
			bits += s->c[i].weights * s->c[i].pts[idx[i]].spent;
			err += s->c[i].pts[idx[i]].err;
		}
		if (bits <= budget_bits * (1 + 1e-12) && err < best)
			best = err;
		for (i = 0; i < n; i++) {
			if (kept && kept[i])
				continue;
			if (++idx[i] < s->c[i].npts)
				break;
			idx[i] = 0;
		}
		if (i == n)
			return best;
	}
}

static double total_w(const alloc_set *s)
{
	double w = 0;

	for (size_t i = 0; i < s->n; i++)
		w += s->c[i].weights;
	return w;
}

/* a target between the floor and the top of the curves */
static double draw_target(tap_rng *r, const alloc_set *s)
{
	double lo = 0, hi = 0, w = total_w(s);

	for (size_t i = 0; i < s->n; i++) {
		double a = INFINITY, b = 0;

		for (size_t j = 0; j < s->c[i].npts; j++) {
			a = fmin(a, s->c[i].pts[j].spent);
			b = fmax(b, s->c[i].pts[j].spent);
		}
		lo += s->c[i].weights * a;
		hi += s->c[i].weights * b;
	}
	return (lo + (hi - lo) * rng_unif(r)) / w;
}

/* the result's own totals, recomputed from its choices */
static int result_adds_up(const alloc_set *s, const alloc_result *res)
{
	double bits = 0, err = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (res->choice[i] == ALLOC_KEPT) {
			bits += 16 * s->c[i].weights;
			continue;
		}
		bits += s->c[i].weights * s->c[i].pts[res->choice[i]].spent;
		err += s->c[i].pts[res->choice[i]].err;
	}
	return fabs(bits - res->bits) <= 1e-9 * bits && fabs(err - res->err) <= 1e-9 * (1 + err);
}

/*
 * the solver against enumeration.  Tolerances: the budget test allows the
 * solver's own relative slack of 1e-12 (Σ w·b against b·Σ w rounds
 * differently); errors agree to 1e-9 relative (sums of a few doubles in
 * different orders).
 */
static void matches_brute_force(int convex, int apart)
{
	tap_rng r = { convex ? 11u : apart ? 13u : 12u };
	int all_opt = 1, all_eq = 1, all_budget = 1, all_bound = 1, all_sum = 1;

	for (int it = 0; it < 300; it++) {
		size_t ng = 2 + rng_u64(&r) % 5, np = 2 + rng_u64(&r) % 4;
		alloc_set s;
		alloc_result res;
		alloc_opts o = { 0 };
		double want;

		make_set(&r, ng, ng, np, convex, apart, &s);
		o.bpw = draw_target(&r, &s);
		want = brute(&s, NULL, o.bpw * total_w(&s));
		if (alloc_solve(&s, &o, &res) < 0) {
			all_eq = 0;
			diag("instance %d: %s", it, nv_err());
			alloc_free(&s);
			continue;
		}
		all_opt &= res.optimal;
		if (fabs(res.err - want) > 1e-9 * (1 + want)) {
			all_eq = 0;
			diag("instance %d: solver %.17g, brute force %.17g", it, res.err, want);
		}
		all_budget &= res.bits <= o.bpw * res.weights * (1 + 1e-12);
		all_bound &= res.bound <= res.err + 1e-9 * (1 + res.err);
		all_sum &= result_adds_up(&s, &res);
		alloc_result_free(&res);
		alloc_free(&s);
	}
	const char *kind = convex ? "convex" : apart ? "spent apart from bpw" : "non-convex";
	ok(all_eq, "%s curves: 300 random instances match the brute-force optimum", kind);
	ok(all_opt, "%s curves: every search finished (proved optimal)", kind);
	ok(all_budget, "%s curves: every plan meets its budget", kind);
	ok(all_bound, "%s curves: the relaxation is a lower bound", kind);
	ok(all_sum, "%s curves: reported bits and error add up", kind);
}

/* on convex curves at a budget that ends on a hull step the relaxation is exact */
static void convex_bound_is_tight_on_a_step(void)
{
	alloc_set s;
	alloc_result res;
	alloc_opts o = { 0 };

	/* two equal tensors: the hull step of each costs 50 bits for 1.0 error */
	ok(parse("a 0 100 0.5 2\na 0 100 1.0 1\nb 1 100 0.5 2\nb 1 100 1.0 1\n", &s) == 0,
	   "two-tensor set");
	o.bpw = 0.75;
	ok(alloc_solve(&s, &o, &res) == 0, "solved");
	/* the bound spends the solver's 1e-12 relative budget slack: 1e-9 covers it */
	ok(res.err == 3 && fabs(res.bound - 3) < 1e-9 && res.bits == 150,
	   "one step fits: error 3, bound 3, 150 bits (got %g, %g, %g)", res.err, res.bound,
	   res.bits);
	ok(res.choice[0] == 1 && res.choice[1] == 0, "the tie goes to the first tensor");
	alloc_result_free(&res);
	alloc_free(&s);
}

static void node_limit_still_feasible(void)
{
	tap_rng r = { 5 };
	alloc_set s;
	alloc_result res;
	alloc_opts o = { 0 };
	int feas = 1, worse_ok = 1, some_stopped = 0;

	for (int it = 0; it < 50; it++) {
		double want;

		make_set(&r, 6, 6, 5, 0, 0, &s);
		o.bpw = draw_target(&r, &s);
		o.node_limit = 1;
		want = brute(&s, NULL, o.bpw * total_w(&s));
		if (alloc_solve(&s, &o, &res) == 0) {
			feas &= res.bits <= o.bpw * res.weights * (1 + 1e-12);
			worse_ok &= res.err >= want - 1e-9 * (1 + want) && res.bound <= want + 1e-9;
			some_stopped |= !res.optimal;
			alloc_result_free(&res);
		} else {
			feas = 0;
		}
		alloc_free(&s);
	}
	ok(feas, "a stopped search still returns a plan within the budget");
	ok(worse_ok, "a stopped search is never better than the optimum, bound below it");
	ok(some_stopped, "a node limit of 1 stops some searches (and says so)");
}

static void floor_and_keep_errors(void)
{
	alloc_set s;
	alloc_result res;
	alloc_opts o = { 0 };

	ok(parse("a 0 100 0.5 2\na 0 100 1.0 1\nb 1 300 0.25 2\nb 1 300 1.0 1\n", &s) == 0,
	   "set");
	o.bpw = 0.3;
	ok(alloc_solve(&s, &o, &res) < 0 && strstr(nv_err(), "below the floor") &&
	   strstr(nv_err(), "0.3125"), "below the floor: %s", nv_err());
	o.bpw = 1;
	o.keep = 2;
	ok(alloc_solve(&s, &o, &res) < 0 && strstr(nv_err(), "cannot keep 2 layers"),
	   "keeping every layer refused: %s", nv_err());
	o.keep = 1;
	ok(alloc_solve(&s, &o, &res) < 0 && strstr(nv_err(), "keeping 1 layers exact"),
	   "a keep the budget cannot pay for: %s", nv_err());
	alloc_free(&s);
}

/* keep: the layers with the largest error in the plain solution, at 16 bpw */
static void keep_matches_brute_force(void)
{
	tap_rng r = { 21 };
	int good = 1;

	for (int it = 0; it < 100; it++) {
		alloc_set s;
		alloc_result plain, kept;
		alloc_opts o = { 0 };
		unsigned char flag[16] = { 0 };
		double lerr[8] = { 0 }, want;
		size_t top = 0;

		make_set(&r, 6, 3, 4, it % 2, it % 3 == 0, &s);
		o.bpw = 6 + 4 * rng_unif(&r);
		if (alloc_solve(&s, &o, &plain) < 0) {
			good = 0;
			alloc_free(&s);
			continue;
		}
		for (size_t i = 0; i < s.n; i++)
			lerr[s.c[i].layer] += s.c[i].pts[plain.choice[i]].err;
		for (size_t l = 1; l < 3; l++)
			if (lerr[l] > lerr[top])
				top = l;
		for (size_t i = 0; i < s.n; i++)
			flag[i] = s.c[i].layer == top;
		want = brute(&s, flag, o.bpw * total_w(&s));
		o.keep = 1;
		if (alloc_solve(&s, &o, &kept) < 0) {
			/* only when even the cheapest rest cannot pay for the kept layer */
			good &= isinf(want);
		} else {
			good &= kept.nkept == 1 && kept.kept[0] == top &&
				fabs(kept.err - want) <= 1e-9 * (1 + want) &&
				kept.bits <= o.bpw * kept.weights * (1 + 1e-12) &&
				result_adds_up(&s, &kept);
			for (size_t i = 0; i < s.n; i++)
				good &= (kept.choice[i] == ALLOC_KEPT) == (s.c[i].layer == top);
			alloc_result_free(&kept);
		}
		alloc_result_free(&plain);
		alloc_free(&s);
	}
	ok(good, "keep 1: the worst layer kept at 16 bpw, the rest optimal (100 instances)");
}

static void by_layer_and_bounds(void)
{
	alloc_set s, l;
	alloc_result res;
	alloc_opts o = { 0 };

	ok(parse("a 0 100 0.5 4\na 0 100 1 2\na 0 100 2 1\n"
		 "b 0 50 1 3\nb 0 50 2 1\nb 0 50 0.5 9\n"
		 "c 1 10 1 7\nc 1 10 3 1\n", &s) == 0, "set");
	ok(alloc_by_layer(&s, &l) == 0 && l.n == 2, "two layer groups");
	ok(l.c[0].name == NULL && l.c[0].weights == 150 && l.c[0].npts == 3 &&
	   l.c[0].pts[0].err == 13 && l.c[0].pts[1].err == 5 && l.c[0].pts[2].err == 2,
	   "layer 0: weights and errors summed at each budget");
	ok(l.c[1].layer == 1 && l.c[1].npts == 2 && l.c[1].pts[1].bpw == 3, "layer 1 as is");
	o.bpw = 1.5;
	/* budget 240 bits: layer 0 at 2 bpw (300 bits) cannot fit; 1 + 3 bpw (180) wins */
	ok(alloc_solve(&l, &o, &res) == 0, "solved by layer");
	ok(res.err == 5 + 1 && res.choice[0] == 1 && res.choice[1] == 1,
	   "layer granularity: 1 bpw to layer 0, 3 to layer 1 (error %g)", res.err);
	alloc_result_free(&res);
	alloc_free(&l);
	ok(alloc_bound(&s, 0.75, 2) == 0 && s.c[0].npts == 2 && s.c[2].npts == 1 &&
	   s.c[2].pts[0].bpw == 1, "--min/--max drop the points outside");
	ok(alloc_bound(&s, 1.5, 1.8) < 0 && strstr(nv_err(), "no point within"),
	   "a tensor with no point left: %s", nv_err());
	alloc_free(&s);
	ok(parse("a 0 10 1 1\nb 0 10 2 1\n", &s) == 0 && alloc_by_layer(&s, &l) < 0 &&
	   strstr(nv_err(), "layer 0: its 2 tensors share no bpw"), "no common budget: %s",
	   nv_err());
	alloc_free(&s);
}

static void per_layer_and_svg(void)
{
	alloc_set s;
	alloc_result res;
	alloc_opts o = { .bpw = 1.0 };
	double *bpw, *err;
	size_t nl;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	ok(parse("a 0 100 0.5 4\na 0 100 1.5 1\nb 2 100 0.5 2\nb 2 100 1.5 1\n", &s) == 0, "set");
	ok(alloc_solve(&s, &o, &res) == 0, "solved");
	ok(alloc_per_layer(&s, &res, &bpw, &err, &nl) == 0 && nl == 3, "three layer slots");
	ok(bpw[0] == 1.5 && err[0] == 1 && isnan(bpw[1]) && bpw[2] == 0.5 && err[2] == 2,
	   "per layer: layer 0 at 1.5, layer 1 absent, layer 2 at 0.5");
	free(bpw);
	free(err);
	f = open_memstream(&text, &len);
	ok(alloc_write_svg(f, &s, &res, 1.0) == 0, "svg written");
	fclose(f);
	ok(strstr(text, "<svg") && strstr(text, "layer 2: 0.5<") && strstr(text, "</svg>"),
	   "svg names each layer's value");
	free(text);
	/* a target above every layer's bits: its line stays inside the panel (y 30..180) */
	f = open_memstream(&text, &len);
	ok(alloc_write_svg(f, &s, &res, 4.0) == 0, "svg written for a target of 4");
	fclose(f);
	{
		const char *ln = strstr(text, "stroke-dasharray");
		double y1 = -1;

		int got;

		ln = ln ? strstr(text, "<line ") : NULL;
		got = ln && sscanf(ln, "<line x1=\"%*g\" x2=\"%*g\" y1=\"%lf\"", &y1) == 1;
		ok(got && y1 >= 30 && y1 <= 180 && strstr(text, ">4.4</text>"),
		   "the target line is on the chart (y %.1f), the axis labelled up to 4.4", y1);
	}
	free(text);
	f = open_memstream(&text, &len);
	ok(alloc_write_plan(f, &s, &res, 1.0) == 0, "plan written");
	fclose(f);
	{
		plan p;
		ok(plan_parse(text, len, &p) == 0 && plan_bpw_for(&p, "a", 0, 9) == 1.5 &&
		   plan_bpw_for(&p, "b", 2, 9) == 0.5 && p.ntensors == 2,
		   "the plan reads back through the plan parser");
		plan_free(&p);
	}
	free(text);
	alloc_result_free(&res);
	alloc_free(&s);
}

int main(void)
{
	parses_curves();
	rejects_bad_curves();
	spent_counts();
	matches_brute_force(1, 0);
	matches_brute_force(0, 0);
	matches_brute_force(0, 1);
	convex_bound_is_tight_on_a_step();
	node_limit_still_feasible();
	floor_and_keep_errors();
	keep_matches_brute_force();
	by_layer_and_bounds();
	per_layer_and_svg();
	return done_testing();
}
