/* gram-capture - calibration Grams: from raw rows, from the model's own forward, or merged */
#include "aout.h"
#include "cmf.h"
#include "err.h"
#include "fileio.h"
#include "gram.h"
#include "mem.h"
#include "par.h"
#include "parse.h"
#include "tok.h"
#include "tool.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char synopsis[] =
	"gram-capture -n N [--fit-tokens F --sel-tokens S] -o prefix [file ...]\n"
	"gram-capture -m model.cmf (--tokens file | --text file) -l L [--state S_L]\n"
	"             [--fit-tokens F --sel-tokens S] [--window W] [--patch name=payload ...]\n"
	"             [--next-state out] [--cross-state S_L_src] [-o prefix] [-q | -v]\n"
	"gram-capture --merge [-o out.gram] a.gram b.gram ...\n"
	"gram-capture -h | --version\n";

#define MAX_PATCH 64

typedef struct {
	const char *model, *tokens, *text, *state, *next, *out, *cross;
	size_t n, fit, sel, window;
	long layer;
	int has_n, has_fit, has_sel, has_layer, merge, progress;
	fw_override patch[MAX_PATCH];
	size_t npatch;
	char *patch_name[MAX_PATCH];
	uint8_t *patch_buf[MAX_PATCH];
} opts;

/* NAME=PAYLOAD: the payload file read whole */
static int add_patch(opts *o, const char *arg)
{
	size_t k = o->npatch, len;
	const char *file = NULL;
	int rc;

	if (k == MAX_PATCH)
		return tool_usage_error("more than %d patches", MAX_PATCH);
	if ((rc = tool_patch_arg(arg, &o->patch_name[k], &file)) != 0)
		return rc;
	if (nv_read_file(file, &o->patch_buf[k], &len) < 0)
		return tool_fail("cannot read patch", file);
	o->patch[k] = (fw_override){ o->patch_name[k], o->patch_buf[k], len };
	o->npatch++;
	return 0;
}

static int size_opt(const char *name, const char *arg, size_t lo, size_t *v)
{
	if (nv_parse_size(arg, lo, SIZE_MAX / 8, v) < 0)
		return tool_usage_error("bad %s '%s': %s", name, arg, nv_err());
	return 0;
}

static int parse_opt(int c, opts *o)
{
	switch (c) {
	case 'n': o->has_n = 1; return size_opt("-n", optarg, 1, &o->n);
	case 'o': o->out = optarg; return 0;
	case 'm': o->model = optarg; return 0;
	case 'l':
		o->has_layer = 1;
		return tool_bad_opt("-l", optarg, tool_parse_layer(optarg, &o->layer));
	case 't': o->tokens = optarg; return 0;
	case 'T': o->text = optarg; return 0;
	case 's': o->state = optarg; return 0;
	case 'N': o->next = optarg; return 0;
	case 'X': o->cross = optarg; return 0;
	case 'F':
		o->has_fit = 1;
		return tool_bad_opt("--fit-tokens", optarg, tool_parse_tokens(optarg, &o->fit));
	case 'S':
		o->has_sel = 1;
		return tool_bad_opt("--sel-tokens", optarg, tool_parse_tokens(optarg, &o->sel));
	case 'w': return tool_bad_opt("--window", optarg, tool_parse_window(optarg, &o->window));
	case 'p': return add_patch(o, optarg);
	case 'M': o->merge = 1; return 0;
	case 'q': o->progress = 0; return 0;
	case 'v': o->progress = 1; return 0;
	case 'h': fputs(synopsis, stdout); return -2;
	case 'V': tool_version(); return -2;
	default: return tool_usage_error("unknown option");
	}
}

static int check_opts(const opts *o, int nfiles)
{
	int model = o->model || o->tokens || o->text || o->state || o->next || o->npatch ||
		    o->has_layer || o->cross;

	if (o->has_fit != o->has_sel)
		return tool_usage_error("give both --fit-tokens and --sel-tokens, or neither");
	if (!o->merge && !o->model && !o->has_n)
		return tool_usage_error("give -n N (rows), -m model.cmf or --merge");
	if (o->merge + !!o->model + o->has_n > 1 || (o->has_n && model) || (o->merge && model))
		return tool_usage_error("-n, -m and --merge are separate modes");
	if (o->merge && (nfiles < 1 || o->has_fit))
		return tool_usage_error("--merge needs input Grams, and takes no split");
	if (o->has_n && !o->out)
		return tool_usage_error("-n needs -o prefix");
	/* "-" is standard output: one Gram, never a prefix of several */
	if (o->out && aout_is_stdout(o->out) && (o->model || o->has_fit))
		return tool_usage_error("-o - writes one Gram to standard output: %s",
					o->model ? "model mode writes one a lead" :
					"the split writes two");
	if (!o->model)
		return 0;
	if (nfiles)
		return tool_usage_error("unexpected argument in model mode");
	if (!o->has_layer)
		return tool_usage_error("-m needs -l L");
	if (!o->tokens == !o->text)
		return tool_usage_error("give one of --tokens and --text");
	if (!o->out && !o->next)
		return tool_usage_error("-m needs -o prefix, --next-state out, or both");
	if (o->cross && (!o->state || !o->out || o->npatch))
		return tool_usage_error("--cross-state needs --state and -o, and takes no --patch");
	if (o->next && o->state && tool_same_file(o->next, o->state))
		return tool_usage_error("--next-state '%s' would overwrite the input state", o->next);
	return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'm' }, { "layer", 1, 0, 'l' }, { "tokens", 1, 0, 't' },
		{ "text", 1, 0, 'T' }, { "state", 1, 0, 's' }, { "next-state", 1, 0, 'N' },
		{ "fit-tokens", 1, 0, 'F' }, { "sel-tokens", 1, 0, 'S' }, { "window", 1, 0, 'w' },
		{ "patch", 1, 0, 'p' }, { "merge", 0, 0, 'M' }, { "help", 0, 0, 'h' },
		{ "version", 0, 0, 'V' }, { "output", 1, 0, 'o' }, { "cross-state", 1, 0, 'X' },
		{ 0, 0, 0, 0 },
	};
	int c, rc;

	while ((c = getopt_long(argc, argv, "n:o:m:l:hqv", lo, NULL)) != -1)
		if ((rc = parse_opt(c, o)) != 0)
			return rc;
	return check_opts(o, argc - optind);
}

/* the Grams to files; on a failure the ones written are removed */
static int write_grams(nvgg *g, char **names, size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (nvgg_write(names[i], &g[i]) < 0) {
			tool_fail("cannot write", names[i]);
			while (i-- > 0)
				unlink(names[i]);
			return EXIT_FAIL;
		}
	return EXIT_OK;
}

/* finish accumulators acc[0..k) into the files names[0..k) */
static int finish_all(gr_acc *const *acc, char **names, size_t k)
{
	nvgg g[4 * GR_NLEAD];
	size_t done = 0;
	int rc = EXIT_FAIL;

	for (; done < k; done++)
		if (gr_finish(acc[done], &g[done]) < 0) {
			tool_fail("no Gram for", names[done]);
			goto out;
		}
	rc = write_grams(g, names, k);
out:
	while (done-- > 0)
		nvgg_free(&g[done]);
	return rc;
}

/* prefix[.lead][.part].ext */
static char *name_of(const char *prefix, const char *lead, const char *part, const char *ext)
{
	size_t len = strlen(prefix) + 32;
	char *s = malloc(len);

	if (s)
		snprintf(s, len, "%s%s%s%s%s.%s", prefix, lead ? "." : "", lead ? lead : "",
			 part ? "." : "", part ? part : "", ext);
	return s;
}

static int write_parts(const char *prefix, const char *lead, gr_acc *acc, int split)
{
	char *names[2] = { aout_is_stdout(prefix) ? strdup(prefix)
						  : name_of(prefix, lead, split ? "fit" : NULL, "gram"),
			   split ? name_of(prefix, lead, "sel", "gram") : NULL };
	gr_acc *a[2] = { &acc[0], &acc[1] };
	int rc = finish_all(a, names, split ? 2 : 1);

	free(names[0]);
	free(names[1]);
	return rc;
}

static int filter_mode(const opts *o, char **files, int nfiles)
{
	static const char *const std[] = { "-" };
	gr_acc acc[2] = { { 0 }, { 0 } };
	int split = o->has_fit, rc = EXIT_FAIL;

	if (gr_init(&acc[0], o->n) < 0 || gr_init(&acc[1], o->n) < 0) {
		tool_fail("cannot allocate", "Gram");
	} else if (gr_filter(nfiles ? (const char *const *)files : std, nfiles ? (size_t)nfiles : 1,
			     o->n, split, o->fit, o->sel, acc) < 0) {
		tool_fail("cannot capture", nfiles ? "input files" : "standard input");
	} else {
		rc = write_parts(o->out, NULL, acc, split);
	}
	gr_free(&acc[0]);
	gr_free(&acc[1]);
	return rc;
}

static int merge_mode(const opts *o, char **files, int nfiles)
{
	nvgg *in = calloc((size_t)nfiles, sizeof *in), out;
	const char *name = !o->out || aout_is_stdout(o->out) ? "standard output" : o->out;
	int k = 0, rc = EXIT_FAIL;

	for (; in && k < nfiles; k++)
		if (nvgg_read_any(files[k], &in[k]) < 0) {
			tool_fail("cannot read Gram", files[k]);
			goto done;
		}
	if (!in || nvgg_merge(in, (size_t)nfiles, &out) < 0) {
		tool_fail("cannot merge into", name);
		goto done;
	}
	if (nvgg_write(o->out ? o->out : "-", &out) < 0)
		tool_fail("cannot write", name);
	else
		rc = EXIT_OK;
	nvgg_free(&out);
done:
	while (in && k-- > 0)
		nvgg_free(&in[k]);
	free(in);
	return rc;
}

/* the leads' Grams (and with xacc their cross-moments, .cross) */
static int write_leads(const opts *o, gr_acc acc[GR_NLEAD][2], gr_acc (*xacc)[2], int split)
{
	char *names[4 * GR_NLEAD] = { 0 };
	gr_acc *a[4 * GR_NLEAD];
	size_t k = 0;
	int rc;

	for (int x = 0; x < (xacc ? 2 : 1); x++)
		for (int i = 0; i < GR_NLEAD; i++)
			for (int p = 0; p < (split ? 2 : 1); p++) {
				a[k] = x ? &xacc[i][p] : &acc[i][p];
				names[k++] = name_of(o->out, gr_lead_name[i],
						     split ? (p ? "sel" : "fit") : NULL, x ? "cross" : "gram");
			}
	rc = finish_all(a, names, k);
	for (size_t i = 0; i < k; i++)
		free(names[i]);
	return rc;
}

static int capture(const opts *o, fw_model *m, const uint32_t *ids, size_t n)
{
	gr_acc acc[GR_NLEAD][2], xacc[GR_NLEAD][2];
	tool_prog p = { tool_now(), 0 };
	gr_capture_opts co = {
		.tok = ids, .ntok = n, .fit = o->has_fit ? o->fit : n, .sel = o->has_fit ? o->sel : 0,
		.window = o->window, .layer = (int)o->layer, .state_in = o->state,
		.state_out = o->next, .cross_in = o->cross, .ov = o->patch, .nov = o->npatch,
		.grams = o->out != NULL,
		.progress = o->progress ? tool_window_progress : NULL, .ctx = &p,
	};
	double flops;
	int rc = EXIT_FAIL;

	if (gr_capture_cross(m, &co, acc, o->cross ? xacc : NULL, &flops) < 0)
		tool_fail("capture failed", o->model);
	else if (!o->out || (rc = write_leads(o, acc, o->cross ? xacc : NULL, o->has_fit)) != EXIT_OK)
		rc = o->out ? EXIT_FAIL : EXIT_OK;
	if (rc == EXIT_OK && o->progress) {
		double t = tool_now() - p.t0;

		fprintf(stderr, "%s: layer %ld, %.1f s, %.2f GFLOP/s\n", tool_name, o->layer, t,
			flops / t * 1e-9);
	}
	if (rc != EXIT_OK && o->next)
		unlink(o->next);
	for (int i = 0; i < GR_NLEAD; i++)
		for (int q = 0; q < 2; q++) {
			gr_free(&acc[i][q]);
			if (o->cross)
				gr_free(&xacc[i][q]);
		}
	return rc;
}

static int model_mode(const opts *o)
{
	cmf_file f;
	fw_model m;
	uint32_t *ids = NULL;
	size_t n = 0;
	int rc = EXIT_FAIL;

	if (tool_open_model(o->model, &f, &m))
		return EXIT_FAIL;
	if (o->text ? tok_text_ids(&f, o->text, &ids, &n) < 0 : tok_read_ids(o->tokens, &ids, &n) < 0)
		tool_fail(o->text ? "cannot tokenize" : "cannot read tokens",
			  o->text ? o->text : o->tokens);
	else
		rc = capture(o, &m, ids, n);
	free(ids);
	fw_close(&m);
	cmf_close(&f);
	return rc;
}

int main(int argc, char **argv)
{
	opts o = { .window = 512, .progress = tool_progress_default() };
	int rc;

	tool_name = "gram-capture";
	nv_fp_flush(1); /* the forward's subnormals would slow its products several times */
	if ((rc = parse_args(argc, argv, &o)) != 0)
		rc = rc == -2 ? EXIT_OK : rc;
	else if (o.merge)
		rc = merge_mode(&o, argv + optind, argc - optind);
	else if (o.model)
		rc = model_mode(&o);
	else
		rc = filter_mode(&o, argv + optind, argc - optind);
	for (size_t i = 0; i < o.npatch; i++) {
		free(o.patch_name[i]);
		free(o.patch_buf[i]);
	}
	return tool_finish(rc);
}
