/* blr-tune - a converted model's continuous parameters tuned against its source's outputs */
#include "cmf.h"
#include "cmf_ops.h"
#include "err.h"
#include "forward.h"
#include "mem.h"
#include "normcal.h"
#include "parse.h"
#include "tok.h"
#include "tool.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char synopsis[] =
	"blr-tune --final-norm -m model.cmf --base source.cmf\n"
	"         (--tokens file | --text file) [--fit-tokens F] [--sel-tokens S]\n"
	"         [--window W] [--steps N] [--batch B] [--lr X] [--eval-every K]\n"
	"         [--seed N] -o out.cmf [-q | -v]\n"
	"blr-tune -h | --version\n";

typedef struct {
	const char *model, *base, *tokens, *text, *out;
	size_t fit, sel, window;
	long seed;
	int final_norm, progress;
	nc_opts nc;
} opts;

static int size_opt(const char *name, const char *arg, size_t lo, size_t hi, size_t *v)
{
	if (nv_parse_size(arg, lo, hi, v) < 0)
		return tool_usage_error("bad %s '%s': %s", name, arg, nv_err());
	return 0;
}

static int parse_opt(int c, opts *o)
{
	switch (c) {
	case 'f': o->final_norm = 1; return 0;
	case 'm': o->model = optarg; return 0;
	case 'b': o->base = optarg; return 0;
	case 't': o->tokens = optarg; return 0;
	case 'T': o->text = optarg; return 0;
	case 'o': o->out = optarg; return 0;
	case 'q': o->progress = 0; return 0;
	case 'v': o->progress = 1; return 0;
	case 'F': return size_opt("--fit-tokens", optarg, 2, SIZE_MAX / 8, &o->fit);
	case 'S': return size_opt("--sel-tokens", optarg, 2, SIZE_MAX / 8, &o->sel);
	case 'w': return size_opt("--window", optarg, 2, 1 << 20, &o->window);
	case 'n': return size_opt("--steps", optarg, 0, 1 << 20, &o->nc.steps);
	case 'B': return size_opt("--batch", optarg, 1, 1 << 16, &o->nc.batch);
	case 'e': return size_opt("--eval-every", optarg, 1, 1 << 20, &o->nc.eval_every);
	case 'l':
		if (nv_parse_double(optarg, 1e-6, 1.0, &o->nc.lr) < 0)
			return tool_usage_error("bad --lr '%s': %s", optarg, nv_err());
		return 0;
	case 's':
		if (nv_parse_long(optarg, 0, 1L << 62, &o->seed) < 0)
			return tool_usage_error("bad --seed '%s': %s", optarg, nv_err());
		return 0;
	case 'h': fputs(synopsis, stdout); return -2;
	case 'V': tool_version(); return -2;
	default: return tool_usage_error("unknown option");
	}
}

static int parse_args(int argc, char **argv, opts *o)
{
	static const struct option lo[] = {
		{ "final-norm", 0, 0, 'f' }, { "model", 1, 0, 'm' }, { "base", 1, 0, 'b' },
		{ "tokens", 1, 0, 't' }, { "text", 1, 0, 'T' }, { "fit-tokens", 1, 0, 'F' },
		{ "sel-tokens", 1, 0, 'S' }, { "window", 1, 0, 'w' }, { "steps", 1, 0, 'n' },
		{ "batch", 1, 0, 'B' }, { "lr", 1, 0, 'l' }, { "eval-every", 1, 0, 'e' },
		{ "seed", 1, 0, 's' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	int c, rc;

	while ((c = getopt_long(argc, argv, "m:o:hqv", lo, NULL)) != -1)
		if ((rc = parse_opt(c, o)) != 0)
			return rc;
	if (optind < argc)
		return tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->final_norm)
		return tool_usage_error("say what to tune: --final-norm");
	if (!o->model || !o->base || !o->out)
		return tool_usage_error("-m model.cmf, --base source.cmf and -o out.cmf are required");
	if (!o->tokens == !o->text)
		return tool_usage_error("give one of --tokens and --text");
	if (tool_same_file(o->out, o->model) || tool_same_file(o->out, o->base))
		return tool_failf("refusing to overwrite the input '%s'", o->out);
	return 0;
}

/* the two models must share every width: the calibration compares their logits row by row */
static int same_shape(const opts *o, const fw_model *m, const fw_model *b)
{
	static const char *what[] = { "hidden size", "vocabulary", "layers", "heads",
				      "kv heads", "head dim", "intermediate size" };
	size_t mv[] = { m->d, m->vocab, (size_t)m->a.layers, m->nh, m->nkv, m->hd, m->ff };
	size_t bv[] = { b->d, b->vocab, (size_t)b->a.layers, b->nh, b->nkv, b->hd, b->ff };

	for (size_t i = 0; i < sizeof mv / sizeof *mv; i++)
		if (mv[i] != bv[i])
			return tool_failf("cannot calibrate '%s' against '%s': its %s is %zu, the "
					  "source's %zu", o->model, o->base, what[i], mv[i], bv[i]);
	return 0;
}

/* the calibration tokens, FIT + SEL of them at least */
static int load_tokens(const opts *o, const cmf_file *f, uint32_t **ids)
{
	size_t n;

	if (o->text ? tok_text_ids(f, o->text, ids, &n) < 0 : tok_read_ids(o->tokens, ids, &n) < 0)
		return tool_fail(o->text ? "cannot tokenize" : "cannot read tokens",
				 o->text ? o->text : o->tokens);
	if (n < o->fit + o->sel) {
		free(*ids);
		*ids = NULL;
		return tool_failf("too few calibration tokens in '%s': %zu, --fit-tokens + "
				  "--sel-tokens need %zu", o->text ? o->text : o->tokens, n,
				  o->fit + o->sel);
	}
	return 0;
}

typedef struct {
	float *n, *ns, *E, *Es; /* see nc_data */
	size_t fit, sel;        /* rows */
} tune_data;

static void data_free(tune_data *t)
{
	if (t->Es != t->E)
		free(t->Es);
	free(t->E);
	free(t->n);
	free(t->ns);
}

/* x (rows × d) ← the model's final states, normalized with weight w (NULL: unit) */
static float *states(fw_model *m, const uint32_t *ids, const fw_window *w, size_t nw,
		     size_t rows, const float *wt)
{
	float *x = nv_malloc(rows, m->d * sizeof(float));

	if (!x)
		return NULL;
	if (fw_final_states(m, ids, w, nw, x) < 0) {
		free(x);
		return NULL;
	}
	fw_rmsnorm(x, wt, x, rows, m->d, m->a.rms_eps);
	return x;
}

/* both heads; one copy when their stored bytes are the same */
static int heads(const opts *o, const fw_model *m, const fw_model *b, tune_data *t)
{
	const cmf_tensor *h = m->head, *g = b->head;

	if (!(t->E = fw_head_f32(m)))
		return tool_fail("cannot read the head of", o->model);
	if (h->blr == g->blr && h->dtype == g->dtype && h->nbytes == g->nbytes &&
	    !memcmp(h->data, g->data, h->nbytes)) {
		t->Es = t->E;
		return 0;
	}
	if (!(t->Es = fw_head_f32(b)))
		return tool_fail("cannot read the head of", o->base);
	return 0;
}

static int prepare(const opts *o, fw_model *m, fw_model *b, const uint32_t *ids, tune_data *t)
{
	size_t nw, rows;
	fw_window *w = fw_windows(o->fit, o->sel, o->window, &nw, &rows);

	if (!w)
		return tool_fail("cannot cut the calibration windows of", o->tokens ? o->tokens : o->text);
	for (size_t i = 0; i < nw; i++)
		*(w[i].sel ? &t->sel : &t->fit) += w[i].len - 1;
	if (o->progress)
		fprintf(stderr, "blr-tune: final states of %zu positions (%zu FIT, %zu SEL)\n", rows,
			t->fit, t->sel);
	if (!(t->n = states(m, ids, w, nw, rows, NULL)))
		tool_fail("cannot run model", o->model);
	else if (!(t->ns = states(b, ids, w, nw, rows, b->final_w)))
		tool_fail("cannot run model", o->base);
	free(w);
	if (!t->n || !t->ns || t->fit == 0 || t->sel == 0)
		return t->n && t->ns ? tool_failf("the calibration windows hold no FIT or no SEL "
						  "position") : EXIT_FAIL;
	return heads(o, m, b, t);
}

static float round_f16(float v)
{
	return cmf_round_dtype(CMF_F16, v);
}

static float round_bf16(float v)
{
	return cmf_round_dtype(CMF_BF16, v);
}

/* the report line on stdout, and the same figures for cmf.provenance */
static void report(const opts *o, const nc_result *r, double secs, char *prov, size_t cap)
{
	printf("final-norm: kl sel %.6f -> %.6f fit %.6f -> %.6f | step %zu of %zu | %.1f s "
	       "%.1f GFLOP/s\n", r->sel_before, r->sel_after, r->fit_before, r->fit_after,
	       r->best_step, o->nc.steps, secs, r->flops / secs * 1e-9);
	snprintf(prov, cap,
		 "{\"final_norm_calibration\":{\"kl_sel_before\":%.9g,\"kl_sel_after\":%.9g,"
		 "\"kl_fit_before\":%.9g,\"kl_fit_after\":%.9g,\"best_step\":%zu,\"steps\":%zu,"
		 "\"batch\":%zu,\"lr\":%.9g,\"eval_every\":%zu,\"seed\":%ld,\"fit_tokens\":%zu,"
		 "\"sel_tokens\":%zu,\"window\":%zu}}",
		 r->sel_before, r->sel_after, r->fit_before, r->fit_after, r->best_step, o->nc.steps,
		 o->nc.batch, o->nc.lr, o->nc.eval_every, o->seed, o->fit, o->sel, o->window);
}

static int final_norm(opts *o, const cmf_file *f, fw_model *m, fw_model *b, const uint32_t *ids)
{
	tune_data t = { 0 };
	nc_result r;
	double t0 = tool_now();
	float *w = nv_malloc(m->d, sizeof(float));
	char prov[1024];
	int rc = EXIT_FAIL;

	if (!w || prepare(o, m, b, ids, &t) != 0)
		goto out;
	o->nc.round = m->final_norm->dtype == CMF_F16 ? round_f16
		    : m->final_norm->dtype == CMF_BF16 ? round_bf16 : NULL;
	o->nc.seed = (uint64_t)o->seed;
	nc_data D = { m->d, m->vocab, t.E, t.Es, t.n, t.ns, t.fit, t.sel };
	if (nc_fit(&D, m->final_w, &o->nc, w, &r) < 0) {
		tool_fail("cannot calibrate the final norm of", o->model);
		goto out;
	}
	report(o, &r, tool_now() - t0, prov, sizeof prov);
	if (cmf_op_set_tensor(f, m->final_norm->name, w, prov, o->out) < 0)
		tool_fail("cannot write", o->out);
	else
		rc = EXIT_OK;
out:
	data_free(&t);
	free(w);
	return rc;
}

int main(int argc, char **argv)
{
	opts o = { .fit = 8192, .sel = 2048, .window = 512, .progress = tool_progress_default(),
		   .nc = { .steps = 100, .batch = 256, .eval_every = 10, .lr = 0.01 } };
	cmf_file f, bf;
	fw_model m, bm;
	uint32_t *ids = NULL;
	int rc;

	tool_name = "blr-tune";
	if ((rc = parse_args(argc, argv, &o)) != 0)
		return rc == -2 ? tool_finish(EXIT_OK) : rc;
	if (tool_open_model(o.model, &f, &m))
		return EXIT_FAIL;
	if (tool_open_model(o.base, &bf, &bm)) {
		fw_close(&m);
		cmf_close(&f);
		return EXIT_FAIL;
	}
	rc = EXIT_FAIL;
	if (same_shape(&o, &m, &bm) == 0 && load_tokens(&o, &f, &ids) == 0)
		rc = final_norm(&o, &f, &m, &bm, ids);
	free(ids);
	fw_close(&bm);
	cmf_close(&bf);
	fw_close(&m);
	cmf_close(&f);
	return tool_finish(rc);
}
