/* provenance.c - merging a conversion's provenance into the source's (see provenance.h) */
#include "provenance.h"
#include "err.h"

#include <cJSON.h>
#include <stdlib.h>

static cJSON *parse_object(const char *text, const char *what)
{
	/* the whole text: a second value after the first is not a provenance */
	cJSON *j = cJSON_ParseWithOpts(text, NULL, 1);

	if (!j) {
		nv_seterr("%s is not valid JSON", what);
		return NULL;
	}
	if (!cJSON_IsObject(j)) {
		nv_seterr("%s is not a JSON object", what);
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

char *prov_merge(const char *old, const char *add)
{
	cJSON *a = parse_object(add, "the provenance to add"), *o, *item;
	char *s;

	if (!a)
		return NULL;
	o = old ? parse_object(old, "the model's cmf.provenance") : cJSON_CreateObject();
	if (!o) {
		cJSON_Delete(a);
		return NULL;
	}
	while ((item = a->child)) {
		cJSON_DetachItemViaPointer(a, item);
		/* every copy of the key: a source may hold one twice */
		while (cJSON_GetObjectItemCaseSensitive(o, item->string))
			cJSON_DeleteItemFromObjectCaseSensitive(o, item->string);
		cJSON_AddItemToObject(o, item->string, item);
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(a);
	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing the provenance");
	return s;
}
