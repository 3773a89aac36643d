/* blr-tune - a converted model's continuous parameters tuned against its source's outputs */
#include "cmf.h"
#include "cmf_ops.h"
#include "err.h"
#include "forward.h"
#include "mem.h"
#include "mtune.h"
#include "normcal.h"
#include "par.h"
#include "parse.h"
#include "perturb.h"
#include "state.h"
#include "aout.h"
#include "fileio.h"
#include "tok.h"
#include "tool.h"
#include "tune.h"

#include <getopt.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * end-to-end steps by default: each of the default 64 FIT windows about
 * twice; on SmolLM2 at 0.55 bpw 120 steps took the held-out KL from 1.606
 * (40 steps) to 1.482, its SEL KL still falling (README)
 */
#define E2E_STEPS 120

/*
 * the end-to-end step's rate by default: 0.004, constant (--lr-decay none);
 * on SmolLM2 at 1.0 bpw, 120 steps took the held-out KL to 1.118 at 0.004,
 * 1.157 at 0.002, 1.167 at 0.002 with a cosine decay (README)
 */
#define E2E_LR 0.004
#define E2E_COSINE 0

/*
 * a layer's block reconstruction by default: 50 steps at 0.02, half the work
 * of the 100 at 0.005 it replaced, and as good: SmolLM2 at 0.8 bpw, layers 8
 * and 20, SEL loss 1.9507 and 3.5831 against 1.9563 and 3.5877; the whole
 * conversion with every step, KL 1.6265 against 1.6408 after the
 * calibration (README)
 */
#define LAYER_STEPS 50
#define LAYER_LR 0.02

/*
 * a layer's loss by default: the plain squared error.  SmolLM2, every step
 * but the end-to-end one, KL after the calibration, normed against mse: 0.8
 * bpw 1.6062 against 1.6265, 1.0 bpw 1.4177 against 1.4060; a draw within
 * what rounding moves one conversion, so the default stays (README)
 */
#define LAYER_LOSS TN_LOSS_MSE

static const char synopsis[] =
	"blr-tune --final-norm -m model.cmf --base source.cmf\n"
	"         (--tokens file | --text file) [--state S_L]\n"
	"         [--src-state S_L_src] [--fit-tokens F] [--sel-tokens S]\n"
	"         [--window W] [--steps N] [--batch B] [--lr X]\n"
	"         [--lr-decay none | cosine] [--eval-every K] [--seed N]\n"
	"         [--cache-mib M] -o out.cmf [-q | -v]\n"
	"blr-tune --layer L -m source.cmf (--tokens file | --text file)\n"
	"         [--state S_L --src-state S_L_src [--src-next S_L+1_src]]\n"
	"         --patch name=payload ... [--next-state S_L+1] [--fit-tokens F]\n"
	"         [--sel-tokens S] [--window W] [--steps N] [--batch B] [--lr X]\n"
	"         [--lr-decay none | cosine] [--eval-every K]\n"
	"         [--loss mse | normed] [--lookahead 0 | 1] [--seed N] -o dir\n"
	"         [-q | -v]\n"
	"blr-tune --end-to-end -m model.cmf --base source.cmf\n"
	"         (--tokens file | --text file) --patch name=payload ...\n"
	"         [--fit-tokens F] [--sel-tokens S] [--window W] [--steps N]\n"
	"         [--batch B] [--lr X] [--lr-decay none | cosine] [--eval-every K]\n"
	"         [--seed N] [--cache-mib M] -o out.cmf [-q | -v]\n"
	"blr-tune --perturb L -m source.cmf (--tokens file | --text file)\n"
	"         [--src-state S_L_src] --patch name=payload ... [--fit-tokens F]\n"
	"         [--sel-tokens S] [--window W] [-q | -v]\n"
	"blr-tune -h | --version\n";

/* payloads a run takes: every projection of a model of up to 4096 layers */
#define MAX_PATCH (FW_NMAT * 4096)

typedef struct {
	const char *model, *base, *tokens, *text, *out, *state, *src_state, *src_next, *next_state;
	size_t fit, sel, window, steps, batch, eval_every, npatch, cache_mib;
	long seed, layer;
	double lr;
	int final_norm, has_layer, e2e, perturb, progress, has_batch, has_lr, has_steps, has_cache;
	int has_tuning; /* an option only the tuning modes take: --eval-every, --seed, --lr-decay */
	int decay; /* --lr-decay: -1 the mode's default, 0 none, 1 cosine */
	int loss, has_loss; /* --loss: tn_loss */
	int ahead, has_ahead; /* --lookahead */
	const char **patch_name, **patch_file;
	size_t patch_cap;
} opts;

static int size_opt(const char *name, const char *arg, size_t lo, size_t hi, size_t *v)
{
	if (nv_parse_size(arg, lo, hi, v) < 0)
		return tool_usage_error("bad %s '%s': %s", name, arg, nv_err());
	return 0;
}

/* NAME=PAYLOAD */
static int add_patch(opts *o, const char *arg)
{
	char *name = NULL;
	int rc;

	if (o->npatch == MAX_PATCH)
		return tool_usage_error("more than %d patches", MAX_PATCH);
	if (o->npatch == o->patch_cap) {
		size_t cap = o->patch_cap ? 2 * o->patch_cap : 16;
		const char **n = realloc(o->patch_name, cap * sizeof *n), **f;

		if (n)
			o->patch_name = n;
		if (!n || !(f = realloc(o->patch_file, cap * sizeof *f)))
			return tool_failf("out of memory for %zu patches", cap);
		o->patch_file = f;
		o->patch_cap = cap;
	}
	if ((rc = tool_patch_arg(arg, &name, &o->patch_file[o->npatch])) != 0)
		return rc;
	o->patch_name[o->npatch++] = name;
	return 0;
}

static int parse_opt(int c, opts *o)
{
	switch (c) {
	case 'f': o->final_norm = 1; return 0;
	case 'E': o->e2e = 1; return 0;
	case 'm': o->model = optarg; return 0;
	case 'b': o->base = optarg; return 0;
	case 't': o->tokens = optarg; return 0;
	case 'T': o->text = optarg; return 0;
	case 'o': o->out = optarg; return 0;
	case 'q': o->progress = 0; return 0;
	case 'v': o->progress = 1; return 0;
	case 'F': return tool_bad_opt("--fit-tokens", optarg, tool_parse_tokens(optarg, &o->fit));
	case 'S': return tool_bad_opt("--sel-tokens", optarg, tool_parse_tokens(optarg, &o->sel));
	case 'w': return tool_bad_opt("--window", optarg, tool_parse_window(optarg, &o->window));
	case 'n': o->has_steps = 1; return size_opt("--steps", optarg, 0, 1 << 20, &o->steps);
	case 'B': o->has_batch = 1; return size_opt("--batch", optarg, 1, 1 << 16, &o->batch);
	case 'e':
		o->has_tuning = 1;
		return size_opt("--eval-every", optarg, 1, 1 << 20, &o->eval_every);
	case 'C': o->has_cache = 1; return size_opt("--cache-mib", optarg, 0, 1 << 30, &o->cache_mib);
	case 'l':
		o->has_lr = 1;
		if (nv_parse_double(optarg, 1e-6, 1.0, &o->lr) < 0)
			return tool_usage_error("bad --lr '%s': %s", optarg, nv_err());
		return 0;
	case 'L':
	case 'P':
		*(c == 'L' ? &o->has_layer : &o->perturb) = 1;
		if (tool_parse_layer(optarg, &o->layer) < 0)
			return tool_usage_error("bad %s '%s': %s", c == 'L' ? "--layer" : "--perturb",
						optarg, nv_err());
		return 0;
	case 'D':
		o->has_tuning = 1;
		if (strcmp(optarg, "none") && strcmp(optarg, "cosine"))
			return tool_usage_error("bad --lr-decay '%s': none or cosine", optarg);
		o->decay = strcmp(optarg, "cosine") == 0;
		return 0;
	case 'W':
		if (strcmp(optarg, "mse") && strcmp(optarg, "normed"))
			return tool_usage_error("bad --loss '%s': mse or normed", optarg);
		o->has_loss = 1;
		o->loss = strcmp(optarg, "normed") == 0 ? TN_LOSS_NORMED : TN_LOSS_MSE;
		return 0;
	case 'A':
		if (strcmp(optarg, "0") && strcmp(optarg, "1"))
			return tool_usage_error("bad --lookahead '%s': 0 or 1", optarg);
		o->has_ahead = 1;
		o->ahead = optarg[0] == '1';
		return 0;
	case 'x': o->state = optarg; return 0;
	case 'X': o->src_state = optarg; return 0;
	case 'N': o->src_next = optarg; return 0;
	case 'Z': o->next_state = optarg; return 0;
	case 'p': return add_patch(o, optarg);
	case 's':
		o->has_tuning = 1;
		if (nv_parse_long(optarg, 0, 1L << 62, &o->seed) < 0)
			return tool_usage_error("bad --seed '%s': %s", optarg, nv_err());
		return 0;
	case 'h': fputs(synopsis, stdout); return -2;
	case 'V': tool_version(); return -2;
	default: return tool_usage_error("unknown option");
	}
}

static int check_layer(const opts *o)
{
	if (!o->model || !o->out || !o->npatch)
		return tool_usage_error("--layer needs -m source.cmf, --patch and -o dir");
	if (o->npatch > FW_NMAT)
		return tool_usage_error("%zu patches: a layer has %d projections", o->npatch,
					FW_NMAT);
	if (o->base)
		return tool_usage_error("--layer takes no --base: -m is the source model");
	if (!o->state != !o->src_state || (!o->state && o->layer != 0))
		return tool_usage_error("give --state and --src-state together (layer 0 may "
					"start from the embeddings)");
	if (o->next_state) {
		const char *in[] = { o->model, o->tokens, o->text, o->state, o->src_state, o->src_next };

		for (size_t i = 0; i < sizeof in / sizeof *in; i++)
			if (in[i] && tool_same_file(o->next_state, in[i]))
				return tool_failf("refusing to overwrite the input '%s'", in[i]);
	}
	return 0;
}

/* --perturb measures: no output file, no base, no tuning option */
static int check_perturb(const opts *o)
{
	if (!o->model || !o->npatch)
		return tool_usage_error("--perturb needs -m source.cmf and --patch");
	if (o->out || o->base || o->state)
		return tool_usage_error("--perturb takes no %s: it prints one line a payload",
					o->out ? "-o" : o->base ? "--base" : "--state");
	if (o->has_steps || o->has_lr || o->has_batch || o->has_tuning || o->has_cache ||
	    o->has_loss || o->has_ahead)
		return tool_usage_error("--perturb tunes nothing: no --steps, --lr, --batch, "
					"--eval-every, --seed, --lr-decay, --cache-mib, --loss or "
					"--lookahead");
	if (!o->src_state && o->layer != 0)
		return tool_usage_error("--perturb %ld needs --src-state (layer 0 starts from the "
					"embeddings)", o->layer);
	return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
	static const struct option lo[] = {
		{ "final-norm", 0, 0, 'f' }, { "model", 1, 0, 'm' }, { "base", 1, 0, 'b' },
		{ "tokens", 1, 0, 't' }, { "text", 1, 0, 'T' }, { "fit-tokens", 1, 0, 'F' },
		{ "sel-tokens", 1, 0, 'S' }, { "window", 1, 0, 'w' }, { "steps", 1, 0, 'n' },
		{ "batch", 1, 0, 'B' }, { "lr", 1, 0, 'l' }, { "eval-every", 1, 0, 'e' },
		{ "seed", 1, 0, 's' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' },
		{ "layer", 1, 0, 'L' }, { "state", 1, 0, 'x' }, { "src-state", 1, 0, 'X' },
		{ "patch", 1, 0, 'p' }, { "end-to-end", 0, 0, 'E' }, { "cache-mib", 1, 0, 'C' },
		{ "lr-decay", 1, 0, 'D' }, { "loss", 1, 0, 'W' }, { "lookahead", 1, 0, 'A' },
		{ "perturb", 1, 0, 'P' }, { "src-next", 1, 0, 'N' },
		{ "next-state", 1, 0, 'Z' }, { 0, 0, 0, 0 },
	};
	int c, rc;

	while ((c = getopt_long(argc, argv, "m:o:hqv", lo, NULL)) != -1)
		if ((rc = parse_opt(c, o)) != 0)
			return rc;
	if (optind < argc)
		return tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (o->final_norm + o->has_layer + o->e2e + o->perturb != 1)
		return tool_usage_error("say what to do: one of --final-norm, --layer L, "
					"--end-to-end and --perturb L");
	if (!o->tokens == !o->text)
		return tool_usage_error("give one of --tokens and --text");
	if ((o->src_next || o->next_state) && !o->has_layer)
		return tool_usage_error("%s is for --layer", o->src_next ? "--src-next" : "--next-state");
	if (o->perturb)
		return check_perturb(o);
	if (o->has_cache && !o->e2e && !o->final_norm)
		return tool_usage_error("--cache-mib is for --end-to-end and --final-norm");
	if ((o->has_loss || o->has_ahead) && !o->has_layer)
		return tool_usage_error("%s is for --layer", o->has_loss ? "--loss" : "--lookahead");
	if (o->has_layer)
		return check_layer(o);
	if (!o->model || !o->base || !o->out)
		return tool_usage_error("-m model.cmf, --base source.cmf and -o out.cmf are required");
	if (o->e2e && (o->state || o->src_state))
		return tool_usage_error("--end-to-end takes no --state or --src-state");
	if (!o->npatch != !o->e2e)
		return tool_usage_error(o->e2e ? "--end-to-end needs --patch" :
					"--final-norm takes no --patch");
	if (tool_same_file(o->out, o->model) || tool_same_file(o->out, o->base) ||
	    (o->state && tool_same_file(o->out, o->state)) ||
	    (o->src_state && tool_same_file(o->out, o->src_state)))
		return tool_failf("refusing to overwrite the input '%s'", o->out);
	for (size_t i = 0; i < o->npatch; i++)
		if (tool_same_file(o->out, o->patch_file[i]))
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
static int load_tokens(const opts *o, const cmf_file *f, uint32_t **ids, size_t *count)
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
	*count = n;
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

/* the layer whose entering states a state file holds: one of m's, or m's
 * count (the states entering the final norm) */
static int state_layer(const fw_model *m, const char *path, int *l)
{
	st_reader r;
	uint32_t layer;

	if (st_open(&r, path) < 0) {
		nv_preerr("state file '%s'", path);
		return -1;
	}
	layer = r.h.layer;
	st_close(&r);
	if (layer > (uint32_t)m->a.layers) {
		nv_seterr("state file '%s': layer %u is beyond the model's %d layers", path, layer,
			  m->a.layers);
		return -1;
	}
	*l = (int)layer;
	return 0;
}

/*
 * states() from a conversion's stream: the states entering the layer the
 * file names (checked against the tokens and windows, state.h), run through
 * the layers from there; NULL with the reason set
 */
static float *states_from(const opts *o, fw_model *m, const char *state, const uint32_t *ids,
			  size_t n, const fw_window *w, size_t nw, const float *wt)
{
	float *x = NULL;
	fw_window *sw = NULL;
	size_t snw, rows;
	int l;

	if (state_layer(m, state, &l) < 0 ||
	    tn_rows(m, state, l, ids, n, o->fit, o->sel, o->window, &x, &sw, &snw, &rows) < 0)
		return NULL;
	free(sw);
	if (fw_final_states_from(m, l, w, nw, x) < 0) {
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

/* one model's final states: from its stream where given, else from the embeddings */
static float *model_states(const opts *o, fw_model *m, const char *path, const char *state,
			   const uint32_t *ids, size_t n, const fw_window *w, size_t nw,
			   size_t rows, const float *wt)
{
	float *x = state ? states_from(o, m, state, ids, n, w, nw, wt)
			 : states(m, ids, w, nw, rows, wt);

	if (!x && state)
		tool_fail("cannot run the final layers of", path);
	else if (!x)
		tool_fail("cannot run model", path);
	return x;
}

static int prepare(const opts *o, fw_model *m, fw_model *b, const uint32_t *ids, size_t n,
		   tune_data *t)
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
	if ((t->n = model_states(o, m, o->model, o->state, ids, n, w, nw, rows, NULL)))
		t->ns = model_states(o, b, o->base, o->src_state, ids, n, w, nw, rows, b->final_w);
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
static void report(const opts *o, const nc_result *r, const nc_opts *no, double secs, char *prov,
		   size_t cap)
{
	printf("final-norm: kl sel %.6f -> %.6f fit %.6f -> %.6f | step %zu of %zu | %.1f s "
	       "%.1f GFLOP/s | source logits kept for %zu of %zu rows\n", r->sel_before,
	       r->sel_after, r->fit_before, r->fit_after, r->best_step, no->steps, secs,
	       r->flops / secs * 1e-9, r->kept, r->rows);
	snprintf(prov, cap,
		 "{\"final_norm_calibration\":{\"kl_sel_before\":%.9g,\"kl_sel_after\":%.9g,"
		 "\"kl_fit_before\":%.9g,\"kl_fit_after\":%.9g,\"best_step\":%zu,\"steps\":%zu,"
		 "\"batch\":%zu,\"lr\":%.9g,\"lr_decay\":\"%s\",\"eval_every\":%zu,\"seed\":%ld,"
		 "\"fit_tokens\":%zu,\"sel_tokens\":%zu,\"window\":%zu}}",
		 r->sel_before, r->sel_after, r->fit_before, r->fit_after, r->best_step, no->steps,
		 no->batch, no->lr, no->cosine ? "cosine" : "none", no->eval_every, o->seed, o->fit,
		 o->sel, o->window);
}

static int final_norm(opts *o, const cmf_file *f, fw_model *m, fw_model *b, const uint32_t *ids,
		      size_t n)
{
	tune_data t = { 0 };
	nc_result r;
	double t0 = tool_now();
	float *w = nv_malloc(m->d, sizeof(float));
	char prov[1024];
	int rc = EXIT_FAIL;

	if (!w || prepare(o, m, b, ids, n, &t) != 0)
		goto out;
	nc_opts no = { o->steps, o->has_batch ? o->batch : 256, o->eval_every,
		       o->has_lr ? o->lr : 0.01, (uint64_t)o->seed,
		       m->final_norm->dtype == CMF_F16 ? round_f16
		       : m->final_norm->dtype == CMF_BF16 ? round_bf16 : NULL, o->decay == 1,
		       o->cache_mib << 20 };
	nc_data D = { m->d, m->vocab, t.E, t.Es, t.n, t.ns, t.fit, t.sel };
	if (nc_fit(&D, m->final_w, &no, w, &r) < 0) {
		tool_fail("cannot calibrate the final norm of", o->model);
		goto out;
	}
	report(o, &r, &no, tool_now() - t0, prov, sizeof prov);
	if (cmf_op_set_tensor(f, m->final_norm->name, w, prov, o->out) < 0)
		tool_fail("cannot write", o->out);
	else
		rc = EXIT_OK;
out:
	data_free(&t);
	free(w);
	return rc;
}

/*
 * the tuned layer's data: both streams' rows, the source block's outputs
 * (with --lookahead 1, passed on through the source's next block)
 */
typedef struct {
	float *xq, *xs, *ys;
	double *rw; /* each row's weight in the loss (tn_row_weights) */
	fw_window *w;
	size_t nw, rows;
	double energy[2]; /* E ρ_t‖y_src − x_src‖² per position, FIT and SEL (the
			   * measured block's change of the source stream) */
	const uint32_t *tok; /* the calibration tokens, ntok of them */
	size_t ntok;
} layer_data;

static void layer_data_free(layer_data *ld)
{
	free(ld->xq);
	free(ld->xs);
	free(ld->ys);
	free(ld->rw);
	free(ld->w);
}

static int layer_prepare(const opts *o, const fw_model *m, const uint32_t *ids, size_t n,
			 layer_data *ld)
{
	int l = (int)o->layer;
	fw_window *w2;
	size_t nw2, rows2, cnt[2] = { 0, 0 }, d = m->d;

	ld->tok = ids;
	ld->ntok = n;
	if (tn_rows(m, o->state, l, ids, n, o->fit, o->sel, o->window, &ld->xq, &ld->w, &ld->nw,
		    &ld->rows) < 0)
		return tool_fail("cannot read the converted stream of layer", o->state ? o->state
							    : "embeddings");
	if (tn_rows(m, o->src_state, l, ids, n, o->fit, o->sel, o->window, &ld->xs, &w2, &nw2,
		    &rows2) < 0)
		return tool_fail("cannot read the source stream of layer",
				 o->src_state ? o->src_state : "embeddings");
	free(w2);
	if (o->ahead && l + 1 >= m->a.layers)
		return tool_failf("--lookahead 1: layer %d is the last of %s, no block after it", l,
				  o->model);
	if (o->src_next) {
		/* the source stream's next states are this block's outputs, as its run gives them */
		if (tn_rows(m, o->src_next, l + 1, ids, n, o->fit, o->sel, o->window, &ld->ys, &w2,
			    &nw2, &rows2) < 0)
			return tool_fail("cannot read the source stream after layer", o->src_next);
		free(w2);
	} else if (!(ld->ys = nv_malloc(ld->rows, d * sizeof(float))) ||
		   tn_block_out(m, l, ld->xs, ld->w, ld->nw, ld->ys) < 0) {
		return tool_fail("cannot run the source block of", o->model);
	}
	/* ahead: the next block's input is ys, its output the target; xs becomes its input */
	if (o->ahead) {
		memcpy(ld->xs, ld->ys, ld->rows * d * sizeof(float));
		if (tn_block_out(m, l + 1, ld->xs, ld->w, ld->nw, ld->ys) < 0)
			return tool_fail("cannot run the next source block of", o->model);
	}
	if (tn_row_weights(ld->ys, ld->rows, d, (tn_loss)o->loss, &ld->rw) < 0)
		return tool_fail("cannot weigh the positions of the source block of", o->model);
	for (size_t i = 0, r = 0; i < ld->nw; i++)
		for (size_t t = 0; t < ld->w[i].len - 1; t++, r++) {
			double e2 = 0;

			for (size_t k = 0; k < d; k++) {
				double e = (double)ld->ys[r * d + k] - ld->xs[r * d + k];

				e2 += e * e;
			}
			ld->energy[ld->w[i].sel] += ld->rw[r] * e2;
			cnt[ld->w[i].sel]++;
		}
	for (int p = 0; p < 2; p++)
		ld->energy[p] /= cnt[p] ? (double)cnt[p] : 1.0;
	return 0;
}

/* dir/<the input payload's file name> */
static char *out_path(const char *dir, const char *in)
{
	char *copy = nv_strdup(in), *s = NULL;

	if (copy && (s = nv_malloc(strlen(dir) + strlen(in) + 2, 1)))
		sprintf(s, "%s/%s", dir, basename(copy));
	free(copy);
	return s;
}

/* every tuned payload, or none: a failure removes the ones written */
static int write_payloads(const opts *o, uint8_t **out, const tn_input *in)
{
	char **path = nv_calloc(o->npatch, sizeof *path);
	size_t k = 0;
	int rc = path ? EXIT_OK : tool_fail("cannot write into", o->out);

	for (; path && k < o->npatch && rc == EXIT_OK; k++) {
		aout a;

		if (!(path[k] = out_path(o->out, o->patch_file[k])))
			rc = tool_fail("cannot write into", o->out);
		else if (aout_open(&a, path[k], AOUT_BINARY) < 0 ||
			 aout_write(&a, out[k], in[k].len) < 0 || aout_commit(&a) < 0)
			rc = tool_fail("cannot write", path[k]);
	}
	for (size_t i = 0; i < k; i++) {
		if (rc != EXIT_OK && i + 1 < k)
			unlink(path[i]);
		free(path[i]);
	}
	free(path);
	return rc;
}

/* --next-state: the tuned layer's outputs, the states entering the next layer
 * (gram-capture --next-state's file for the same payloads, byte for byte) */
static int write_next(const opts *o, const fw_model *m, const layer_data *ld, const float *y)
{
	st_header h = st_header_of((uint32_t)o->layer + 1, m->d, o->window, ld->tok,
				   ld->ntok, o->fit, o->sel, ld->rows);
	st_writer w;

	if (!o->next_state)
		return EXIT_OK;
	if (st_create(&w, o->next_state, &h) < 0)
		return tool_fail("cannot write", o->next_state);
	if (st_append(&w, y, ld->rows) < 0) {
		st_abort(&w);
		return tool_fail("cannot write", o->next_state);
	}
	return st_commit(&w) < 0 ? tool_fail("cannot write", o->next_state) : EXIT_OK;
}

static int layer_tune(const opts *o, const fw_model *m, const layer_data *ld, tn_input *in)
{
	uint8_t *out[MAX_PATCH] = { 0 };
	tn_opts to = { o->has_steps ? o->steps : LAYER_STEPS, o->has_batch ? o->batch : 2,
		       o->eval_every, o->has_lr ? o->lr : LAYER_LR, (uint64_t)o->seed,
		       o->decay == 1 };
	tn_data dt = { ld->xq, ld->ys, ld->rw, ld->w, ld->nw, o->ahead, NULL };
	tn_result r;
	double t0 = tool_now(), secs;
	int rc;

	if (o->next_state && !(dt.next = nv_malloc(ld->rows, m->d * sizeof(float))))
		return tool_fail("cannot hold the states after layer", o->patch_file[0]);
	if (tn_tune(m, (int)o->layer, in, o->npatch, &dt, &to, out, &r) < 0) {
		free(dt.next);
		return tool_fail("cannot tune layer", o->patch_file[0]);
	}
	secs = tool_now() - t0;
	printf("layer %ld: loss fit %.6f -> %.6f sel %.6f -> %.6f | step %zu of %zu | %.1f s "
	       "%.1f GFLOP/s | norm sel %.4f -> %.4f\n", o->layer, r.fit_before / ld->energy[0],
	       r.fit_after / ld->energy[0], r.sel_before / ld->energy[1], r.sel_after / ld->energy[1],
	       r.best_step, to.steps, secs, r.flops / secs * 1e-9, r.norm_before, r.norm_after);
	rc = write_next(o, m, ld, dt.next);
	if (rc == EXIT_OK && (rc = write_payloads(o, out, in)) != EXIT_OK && o->next_state)
		unlink(o->next_state); /* every output, or none */
	for (size_t i = 0; i < o->npatch; i++)
		free(out[i]);
	free(dt.next);
	return rc;
}

/* --layer's output directory, none of whose payloads would overwrite an input */
static int check_out_dir(const opts *o)
{
	struct stat st;

	if (stat(o->out, &st) != 0 || !S_ISDIR(st.st_mode))
		return tool_failf("the output '%s' is not a directory", o->out);
	for (size_t i = 0; i < o->npatch; i++) {
		char *p = out_path(o->out, o->patch_file[i]);
		int same = p && tool_same_file(p, o->patch_file[i]);

		free(p);
		if (same)
			return tool_failf("refusing to overwrite the input '%s'", o->patch_file[i]);
	}
	return EXIT_OK;
}

/* every payload read */
static int read_patches(const opts *o, tn_input **in)
{
	size_t k = 0;

	if (!(*in = nv_calloc(o->npatch, sizeof **in)))
		return tool_failf("out of memory for %zu patches", o->npatch);
	for (; k < o->npatch; k++) {
		uint8_t *buf;

		if (nv_read_file(o->patch_file[k], &buf, &(*in)[k].len) < 0) {
			tool_fail("cannot read patch", o->patch_file[k]);
			break;
		}
		(*in)[k].name = o->patch_name[k];
		(*in)[k].payload = buf;
	}
	return k == o->npatch ? EXIT_OK : EXIT_FAIL;
}

static void free_inputs(const opts *o, tn_input *in)
{
	for (size_t k = 0; in && k < o->npatch; k++)
		free((void *)in[k].payload);
	free(in);
}

static int layer_mode(const opts *o, const fw_model *m, const uint32_t *ids, size_t n)
{
	tn_input *in = NULL;
	layer_data ld = { 0 };
	int rc = check_out_dir(o);

	if (rc == EXIT_OK)
		rc = read_patches(o, &in);

	if (rc == EXIT_OK)
		rc = layer_prepare(o, m, ids, n, &ld) == 0 ? layer_tune(o, m, &ld, in) : EXIT_FAIL;
	free_inputs(o, in);
	layer_data_free(&ld);
	return rc;
}

/*
 * --perturb: each payload alone in the source, from the source's states
 * entering the layer on the SEL windows; one line a payload
 */
static int perturb_run(const opts *o, const fw_model *m, const tn_input *in, const float *x,
		       const fw_window *w, size_t nw)
{
	size_t s0 = 0, r0 = 0;
	double *kl = nv_calloc(o->npatch, sizeof *kl);
	double flops = 0, t0 = tool_now();
	float *E = kl ? fw_head_f32(m) : NULL;
	int rc = EXIT_FAIL;

	while (s0 < nw && !w[s0].sel)
		r0 += w[s0++].len - 1;
	if (!E)
		tool_fail("cannot read the head of", o->model);
	else if (pt_kl(m, (int)o->layer, in, o->npatch, x + r0 * m->d, w + s0, nw - s0, E, kl,
		       &flops) < 0)
		tool_fail("cannot measure the payloads alone in", o->model);
	else {
		for (size_t i = 0; i < o->npatch; i++)
			printf("%s %s kl %.9g\n", in[i].name, o->patch_file[i], kl[i]);
		if (o->progress)
			fprintf(stderr, "blr-tune: layer %ld, %zu payloads: %.1f s %.1f GFLOP/s\n",
				o->layer, o->npatch, tool_now() - t0,
				flops / (tool_now() - t0) * 1e-9);
		rc = EXIT_OK;
	}
	free(E);
	free(kl);
	return rc;
}

static int perturb_mode(const opts *o, const fw_model *m, const uint32_t *ids, size_t n)
{
	tn_input *in = NULL;
	fw_window *w = NULL;
	float *x = NULL;
	size_t nw, rows;
	int rc = read_patches(o, &in);

	if (rc == EXIT_OK && tn_rows(m, o->src_state, (int)o->layer, ids, n, o->fit, o->sel,
				     o->window, &x, &w, &nw, &rows) < 0)
		rc = tool_fail("cannot read the source stream of layer",
			       o->src_state ? o->src_state : "embeddings");
	if (rc == EXIT_OK)
		rc = perturb_run(o, m, in, x, w, nw);
	free(x);
	free(w);
	free_inputs(o, in);
	return rc;
}

/* the source's final states (normalized, × its final norm's weight) and both heads */
static int e2e_prepare(const opts *o, fw_model *m, fw_model *b, const uint32_t *ids,
		       tune_data *t, fw_window **w, size_t *nw)
{
	size_t rows;

	if (!(*w = fw_windows(o->fit, o->sel, o->window, nw, &rows)))
		return tool_fail("cannot cut the calibration windows of",
				 o->tokens ? o->tokens : o->text);
	if (o->progress)
		fprintf(stderr, "blr-tune: the source's final states of %zu positions\n", rows);
	if (!(t->ns = states(b, ids, *w, *nw, rows, b->final_w)))
		return tool_fail("cannot run model", o->base);
	return heads(o, m, b, t);
}

/* the -m model with the tuned payloads in place, the run in its cmf.provenance */
static int write_model(const opts *o, const cmf_file *f, const tn_input *in, uint8_t **out,
		       const mt_result *r, const tn_opts *to)
{
	cmf_patch *p = nv_calloc(o->npatch, sizeof *p);
	char prov[1024];
	int rc = EXIT_OK;

	if (!p)
		return tool_fail("cannot write", o->out);
	for (size_t i = 0; i < o->npatch; i++)
		p[i] = (cmf_patch){ in[i].name, o->patch_file[i], out[i], in[i].len };
	snprintf(prov, sizeof prov,
		 "{\"end_to_end_tuning\":{\"kl_sel_before\":%.9g,\"kl_sel_after\":%.9g,"
		 "\"kl_fit_before\":%.9g,\"kl_fit_after\":%.9g,\"best_step\":%zu,\"steps\":%zu,"
		 "\"batch\":%zu,\"lr\":%.9g,\"lr_decay\":\"%s\",\"eval_every\":%zu,\"seed\":%ld,"
		 "\"payloads\":%zu,\"fit_tokens\":%zu,\"sel_tokens\":%zu,\"window\":%zu}}",
		 r->sel_before, r->sel_after, r->fit_before, r->fit_after, r->best_step, to->steps,
		 to->batch, to->lr, to->cosine ? "cosine" : "none", to->eval_every, o->seed,
		 o->npatch, o->fit, o->sel, o->window);
	if (cmf_op_apply_prov(f, p, o->npatch, prov, o->out) < 0)
		rc = tool_fail("cannot write", o->out);
	free(p);
	return rc;
}

static double e2e_t0;

static void e2e_progress(size_t step, double sel)
{
	fprintf(stderr, "blr-tune: step %zu: kl sel %.6f (%.0f s)\n", step, sel,
		tool_now() - e2e_t0);
}

static int e2e_mode(const opts *o, const cmf_file *f, fw_model *m, fw_model *b,
		    const uint32_t *ids)
{
	tn_input *in = NULL;
	uint8_t **out = NULL;
	tune_data t = { 0 };
	fw_window *w = NULL;
	size_t nw = 0;
	mt_result r;
	double t0 = tool_now(), secs;
	int rc = read_patches(o, &in);

	if (rc == EXIT_OK && mt_check(m, in, o->npatch) < 0)
		rc = tool_fail("cannot tune the payloads of", o->model);
	if (rc != EXIT_OK || (rc = e2e_prepare(o, m, b, ids, &t, &w, &nw)) != EXIT_OK)
		goto out;
	tn_opts to = { o->has_steps ? o->steps : E2E_STEPS, o->has_batch ? o->batch : 1, o->eval_every,
		       o->has_lr ? o->lr : E2E_LR, (uint64_t)o->seed,
		       o->decay < 0 ? E2E_COSINE : o->decay };
	mt_data D = { ids, w, nw, t.ns, t.E, t.Es, o->progress ? e2e_progress : NULL,
		      o->cache_mib << 20 };
	e2e_t0 = t0;
	rc = EXIT_FAIL;
	if (!(out = nv_calloc(o->npatch, sizeof *out)) || mt_tune(m, in, o->npatch, &D, &to, out,
								   &r) < 0) {
		tool_fail("cannot tune the payloads of", o->model);
		goto out;
	}
	secs = tool_now() - t0;
	printf("model: kl sel %.6f -> %.6f fit %.6f -> %.6f | step %zu of %zu | %zu payloads | "
	       "%.1f s %.1f GFLOP/s\n", r.sel_before, r.sel_after, r.fit_before, r.fit_after,
	       r.best_step, to.steps, o->npatch, secs, r.flops / secs * 1e-9);
	rc = write_model(o, f, in, out, &r, &to);
out:
	for (size_t i = 0; out && i < o->npatch; i++)
		free(out[i]);
	free(out);
	free(w);
	free_inputs(o, in);
	data_free(&t);
	return rc;
}

static void free_patches(opts *o)
{
	for (size_t i = 0; i < o->npatch; i++)
		free((char *)o->patch_name[i]);
	free(o->patch_name);
	free(o->patch_file);
	o->npatch = 0;
}

int main(int argc, char **argv)
{
	opts o = { .fit = 8192, .sel = 2048, .window = 512, .progress = tool_progress_default(),
		   .steps = 100, .eval_every = 10, .cache_mib = 4096, .decay = -1,
		   .loss = LAYER_LOSS };
	cmf_file f, bf;
	fw_model m, bm;
	uint32_t *ids = NULL;
	size_t n = 0;
	int rc;

	tool_name = "blr-tune";
	nv_fp_flush(1); /* the forward's subnormals would slow its products several times */
	if ((rc = parse_args(argc, argv, &o)) != 0 || tool_open_model(o.model, &f, &m)) {
		free_patches(&o);
		return rc == -2 ? tool_finish(EXIT_OK) : rc ? rc : EXIT_FAIL;
	}
	if (o.has_layer || o.perturb) {
		rc = load_tokens(&o, &f, &ids, &n) ? EXIT_FAIL
		     : o.perturb ? perturb_mode(&o, &m, ids, n) : layer_mode(&o, &m, ids, n);
		goto out;
	}
	if (tool_open_model(o.base, &bf, &bm)) {
		rc = EXIT_FAIL;
		goto out;
	}
	rc = EXIT_FAIL;
	if (same_shape(&o, &m, &bm) == 0 && load_tokens(&o, &f, &ids, &n) == 0)
		rc = o.e2e ? e2e_mode(&o, &f, &m, &bm, ids) : final_norm(&o, &f, &m, &bm, ids, n);
	fw_close(&bm);
	cmf_close(&bf);
out:
	free_patches(&o);
	free(ids);
	fw_close(&m);
	cmf_close(&f);
	return tool_finish(rc);
}
