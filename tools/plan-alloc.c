/* plan-alloc - per-tensor error curves in, a bit-budget plan out (man plan-alloc(1)) */
#include "alloc.h"
#include "aout.h"
#include "fileio.h"
#include "plan.h"
#include "parse.h"
#include "tool.h"

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static const char synopsis[] =
	"plan-alloc --bpw B [--granularity tensor | layer] [--keep N] [--min B] [--max B]\n"
	"           [--nodes N] [--plot FILE.svg] [-o PLAN] [-q] [CURVES]\n"
	"plan-alloc --resolve PLAN [--bpw B] [-o OUT] [TENSORS]\n"
	"plan-alloc -h | --version\n";

typedef struct {
	alloc_opts a;
	int by_layer, quiet, have_bpw;
	double lo, hi;
	const char *out, *plot, *in, *resolve;
	int other; /* an allocation option was given */
} opts;

static int parse_opts(int argc, char **argv, opts *o)
{
	static const struct option lo[] = {
		{ "bpw", required_argument, 0, 'b' },   { "granularity", required_argument, 0, 'g' },
		{ "keep", required_argument, 0, 'k' },  { "min", required_argument, 0, 'm' },
		{ "max", required_argument, 0, 'M' },   { "nodes", required_argument, 0, 'n' },
		{ "plot", required_argument, 0, 'p' },  { "output", required_argument, 0, 'o' },
		{ "quiet", no_argument, 0, 'q' },       { "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' },     { "resolve", required_argument, 0, 'r' },
		{ 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "o:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (tool_parse_bpw(optarg, &o->a.bpw) < 0)
				return tool_usage_error("bad --bpw '%s': %s", optarg, nv_err());
			o->have_bpw = 1;
			break;
		case 'g':
			if (strcmp(optarg, "tensor") && strcmp(optarg, "layer"))
				return tool_usage_error("bad --granularity '%s': tensor or layer",
							optarg);
			o->by_layer = optarg[0] == 'l';
			break;
		case 'k':
			if (nv_parse_size(optarg, 0, (size_t)PLAN_MAX_LAYER, &o->a.keep) < 0)
				return tool_usage_error("bad --keep '%s': %s", optarg, nv_err());
			break;
		case 'm':
		case 'M':
			if (tool_parse_bpw(optarg, c == 'm' ? &o->lo : &o->hi) < 0)
				return tool_usage_error("bad --%s '%s': %s", c == 'm' ? "min" : "max",
							optarg, nv_err());
			break;
		case 'n':
			if (nv_parse_size(optarg, 1, SIZE_MAX / 2, &o->a.node_limit) < 0)
				return tool_usage_error("bad --nodes '%s': %s", optarg, nv_err());
			break;
		case 'p': o->plot = optarg; break;
		case 'r': o->resolve = optarg; break;
		case 'o': o->out = optarg; break;
		case 'q': o->quiet = 1; break;
		case 'h': fputs(synopsis, stdout); return tool_finish(EXIT_OK) ? EXIT_FAIL : -1;
		case 'V': tool_version(); return tool_finish(EXIT_OK) ? EXIT_FAIL : -1;
		default: return EXIT_USAGE;
		}
		o->other |= strchr("gkmMnpq", c) != NULL;
	}
	if (o->resolve && o->other)
		return tool_usage_error("--resolve takes only --bpw and -o");
	if (!o->have_bpw && !o->resolve)
		return tool_usage_error("--bpw is required");
	if (o->lo > o->hi)
		return tool_usage_error("--min %g is above --max %g", o->lo, o->hi);
	if (optind + 1 < argc)
		return tool_usage_error("one curve file at most ('%s' is extra)", argv[optind + 1]);
	o->in = optind < argc ? argv[optind] : "-";
	return 0;
}

static void summary(const alloc_set *s, const alloc_result *r, const opts *o, size_t ntensors)
{
	double *bpw, *err;
	size_t nl, np = 0;

	for (size_t i = 0; i < s->n; i++)
		np += s->c[i].npts;
	fprintf(stderr, "plan-alloc: %zu tensors, %zu groups by %s, %zu points\n", ntensors, s->n,
		o->by_layer ? "layer" : "tensor", np);
	fprintf(stderr, "plan-alloc: target %g bpw over %.0f weights: plan %.6f bpw, error %.6g, "
		"lower bound %.6g (%s after %zu nodes)\n", o->a.bpw, r->weights,
		r->bits / r->weights, r->err, r->bound,
		r->optimal ? "optimal" : "search stopped, best found", r->nodes);
	if (r->nkept) {
		fprintf(stderr, "plan-alloc: kept exact at 16 bpw: layer");
		for (size_t k = 0; k < r->nkept; k++)
			fprintf(stderr, " %zu", r->kept[k]);
		fputc('\n', stderr);
	}
	if (alloc_per_layer(s, r, &bpw, &err, &nl) < 0)
		return;
	fprintf(stderr, "plan-alloc: layer      bpw        error\n");
	for (size_t l = 0; l < nl; l++)
		if (!isnan(bpw[l]))
			fprintf(stderr, "plan-alloc: %5zu %8.4f %12.6g\n", l, bpw[l], err[l]);
	free(bpw);
	free(err);
}

/* the plan (and the plot) written together: both or neither */
static int write_outputs(const opts *o, const alloc_set *s, const alloc_result *r)
{
	aout plan, svg = { 0 };

	if (aout_open(&plan, o->out, 0) < 0)
		return tool_fail("writing plan", o->out);
	if (o->plot && aout_open(&svg, o->plot, 0) < 0) {
		aout_abort(&plan);
		return tool_fail("writing plot", o->plot);
	}
	if (alloc_write_plan(plan.f, s, r, o->a.bpw) < 0) {
		tool_fail("writing plan", o->out);
		goto fail;
	}
	if (o->plot && (alloc_write_svg(svg.f, s, r, o->a.bpw) < 0 || aout_commit(&svg) < 0)) {
		tool_fail("writing plot", o->plot);
		goto fail;
	}
	if (aout_commit(&plan) < 0) {
		tool_fail("writing plan", o->out);
		goto fail;
	}
	return EXIT_OK;
fail:
	aout_abort(&plan);
	aout_abort(&svg);
	return EXIT_FAIL;
}

/* --resolve: a tensor list in, each tensor's budget or keep out */
static int resolve(const opts *o)
{
	plan p;
	uint8_t *buf;
	size_t len;
	aout out;
	int rc = EXIT_FAIL;

	if (plan_load(o->resolve, &p) < 0)
		return tool_fail("reading plan", o->resolve);
	if (nv_read_file(o->in, &buf, &len) < 0) {
		plan_free(&p);
		return tool_fail("reading tensor list", o->in);
	}
	if (aout_open(&out, o->out, 0) < 0) {
		tool_fail("writing", o->out);
	} else if (plan_resolve(&p, (const char *)buf, len, o->have_bpw ? o->a.bpw : 0,
				out.f) < 0) {
		fprintf(stderr, "%s: resolving plan '%s' for '%s': %s\n", tool_name, o->resolve,
			o->in, nv_err());
		aout_abort(&out);
	} else if (aout_commit(&out) < 0) {
		tool_fail("writing", o->out);
	} else {
		rc = EXIT_OK;
	}
	free(buf);
	plan_free(&p);
	return rc;
}

static int run(opts *o)
{
	alloc_set s, g;
	alloc_result r;
	int rc = EXIT_FAIL;
	size_t ntensors;

	if (alloc_load(o->in, &s) < 0)
		return tool_fail("reading curves", o->in);
	ntensors = s.n;
	if (alloc_bound(&s, o->lo, o->hi) < 0) {
		alloc_free(&s);
		return tool_fail("bounding curves", o->in);
	}
	if (o->by_layer) {
		if (alloc_by_layer(&s, &g) < 0) {
			alloc_free(&s);
			return tool_fail("grouping curves by layer", o->in);
		}
		alloc_free(&s);
		s = g;
	}
	/* with no layer kept, a target above every curve's top would plan less than asked */
	if (o->a.keep == 0 && alloc_ceiling(&s) < o->a.bpw * (1 - 1e-9)) {
		nv_seterr("target %g bpw is above the top of the curves: at most %.6g bpw; sweep "
			  "higher budgets", o->a.bpw, alloc_ceiling(&s));
		tool_fail("allocating", o->in);
		goto out;
	}
	if (alloc_solve(&s, &o->a, &r) < 0) {
		tool_fail("allocating", o->in);
		goto out;
	}
	rc = write_outputs(o, &s, &r);
	if (rc == EXIT_OK && !o->quiet)
		summary(&s, &r, o, ntensors);
	alloc_result_free(&r);
out:
	alloc_free(&s);
	return rc;
}

int main(int argc, char **argv)
{
	opts o = { .lo = 1e-300, .hi = 16, .out = "-" };
	int rc;

	tool_name = "plan-alloc";
	if ((rc = parse_opts(argc, argv, &o)) != 0)
		return rc < 0 ? EXIT_OK : rc;
	return tool_finish(o.resolve ? resolve(&o) : run(&o));
}
