/*
 * fuzz-safetensors.c - libFuzzer target for the Hugging Face importer:
 * the input is a config.json, a NUL, then a model.safetensors, written
 * into a model directory made once for the process.  Either the import
 * fails with a reason or: the architecture is one the forward can run
 * (sizes ≥ 1, kv heads dividing heads, bos and eos within the vocabulary)
 * and its cmf.arch JSON reads back as itself (cmf_open will read what the
 * writer writes); every tensor's shape gives its bytes and every lazy one
 * produces its values.
 */
#include "fuzz-import.h"

#include <string.h>

static char dir[] = "/tmp/fuzz-safetensors.XXXXXX";

static void put(const char *name, const uint8_t *data, size_t size)
{
	char path[sizeof dir + 32];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")) || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
}

static void cleanup(void)
{
	char path[sizeof dir + 32];

	snprintf(path, sizeof path, "%s/config.json", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	unlink(path);
	rmdir(dir);
}

static void check_arch(const cmf_arch *a)
{
	char *json = cmf_arch_json(a), *again = NULL;
	cmf_arch b;

	if (a->hidden < 1 || a->intermediate < 1 || a->layers < 1 || a->heads < 1 ||
	    a->kv_heads < 1 || a->heads % a->kv_heads || a->head_dim < 1 || a->vocab < 1 ||
	    a->bos < -1 || a->bos >= a->vocab || a->eos < -1 || a->eos >= a->vocab)
		abort();
	if (!json || cmf_arch_parse(json, "cmf.arch", &b) < 0 || !(again = cmf_arch_json(&b)) ||
	    strcmp(json, again) != 0)
		abort();
	free(json);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t clen = nul ? (size_t)(nul - data) : size;
	char *src[1] = { dir };
	nv_import_opts o = { NV_FROM_SAFETENSORS, -1, NULL };
	imp_model m;

	if (dir[sizeof dir - 2] == 'X') {
		if (!mkdtemp(dir))
			abort();
		atexit(cleanup);
	}
	put("config.json", data, clen);
	put("model.safetensors", nul ? nul + 1 : data + size, nul ? size - clen - 1 : 0);
	if (nv_import(1, src, &o, &m) < 0)
		return 0;
	check_arch(&m.arch);
	fuzz_produce(&m);
	imp_model_free(&m);
	return 0;
}
