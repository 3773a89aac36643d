/* blr-pack - the BLR container: info, verify, unpack, rank rule, row-gauge undo */
#include "aout.h"
#include "blr.h"
#include "err.h"
#include "fileio.h"
#include "mem.h"
#include "parse.h"
#include "tool.h"

#include <getopt.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>

static const char synopsis[] =
	"blr-pack info [file ...]\n"
	"blr-pack verify --shape MxN [file]\n"
	"blr-pack unpack [-o out] [file]\n"
	"blr-pack rank --shape MxN --bpw bits [--paths 1|2] [--kv-factor k]\n"
	"blr-pack gauge --undo factors [-o out] [file]\n"
	"blr-pack -h | --version\n";

/* what the subcommands' options set */
typedef struct {
	const char *out, *undo, *shape, *bpw, *paths, *kv;
} opts;

static const char *subject(const char *path)
{
	return aout_is_stdout(path) ? "standard input" : path;
}

/* map and validate a payload; prints the failure */
static int load(const char *path, nv_map *m, blr_header *hd, blr_view v[2])
{
	if (nv_map_file(path, m) < 0) {
		fprintf(stderr, "%s: %s\n", tool_name, nv_err());
		return -1;
	}
	if (blr_parse(m->data, m->len, hd, v) < 0) {
		tool_fail("invalid payload", subject(path));
		nv_map_free(m);
		return -1;
	}
	return 0;
}

static int info_one(const char *path)
{
	nv_map m;
	blr_header hd;
	blr_view v[2];
	double bits;

	if (load(path, &m, &hd, v) < 0)
		return EXIT_FAIL;
	bits = blr_bits(hd.m, hd.n, hd.r, hd.paths);
	printf("shape %ux%u\nrank %u\npaths %u\nbytes %zu\nbits %.0f\nbpw %.6f\n", hd.m, hd.n,
	       hd.r, hd.paths, m.len, bits, bits / ((double)hd.m * hd.n));
	for (size_t p = 0; p < hd.paths; p++) {
		blr_scale_range s;

		blr_path_range(&hd, &v[p], &s);
		printf("path %zu |h| %.6g %.6g |g| %.6g %.6g l %.6g %.6g\n", p, s.h_min, s.h_max,
		       s.g_min, s.g_max, s.l_min, s.l_max);
	}
	nv_map_free(&m);
	return EXIT_OK;
}

/* one payload's lines; of several, each after "file NAME", up to the
 * first that fails (one process for a conversion's report, not one each) */
static int cmd_info(char **files, int n)
{
	if (n <= 1)
		return info_one(n ? files[0] : "-");
	for (int i = 0; i < n; i++) {
		printf("file %s\n", files[i]);
		if (info_one(files[i]) != EXIT_OK)
			return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int cmd_verify(const char *path, const opts *o)
{
	size_t rows, cols;
	nv_map m;
	blr_header hd;
	blr_view v[2];
	int rc = EXIT_OK;

	if (!o->shape)
		return tool_usage_error("verify needs --shape MxN");
	if (nv_parse_shape(o->shape, &rows, &cols) < 0)
		return tool_usage_error("bad --shape: %s", nv_err());
	if (load(path, &m, &hd, v) < 0)
		return EXIT_FAIL;
	if (blr_verify_shape(m.data, m.len, rows, cols) < 0)
		rc = tool_fail("verify failed", subject(path));
	nv_map_free(&m);
	return rc;
}

static int cmd_unpack(const char *path, const opts *o)
{
	nv_map m;
	blr_header hd;
	blr_view v[2];
	float *w = NULL;
	aout out;
	int rc = EXIT_FAIL;

	if (load(path, &m, &hd, v) < 0)
		return EXIT_FAIL;
	if (aout_open(&out, o->out ? o->out : "-", AOUT_BINARY) < 0) {
		tool_fail("cannot write", o->out ? o->out : "standard output");
		goto done;
	}
	w = nv_malloc((size_t)hd.m * hd.n, sizeof(float));
	if (!w || blr_dequantize(m.data, m.len, w) < 0) {
		tool_fail("cannot dequantize", subject(path));
		aout_abort(&out);
		goto done;
	}
	if (nv_write_f32(&out, w, (size_t)hd.m * hd.n) < 0 || aout_commit(&out) < 0) {
		tool_fail("cannot write", o->out ? o->out : "standard output");
		aout_abort(&out);
		goto done;
	}
	rc = EXIT_OK;
done:
	free(w);
	nv_map_free(&m);
	return rc;
}

static int rank_line(size_t m, size_t n, double bpw, size_t p, double k)
{
	size_t r;
	blr_clip c;
	double bits;

	if (blr_rank(m, n, bpw, p, k, &r, &c) < 0) {
		fprintf(stderr, "%s: no rank for '%zux%zu': %s\n", tool_name, m, n, nv_err());
		return EXIT_REFUSED;
	}
	bits = blr_bits(m, n, r, p);
	printf("paths %zu rank %zu bpw %.6f bits %.0f clip %s\n", p, r,
	       bits / ((double)m * (double)n), bits, c == BLR_CLIP_NONE ? "-" : blr_clip_name(c));
	return EXIT_OK;
}

static int cmd_rank(const opts *o)
{
	size_t m, n, p = 0;
	double bpw, k = 1.0;
	int rc;

	if (!o->shape || !o->bpw)
		return tool_usage_error("rank needs --shape MxN and --bpw bits");
	if (nv_parse_shape(o->shape, &m, &n) < 0)
		return tool_usage_error("bad --shape: %s", nv_err());
	if (tool_parse_bpw(o->bpw, &bpw) < 0)
		return tool_usage_error("bad --bpw '%s': %s", o->bpw, nv_err());
	if (o->paths && nv_parse_size(o->paths, 1, 2, &p) < 0)
		return tool_usage_error("bad --paths: %s", nv_err());
	if (o->kv && tool_parse_kv_factor(o->kv, &k) < 0)
		return tool_usage_error("bad --kv-factor: %s", nv_err());
	if (p)
		return rank_line(m, n, bpw, p, k);
	rc = rank_line(m, n, bpw, 1, k);
	return rc ? rc : rank_line(m, n, bpw, 2, k);
}

static int cmd_gauge(const char *path, const opts *o)
{
	const char *dst = o->out ? o->out : "-";
	nv_map m;
	blr_header hd;
	blr_view v[2];
	uint8_t *copy = NULL;
	float *f = NULL;
	double *d = NULL;
	aout out;
	int rc = EXIT_FAIL;

	if (!o->undo)
		return tool_usage_error("gauge needs --undo factors");
	if (tool_same_file(path, dst) || tool_same_file(o->undo, dst))
		return tool_failf("cannot write '%s': it is an input", dst);
	if (load(path, &m, &hd, v) < 0)
		return EXIT_FAIL;
	/* one f32 per row: exactly 4·d_out bytes, every value finite */
	f = nv_read_raw_f32(o->undo, hd.m, 1);
	d = nv_malloc(hd.m, sizeof(double));
	copy = nv_malloc(m.len, 1);
	if (!f || !d || !copy) {
		tool_fail("bad row factors", o->undo);
		goto done;
	}
	for (size_t i = 0; i < hd.m; i++)
		d[i] = f[i];
	memcpy(copy, m.data, m.len);
	if (blr_gauge_undo(copy, m.len, d, hd.m) < 0) {
		tool_fail("cannot undo the row gauge", o->undo);
		goto done;
	}
	if (aout_open(&out, dst, AOUT_BINARY) < 0) {
		tool_fail("cannot write", o->out ? o->out : "standard output");
		goto done;
	}
	if (aout_write(&out, copy, m.len) < 0 || aout_commit(&out) < 0) {
		tool_fail("cannot write", o->out ? o->out : "standard output");
		aout_abort(&out);
		goto done;
	}
	rc = EXIT_OK;
done:
	free(f);
	free(d);
	free(copy);
	nv_map_free(&m);
	return rc;
}

enum { OPT_SHAPE = 256, OPT_BPW, OPT_PATHS, OPT_KV, OPT_UNDO, OPT_VERSION };

static const struct option longopts[] = {
	{ "shape", required_argument, NULL, OPT_SHAPE },
	{ "bpw", required_argument, NULL, OPT_BPW },
	{ "paths", required_argument, NULL, OPT_PATHS },
	{ "kv-factor", required_argument, NULL, OPT_KV },
	{ "undo", required_argument, NULL, OPT_UNDO },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* the options of a subcommand; -1 after -h/--version (done), -2 on a usage error */
static int parse_opts(int argc, char **argv, opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(synopsis, stdout); return -1;
		case OPT_VERSION: tool_version(); return -1;
		case 'o': o->out = optarg; break;
		case OPT_SHAPE: o->shape = optarg; break;
		case OPT_BPW: o->bpw = optarg; break;
		case OPT_PATHS: o->paths = optarg; break;
		case OPT_KV: o->kv = optarg; break;
		case OPT_UNDO: o->undo = optarg; break;
		case ':':
			tool_usage_error("option '%s' needs a value", argv[optind - 1]);
			return -2;
		default:
			tool_usage_error("unknown option '%s'", argv[optind - 1]);
			return -2;
		}
	}
	return 0;
}

/* which options each subcommand takes, and whether it reads a file (info: any number) */
static int allowed(const char *cmd, const opts *o, int nargs)
{
	int file = strcmp(cmd, "rank") != 0;
	int ok = nargs <= file || !strcmp(cmd, "info");

	ok &= !o->out || !strcmp(cmd, "unpack") || !strcmp(cmd, "gauge");
	ok &= !o->shape || !strcmp(cmd, "verify") || !strcmp(cmd, "rank");
	ok &= !(o->bpw || o->paths || o->kv) || !strcmp(cmd, "rank");
	ok &= !o->undo || !strcmp(cmd, "gauge");
	if (!ok)
		tool_usage_error("%s: unexpected option or argument", cmd);
	return ok;
}

static int run(int argc, char **argv)
{
	const char *cmd, *file;
	opts o;
	int rc;

	if (argc < 2)
		return tool_usage_error("no subcommand");
	cmd = argv[1];
	if (cmd[0] == '-') {
		rc = parse_opts(argc, argv, &o);
		return rc == -1 ? EXIT_OK : tool_usage_error("no subcommand");
	}
	optind = 2;
	rc = parse_opts(argc, argv, &o);
	if (rc == -1)
		return EXIT_OK;
	if (rc == -2)
		return EXIT_USAGE;
	if (strcmp(cmd, "info") && strcmp(cmd, "verify") && strcmp(cmd, "unpack") &&
	    strcmp(cmd, "rank") && strcmp(cmd, "gauge"))
		return tool_usage_error("unknown subcommand '%s'", cmd);
	if (!allowed(cmd, &o, argc - optind))
		return EXIT_USAGE;
	file = optind < argc ? argv[optind] : "-";
	if (!strcmp(cmd, "info"))
		return cmd_info(argv + optind, argc - optind);
	if (!strcmp(cmd, "verify"))
		return cmd_verify(file, &o);
	if (!strcmp(cmd, "unpack"))
		return cmd_unpack(file, &o);
	if (!strcmp(cmd, "rank"))
		return cmd_rank(&o);
	return cmd_gauge(file, &o);
}

int main(int argc, char **argv)
{
	tool_name = "blr-pack";
	return tool_finish(run(argc, argv));
}
