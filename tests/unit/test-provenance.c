/* test-provenance.c - merging a conversion's provenance into the source's */
#include "err.h"
#include "provenance.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *s;

	s = prov_merge("{\"import\":{\"from\":\"gguf\"},\"blr\":1}", "{\"blr\":{\"method\":\"nvg\"},\"weight_quant\":\"blr\"}");
	ok(s && !strcmp(s, "{\"import\":{\"from\":\"gguf\"},\"blr\":{\"method\":\"nvg\"},\"weight_quant\":\"blr\"}"),
	   "the source's keys stay, the conversion's replace theirs: %s", s ? s : nv_err());
	free(s);
	s = prov_merge(NULL, "{\"a\":[1,2]}");
	ok(s && !strcmp(s, "{\"a\":[1,2]}"), "no source provenance: %s", s ? s : nv_err());
	free(s);
	ok(prov_merge(NULL, "[1]") == NULL && strstr(nv_err(), "not a JSON object"),
	   "an array is refused: %s", nv_err());
	ok(prov_merge(NULL, "{\"a\":") == NULL && strstr(nv_err(), "not valid JSON"),
	   "broken JSON is refused: %s", nv_err());
	ok(prov_merge("nope", "{}") == NULL && strstr(nv_err(), "cmf.provenance is not valid"),
	   "a broken source block is named: %s", nv_err());
	ok(prov_merge(NULL, "{\"a\":1}}") == NULL && strstr(nv_err(), "not valid JSON"),
	   "text after the object is refused: %s", nv_err());
	ok(prov_merge("{\"a\":1} x", "{}") == NULL && strstr(nv_err(), "cmf.provenance is not valid"),
	   "text after the source block is refused: %s", nv_err());
	s = prov_merge("{\"a\":1,\"b\":2,\"a\":3}", "{\"a\":4}");
	ok(s && !strcmp(s, "{\"b\":2,\"a\":4}"),
	   "a key the source holds twice is replaced, both times: %s", s ? s : nv_err());
	free(s);
	return done_testing();
}
