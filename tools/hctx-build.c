/* hctx-build - one input's context (HCtx) from its FIT Gram */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "fileio.h"
#include "hctx.h"
#include "linalg.h"
#include "nvgg.h"
#include "parse.h"
#include "tool.h"

static const char synopsis[] =
	"hctx-build [--rho R] [--threads N] [-o OUT.hctx] FIT.gram\n"
	"hctx-build -h | --version\n";

typedef struct {
	double rho;
	const char *out, *gram;
	long threads;
} opts;

/* 0: go on; 1: exit now with *st */
static int parse_args(int argc, char **argv, opts *o, int *st)
{
	static const struct option lo[] = {
		{"rho", required_argument, NULL, 'r'}, {"threads", required_argument, NULL, 't'},
		{"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
	int c;

	o->rho = 0.03;
	o->out = "-";
	o->threads = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (tool_parse_rho(optarg, &o->rho) < 0)
				return *st = tool_fail("invalid --rho", optarg), 1;
			break;
		case 't':
			if (tool_parse_threads(optarg, &o->threads) < 0)
				return *st = tool_fail("invalid --threads", optarg), 1;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'h':
			fputs(synopsis, stdout);
			return *st = tool_finish(EXIT_OK), 1;
		case 'V':
			tool_version();
			return *st = tool_finish(EXIT_OK), 1;
		default:
			return *st = tool_usage_error("unknown option or missing argument '%s'",
						      argv[optind - 1]), 1;
		}
	}
	if (optind != argc - 1)
		return *st = tool_usage_error("expected one FIT.gram"), 1;
	o->gram = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	opts o;
	nvgg g;
	uint32_t crc;
	int rc;

	tool_name = "hctx-build";
	if (parse_args(argc, argv, &o, &rc))
		return rc;
	if (o.threads)
		nv_set_threads((int)o.threads);
	if (nvgg_read_f32(o.gram, 0, &g, &crc) < 0)
		return tool_fail("cannot read Gram", o.gram);
	/* the Gram's values are taken by the build */
	rc = nv_hctx_build_write(g.g, g.n, o.rho, g.count, crc, o.out);
	g.g = NULL;
	if (rc == -2)
		return tool_fail("cannot write", aout_is_stdout(o.out) ? "standard output" : o.out);
	if (rc < 0)
		return tool_fail("cannot build context from", o.gram);
	return tool_finish(EXIT_OK);
}
