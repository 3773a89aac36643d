/* cmf-eval - perplexity, KL divergence and top-1 agreement of a CMF model over tokens */
#include "cmf.h"
#include "err.h"
#include "forward.h"
#include "mem.h"
#include "par.h"
#include "parse.h"
#include "tok.h"
#include "tool.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char synopsis[] =
	"cmf-eval -m model.cmf (--tokens file | --text file) [--window W] [--limit N]\n"
	"         [--base base.cmf] [--json] [-q | -v]\n"
	"cmf-eval -m model.cmf --text file --tokenize out.u32\n"
	"cmf-eval -m model.cmf (--tokens file | --text file) --generate N [--window W]\n"
	"cmf-eval -h | --version\n";

typedef struct {
	const char *model, *tokens, *text, *base, *tokenize;
	size_t window, limit, generate;
	int json, progress, gen;
} opts;

static int parse_args(int argc, char **argv, opts *o)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'm' }, { "tokens", 1, 0, 't' }, { "text", 1, 0, 'T' },
		{ "window", 1, 0, 'w' }, { "limit", 1, 0, 'L' }, { "base", 1, 0, 'b' },
		{ "json", 0, 0, 'j' }, { "tokenize", 1, 0, 'k' }, { "generate", 1, 0, 'g' },
		{ "help", 0, 0, 'h' }, { "version", 0, 0, 'V' }, { 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "m:hqv", lo, NULL)) != -1) {
		switch (c) {
		case 'm': o->model = optarg; break;
		case 't': o->tokens = optarg; break;
		case 'T': o->text = optarg; break;
		case 'b': o->base = optarg; break;
		case 'j': o->json = 1; break;
		case 'k': o->tokenize = optarg; break;
		case 'q': o->progress = 0; break;
		case 'v': o->progress = 1; break;
		case 'w':
			if (tool_parse_window(optarg, &o->window) < 0)
				return tool_usage_error("bad --window '%s': %s", optarg, nv_err());
			break;
		case 'L':
			if (nv_parse_size(optarg, 2, SIZE_MAX, &o->limit) < 0)
				return tool_usage_error("bad --limit '%s': %s", optarg, nv_err());
			break;
		case 'g':
			if (nv_parse_size(optarg, 1, 1 << 20, &o->generate) < 0)
				return tool_usage_error("bad --generate '%s': %s", optarg, nv_err());
			o->gen = 1;
			break;
		case 'h': fputs(synopsis, stdout); return -2;
		case 'V': tool_version(); return -2;
		default: return tool_usage_error("unknown option");
		}
	}
	if (optind < argc)
		return tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->model)
		return tool_usage_error("-m model.cmf is required");
	if (!o->tokens == !o->text)
		return tool_usage_error("give one of --tokens and --text");
	if (o->tokenize && (!o->text || o->base || o->gen))
		return tool_usage_error("--tokenize takes --text and no --base or --generate");
	if (o->gen && o->base)
		return tool_usage_error("--generate takes no --base");
	return 0;
}

static void report(const opts *o, const fw_eval_result *r, double secs)
{
	double tps = (double)r->predicted / secs;

	if (o->json) {
		printf("{\"tokens\":%zu,\"predicted\":%zu,\"window\":%zu,\"nll\":%.9g,\"ppl\":%.9g",
		       r->tokens, r->predicted, o->window, r->nll, exp(r->nll));
		if (o->base)
			printf(",\"base_nll\":%.9g,\"base_ppl\":%.9g,\"kl\":%.9g,\"top1\":%.9g",
			       r->base_nll, exp(r->base_nll), r->kl, r->top1);
		printf(",\"seconds\":%.6g,\"tokens_per_s\":%.6g,\"gflops\":%.6g}\n", secs, tps,
		       r->flops / secs * 1e-9);
		return;
	}
	printf("tokens %zu\npredicted %zu\nwindow %zu\nnll %.6f\nppl %.6f\n", r->tokens,
	       r->predicted, o->window, r->nll, exp(r->nll));
	if (o->base)
		printf("base_nll %.6f\nbase_ppl %.6f\nkl %.6g\ntop1 %.6f\n", r->base_nll,
		       exp(r->base_nll), r->kl, r->top1);
	printf("seconds %.3f\ntokens_per_s %.1f\ngflops %.2f\n", secs, tps, r->flops / secs * 1e-9);
}

static int load_tokens(const opts *o, const cmf_file *f, uint32_t **ids, size_t *n)
{
	if (o->text ? tok_text_ids(f, o->text, ids, n) < 0 : tok_read_ids(o->tokens, ids, n) < 0)
		return tool_fail(o->text ? "cannot tokenize" : "cannot read tokens",
				 o->text ? o->text : o->tokens);
	if (o->limit && *n > o->limit)
		*n = o->limit;
	return 0;
}

static int write_ids(const char *path, const uint32_t *ids, size_t n)
{
	aout out;
	uint8_t b[4];

	if (aout_open(&out, path, AOUT_BINARY) < 0)
		return tool_fail("cannot write", path);
	for (size_t i = 0; i < n; i++) {
		b[0] = (uint8_t)ids[i];
		b[1] = (uint8_t)(ids[i] >> 8);
		b[2] = (uint8_t)(ids[i] >> 16);
		b[3] = (uint8_t)(ids[i] >> 24);
		if (aout_write(&out, b, 4) < 0) {
			aout_abort(&out);
			return tool_fail("cannot write", path);
		}
	}
	if (aout_commit(&out) < 0)
		return tool_fail("cannot write", path);
	return 0;
}

/* print the prompt and its continuation as run.c does (the first token, bos, unprinted) */
static int generate(const opts *o, fw_model *m, const cmf_file *f, const uint32_t *ids, size_t n)
{
	tok_vocab v;
	uint32_t *out;
	size_t nout, k;
	char buf[1024];

	if (tok_from_cmf(&v, f) < 0)
		return tool_fail("cannot decode with", o->model);
	if (fw_generate(m, ids, n, o->generate, o->window, &out, &nout) < 0) {
		tok_free(&v);
		return tool_fail("generation failed", o->model);
	}
	for (size_t i = 1; i < nout; i++)
		if (tok_decode(&v, (int)out[i - 1], out[i], buf, sizeof buf, &k) == 0)
			fwrite(buf, 1, k, stdout);
	putchar('\n');
	free(out);
	tok_free(&v);
	return 0;
}

static int evaluate(const opts *o, fw_model *m, const uint32_t *ids, size_t n)
{
	cmf_file bf;
	fw_model bm;
	fw_eval_result r;
	tool_prog p = { tool_now(), 0 };
	int rc;

	if (o->base && tool_open_model(o->base, &bf, &bm))
		return EXIT_FAIL;
	rc = fw_eval(m, o->base ? &bm : NULL, ids, n, o->window, &r, o->progress ? tool_pass_progress : NULL, &p);
	if (rc < 0)
		tool_fail("evaluation failed", o->model);
	else
		report(o, &r, tool_now() - p.t0);
	if (o->base) {
		fw_close(&bm);
		cmf_close(&bf);
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

int main(int argc, char **argv)
{
	opts o = { .window = 512, .progress = tool_progress_default() };
	cmf_file f;
	fw_model m;
	uint32_t *ids = NULL;
	size_t n = 0;
	int rc;

	tool_name = "cmf-eval";
	nv_fp_flush(1); /* the forward's subnormals would slow its products several times */
	if ((rc = parse_args(argc, argv, &o)) != 0)
		return rc == -2 ? tool_finish(EXIT_OK) : rc;
	if (tool_open_model(o.model, &f, &m))
		return EXIT_FAIL;
	if (load_tokens(&o, &f, &ids, &n))
		rc = EXIT_FAIL;
	else if (o.tokenize)
		rc = write_ids(o.tokenize, ids, n) ? EXIT_FAIL : EXIT_OK;
	else if (o.gen)
		rc = generate(&o, &m, &f, ids, n) ? EXIT_FAIL : EXIT_OK;
	else
		rc = evaluate(&o, &m, ids, n);
	free(ids);
	fw_close(&m);
	cmf_close(&f);
	return tool_finish(rc);
}
