/*
 * fuzz-hftok.c - libFuzzer target for Hugging Face tokenizer files: the
 * input is a tokenizer.json, then optionally a NUL and a
 * tokenizer_config.json (hf_tokenizer_parse, hf_tokenizer_config: what
 * cmf-patch import reads beside a model).  Either a read fails with a
 * reason or: the vocabulary is non-empty, its pieces valid UTF-8 without
 * NUL, every special id (bos, eos, unk, pad, the added tokens) below its
 * size; its cmf.tokenizer JSON
 * reads back as the same vocabulary, and a sample text encodes to ids below
 * its size that decode (fuzz-vocab.h).
 */
#include "err.h"
#include "fuzz.h"
#include "fuzz-vocab.h"
#include "hftok.h"

#include <string.h>

/* set before each read: a failure whose reason is still it, or ends in it
 * after a prefix (nv_preerr), gave none of its own */
static const char no_reason[] = "fuzz: no reason set";

static void reason_given(void)
{
	const char *e = nv_err();
	size_t n = strlen(e), k = sizeof no_reason - 1;

	if (!strcmp(e, no_reason) || (n > k + 2 && !strcmp(e + n - k - 2, ": fuzz: no reason set")))
		abort();
}

static void check_ids(const nv_vocab *v)
{
	int ids[] = {v->bos, v->eos, v->unk, v->pad};

	if (v->n == 0)
		abort();
	for (size_t i = 0; i < v->n; i++)
		if (!nv_utf8_ok(v->tokens[i], strlen(v->tokens[i])))
			abort();
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		if (ids[i] < -1 || ids[i] >= (int)v->n)
			abort();
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < v->nadded[k]; i++)
			if (v->added[k][i] < 0 || (size_t)v->added[k][i] >= v->n)
				abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t jlen = nul ? (size_t)(nul - data) : size;
	char *json = malloc(jlen + 1), *cfg = NULL;
	nv_vocab v;

	if (!json)
		abort();
	memcpy(json, data, jlen);
	json[jlen] = 0;
	if (nul) {
		size_t clen = size - jlen - 1;

		if (!(cfg = malloc(clen + 1)))
			abort();
		memcpy(cfg, nul + 1, clen);
		cfg[clen] = 0;
	}
	nv_seterr("%s", no_reason);
	if (hf_tokenizer_parse(json, "tokenizer.json", &v) < 0) {
		reason_given();
		goto out;
	}
	nv_seterr("%s", no_reason);
	if (cfg && hf_tokenizer_config(cfg, "tokenizer_config.json", &v) < 0) {
		reason_given();
	} else {
		check_ids(&v);
		check_json(&v);
		check_encode(&v);
	}
	nv_vocab_free(&v);
out:
	free(json);
	free(cfg);
	return 0;
}
