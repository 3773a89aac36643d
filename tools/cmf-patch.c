/* cmf-patch - the model container: import, list, info, extract, apply, truncate, export, report, verify */
#include "cmf.h"
#include "cmf_ops.h"
#include "import.h"
#include "mem.h"
#include "parse.h"
#include "tool.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char synopsis[] =
	"cmf-patch import [--from safetensors|gguf|llama2c] [--dtype f32|f16|bf16] [--vocab FILE] -o OUT SRC ...\n"
	"cmf-patch list MODEL\n"
	"cmf-patch info MODEL\n"
	"cmf-patch extract [-o OUT] MODEL NAME\n"
	"cmf-patch apply [--provenance FILE] -o OUT MODEL NAME=PAYLOAD ...\n"
	"cmf-patch truncate --layers N -o OUT MODEL\n"
	"cmf-patch export [--dtype f32|f16|bf16] -o OUT MODEL\n"
	"cmf-patch report MODEL\n"
	"cmf-patch verify MODEL\n"
	"cmf-patch -h | --version\n";

enum { OPT_FROM = 256, OPT_DTYPE, OPT_VOCAB, OPT_LAYERS, OPT_PROV };

static const struct option long_opts[] = {
	{ "from", required_argument, NULL, OPT_FROM },
	{ "dtype", required_argument, NULL, OPT_DTYPE },
	{ "vocab", required_argument, NULL, OPT_VOCAB },
	{ "layers", required_argument, NULL, OPT_LAYERS },
	{ "output", required_argument, NULL, 'o' },
	{ "provenance", required_argument, NULL, OPT_PROV }, /* apply: for convert.mk */
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

typedef struct {
	const char *out, *vocab;
	const char *prov; /* apply --provenance FILE */
	int from, dtype;
	size_t layers;
	int nargs;
	char **args;
} opts;

/* the options of a subcommand; the operands are left in o->args */
static int parse_opts(int argc, char **argv, opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->dtype = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", long_opts, NULL)) != -1) {
		switch (c) {
		case 'o': o->out = optarg; break;
		case OPT_VOCAB: o->vocab = optarg; break;
		case OPT_PROV: o->prov = optarg; break;
		case OPT_FROM:
			if ((o->from = nv_from_parse(optarg)) < 0)
				return tool_usage_error("--from '%s': want safetensors, gguf or llama2c", optarg);
			break;
		case OPT_DTYPE:
			if (strcmp(optarg, "f32") == 0)
				o->dtype = CMF_F32;
			else if (strcmp(optarg, "f16") == 0)
				o->dtype = CMF_F16;
			else if (strcmp(optarg, "bf16") == 0)
				o->dtype = CMF_BF16;
			else
				return tool_usage_error("--dtype '%s': want f32, f16 or bf16", optarg);
			break;
		case OPT_LAYERS:
			if (nv_parse_size(optarg, 1, 1u << 20, &o->layers) < 0)
				return tool_usage_error("--layers '%s': %s", optarg, nv_err());
			break;
		case 'h': fputs(synopsis, stdout); return -1;
		default: return tool_usage_error("bad option");
		}
	}
	o->nargs = argc - optind;
	o->args = argv + optind;
	return 0;
}

static int need_out(const opts *o, const char *model)
{
	if (!o->out)
		return tool_usage_error("-o OUT is required");
	if (model && tool_same_file(o->out, model))
		return tool_failf("refusing to overwrite the input '%s'", model);
	return 0;
}

static int cmd_import(const opts *o)
{
	nv_import_opts io = { (nv_from)o->from, o->dtype, o->vocab };
	imp_model m;

	if (o->nargs < 1)
		return tool_usage_error("import needs SRC");
	if (need_out(o, NULL))
		return EXIT_USAGE;
	for (int i = 0; i < o->nargs; i++)
		if (tool_same_file(o->out, o->args[i]))
			return tool_failf("refusing to overwrite the input '%s'", o->args[i]);
	if (nv_import((size_t)o->nargs, o->args, &io, &m) < 0)
		return tool_fail("import failed", o->args[0]);
	if (imp_model_write(&m, o->out) < 0) {
		imp_model_free(&m);
		return tool_fail("write failed", o->out);
	}
	imp_model_free(&m);
	return EXIT_OK;
}

/* apply --provenance FILE: the conversion's JSON merged into cmf.provenance */
static int apply_with_provenance(const cmf_file *f, const cmf_patch *p, size_t np,
				 const opts *o)
{
	uint8_t *text;
	size_t len;
	char *s;
	int rc = EXIT_OK;

	if (nv_read_file(o->prov, &text, &len) < 0)
		return tool_fail("reading provenance", o->prov);
	if (!(s = nv_malloc(len + 1, 1))) {
		free(text);
		return tool_fail("reading provenance", o->prov);
	}
	memcpy(s, text, len);
	s[len] = '\0';
	if (strlen(s) != len || cmf_op_apply_prov(f, p, np, s, o->out) < 0) {
		if (strlen(s) != len)
			nv_seterr("a NUL byte in the provenance file");
		rc = tool_fail("apply failed", o->args[0]);
	}
	free(s);
	free(text);
	return rc;
}

static int apply_patches(const cmf_file *f, const opts *o)
{
	size_t np = (size_t)o->nargs - 1;
	cmf_patch *p = nv_calloc(np ? np : 1, sizeof(*p));
	char **names = nv_calloc(np ? np : 1, sizeof(char *));
	int rc = EXIT_OK;

	if (!p || !names)
		rc = tool_fail("apply failed", o->args[0]);
	for (size_t i = 0; rc == EXIT_OK && i < np; i++) {
		const char *a = o->args[i + 1], *eq = strchr(a, '=');

		if (!eq || eq == a || !eq[1]) {
			rc = tool_usage_error("'%s' is not NAME=PAYLOAD", a);
			break;
		}
		names[i] = strndup(a, (size_t)(eq - a));
		p[i].name = names[i];
		p[i].payload = eq + 1;
	}
	if (rc == EXIT_OK && o->prov)
		rc = apply_with_provenance(f, p, np, o);
	else if (rc == EXIT_OK && cmf_op_apply(f, p, np, o->out) < 0)
		rc = tool_fail("apply failed", o->args[0]);
	for (size_t i = 0; names && i < np; i++)
		free(names[i]);
	free(names);
	free(p);
	return rc;
}

/* the subcommands that read one MODEL */
static int run_on_model(const char *cmd, const opts *o, const cmf_file *f)
{
	const char *model = o->args[0];

	if (!strcmp(cmd, "list"))
		return cmf_op_list(f, stdout) < 0 ? tool_fail("list failed", model) : EXIT_OK;
	if (!strcmp(cmd, "info"))
		return cmf_op_info(f, stdout) < 0 ? tool_fail("info failed", model) : EXIT_OK;
	if (!strcmp(cmd, "report"))
		return cmf_op_report(f, stdout) < 0 ? tool_fail("report failed", model) : EXIT_OK;
	if (!strcmp(cmd, "verify")) {
		if (cmf_verify(f) < 0)
			return tool_fail("verify failed", model);
		printf("%s: %zu tensors, every CRC-32 matches\n", model, f->ntensors);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "extract"))
		return cmf_op_extract(f, o->args[1], o->out ? o->out : "-") < 0
			       ? tool_fail("extract failed", o->args[1]) : EXIT_OK;
	if (!strcmp(cmd, "apply"))
		return apply_patches(f, o);
	if (!strcmp(cmd, "truncate"))
		return cmf_op_truncate(f, o->layers, o->out) < 0 ? tool_fail("truncate failed", model)
								 : EXIT_OK;
	return cmf_op_export(f, o->dtype < 0 ? cmf_op_export_dtype(f) : (cmf_dtype)o->dtype, o->out) < 0
		       ? tool_fail("export failed", model) : EXIT_OK;
}

/* operand counts and required options of each model subcommand */
static int check_model_cmd(const char *cmd, const opts *o)
{
	int want = !strcmp(cmd, "extract") ? 2 : 1;

	if (!strcmp(cmd, "apply") ? o->nargs < 2 : o->nargs != want)
		return tool_usage_error("%s: wrong number of operands", cmd);
	if (!strcmp(cmd, "truncate") && o->layers == 0)
		return tool_usage_error("truncate needs --layers N");
	if (!strcmp(cmd, "apply") || !strcmp(cmd, "truncate") || !strcmp(cmd, "export"))
		return need_out(o, o->args[0]);
	if (!strcmp(cmd, "extract") && o->out && tool_same_file(o->out, o->args[0]))
		return tool_failf("refusing to overwrite the input '%s'", o->args[0]);
	return 0;
}

static int is_model_cmd(const char *cmd)
{
	static const char *const cmds[] = { "list", "info", "extract", "apply", "truncate",
					    "export", "report", "verify" };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i]))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;
	cmf_file f;
	opts o;
	int rc;

	tool_name = "cmf-patch";
	if (argc < 2)
		return tool_usage_error("no subcommand");
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help"))
		return fputs(synopsis, stdout), tool_finish(EXIT_OK);
	if (!strcmp(cmd, "--version"))
		return tool_version(), tool_finish(EXIT_OK);
	if (strcmp(cmd, "import") != 0 && !is_model_cmd(cmd))
		return tool_usage_error("unknown subcommand '%s'", cmd);
	if ((rc = parse_opts(argc - 1, argv + 1, &o)) != 0)
		return rc < 0 ? tool_finish(EXIT_OK) : rc;
	if (!strcmp(cmd, "import"))
		return tool_finish(cmd_import(&o));
	if ((rc = check_model_cmd(cmd, &o)) != 0)
		return rc;
	if (cmf_open(o.args[0], &f) < 0)
		return tool_fail("open failed", o.args[0]);
	rc = run_on_model(cmd, &o, &f);
	cmf_close(&f);
	return tool_finish(rc);
}
