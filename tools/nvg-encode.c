/* nvg-encode - one tensor to a BLR payload: nvg or dual-svid, f64 on the CPU */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aout.h"
#include "err.h"
#include "fileio.h"
#include "hctx.h"
#include "linalg.h"
#include "nvg.h"
#include "nvgdev.h"
#include "nvgg.h"
#include "parse.h"
#include "tool.h"

static const char synopsis[] =
	"nvg-encode -w W.raw --shape MxN --fit FIT.gram --sel SEL.gram [--hctx CTX.hctx | --rho R]\n"
	"           --bpw B [--kv] [--kv-factor K] [--paths auto|1|2] [--threads N] [--profile]\n"
	"           [--target-raw M.raw] [--row-gauge invE --head-blocks SPEC [--gauge-shuffle SEED]]\n"
	"           [--device cpu|opencl|auto|both] [--cl-platform P] [--cl-device D] [--jobs N]\n"
	"           [-o OUT.blr] [-w W2.raw [--shape M2xN] -o OUT2.blr ...]\n"
	"nvg-encode --method dual-svid -w W.raw --shape MxN --bpw B [--kv] [--kv-factor K]\n"
	"           [--paths auto|1|2] [--threads N] [-o OUT.blr]\n"
	"nvg-encode -h | --version\n";

typedef struct {
	const char *w, *target, *shape, *hctx, *fit, *sel, *out, *gauge, *blocks;
	size_t m, n;
	double bpw, kv_factor, rho;
	int kv, paths, profile, have_bpw, have_rho;
	nv_method method;
	long threads;
	unsigned long long shuffle;
	nvdev_opts dev;
	size_t nw, nout, nshape;          /* several tensors sharing the input */
	const char *ws[64], *outs[64], *shapes[64];
} opts;

enum {
	O_SHAPE = 256, O_HCTX, O_FIT, O_SEL, O_BPW, O_KV, O_KVF, O_PATHS, O_METHOD, O_THREADS,
	O_PROFILE, O_RHO, O_TARGET, O_GAUGE, O_BLOCKS, O_SHUFFLE, O_VERSION, O_DEVICE,
	O_CLPLAT, O_CLDEV, O_JOBS
};

static const struct option longopts[] = {
	{"shape", required_argument, NULL, O_SHAPE}, {"hctx", required_argument, NULL, O_HCTX},
	{"fit", required_argument, NULL, O_FIT}, {"sel", required_argument, NULL, O_SEL},
	{"bpw", required_argument, NULL, O_BPW}, {"kv", no_argument, NULL, O_KV},
	{"kv-factor", required_argument, NULL, O_KVF}, {"paths", required_argument, NULL, O_PATHS},
	{"method", required_argument, NULL, O_METHOD},
	{"threads", required_argument, NULL, O_THREADS},
	{"profile", no_argument, NULL, O_PROFILE}, {"rho", required_argument, NULL, O_RHO},
	{"target-raw", required_argument, NULL, O_TARGET},
	{"row-gauge", required_argument, NULL, O_GAUGE},
	{"head-blocks", required_argument, NULL, O_BLOCKS},
	{"gauge-shuffle", required_argument, NULL, O_SHUFFLE},
	{"device", required_argument, NULL, O_DEVICE},
	{"cl-platform", required_argument, NULL, O_CLPLAT},
	{"cl-device", required_argument, NULL, O_CLDEV}, {"jobs", required_argument, NULL, O_JOBS},
	{"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, O_VERSION}, {NULL, 0, NULL, 0}};

/* options that take a value checked on the spot; -1 after printing */
static int value_opt(int c, const char *a, opts *o)
{
	long v;

	switch (c) {
	case O_BPW:
		o->have_bpw = 1;
		if (nv_parse_double_open(a, 0.0, 16.0, &o->bpw) < 0)
			return tool_fail("invalid --bpw", a), -1;
		return 0;
	case O_KVF:
		if (nv_parse_double_open(a, 0.0, 16.0, &o->kv_factor) < 0)
			return tool_fail("invalid --kv-factor", a), -1;
		return 0;
	case O_RHO:
		o->have_rho = 1;
		if (nv_parse_double(a, 0.0, 1e6, &o->rho) < 0)
			return tool_fail("invalid --rho", a), -1;
		return 0;
	case O_THREADS:
		if (nv_parse_long(a, 1, 64, &o->threads) < 0)
			return tool_fail("invalid --threads", a), -1;
		return 0;
	case O_SHUFFLE:
		if (nv_parse_long(a, 1, 0x7fffffffL, &v) < 0)
			return tool_fail("invalid --gauge-shuffle", a), -1;
		o->shuffle = (unsigned long long)v;
		return 0;
	case O_PATHS:
		if (!strcmp(a, "auto") || !strcmp(a, "1") || !strcmp(a, "2")) {
			o->paths = a[0] == 'a' ? 0 : a[0] - '0';
			return 0;
		}
		nv_seterr("expected auto, 1 or 2");
		return tool_fail("invalid --paths", a), -1;
	case O_METHOD:
		if (!strcmp(a, "nvg") || !strcmp(a, "dual-svid")) {
			o->method = a[0] == 'n' ? NV_METHOD_NVG : NV_METHOD_DUAL_SVID;
			return 0;
		}
		nv_seterr("expected nvg or dual-svid");
		return tool_fail("invalid --method", a), -1;
	case O_DEVICE:
		if (nvcl_parse_mode(a, &o->dev.mode) < 0)
			return tool_fail("invalid --device", a), -1;
		return 0;
	case O_CLPLAT:
	case O_CLDEV:
		if (nv_parse_long(a, 0, 1024, c == O_CLPLAT ? &o->dev.plat : &o->dev.dev) < 0)
			return tool_fail(c == O_CLPLAT ? "invalid --cl-platform" : "invalid --cl-device",
					 a), -1;
		return 0;
	case O_JOBS:
		if (nv_parse_size(a, 1, 64, &o->dev.jobs) < 0)
			return tool_fail("invalid --jobs", a), -1;
		return 0;
	case O_GAUGE:
		if (strcmp(a, "invE")) {
			nv_seterr("expected invE");
			return tool_fail("invalid --row-gauge", a), -1;
		}
		o->gauge = a;
		return 0;
	}
	return 1;
}

/* file and flag options; 1 when c is not one of them */
static int plain_opt(int c, const char *a, opts *o)
{
	switch (c) {
	case 'w': o->ws[o->nw < 64 ? o->nw : 63] = o->w = a, o->nw++; break;
	case 'o': o->outs[o->nout < 64 ? o->nout : 63] = a, o->nout++; break;
	case O_SHAPE: o->shapes[o->nshape < 64 ? o->nshape : 63] = o->shape = a, o->nshape++; break;
	case O_HCTX: o->hctx = a; break;
	case O_FIT: o->fit = a; break;
	case O_SEL: o->sel = a; break;
	case O_TARGET: o->target = a; break;
	case O_BLOCKS: o->blocks = a; break;
	case O_KV: o->kv = 1; break;
	case O_PROFILE: o->profile = 1; break;
	default: return 1;
	}
	return 0;
}

/* combinations that make no command; returns a usage status or 0 */
static int check_usage(const opts *o)
{
	if (!o->shape)
		return tool_usage_error("missing --shape MxN");
	if (!o->w == !o->target)
		return tool_usage_error("give exactly one of -w W.raw and --target-raw M.raw");
	if (!o->have_bpw)
		return tool_usage_error("missing --bpw B");
	if (o->method == NV_METHOD_NVG && (!o->fit || !o->sel))
		return tool_usage_error("nvg needs --fit FIT.gram and --sel SEL.gram");
	if (o->hctx && o->have_rho)
		return tool_usage_error("--rho applies when the context is built from --fit, "
					"not with --hctx");
	if (o->method == NV_METHOD_DUAL_SVID && (o->hctx || o->sel))
		return tool_usage_error("dual-svid reads no context or SEL Gram");
	if (!o->gauge != !o->blocks || (o->shuffle && !o->gauge))
		return tool_usage_error("--row-gauge and --head-blocks go together "
					"(--gauge-shuffle with them)");
	if (o->gauge && !o->fit)
		return tool_usage_error("--row-gauge needs --fit FIT.gram");
	if (o->nw > 64)
		return tool_usage_error("at most 64 tensors at once");
	if (o->nw > 1 && (o->nout != o->nw || (o->nshape != 1 && o->nshape != o->nw)))
		return tool_usage_error("several -w need one -o each, and one --shape or one each");
	if (o->nw > 1 && (o->gauge || o->target))
		return tool_usage_error("several tensors take no --row-gauge or --target-raw");
	if (o->nw <= 1 && o->nout > 1)
		return tool_usage_error("one tensor, one -o");
	return 0;
}

/* 0: go on; 1: exit now with *st */
static int parse_args(int argc, char **argv, opts *o, int *st)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->out = "-";
	o->dev = (nvdev_opts){ NVCL_CPU, -1, -1, 1, 0 };
	o->kv_factor = 1.0;
	o->rho = 0.03;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hw:o:", longopts, NULL)) != -1) {
		if (c == 'h' || c == O_VERSION) {
			if (c == 'h')
				fputs(synopsis, stdout);
			else
				tool_version();
			return *st = tool_finish(EXIT_OK), 1;
		}
		if (c == '?' || c == ':')
			return *st = tool_usage_error("unknown option or missing argument '%s'",
						      argv[optind - 1]), 1;
		if (plain_opt(c, optarg, o) == 0)
			continue;
		if (value_opt(c, optarg, o) < 0)
			return *st = EXIT_FAIL, 1;
	}
	if (optind != argc)
		return *st = tool_usage_error("unexpected argument '%s'", argv[optind]), 1;
	if ((*st = check_usage(o)))
		return 1;
	o->shape = o->shapes[0];
	o->w = o->nw ? o->ws[0] : NULL;
	o->out = o->nout ? o->outs[0] : "-";
	o->dev.profile = o->profile;
	if (nv_parse_shape(o->shape, &o->m, &o->n) < 0)
		return *st = tool_fail("invalid --shape", o->shape), 1;
	if (o->m < 8 || o->n < 8) {
		nv_seterr("min(m,n) < 8 is not encodable");
		return *st = tool_fail("invalid --shape", o->shape), 1;
	}
	return 0;
}

/* the inputs of one encode */
typedef struct {
	nv_mat w, hfit, hsel;
	nv_hctx hc;
	int have_hc;
	uint32_t fit_crc;
	uint64_t fit_count;
	double *gauge; /* (m) row gauge, or NULL */
} inputs;

static void inputs_free(inputs *in)
{
	nv_mat_free(&in->w);
	nv_mat_free(&in->hfit);
	nv_mat_free(&in->hsel);
	if (in->have_hc)
		nv_hctx_free(&in->hc);
	free(in->gauge);
}

/* an NVGG as f64 (n × n) whose width must be n */
static int load_gram(const char *path, size_t n, nv_mat *g, uint32_t *crc, uint64_t *count)
{
	nvgg gg;
	double *d;

	if (nvgg_read(path, &gg) < 0)
		return tool_fail("cannot read Gram", path), -1;
	if (gg.n != n) {
		nv_seterr("%u wide, but W has %zu columns", gg.n, n);
		nvgg_free(&gg);
		return tool_fail("Gram does not fit W", path), -1;
	}
	d = nvgg_to_f64(&gg);
	if (crc)
		*crc = nv_crc32(gg.g, (size_t)n * n * sizeof(float));
	if (count)
		*count = gg.count;
	nvgg_free(&gg);
	if (!d)
		return tool_fail("cannot read Gram", path), -1;
	g->r = g->c = n;
	g->d = d;
	return 0;
}

static int load_w(const opts *o, nv_mat *w)
{
	const char *path = o->target ? o->target : o->w;
	float *f = nv_read_raw_f32(path, o->m, o->n);

	if (!f || nv_mat_zeros(w, o->m, o->n) < 0) {
		free(f);
		return tool_fail("cannot read matrix", path), -1;
	}
	for (size_t i = 0; i < o->m * o->n; i++)
		w->d[i] = f[i];
	free(f);
	return 0;
}

/* the FIT context: read (checked against W and --fit) or built from --fit */
static int load_hctx(const opts *o, inputs *in, nv_prof *prof)
{
	double t = nv_now();

	if (o->hctx) {
		if (nv_hctx_read(o->hctx, &in->hc) < 0)
			return tool_fail("cannot read context", o->hctx), -1;
		in->have_hc = 1;
		if (in->hc.n != o->n) {
			nv_seterr("%zu wide, but W has %zu columns", in->hc.n, o->n);
			return tool_fail("context does not fit W", o->hctx), -1;
		}
		if (in->hc.gram_crc != in->fit_crc) {
			nv_seterr("built from another Gram than '%s'", o->fit);
			return tool_fail("context does not fit the FIT Gram", o->hctx), -1;
		}
	} else {
		if (nv_hctx_build(in->hfit.d, o->n, o->rho, &in->hc) < 0)
			return tool_fail("cannot build context from", o->fit), -1;
		in->have_hc = 1;
	}
	nv_prof_add(prof, "hctx", nv_now() - t, 0);
	return 0;
}

/* scale head blocks of W's rows by the invE gauge; remembered for the undo */
static int apply_gauge(const opts *o, inputs *in)
{
	size_t *starts, nb, m = in->w.r;
	double lo = INFINITY, hi = 0;

	if (nv_parse_head_blocks(o->blocks, m, &starts, &nb) < 0)
		return tool_fail("invalid --head-blocks", o->blocks), -1;
	in->gauge = malloc(m * sizeof(double));
	if (!in->gauge || nv_row_gauge(&in->w, &in->hfit, starts, nb, o->shuffle, in->gauge) < 0) {
		free(starts);
		return tool_fail("cannot compute the row gauge for", o->blocks), -1;
	}
	free(starts);
	for (size_t i = 0; i < m; i++) {
		lo = fmin(lo, in->gauge[i]);
		hi = fmax(hi, in->gauge[i]);
		for (size_t j = 0; j < in->w.c; j++)
			in->w.d[i * in->w.c + j] *= in->gauge[i];
	}
	fprintf(stderr, "%s: row gauge%s over %zu blocks: scale %.3f..%.3f\n", tool_name,
		o->shuffle ? " (shuffled)" : "", nb, lo, hi);
	return 0;
}

static int load_inputs(const opts *o, inputs *in, nv_prof *prof)
{
	memset(in, 0, sizeof(*in));
	if (load_w(o, &in->w) < 0)
		return -1;
	if (o->fit && load_gram(o->fit, o->n, &in->hfit, &in->fit_crc, &in->fit_count) < 0)
		return -1;
	if (o->sel && load_gram(o->sel, o->n, &in->hsel, NULL, NULL) < 0)
		return -1;
	if (o->method == NV_METHOD_NVG && load_hctx(o, in, prof) < 0)
		return -1;
	if (o->gauge && apply_gauge(o, in) < 0)
		return -1;
	return 0;
}

static int write_payload(const char *path, const nv_enc_result *res)
{
	aout out;

	if (aout_open(&out, path, AOUT_BINARY) < 0)
		return -1;
	if (aout_write(&out, res->bytes, res->len) < 0 || aout_commit(&out) < 0) {
		aout_abort(&out);
		return -1;
	}
	return 0;
}

static void report(const opts *o, const nvdev_result *r, nv_prof *prof, double secs)
{
	FILE *rep = aout_is_stdout(o->out) ? stderr : stdout;
	char line[2048];

	fprintf(rep, "%s\n", r->res.line);
	if (r->cmp[0])
		fprintf(rep, "%s\n", r->cmp);
	if (!prof)
		return;
	if (r->prof[0] && strcmp(r->where, "gpu") == 0)
		fprintf(stderr, "device profile: %s\ndevice total: %.3fs %.4g flop %.2f GFLOP/s\n",
			r->prof, r->secs, r->flops, r->flops / fmax(r->secs, 1e-9) * 1e-9);
	nv_prof_line(prof, line, sizeof(line));
	fprintf(stderr, "profile: %s\n", line);
	fprintf(stderr, "total: %.3fs %.4g flop %.2f GFLOP/s\n", secs, (double)nv_flops(),
		(double)nv_flops() / fmax(secs, 1e-9) * 1e-9);
}

/* tensors 2..k of a several-tensor run: their W, shaped by their own --shape or the first */
static int load_more(const opts *o, nv_mat *w)
{
	for (size_t i = 1; i < o->nw; i++) {
		opts one = *o;
		one.w = o->ws[i];
		if (o->nshape > 1 && nv_parse_shape(o->shapes[i], &one.m, &one.n) < 0)
			return tool_fail("invalid --shape", o->shapes[i]), -1;
		if (one.n != o->n) {
			nv_seterr("%zu columns, but the shared input is %zu wide", one.n, o->n);
			return tool_fail("invalid --shape", o->shapes[i]), -1;
		}
		if (load_w(&one, &w[i]) < 0)
			return -1;
	}
	return 0;
}

/* write and report tensor i; its exit status */
static int finish_one(const opts *o, size_t i, const char *subj, nvdev_result *r,
		      const inputs *in, nv_prof *prof, double t0)
{
	const char *out = o->nout ? o->outs[i] : "-";

	if (r->st == 1) {
		nv_seterr("%s", r->err);
		tool_fail("blr refused", subj);
		return EXIT_REFUSED;
	}
	if (r->st < 0) {
		nv_seterr("%s", r->err);
		return tool_fail("cannot encode", subj);
	}
	if (in->gauge && nv_undo_row_gauge(r->res.bytes, r->res.len, in->gauge, o->m) < 0)
		return tool_fail("cannot encode", subj);
	if (write_payload(out, &r->res) < 0)
		return tool_fail("cannot write", aout_is_stdout(out) ? "standard output" : out);
	report(o, r, prof, nv_now() - t0);
	return EXIT_OK;
}

/* open the device the mode asks for; the kernels' build log follows a failure */
static int open_device(const opts *o, const nv_enc_opts *eo, nvdev *d)
{
	if (nvdev_open(d, &o->dev, eo) < 0) {
		tool_fail("cannot use the device", nvcl_mode_name(o->dev.mode));
		if (d->c.build_log)
			fprintf(stderr, "%s", d->c.build_log);
		return -1;
	}
	if (d->ch.note[0])
		fprintf(stderr, "%s: note: %s\n", tool_name, d->ch.note);
	return 0;
}

static int encode(const opts *o, nv_prof *prof)
{
	inputs in;
	nv_enc_opts eo;
	nvdev d;
	nvdev_result res[64];
	nv_mat w[64] = { { 0 } };
	const nv_mat *wp[64];
	const char *names[64];
	size_t k = o->nw > 1 ? o->nw : 1;
	double t0 = nv_now();
	int st = EXIT_OK;

	nv_flops_reset();
	if (load_inputs(o, &in, prof) < 0 || load_more(o, w) < 0) {
		inputs_free(&in);
		for (size_t i = 1; i < k; i++)
			nv_mat_free(&w[i]);
		return EXIT_FAIL;
	}
	w[0] = in.w;
	for (size_t i = 0; i < k; i++) {
		wp[i] = &w[i];
		names[i] = o->target ? o->target : o->ws[i];
	}
	nv_enc_opts_default(&eo);
	eo.bpw = o->bpw;
	eo.kv = o->kv ? o->kv_factor : 1.0;
	eo.paths = o->paths;
	eo.method = o->method;
	eo.threads = (int)(o->threads ? o->threads : nv_get_threads());
	eo.prof = prof;
	if (open_device(o, &eo, &d) < 0) {
		st = EXIT_FAIL;
	} else {
		nvdev_encode(&d, wp, names, k, in.have_hc ? &in.hc : NULL, in.hfit.d ? &in.hfit : NULL,
			     in.hsel.d ? &in.hsel : NULL, &eo, res);
		for (size_t i = 0; i < k; i++) {
			int s = finish_one(o, i, names[i], &res[i], &in, prof, t0);
			st = st == EXIT_FAIL || s == EXIT_OK ? st : s;
			nvdev_result_free(&res[i]);
		}
	}
	nvdev_close(&d);
	for (size_t i = 1; i < k; i++)
		nv_mat_free(&w[i]);
	inputs_free(&in);
	return st;
}

int main(int argc, char **argv)
{
	opts o;
	nv_prof prof;
	int st;

	tool_name = "nvg-encode";
	if (parse_args(argc, argv, &o, &st))
		return st;
	if (o.threads)
		nv_set_threads((int)o.threads);
	nv_prof_init(&prof);
	st = encode(&o, o.profile ? &prof : NULL);
	nv_prof_free(&prof);
	return tool_finish(st);
}
