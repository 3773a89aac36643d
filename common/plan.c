/* plan.c - the bit-budget plan grammar and its strict parser (see plan.h) */
#include "plan.h"
#include "err.h"
#include "fileio.h"
#include "lines.h"
#include "mem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 4

void plan_init(plan *p)
{
	memset(p, 0, sizeof(*p));
}

static void free_tensor_rules(plan_tensor_rule *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

void plan_free(plan *p)
{
	free(p->layers);
	free(p->keep_layers);
	free_tensor_rules(p->tensors, p->ntensors);
	free_tensor_rules(p->keep_tensors, p->nkeep_tensors);
	plan_init(p);
}

/* a layer number: decimal digits only, at most PLAN_MAX_LAYER */
static int parse_layer(const char *s, size_t *out)
{
	size_t v = 0;

	if (!*s)
		return -1;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		v = v * 10 + (size_t)(*c - '0');
		if (v > (size_t)PLAN_MAX_LAYER)
			return -1;
	}
	*out = v;
	return 0;
}

/* a budget in (0, 16) */
static int parse_budget(const char *s, size_t line, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0') {
		nv_seterr("line %zu: '%s' is not a number", line, s);
		return -1;
	}
	if (!isfinite(v) || !(v > 0.0 && v < 16.0)) {
		nv_seterr("line %zu: budget %s out of range (0 < bpw < 16)", line, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int add_layer(plan_layer_rule **v, size_t *n, size_t layer, double bpw, size_t line,
		     const char *what)
{
	plan_layer_rule *nv;

	for (size_t i = 0; i < *n; i++) {
		if ((*v)[i].layer == layer) {
			nv_seterr("line %zu: layer %zu already %s on line %zu", line, layer, what,
				  (*v)[i].line);
			return -1;
		}
	}
	nv = nv_realloc(*v, *n + 1, sizeof(**v));
	if (!nv)
		return -1;
	nv[*n] = (plan_layer_rule){ layer, bpw, line };
	*v = nv;
	(*n)++;
	return 0;
}

static int add_tensor(plan_tensor_rule **v, size_t *n, const char *name, double bpw,
		      size_t line, const char *what)
{
	plan_tensor_rule *nv;
	char *copy;

	for (size_t i = 0; i < *n; i++) {
		if (strcmp((*v)[i].name, name) == 0) {
			nv_seterr("line %zu: tensor '%s' already %s on line %zu", line, name, what,
				  (*v)[i].line);
			return -1;
		}
	}
	copy = nv_strdup(name);
	if (!copy)
		return -1;
	nv = nv_realloc(*v, *n + 1, sizeof(**v));
	if (!nv) {
		free(copy);
		return -1;
	}
	nv[*n] = (plan_tensor_rule){ copy, bpw, line };
	*v = nv;
	(*n)++;
	return 0;
}

/* keep <n> | keep layer <n> | keep tensor <name> */
static int parse_keep(plan *p, char **tok, size_t nt, size_t line)
{
	size_t l;

	if (nt < 2) {
		nv_seterr("line %zu: expected a layer or a tensor", line);
		return -1;
	}
	if (strcmp(tok[1], "layer") == 0 || strcmp(tok[1], "tensor") == 0) {
		if (nt < 3) {
			nv_seterr("line %zu: expected a %s", line, tok[1]);
			return -1;
		}
		if (nt > 3) {
			nv_seterr("line %zu: too many fields", line);
			return -1;
		}
		if (tok[1][0] == 't')
			return add_tensor(&p->keep_tensors, &p->nkeep_tensors, tok[2], 0, line,
					  "kept");
		if (parse_layer(tok[2], &l) < 0) {
			nv_seterr("line %zu: '%s' is not a layer", line, tok[2]);
			return -1;
		}
		return add_layer(&p->keep_layers, &p->nkeep_layers, l, 0, line, "kept");
	}
	if (nt > 2) {
		nv_seterr("line %zu: too many fields", line);
		return -1;
	}
	if (parse_layer(tok[1], &l) < 0) {
		nv_seterr("line %zu: '%s' is not a layer or a tensor", line, tok[1]);
		return -1;
	}
	return add_layer(&p->keep_layers, &p->nkeep_layers, l, 0, line, "kept");
}

/* a rule with a value: `key what bpw` (three fields) or `n bpw` (two) */
static int check_fields(size_t nt, size_t want, size_t line)
{
	if (nt < want) {
		nv_seterr("line %zu: expected a value", line);
		return -1;
	}
	if (nt > want) {
		nv_seterr("line %zu: too many fields", line);
		return -1;
	}
	return 0;
}

static int parse_rule(plan *p, char **tok, size_t nt, size_t line)
{
	size_t l;
	double b;

	/* the allocator's header row */
	if (nt == 2 && (strcmp(tok[0], "layer") == 0 || strcmp(tok[0], "tensor") == 0) &&
	    strcmp(tok[1], "bpw") == 0)
		return 0;
	if (strcmp(tok[0], "keep") == 0)
		return parse_keep(p, tok, nt, line);
	if (strcmp(tok[0], "layer") == 0) {
		if (check_fields(nt, 3, line) < 0)
			return -1;
		if (parse_layer(tok[1], &l) < 0) {
			nv_seterr("line %zu: '%s' is not a layer", line, tok[1]);
			return -1;
		}
		if (parse_budget(tok[2], line, &b) < 0)
			return -1;
		return add_layer(&p->layers, &p->nlayers, l, b, line, "has a rule");
	}
	if (strcmp(tok[0], "tensor") == 0) {
		if (check_fields(nt, 3, line) < 0 || parse_budget(tok[2], line, &b) < 0)
			return -1;
		return add_tensor(&p->tensors, &p->ntensors, tok[1], b, line, "has a rule");
	}
	if (parse_layer(tok[0], &l) < 0) {
		nv_seterr("line %zu: unknown key '%s' (layer|tensor|keep|<layer number>)", line,
			  tok[0]);
		return -1;
	}
	if (check_fields(nt, 2, line) < 0 || parse_budget(tok[1], line, &b) < 0)
		return -1;
	return add_layer(&p->layers, &p->nlayers, l, b, line, "has a rule");
}

static int cmp_layer(const void *a, const void *b)
{
	const plan_layer_rule *x = a, *y = b;

	return (x->layer > y->layer) - (x->layer < y->layer);
}

static int cmp_tensor(const void *a, const void *b)
{
	const plan_tensor_rule *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void sort_rules(plan *p)
{
	if (p->nlayers)
		qsort(p->layers, p->nlayers, sizeof(*p->layers), cmp_layer);
	if (p->nkeep_layers)
		qsort(p->keep_layers, p->nkeep_layers, sizeof(*p->keep_layers), cmp_layer);
	if (p->ntensors)
		qsort(p->tensors, p->ntensors, sizeof(*p->tensors), cmp_tensor);
	if (p->nkeep_tensors)
		qsort(p->keep_tensors, p->nkeep_tensors, sizeof(*p->keep_tensors), cmp_tensor);
}

int plan_parse(const char *text, size_t len, plan *p)
{
	char *tok[MAX_FIELDS];
	nv_lines it;
	size_t nt;
	int rc;

	plan_init(p);
	nv_lines_init(&it, text, len);
	while ((rc = nv_lines_next(&it)) > 0) {
		nt = nv_fields(it.buf, tok, MAX_FIELDS);
		if (nt > 0 && parse_rule(p, tok, nt < MAX_FIELDS ? nt : MAX_FIELDS, it.line) < 0)
			goto fail;
	}
	if (rc < 0)
		goto fail;
	nv_lines_free(&it);
	sort_rules(p);
	return 0;
fail:
	nv_lines_free(&it);
	plan_free(p);
	return -1;
}

int plan_load(const char *path, plan *p)
{
	uint8_t *buf;
	size_t len;
	int rc;

	plan_init(p);
	if (nv_read_file(path, &buf, &len) < 0)
		return -1;
	rc = plan_parse((const char *)buf, len, p);
	free(buf);
	return rc;
}

static const plan_layer_rule *find_layer(const plan_layer_rule *v, size_t n, size_t layer)
{
	plan_layer_rule key = { layer, 0, 0 };

	return n ? bsearch(&key, v, n, sizeof(*v), cmp_layer) : NULL;
}

static const plan_tensor_rule *find_tensor(const plan_tensor_rule *v, size_t n,
					   const char *name)
{
	plan_tensor_rule key = { (char *)name, 0, 0 };

	return n ? bsearch(&key, v, n, sizeof(*v), cmp_tensor) : NULL;
}

double plan_bpw_for(const plan *p, const char *name, size_t layer, double dflt)
{
	const plan_tensor_rule *t = find_tensor(p->tensors, p->ntensors, name);
	const plan_layer_rule *l;

	if (t)
		return t->bpw;
	l = find_layer(p->layers, p->nlayers, layer);
	return l ? l->bpw : dflt;
}

int plan_keeps(const plan *p, const char *name, size_t layer)
{
	return find_tensor(p->keep_tensors, p->nkeep_tensors, name) != NULL ||
	       find_layer(p->keep_layers, p->nkeep_layers, layer) != NULL;
}

static int has_layer(const size_t *layers, size_t n, size_t l)
{
	for (size_t i = 0; i < n; i++)
		if (layers[i] == l)
			return 1;
	return 0;
}

static int has_name(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

static int check_layers(const plan_layer_rule *r, size_t nr, const size_t *layers, size_t n)
{
	for (size_t i = 0; i < nr; i++) {
		if (!has_layer(layers, n, r[i].layer)) {
			nv_seterr("line %zu: layer %zu has no tensor to encode", r[i].line,
				  r[i].layer);
			return -1;
		}
	}
	return 0;
}

static int check_tensors(const plan_tensor_rule *r, size_t nr, const char *const *names,
			 size_t n)
{
	for (size_t i = 0; i < nr; i++) {
		if (!has_name(names, n, r[i].name)) {
			nv_seterr("line %zu: tensor '%s' is not one to encode", r[i].line,
				  r[i].name);
			return -1;
		}
	}
	return 0;
}

int plan_check(const plan *p, const char *const *names, const size_t *layers, size_t n)
{
	return check_layers(p->layers, p->nlayers, layers, n) < 0 ||
			       check_layers(p->keep_layers, p->nkeep_layers, layers, n) < 0 ||
			       check_tensors(p->tensors, p->ntensors, names, n) < 0 ||
			       check_tensors(p->keep_tensors, p->nkeep_tensors, names, n) < 0
		       ? -1
		       : 0;
}

int plan_is_empty(const plan *p)
{
	return !p->nlayers && !p->ntensors && !p->nkeep_layers && !p->nkeep_tensors;
}

const char *plan_fmt_bpw(double v, char *buf, size_t len)
{
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

int plan_write(FILE *f, const plan *p)
{
	char b[40];

	for (size_t i = 0; i < p->nkeep_layers; i++)
		fprintf(f, "keep layer %zu\n", p->keep_layers[i].layer);
	for (size_t i = 0; i < p->nkeep_tensors; i++)
		fprintf(f, "keep tensor %s\n", p->keep_tensors[i].name);
	for (size_t i = 0; i < p->nlayers; i++)
		fprintf(f, "layer %zu %s\n", p->layers[i].layer,
			plan_fmt_bpw(p->layers[i].bpw, b, sizeof(b)));
	for (size_t i = 0; i < p->ntensors; i++)
		fprintf(f, "tensor %s %s\n", p->tensors[i].name,
			plan_fmt_bpw(p->tensors[i].bpw, b, sizeof(b)));
	if (ferror(f)) {
		nv_seterr("write failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* one list line "name layer [more…]" (NUL-terminated, modified in place) */
typedef struct {
	char *name, *rest;
	size_t layer;
} list_line;

static int parse_list_line(char *s, size_t line, list_line *ll)
{
	char *hash = strchr(s, '#'), *l;

	if (hash)
		*hash = '\0';
	s += strspn(s, NV_BLANKS);
	if (!*s)
		return 0;
	ll->name = s;
	s += strcspn(s, NV_BLANKS);
	if (*s)
		*s++ = '\0';
	l = s + strspn(s, NV_BLANKS);
	s = l + strcspn(l, NV_BLANKS);
	if (*s)
		*s++ = '\0';
	if (parse_layer(l, &ll->layer) < 0) {
		nv_seterr("line %zu: layer '%s' of '%s' is not a layer number", line, l, ll->name);
		return -1;
	}
	s += strspn(s, NV_BLANKS);
	ll->rest = s;
	for (char *e = s + strlen(s); e > s && strchr(NV_BLANKS, e[-1]);)
		*--e = '\0';
	return 1;
}

/* the list split into lines (buf holds them, NUL-separated) */
static int read_list(const char *text, size_t len, char **buf, list_line **ll, size_t *n)
{
	size_t line = 0, pos = 0;

	*n = 0;
	*ll = NULL;
	if (memchr(text, '\0', len)) {
		nv_seterr("a NUL byte (not a text file)");
		return -1;
	}
	if (!(*buf = nv_malloc(len + 1, 1)) || !(*ll = nv_malloc(len / 2 + 1, sizeof(list_line))))
		return -1;
	memcpy(*buf, text, len);
	(*buf)[len] = '\0';
	while (pos < len) {
		char *s = *buf + pos, *nl = strchr(s, '\n');
		int rc;

		if (nl)
			*nl = '\0';
		pos += strlen(s) + 1;
		line++;
		rc = parse_list_line(s, line, &(*ll)[*n]);
		if (rc < 0)
			return -1;
		*n += (size_t)rc;
	}
	return 0;
}

int plan_resolve(const plan *p, const char *text, size_t len, double dflt, FILE *out)
{
	char *buf = NULL, b[40];
	list_line *ll = NULL;
	const char **names = NULL;
	size_t n, *layers = NULL;
	int rc = -1;

	if (read_list(text, len, &buf, &ll, &n) < 0) {
		nv_preerr("tensor list");
		goto out;
	}
	names = nv_malloc(n ? n : 1, sizeof(*names));
	layers = nv_malloc(n ? n : 1, sizeof(*layers));
	if (!names || !layers)
		goto out;
	for (size_t i = 0; i < n; i++) {
		names[i] = ll[i].name;
		layers[i] = ll[i].layer;
	}
	if (plan_check(p, names, layers, n) < 0) {
		nv_preerr("plan");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		double v = plan_bpw_for(p, ll[i].name, ll[i].layer, dflt);

		if (!plan_keeps(p, ll[i].name, ll[i].layer) && !(v > 0)) {
			nv_seterr("no budget for tensor '%s': no plan rule covers it and no default",
				  ll[i].name);
			goto out;
		}
		fprintf(out, "%s %zu %s%s%s\n", ll[i].name, ll[i].layer,
			plan_keeps(p, ll[i].name, ll[i].layer) ? "keep" : plan_fmt_bpw(v, b, sizeof(b)),
			*ll[i].rest ? " " : "", ll[i].rest);
	}
	rc = 0;
	if (ferror(out)) {
		nv_seterr("write failed: %s", strerror(errno));
		rc = -1;
	}
out:
	free(buf);
	free(ll);
	free(names);
	free(layers);
	return rc;
}
