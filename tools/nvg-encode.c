/* nvg-encode - one tensor to a BLR payload: nvg or dual-svid, f64 on the CPU */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aout.h"
#include "cmf.h"
#include "encin.h"
#include "err.h"
#include "fileio.h"
#include "hctx.h"
#include "jobs.h"
#include "linalg.h"
#include "mem.h"
#include "nvg.h"
#include "nvgdev.h"
#include "nvgg.h"
#include "parse.h"
#include "tool.h"

/* how often an idle job slot is looked for: make takes a token at once when it
 * has a job to start, so one still there a period later is lent */
#define LEND_POLL_MS 10

static const char synopsis[] =
	"nvg-encode -w W.raw --shape MxN --fit FIT.gram --sel SEL.gram\n"
	"[--hctx CTX.hctx | --rho R] --bpw B [--kv] [--kv-factor K]\n"
	"[--paths auto|1|2] [--refine N] [--g-solve direct|pcg]\n"
	"[--itq-prec f64|f32] [--hb-prec f32|f64] [--als-prec f64|f32]\n"
	"[--try-sweeps N] [--try-abort on|off] [--g-every N]\n"
	"[--itq-tol F] [--als-tol F]\n"
	"[--pick-after N | --pick-lead F|off]\n"
	"[--threads N [--threads-max M]] [--profile]\n"
	"[--target-raw M.raw] [--cross C.fit.cross [--cross-damp D]]\n"
	"[--cross-sel C.sel.cross --src-sel S.sel.gram]\n"
	"[--row-gauge invE --head-blocks SPEC [--gauge-shuffle SEED]]\n"
	"[--device cpu|opencl|auto|both] [--cl-platform P]\n"
	"[--cl-device D] [-o OUT.blr]\n"
	"nvg-encode -m MODEL.cmf -t NAME [--target-from OTHER.cmf] [--plan FILE]\n"
	"[option ...]\n"
	"nvg-encode [option ...] [--jobs N] -w W.raw [--shape MxN] -o OUT.blr\n"
	"-w W2.raw [--shape M2xN] -o OUT2.blr ...\n"
	"nvg-encode -m MODEL.cmf [option ...] [--jobs N] -t NAME -o OUT.blr\n"
	"-t NAME2 -o OUT2.blr ...\n"
	"nvg-encode --method dual-svid -w W.raw --shape MxN --bpw B [--kv]\n"
	"[--kv-factor K] [--paths auto|1|2] [--threads N]\n"
	"[--sel SEL.gram] [-o OUT.blr]\n"
	"nvg-encode -h | --version\n";

typedef struct {
	nv_encin_spec s; /* what to read */
	const char *shape, *out;
	double kv_factor;
	int paths, profile, have_rho, have_damp;
	int g_pcg; /* --g-solve: -1 not given (pcg for nvg: the CPU encoder), 0 direct, 1 pcg */
	double itq_tol; /* --itq-tol: -1 not given (the CPU encoder's default; a device takes every step) */
	int itq_prec;   /* --itq-prec: 0 not given (f64), 64, 32 */
	int hb_prec;    /* --hb-prec: 0 not given (f32), 64, 32 */
	int als_prec;   /* --als-prec: 0 not given (f64), 64, 32 */
	double als_tol; /* --als-tol: -1 not given (likewise) */
	long sweeps;
	long try_sweeps; /* --try-sweeps: 0 not given */
	int try_abort;   /* --try-abort: -1 not given (on: the CPU encoder's), 0 off, 1 on */
	long g_every;    /* --g-every: 0 not given */
	long pick_after; /* --pick-after: 0 not given */
	double pick_lead; /* --pick-lead: -2 not given (the CPU encoder's default; a device
			   * refines both candidates through), -1 off */
	nv_method method;
	long threads;
	long threads_max; /* --threads-max: 0 not given */
	nvdev_opts dev;
	size_t nt, nout, nshape; /* several tensors that read one input */
	const char *ts[64], *outs[64], *shapes[64];
} opts;

_Static_assert(NV_SWEEPS_MAX == 16, "tool_parse_refine's range is nvg.h's");

enum {
	O_SHAPE = 256, O_HCTX, O_FIT, O_SEL, O_BPW, O_KV, O_KVF, O_PATHS, O_METHOD, O_THREADS,
	O_PROFILE, O_RHO, O_TARGET, O_GAUGE, O_BLOCKS, O_SHUFFLE, O_VERSION, O_TFROM, O_PLAN,
	O_DEVICE, O_CLPLAT, O_CLDEV, O_JOBS, O_CROSS, O_CROSS_SEL, O_SRC_SEL, O_CROSS_DAMP,
	O_REFINE, O_GSOLVE, O_ITQ_PREC, O_HB_PREC, O_ITQ_TOL, O_ALS_TOL, O_TRY_SWEEPS, O_G_EVERY, O_PICK_AFTER,
	O_PICK_LEAD, O_TRY_ABORT,
	O_ALS_PREC, O_THREADS_MAX
};

static const struct option longopts[] = {
	{"shape", required_argument, NULL, O_SHAPE}, {"hctx", required_argument, NULL, O_HCTX},
	{"fit", required_argument, NULL, O_FIT}, {"sel", required_argument, NULL, O_SEL},
	{"bpw", required_argument, NULL, O_BPW}, {"kv", no_argument, NULL, O_KV},
	{"kv-factor", required_argument, NULL, O_KVF}, {"paths", required_argument, NULL, O_PATHS},
	{"method", required_argument, NULL, O_METHOD},
	{"refine", required_argument, NULL, O_REFINE},
	{"g-solve", required_argument, NULL, O_GSOLVE},
	{"itq-prec", required_argument, NULL, O_ITQ_PREC},
	{"hb-prec", required_argument, NULL, O_HB_PREC},
	{"als-prec", required_argument, NULL, O_ALS_PREC},
	{"itq-tol", required_argument, NULL, O_ITQ_TOL},
	{"als-tol", required_argument, NULL, O_ALS_TOL},
	{"try-sweeps", required_argument, NULL, O_TRY_SWEEPS},
	{"try-abort", required_argument, NULL, O_TRY_ABORT},
	{"g-every", required_argument, NULL, O_G_EVERY},
	{"pick-after", required_argument, NULL, O_PICK_AFTER},
	{"pick-lead", required_argument, NULL, O_PICK_LEAD},
	{"threads", required_argument, NULL, O_THREADS},
	{"threads-max", required_argument, NULL, O_THREADS_MAX},
	{"profile", no_argument, NULL, O_PROFILE}, {"rho", required_argument, NULL, O_RHO},
	{"target-raw", required_argument, NULL, O_TARGET},
	{"cross", required_argument, NULL, O_CROSS},
	{"cross-sel", required_argument, NULL, O_CROSS_SEL},
	{"src-sel", required_argument, NULL, O_SRC_SEL},
	{"cross-damp", required_argument, NULL, O_CROSS_DAMP},
	{"row-gauge", required_argument, NULL, O_GAUGE},
	{"head-blocks", required_argument, NULL, O_BLOCKS},
	{"gauge-shuffle", required_argument, NULL, O_SHUFFLE},
	{"target-from", required_argument, NULL, O_TFROM},
	{"plan", required_argument, NULL, O_PLAN}, {"model", required_argument, NULL, 'm'},
	{"tensor", required_argument, NULL, 't'}, {"device", required_argument, NULL, O_DEVICE},
	{"cl-platform", required_argument, NULL, O_CLPLAT},
	{"cl-device", required_argument, NULL, O_CLDEV}, {"jobs", required_argument, NULL, O_JOBS},
	{"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, O_VERSION}, {NULL, 0, NULL, 0}};

/* the options whose value is a number, checked on the spot: 0, -1 after
 * printing, 1 when c is not one of them */
static int value_opt(int c, const char *a, opts *o)
{
	long v;

	switch (c) {
	case O_BPW:
		o->s.have_bpw = 1;
		if (tool_parse_bpw(a, &o->s.bpw) < 0)
			return tool_fail("invalid --bpw", a), -1;
		return 0;
	case O_KVF:
		if (tool_parse_kv_factor(a, &o->kv_factor) < 0)
			return tool_fail("invalid --kv-factor", a), -1;
		return 0;
	case O_CROSS_DAMP:
		o->have_damp = 1;
		if (nv_parse_double(a, 0.0, 1e6, &o->s.cross_damp) < 0)
			return tool_fail("invalid --cross-damp", a), -1;
		return 0;
	case O_RHO:
		o->have_rho = 1;
		if (tool_parse_rho(a, &o->s.rho) < 0)
			return tool_fail("invalid --rho", a), -1;
		return 0;
	case O_THREADS:
		if (tool_parse_threads(a, &o->threads) < 0)
			return tool_fail("invalid --threads", a), -1;
		return 0;
	case O_THREADS_MAX:
		if (tool_parse_threads(a, &o->threads_max) < 0)
			return tool_fail("invalid --threads-max", a), -1;
		return 0;
	case O_SHUFFLE:
		if (nv_parse_long(a, 1, 0x7fffffffL, &v) < 0)
			return tool_fail("invalid --gauge-shuffle", a), -1;
		o->s.shuffle = (unsigned long long)v;
		return 0;
	case O_REFINE:
		if (tool_parse_refine(a, &o->sweeps) < 0)
			return tool_fail("invalid --refine", a), -1;
		return 0;
	case O_TRY_SWEEPS:
		if (nv_parse_long(a, 1, NV_TRY_SWEEPS_MAX, &o->try_sweeps) < 0)
			return tool_fail("invalid --try-sweeps", a), -1;
		return 0;
	case O_G_EVERY:
		if (nv_parse_long(a, 1, NV_G_EVERY_MAX, &o->g_every) < 0)
			return tool_fail("invalid --g-every", a), -1;
		return 0;
	case O_PICK_AFTER:
		if (nv_parse_long(a, 1, NV_SWEEPS_MAX - 1, &o->pick_after) < 0)
			return tool_fail("invalid --pick-after", a), -1;
		return 0;
	case O_PICK_LEAD:
		if (!strcmp(a, "off"))
			o->pick_lead = -1.0;
		else if (nv_parse_double(a, 0.0, 0.5, &o->pick_lead) < 0)
			return tool_fail("invalid --pick-lead", a), -1;
		return 0;
	case O_ITQ_TOL:
		if (nv_parse_double(a, 0.0, 0.5, &o->itq_tol) < 0)
			return tool_fail("invalid --itq-tol", a), -1;
		return 0;
	case O_ALS_TOL:
		if (nv_parse_double(a, 0.0, 0.5, &o->als_tol) < 0)
			return tool_fail("invalid --als-tol", a), -1;
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
	}
	return 1;
}

/* the options whose value is a word from a list: as value_opt */
static int choice_opt(int c, const char *a, opts *o)
{
	switch (c) {
	case O_GSOLVE:
		if (!strcmp(a, "direct") || !strcmp(a, "pcg")) {
			o->g_pcg = a[0] == 'p';
			return 0;
		}
		nv_seterr("expected direct or pcg");
		return tool_fail("invalid --g-solve", a), -1;
	case O_ITQ_PREC:
	case O_HB_PREC:
	case O_ALS_PREC:
		if (!strcmp(a, "f64") || !strcmp(a, "f32")) {
			*(c == O_ITQ_PREC ? &o->itq_prec : c == O_HB_PREC ? &o->hb_prec : &o->als_prec) =
				a[1] == '3' ? 32 : 64;
			return 0;
		}
		nv_seterr("expected f64 or f32");
		return tool_fail(c == O_ITQ_PREC ? "invalid --itq-prec" : c == O_HB_PREC ? "invalid --hb-prec"
			: "invalid --als-prec", a), -1;
	case O_TRY_ABORT:
		if (!strcmp(a, "on") || !strcmp(a, "off")) {
			o->try_abort = a[1] == 'n';
			return 0;
		}
		nv_seterr("expected on or off");
		return tool_fail("invalid --try-abort", a), -1;
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
	case O_GAUGE:
		if (strcmp(a, "invE")) {
			nv_seterr("expected invE");
			return tool_fail("invalid --row-gauge", a), -1;
		}
		o->s.gauge = a;
		return 0;

	}
	return 1;
}

/* file and flag options; 1 when c is not one of them */
static int plain_opt(int c, const char *a, opts *o)
{
	switch (c) {
	case 'w': o->ts[o->nt < 64 ? o->nt : 63] = o->s.w = a, o->nt++; break;
	case 'o': o->outs[o->nout < 64 ? o->nout : 63] = o->out = a, o->nout++; break;
	case O_SHAPE: o->shapes[o->nshape < 64 ? o->nshape : 63] = o->shape = a, o->nshape++; break;
	case O_HCTX: o->s.hctx = a; break;
	case O_FIT: o->s.fit = a; break;
	case O_SEL: o->s.sel = a; break;
	case O_TARGET: o->s.target = a; break;
	case O_CROSS: o->s.cross = a; break;
	case O_CROSS_SEL: o->s.cross_sel = a; break;
	case O_SRC_SEL: o->s.src_sel = a; break;
	case O_BLOCKS: o->s.blocks = a; break;
	case 'm': o->s.model = a; break;
	case 't': o->ts[o->nt < 64 ? o->nt : 63] = o->s.tname = a, o->nt++; break;
	case O_TFROM: o->s.target_from = a; break;
	case O_PLAN: o->s.plan = a; break;
	case O_KV: o->s.kv = 1; break;
	case O_PROFILE: o->profile = 1; break;
	default: return 1;
	}
	return 0;
}

/* several tensors: one -o each, one --shape or one each; no per-tensor knobs */
static int check_several(const opts *o)
{
	if (o->nt > 64)
		return tool_usage_error("at most 64 tensors at once");
	if (o->nt <= 1)
		return o->nout > 1 || o->nshape > 1 ? tool_usage_error("one tensor, one -o") : 0;
	if (o->nout != o->nt || (o->nshape > 1 && o->nshape != o->nt))
		return tool_usage_error("several tensors need one -o each, and one --shape or one each");
	if (o->s.gauge || o->s.target || o->s.target_from || o->s.cross || o->s.cross_sel)
		return tool_usage_error("several tensors take no --row-gauge, --target-raw, "
					"--target-from, --cross or --cross-sel");
	return 0;
}

/* --threads-max: above --threads, which it needs */
static int check_threads(const opts *o)
{
	if (o->threads_max && (!o->threads || o->threads_max < o->threads))
		return tool_usage_error("--threads-max needs --threads, and at least as many");
	return 0;
}

/* the transport target and its SEL objective; returns a usage status or 0 */
static int check_transport(const opts *o)
{
	if (o->s.cross && (o->method != NV_METHOD_NVG || o->s.target || o->s.target_from ||
			   o->s.gauge))
		return tool_usage_error("--cross is nvg's, without --target-raw, --target-from "
					"or --row-gauge");
	if (o->have_damp && !o->s.cross)
		return tool_usage_error("--cross-damp needs --cross");
	if (!o->s.cross_sel != !o->s.src_sel || (o->s.cross_sel && (!o->s.sel || o->s.gauge)))
		return tool_usage_error("--cross-sel and --src-sel go together, with --sel and "
					"without --row-gauge");
	return 0;
}

/* nvg's effort and precision options: nvg's, and some the CPU encoder's only;
 * returns a usage status or 0 */
static int check_effort(const opts *o)
{
	if (o->method == NV_METHOD_DUAL_SVID && o->sweeps)
		return tool_usage_error("--refine is nvg's: dual-svid refines nothing");
	if (o->method == NV_METHOD_DUAL_SVID && o->g_pcg >= 0)
		return tool_usage_error("--g-solve is nvg's: dual-svid has no g step");
	if (o->g_pcg == 1 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--g-solve pcg is the CPU encoder's: give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->try_sweeps)
		return tool_usage_error("--try-sweeps is nvg's: dual-svid refines nothing");
	if (o->method == NV_METHOD_DUAL_SVID && o->try_abort >= 0)
		return tool_usage_error("--try-abort is nvg's: dual-svid refines nothing");
	if (o->try_abort >= 0 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--try-abort is the CPU encoder's (a device runs every "
					"sweep of a try): give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->g_every)
		return tool_usage_error("--g-every is nvg's: dual-svid has no g step");
	if (o->g_every > 1 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--g-every above 1 is the CPU encoder's (a device runs "
					"every g step): give --device cpu");
	if (o->pick_after && (o->method == NV_METHOD_DUAL_SVID || o->paths))
		return tool_usage_error("--pick-after chooses between nvg's two candidates: "
					"--paths auto");
	if (o->pick_after && o->pick_after >= (o->sweeps ? o->sweeps : NV_SWEEPS_DEFAULT))
		return tool_usage_error("--pick-after must be below --refine's sweeps");
	if (o->pick_after && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--pick-after is the CPU encoder's: give --device cpu");
	if (o->pick_lead >= 0.0 && (o->method == NV_METHOD_DUAL_SVID || o->paths))
		return tool_usage_error("--pick-lead chooses between nvg's two candidates: "
					"--paths auto");
	if (o->pick_lead >= 0.0 && o->pick_after)
		return tool_usage_error("--pick-after and --pick-lead are two early choices: "
					"give one");
	if (o->pick_lead >= 0.0 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--pick-lead is the CPU encoder's: give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->itq_tol >= 0)
		return tool_usage_error("--itq-tol is nvg's: dual-svid has no ITQ");
	if (o->itq_tol > 0 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--itq-tol above 0 is the CPU encoder's: give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->itq_prec)
		return tool_usage_error("--itq-prec is nvg's: dual-svid has no ITQ");
	if (o->itq_prec == 32 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--itq-prec f32 is the CPU encoder's (a device's ITQ is "
					"f32 already): give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->als_tol >= 0)
		return tool_usage_error("--als-tol is nvg's: dual-svid has no ALS");
	if (o->als_tol > 0 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--als-tol above 0 is the CPU encoder's: give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->hb_prec)
		return tool_usage_error("--hb-prec is nvg's: dual-svid has no FIT Gram");
	if (o->hb_prec == 64 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--hb-prec f64 is the CPU encoder's (a device's products are "
					"f32): give --device cpu");
	if (o->method == NV_METHOD_DUAL_SVID && o->als_prec)
		return tool_usage_error("--als-prec is nvg's: dual-svid has no ALS");
	if (o->als_prec == 32 && o->dev.mode != NVCL_CPU)
		return tool_usage_error("--als-prec f32 is the CPU encoder's (a device's products are "
					"f32 already): give --device cpu");
	return 0;
}

/* combinations that make no command; returns a usage status or 0 */
static int check_usage(const opts *o)
{
	int st;

	if (o->s.model && !o->s.tname)
		return tool_usage_error("-m MODEL.cmf needs -t NAME");
	if (o->s.model && o->s.w)
		return tool_usage_error("give one of -w W.raw and -m MODEL.cmf");
	if (o->s.target_from && !o->s.model)
		return tool_usage_error("--target-from needs -m MODEL.cmf -t NAME");
	if (o->s.target_from && o->s.target)
		return tool_usage_error("give one of --target-raw and --target-from");
	if (!o->shape && !o->s.model)
		return tool_usage_error("missing --shape MxN");
	if (!o->s.model && !o->s.w == !o->s.target)
		return tool_usage_error("give exactly one of -w W.raw and --target-raw M.raw");
	if (o->s.plan && !o->s.tname)
		return tool_usage_error("--plan needs the tensor's name, -t NAME");
	if (!o->s.have_bpw && !o->s.plan)
		return tool_usage_error("missing --bpw B");
	if (o->method == NV_METHOD_NVG && (!o->s.fit || !o->s.sel))
		return tool_usage_error("nvg needs --fit FIT.gram and --sel SEL.gram");
	if (o->s.hctx && o->have_rho)
		return tool_usage_error("--rho applies when the context is built from --fit, "
					"not with --hctx");
	if (o->method == NV_METHOD_DUAL_SVID && o->s.hctx)
		return tool_usage_error("dual-svid reads no context");
	if ((st = check_effort(o)))
		return st;
	if (!o->s.gauge != !o->s.blocks || (o->s.shuffle && !o->s.gauge))
		return tool_usage_error("--row-gauge and --head-blocks go together "
					"(--gauge-shuffle with them)");
	if (o->s.gauge && !o->s.fit)
		return tool_usage_error("--row-gauge needs --fit FIT.gram");
	if (check_threads(o) || check_transport(o))
		return EXIT_USAGE;
	return check_several(o);
}

/* 0: go on; 1: exit now with *st */
static int parse_args(int argc, char **argv, opts *o, int *st)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->out = "-";
	o->dev = (nvdev_opts){ NVCL_CPU, -1, -1, 1, 0 };
	o->kv_factor = 1.0;
	o->g_pcg = -1;
	o->itq_tol = -1;
	o->als_tol = -1;
	o->pick_lead = -2;
	o->try_abort = -1;
	o->s.rho = 0.03;
	o->s.cross_damp = 0.03;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hw:o:m:t:", longopts, NULL)) != -1) {
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
		if (value_opt(c, optarg, o) < 0 || choice_opt(c, optarg, o) < 0)
			return *st = EXIT_FAIL, 1;
	}
	if (optind != argc)
		return *st = tool_usage_error("unexpected argument '%s'", argv[optind]), 1;
	if ((*st = check_usage(o)))
		return 1;
	/* the first tensor is the one the single-tensor code reads */
	if (o->nt > 1) {
		*(o->s.model ? &o->s.tname : &o->s.w) = o->ts[0];
		o->out = o->outs[0];
		o->shape = o->nshape ? o->shapes[0] : NULL;
	}
	o->dev.profile = o->profile;
	if (o->g_pcg < 0) /* the CPU encoder's default (a device solves directly) */
		o->g_pcg = o->method == NV_METHOD_NVG;
	/* likewise the stops (a device takes every ITQ step and ALS sweep) */
	if (o->itq_tol < 0)
		o->itq_tol = NV_ITQ_TOL_DEFAULT;
	if (o->als_tol < 0)
		o->als_tol = NV_ALS_TOL_DEFAULT;
	if (o->pick_lead < -1.5) /* likewise, and none with --pick-after */
		o->pick_lead = o->pick_after ? -1.0 : NV_PICK_LEAD_DEFAULT;
	if (o->shape && nv_parse_shape(o->shape, &o->s.m, &o->s.n) < 0)
		return *st = tool_fail("invalid --shape", o->shape), 1;
	if (o->shape && (o->s.m < 8 || o->s.n < 8)) {
		nv_seterr("min(m,n) < 8 is not encodable");
		return *st = tool_fail("invalid --shape", o->shape), 1;
	}
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
	if (strcmp(r->where, "gpu") == 0) {
		fprintf(stderr, "device profile: %s\n", r->prof);
		fprintf(stderr, "device total: %.3fs %.4g flop %.2f GFLOP/s\n", r->secs, r->flops,
			r->flops / fmax(r->secs, 1e-9) * 1e-9);
	}
	nv_prof_line(prof, line, sizeof(line));
	fprintf(stderr, "profile: %s\n", line);
	fprintf(stderr, "total: %.3fs %.4g flop %.2f GFLOP/s\n", secs, (double)nv_flops(),
		(double)nv_flops() / fmax(secs, 1e-9) * 1e-9);
}

/* "| transport sel E" after the report line: the objective of the payload as stored */
static int add_transport_err(const nv_encin *in, nv_enc_result *res)
{
	size_t k = strlen(res->line);
	double e;

	if (nv_encin_transport_err(in, res->bytes, res->len, &e) < 0)
		return -1;
	snprintf(res->line + k, sizeof(res->line) - k, " | transport sel %.4f", e);
	return 0;
}

/* write and report tensor i; its exit status */
static int finish_one(const opts *o, size_t i, const char *subj, nvdev_result *r,
		      const nv_encin *in, nv_prof *prof, double t0)
{
	const char *out = o->nt > 1 ? o->outs[i] : o->out;

	if (r->st == 1) {
		nv_seterr("%s", r->err);
		tool_fail("blr refused", subj);
		return EXIT_REFUSED;
	}
	if (r->st < 0) {
		nv_seterr("%s", r->err);
		return tool_fail("cannot encode", subj);
	}
	if (in->gauge && blr_gauge_undo(r->res.bytes, r->res.len, in->gauge, o->s.m) < 0)
		return tool_fail("cannot undo the row gauge of", subj);
	if (in->csel.path && add_transport_err(in, &r->res) < 0)
		return tool_fail("cannot measure the transport objective of", subj);
	if (write_payload(out, &r->res) < 0)
		return tool_fail("cannot write", aout_is_stdout(out) ? "standard output" : out);
	report(o, r, prof, nv_now() - t0);
	return EXIT_OK;
}

/* the mode's encoder; the kernels' build log follows a failure to build them */
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

/* every tensor's inputs: the first's in full, the others' matrices and budgets */
static int load_all(opts *o, const cmf_file *cf, nv_encin *in, nvdev_tensor *t, size_t k,
		    nv_prof *prof)
{
	static nv_encin_spec sp[64];
	const char *shapes[64] = { 0 };

	o->s.nvg = o->method == NV_METHOD_NVG;
	/* the CPU encoder of one matrix no taller than wide reads no Cholesky
	 * factor: the context is read without it (other runs: nvdev_trim_context) */
	o->s.no_l = o->dev.mode == NVCL_CPU && k == 1 && o->s.m <= o->s.n;
	/* nor does it hold the SEL Gram beside the refinement: it reads it
	 * again for each measure (the device encoders take it whole) */
	o->s.sel_later = o->dev.mode == NVCL_CPU;
	sp[0] = o->s;
	for (size_t i = 1; i < k && o->nshape > 1; i++)
		shapes[i] = o->shapes[i];
	for (size_t i = 1; i < k && o->nshape == 1; i++)
		shapes[i] = o->shapes[0];
	if (nv_encin_load(&o->s, cf, &in[0], prof) < 0 ||
	    (k > 1 && nvdev_load_more(&o->s, o->ts, shapes, k, sp, in) < 0)) {
		tool_failf("%s", nv_err());
		return -1;
	}
	if (in[0].gauge)
		fprintf(stderr, "%s: row gauge%s over %zu blocks: scale %.3f..%.3f\n", tool_name,
			o->s.shuffle ? " (shuffled)" : "", in[0].gauge_blocks, in[0].gauge_lo,
			in[0].gauge_hi);
	for (size_t i = 0; i < k; i++)
		t[i] = (nvdev_tensor){ sp[i].tname ? sp[i].tname : sp[i].target ? sp[i].target : sp[i].w,
				       &in[i].w, sp[i].bpw, sp[i].kv ? o->kv_factor : 1.0 };
	return 0;
}

/*
 * the sweeps' temporaries stay mapped (nv_heap_hold) where every tensor is
 * small (nv_hold_mn's bound): their page faults cost a SmolLM2 encode some
 * 3% of its time, and a 7B tensor's 1-3%, while the fragments the held
 * heap keeps raised a 7B-shaped encode's peak RSS past #12's 3x its inputs
 * (a synthetic 5504x2048 at 1.0 bpw: 440 MiB held, 380 MiB not; the same
 * bytes)
 */
static void heap_hold_small(const nv_encin *in, size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (!nv_hold_mn(in[i].w.r, in[i].w.c, NV_HOLD_MAX_DEFAULT))
			return;
	nv_heap_hold();
}

static int encode(opts *o, const cmf_file *cf, nv_prof *prof)
{
	static nv_encin in[64];
	static nvdev_result res[64];
	nvdev_tensor t[64];
	nv_enc_opts eo;
	nvdev d;
	size_t k = o->nt > 1 ? o->nt : 1;
	double t0 = nv_now();
	int st = EXIT_OK;

	nv_flops_reset();
	memset(&d, 0, sizeof(d));
	if (load_all(o, cf, in, t, k, prof) < 0) {
		st = EXIT_FAIL;
		goto out;
	}
	heap_hold_small(in, k);
	nv_enc_opts_default(&eo);
	eo.paths = o->paths;
	if (o->sweeps)
		eo.sweeps = (int)o->sweeps;
	eo.g_pcg = o->g_pcg;
	eo.itq_tol = o->itq_tol;
	eo.itq_f32 = o->itq_prec == 32;
	eo.hb_f32 = o->hb_prec != 64;
	eo.als_f32 = o->als_prec == 32;
	eo.als_tol = o->als_tol;
	if (o->try_sweeps)
		eo.try_sweeps = (int)o->try_sweeps;
	eo.try_abort = o->try_abort != 0;
	if (o->g_every)
		eo.g_every = (int)o->g_every;
	eo.pick_after = (int)o->pick_after;
	eo.pick_lead = o->pick_lead;
	eo.method = o->method;
	if (!in[0].hsel.d && in[0].sel_src.path) {
		eo.sel_load = nv_encin_sel_load;
		eo.sel_arg = &in[0].sel_src;
	}
	eo.threads = (int)(o->threads ? o->threads : nv_get_threads());
	eo.prof = prof;
	if (k == 1 && in[0].have_hc && o->dev.mode == NVCL_CPU)
		eo.spend_l = &in[0].hc; /* one encode on the CPU reads the context */
	if (open_device(o, &eo, &d) < 0) {
		st = EXIT_FAIL;
		goto out;
	}
	nvdev_trim_context(&d, t, k, in[0].have_hc ? &in[0].hc : NULL);
	nvdev_encode(&d, t, k, in[0].have_hc ? &in[0].hc : NULL, in[0].hsel.d ? &in[0].hsel : NULL,
		     &eo, res);
	for (size_t i = 0; i < k; i++) {
		int s1 = finish_one(o, i, t[i].name, &res[i], &in[i], prof, t0);
		st = st == EXIT_FAIL || s1 == EXIT_OK ? st : s1;
		nvdev_result_free(&res[i]);
	}
out:
	nvdev_close(&d);
	for (size_t i = 0; i < k; i++)
		nv_encin_free(&in[i]);
	return st;
}

/* grow's: THREADS more for each job slot lent, up to --threads-max */
static void lent(void *ctx, size_t held)
{
	const opts *o = ctx;
	size_t n = (size_t)o->threads * (held + 1);

	nv_set_threads((int)(n < (size_t)o->threads_max ? n : (size_t)o->threads_max));
}

/*
 * --threads-max: the job slots of make's jobserver that lie idle, THREADS
 * threads each (j: opened before any file, so that a descriptor number make
 * closed cannot be one of ours); where none is given or it cannot be read,
 * the encoder runs on --threads, with a note in the second case
 */
static nv_jobs *lend_slots(const opts *o, nv_jobs *j, const char *open_err)
{
	const char *why = open_err;

	if (o->threads_max && !open_err && j) {
		size_t slots = (size_t)((o->threads_max + o->threads - 1) / o->threads) - 1;

		if (nv_jobs_lend(j, slots, LEND_POLL_MS, lent, (void *)o) == 0)
			return j;
		why = nv_err();
	}
	if (o->threads_max && why)
		fprintf(stderr, "%s: note: no job slots lent: %s\n", tool_name, why);
	nv_jobs_close(j);
	return NULL;
}

static void lend_end(nv_jobs *j)
{
	size_t held = nv_jobs_held(j);

	if (held)
		fprintf(stderr, "%s: %zu job slot%s lent at the end\n", tool_name, held,
			held == 1 ? "" : "s");
	if (nv_jobs_close(j) < 0)
		fprintf(stderr, "%s: note: %s\n", tool_name, nv_err());
}

int main(int argc, char **argv)
{
	opts o;
	nv_prof prof;
	cmf_file cf;
	nv_jobs *j = NULL;
	char jerr[256] = "";
	int st;

	tool_name = "nvg-encode";
	/* before any file is opened (lend_slots) */
	if (nv_jobs_open(getenv("MAKEFLAGS"), &j) < 0)
		snprintf(jerr, sizeof jerr, "%s", nv_err());
	if (parse_args(argc, argv, &o, &st)) {
		nv_jobs_close(j);
		return st;
	}
	memset(&cf, 0, sizeof(cf));
	if ((o.s.model && nv_encin_model(&o.s, &cf) < 0) || (o.s.plan && nv_encin_plan(&o.s) < 0)) {
		nv_jobs_close(j);
		cmf_close(&cf);
		return tool_finish(tool_failf("%s", nv_err()));
	}
	if (o.threads)
		nv_set_threads((int)o.threads);
	j = lend_slots(&o, j, jerr[0] ? jerr : NULL);
	nv_prof_init(&prof);
	st = encode(&o, &cf, o.profile ? &prof : NULL);
	lend_end(j);
	nv_prof_free(&prof);
	if (o.s.model)
		cmf_close(&cf);
	return tool_finish(st);
}
