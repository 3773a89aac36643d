/*
 * fuzz-plan.c - libFuzzer target for plan_parse: any text either fails
 * with a reason or gives a plan whose rules are sorted without duplicates,
 * whose budgets lie in (0, 16) and whose layers are at most PLAN_MAX_LAYER,
 * and which plan_write writes as text that parses back to the same plan.
 */
#include "fuzz.h"
#include "plan.h"

#include <stdlib.h>
#include <string.h>

static void check_layers(const plan_layer_rule *r, size_t n, int keep)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].layer > PLAN_MAX_LAYER || (i && r[i - 1].layer >= r[i].layer) ||
		    (keep ? r[i].bpw != 0 : !(r[i].bpw > 0 && r[i].bpw < 16)))
			abort();
}

static void check_tensors(const plan_tensor_rule *r, size_t n, int keep)
{
	for (size_t i = 0; i < n; i++)
		if (!r[i].name[0] || strpbrk(r[i].name, " \t\r\n\v\f#") ||
		    (i && strcmp(r[i - 1].name, r[i].name) >= 0) ||
		    (keep ? r[i].bpw != 0 : !(r[i].bpw > 0 && r[i].bpw < 16)))
			abort();
}

static int same_layers(const plan_layer_rule *a, const plan_layer_rule *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].layer != b[i].layer || a[i].bpw != b[i].bpw)
			return 0;
	return 1;
}

static int same_tensors(const plan_tensor_rule *a, const plan_tensor_rule *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i].name, b[i].name) != 0 || a[i].bpw != b[i].bpw)
			return 0;
	return 1;
}

/* plan_write's text parses back to p */
static void check_written(const plan *p)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	plan q;

	if (!f || plan_write(f, p) < 0 || fclose(f) != 0 || plan_parse(text, len, &q) < 0)
		abort();
	if (q.nlayers != p->nlayers || q.ntensors != p->ntensors ||
	    q.nkeep_layers != p->nkeep_layers || q.nkeep_tensors != p->nkeep_tensors ||
	    !same_layers(q.layers, p->layers, p->nlayers) ||
	    !same_layers(q.keep_layers, p->keep_layers, p->nkeep_layers) ||
	    !same_tensors(q.tensors, p->tensors, p->ntensors) ||
	    !same_tensors(q.keep_tensors, p->keep_tensors, p->nkeep_tensors))
		abort();
	plan_free(&q);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	plan p;

	if (plan_parse((const char *)data, size, &p) < 0)
		return 0;
	check_layers(p.layers, p.nlayers, 0);
	check_layers(p.keep_layers, p.nkeep_layers, 1);
	check_tensors(p.tensors, p.ntensors, 0);
	check_tensors(p.keep_tensors, p.nkeep_tensors, 1);
	check_written(&p);
	plan_free(&p);
	return 0;
}
