/*
 * fuzz-prov.c - libFuzzer target for prov_merge (cmf-patch apply
 * --provenance): the input is the model's cmf.provenance, a NUL, then the
 * conversion's JSON (no NUL: no cmf.provenance).  Either the merge fails
 * with a reason, or both inputs are whole JSON objects (nothing after the
 * value) and the result is a JSON object in which each added key has its
 * added value (the last, when added twice) and each other key of the
 * model's block its old value.
 */
#include "fuzz.h"
#include "provenance.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* text as one whole JSON object, or abort */
static cJSON *whole_object(const char *text)
{
	cJSON *j = cJSON_ParseWithOpts(text, NULL, 1);

	if (!cJSON_IsObject(j))
		abort();
	return j;
}

/* the last item called key in o */
static cJSON *last(const cJSON *o, const char *key)
{
	cJSON *x, *found = NULL;

	cJSON_ArrayForEach(x, o)
		if (strcmp(x->string, key) == 0)
			found = x;
	return found;
}

/* the same JSON text (cJSON_Compare fails an object against itself when it
 * holds a key twice) */
static int same(const cJSON *x, const cJSON *y)
{
	char *a = x ? cJSON_PrintUnformatted(x) : NULL, *b = y ? cJSON_PrintUnformatted(y) : NULL;
	int eq = a && b && strcmp(a, b) == 0;

	free(a);
	free(b);
	return eq;
}

static void check(const char *old, const char *add, const char *merged)
{
	cJSON *a = whole_object(add), *o = old ? whole_object(old) : NULL, *m = whole_object(merged);
	cJSON *x;

	cJSON_ArrayForEach(x, a)
		if (!same(cJSON_GetObjectItemCaseSensitive(m, x->string), last(a, x->string)))
			abort();
	cJSON_ArrayForEach(x, o)
		if (!last(a, x->string) &&
		    !same(cJSON_GetObjectItemCaseSensitive(m, x->string),
			  cJSON_GetObjectItemCaseSensitive(o, x->string)))
			abort();
	cJSON_Delete(a);
	cJSON_Delete(o);
	cJSON_Delete(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *old = NULL, *add = buf, *merged;
	size_t k;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	if ((k = strlen(buf)) < size) {
		old = buf;
		add = buf + k + 1;
	}
	if ((merged = prov_merge(old, add))) {
		check(old, add, merged);
		free(merged);
	}
	free(buf);
	return 0;
}
