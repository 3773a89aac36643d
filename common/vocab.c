/* vocab.c - the cmf.tokenizer vocabulary: JSON in and out, llama2.c's tokenizer file (see vocab.h) */
#include "vocab.h"
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const missing_names[] = { "error", "drop", "unk", "fuse_unk" };

const char *nv_vocab_model_name(nv_vocab_model m)
{
	return m == NV_VOCAB_GPT2 ? "gpt2" : "llama";
}

void nv_vocab_init(nv_vocab *v, nv_vocab_model model)
{
	memset(v, 0, sizeof(*v));
	v->model = model;
	v->bos = v->eos = v->unk = v->pad = -1;
}

static void free_strings(char **s, size_t n)
{
	if (!s)
		return;
	for (size_t i = 0; i < n; i++)
		free(s[i]);
	free(s);
}

void nv_vocab_free(nv_vocab *v)
{
	free_strings(v->tokens, v->n);
	free_strings(v->merges, v->nmerges);
	free(v->scores);
	free(v->types);
	free(v->added[0]);
	free(v->added[1]);
	nv_vocab_init(v, v->model);
}

int nv_utf8_ok(const char *str, size_t n)
{
	const uint8_t *s = (const uint8_t *)str;
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;

		if (c == 0)
			return 0;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return 0;
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return 0;
		i += k + 1;
	}
	return 1;
}

static cJSON *string_array(char *const *s, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
	return a;
}

char *nv_vocab_to_json(const nv_vocab *v)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *s;

	for (size_t i = 0; i < v->n; i++)
		if (!nv_utf8_ok(v->tokens[i], strlen(v->tokens[i])))
			return cJSON_Delete(o), nv_seterr("token %zu is not valid UTF-8", i), NULL;
	cJSON_AddStringToObject(o, "model", nv_vocab_model_name(v->model));
	cJSON_AddItemToObject(o, "tokens", string_array(v->tokens, v->n));
	if (v->scores) {
		a = cJSON_AddArrayToObject(o, "scores");
		for (size_t i = 0; i < v->n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(v->scores[i]));
	}
	a = cJSON_AddArrayToObject(o, "types");
	for (size_t i = 0; i < v->n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v->types ? v->types[i] : NV_TOK_NORMAL));
	if (v->model == NV_VOCAB_GPT2 || v->merges)
		cJSON_AddItemToObject(o, "merges", string_array(v->merges, v->nmerges));
	cJSON_AddNumberToObject(o, "bos", v->bos);
	cJSON_AddNumberToObject(o, "eos", v->eos);
	cJSON_AddNumberToObject(o, "unk", v->unk);
	cJSON_AddNumberToObject(o, "pad", v->pad);
	cJSON_AddBoolToObject(o, "add_bos", v->add_bos);
	cJSON_AddBoolToObject(o, "add_eos", v->add_eos);
	cJSON_AddBoolToObject(o, "add_space_prefix", v->add_space_prefix);
	cJSON_AddStringToObject(o, "pre", v->pre);
	for (int k = 0; k < 2; k++) {
		if (!v->nadded[k])
			continue;
		a = cJSON_AddArrayToObject(o, k ? "added_normalized" : "added");
		for (size_t i = 0; i < v->nadded[k]; i++)
			cJSON_AddItemToArray(a, cJSON_CreateNumber(v->added[k][i]));
	}
	if (v->prefix_each)
		cJSON_AddBoolToObject(o, "prefix_each_segment", 1);
	if (v->prefix_unless_space)
		cJSON_AddBoolToObject(o, "prefix_unless_space", 1);
	if (v->missing)
		cJSON_AddStringToObject(o, "missing", missing_names[v->missing]);
	if (v->ignore_merges != !strcmp(v->pre, "llama-bpe"))
		cJSON_AddBoolToObject(o, "ignore_merges", v->ignore_merges);
	if (v->nfc)
		cJSON_AddBoolToObject(o, "nfc", 1);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing the tokenizer");
	return s;
}

/* ---------------------------------------------------------------- parsing */

/* the optional "missing": drop, unk or fuse_unk (these two with an unk) */
static int missing_from(const cJSON *o, nv_vocab *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "missing");

	if (!x)
		return 0;
	for (int k = NV_MISSING_DROP; k <= NV_MISSING_FUSE_UNK; k++)
		if (cJSON_IsString(x) && !strcmp(x->valuestring, missing_names[k]))
			v->missing = k;
	if (!v->missing)
		return nv_seterr("cmf.tokenizer: field 'missing' is not \"drop\", \"unk\" or "
				 "\"fuse_unk\""), -1;
	if (v->missing >= NV_MISSING_UNK && v->unk < 0)
		return nv_seterr("cmf.tokenizer: field 'missing' is \"%s\" but 'unk' is -1",
				 missing_names[v->missing]), -1;
	return 0;
}

static int strings_from(const cJSON *a, const char *field, size_t *n, char ***out)
{
	const cJSON *x;
	size_t i = 0;

	if (!cJSON_IsArray(a))
		return nv_seterr("cmf.tokenizer: field '%s' is missing or not an array", field), -1;
	*n = (size_t)cJSON_GetArraySize(a);
	if (!(*out = nv_calloc(*n ? *n : 1, sizeof(char *))))
		return -1;
	cJSON_ArrayForEach(x, a) {
		if (!cJSON_IsString(x))
			return nv_seterr("cmf.tokenizer: %s[%zu] is not a string", field, i), -1;
		if (!nv_utf8_ok(x->valuestring, strlen(x->valuestring)))
			return nv_seterr("cmf.tokenizer: %s[%zu] is not valid UTF-8", field, i), -1;
		if (!((*out)[i++] = nv_strdup(x->valuestring)))
			return -1;
	}
	return 0;
}

static int id_from(const cJSON *o, const char *key, size_t n, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	double d;

	if (!cJSON_IsNumber(x))
		return nv_seterr("cmf.tokenizer: field '%s' is missing or not a number", key), -1;
	d = x->valuedouble;
	if (d != floor(d) || d < -1 || d >= (double)n)
		return nv_seterr("cmf.tokenizer: field '%s' = %g is not -1 or a token id below %zu",
				 key, d, n), -1;
	*out = (int)d;
	return 0;
}

static int flag_from(const cJSON *o, const char *key, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsBool(x))
		return nv_seterr("cmf.tokenizer: field '%s' is missing or not true/false", key), -1;
	*out = cJSON_IsTrue(x);
	return 0;
}

static int numbers_from(const cJSON *o, nv_vocab *v)
{
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "scores");
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "types");
	const cJSON *x;
	size_t i = 0;

	if (v->model == NV_VOCAB_LLAMA && (sc || !cJSON_HasObjectItem(o, "merges"))) {
		if (!cJSON_IsArray(sc) || (size_t)cJSON_GetArraySize(sc) != v->n)
			return nv_seterr("cmf.tokenizer: field 'scores' is not an array of %zu numbers",
					 v->n), -1;
		if (!(v->scores = nv_malloc(v->n ? v->n : 1, sizeof(float))))
			return -1;
		cJSON_ArrayForEach(x, sc) {
			if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
				return nv_seterr("cmf.tokenizer: scores[%zu] is not a finite number", i), -1;
			v->scores[i++] = (float)x->valuedouble;
		}
	}
	if (!cJSON_IsArray(ty) || (size_t)cJSON_GetArraySize(ty) != v->n)
		return nv_seterr("cmf.tokenizer: field 'types' is not an array of %zu integers", v->n), -1;
	if (!(v->types = nv_malloc(v->n ? v->n : 1, sizeof(int32_t))))
		return -1;
	i = 0;
	cJSON_ArrayForEach(x, ty) {
		if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
		    x->valuedouble < 0 || x->valuedouble > 6)
			return nv_seterr("cmf.tokenizer: types[%zu] is not an integer in [0, 6]", i), -1;
		v->types[i++] = (int32_t)x->valuedouble;
	}
	return 0;
}

static int check_merges(const nv_vocab *v)
{
	for (size_t i = 0; i < v->nmerges; i++) {
		const char *m = v->merges[i], *sp = strchr(m, ' ');

		if (!sp || sp == m || !sp[1] || strchr(sp + 1, ' '))
			return nv_seterr("cmf.tokenizer: merges[%zu] = '%.40s' is not two parts separated by one space",
					 i, m), -1;
	}
	return 0;
}

/* the optional "added" or "added_normalized" ids (k 0 or 1): distinct, in the vocabulary */
static int added_from(const cJSON *o, int k, nv_vocab *v)
{
	const char *key = k ? "added_normalized" : "added";
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
	uint8_t *seen;
	int rc = 0;

	if (!a)
		return 0;
	if (!cJSON_IsArray(a))
		return nv_seterr("cmf.tokenizer: field '%s' is not an array", key), -1;
	v->added[k] = nv_malloc((size_t)cJSON_GetArraySize(a) + 1, sizeof(int32_t));
	if (!v->added[k] || !(seen = nv_calloc(v->n, 1)))
		return -1;
	cJSON_ArrayForEach(x, a) {
		double d = cJSON_IsNumber(x) ? x->valuedouble : -1;

		if (d != floor(d) || d < 0 || d >= (double)v->n || seen[(size_t)d]) {
			nv_seterr("cmf.tokenizer: %s[%zu] is not a distinct token id below %zu", key,
				  v->nadded[k], v->n);
			rc = -1;
			break;
		}
		seen[(size_t)d] = 1;
		v->added[k][v->nadded[k]++] = (int32_t)d;
	}
	free(seen);
	return rc;
}

static int vocab_fields(const cJSON *o, nv_vocab *v)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(o, "pre");

	if (!cJSON_IsString(m) ||
	    (strcmp(m->valuestring, "llama") != 0 && strcmp(m->valuestring, "gpt2") != 0))
		return nv_seterr("cmf.tokenizer: field 'model' is not \"llama\" or \"gpt2\""), -1;
	nv_vocab_init(v, strcmp(m->valuestring, "gpt2") == 0 ? NV_VOCAB_GPT2 : NV_VOCAB_LLAMA);
	if (strings_from(cJSON_GetObjectItemCaseSensitive(o, "tokens"), "tokens", &v->n,
			 &v->tokens) < 0)
		return -1;
	if (v->n == 0)
		return nv_seterr("cmf.tokenizer: field 'tokens' is empty"), -1;
	if (numbers_from(o, v) < 0)
		return -1;
	if ((v->model == NV_VOCAB_GPT2 || cJSON_HasObjectItem(o, "merges")) &&
	    (strings_from(cJSON_GetObjectItemCaseSensitive(o, "merges"), "merges", &v->nmerges,
			  &v->merges) < 0 || check_merges(v) < 0))
		return -1;
	if (added_from(o, 0, v) < 0 || added_from(o, 1, v) < 0 ||
	    (cJSON_HasObjectItem(o, "prefix_each_segment") &&
	     flag_from(o, "prefix_each_segment", &v->prefix_each) < 0))
		return -1;
	if (id_from(o, "bos", v->n, &v->bos) < 0 || id_from(o, "eos", v->n, &v->eos) < 0 ||
	    id_from(o, "unk", v->n, &v->unk) < 0 || id_from(o, "pad", v->n, &v->pad) < 0 ||
	    flag_from(o, "add_bos", &v->add_bos) < 0 || flag_from(o, "add_eos", &v->add_eos) < 0 ||
	    flag_from(o, "add_space_prefix", &v->add_space_prefix) < 0)
		return -1;
	if (missing_from(o, v) < 0)
		return -1;
	if (pre && (!cJSON_IsString(pre) || strlen(pre->valuestring) >= sizeof(v->pre)))
		return nv_seterr("cmf.tokenizer: field 'pre' is not a string under %zu bytes",
				 sizeof(v->pre)), -1;
	if (pre)
		strcpy(v->pre, pre->valuestring);
	v->ignore_merges = !strcmp(v->pre, "llama-bpe");
	if ((cJSON_HasObjectItem(o, "ignore_merges") &&
	     flag_from(o, "ignore_merges", &v->ignore_merges) < 0) ||
	    (cJSON_HasObjectItem(o, "nfc") && flag_from(o, "nfc", &v->nfc) < 0) ||
	    (cJSON_HasObjectItem(o, "prefix_unless_space") &&
	     flag_from(o, "prefix_unless_space", &v->prefix_unless_space) < 0))
		return -1;
	return 0;
}

int nv_vocab_from_json(const char *json, nv_vocab *v)
{
	cJSON *o = cJSON_Parse(json);
	int rc;

	nv_vocab_init(v, NV_VOCAB_LLAMA);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return nv_seterr("cmf.tokenizer is not a JSON object"), -1;
	}
	rc = vocab_fields(o, v);
	cJSON_Delete(o);
	if (rc < 0)
		nv_vocab_free(v);
	return rc;
}

/* ---------------------------------------------------------------- llama2.c */

/* a piece with every ' ' turned into U+2581 (sentencepiece's space) */
static char *spm_piece(const uint8_t *p, size_t len)
{
	size_t spaces = 0, k = 0;
	char *s;

	for (size_t i = 0; i < len; i++)
		spaces += p[i] == ' ';
	if (!(s = nv_malloc(len + 2 * spaces + 1, 1)))
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == ' ') {
			memcpy(s + k, "\xe2\x96\x81", 3);
			k += 3;
		} else {
			s[k++] = (char)p[i];
		}
	}
	s[k] = '\0';
	return s;
}

int nv_vocab_byte_piece(const char *p, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *h, *l;

	if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || !p[3] || !p[4])
		return -1;
	h = strchr(hex, p[3]);
	l = strchr(hex, p[4]);
	return h && l ? (int)((h - hex) * 16 + (l - hex)) : -1;
}

static int32_t llama2c_type(size_t id, const char *s)
{
	if (id == 0)
		return NV_TOK_UNKNOWN;
	if (id == 1 || id == 2)
		return NV_TOK_CONTROL;
	return nv_vocab_byte_piece(s, strlen(s)) >= 0 ? NV_TOK_BYTE : NV_TOK_NORMAL;
}

static int read_pieces(const char *path, const uint8_t *b, size_t len, nv_vocab *v)
{
	size_t at = 4;

	for (size_t i = 0; i < v->n; i++) {
		uint32_t plen;

		if (len - at < 8)
			return nv_seterr("'%s': token %zu: file ends at byte %zu (need its score and length)",
					 path, i, len), -1;
		v->scores[i] = le_f32(b + at);
		plen = le_u32(b + at + 4);
		at += 8;
		if (!isfinite(v->scores[i]))
			return nv_seterr("'%s': token %zu: score is not finite", path, i), -1;
		if (plen == 0 || plen > len - at)
			return nv_seterr("'%s': token %zu: length %u is zero or beyond the file (%zu bytes left)",
					 path, i, plen, len - at), -1;
		if (!nv_utf8_ok((const char *)b + at, plen))
			return nv_seterr("'%s': token %zu is not valid UTF-8", path, i), -1;
		if (!(v->tokens[i] = spm_piece(b + at, plen)))
			return -1;
		v->types[i] = llama2c_type(i, v->tokens[i]);
		at += plen;
	}
	if (at != len)
		return nv_seterr("'%s': %zu bytes after token %zu (the model's vocabulary has %zu tokens)",
				 path, len - at, v->n - 1, v->n), -1;
	return 0;
}

int nv_vocab_read_llama2c(const char *path, size_t n, nv_vocab *v)
{
	uint8_t *b;
	size_t len;
	int rc = -1;

	nv_vocab_init(v, NV_VOCAB_LLAMA);
	if (n < 3)
		return nv_seterr("'%s': a vocabulary of %zu tokens has no unk/bos/eos", path, n), -1;
	if (nv_read_file(path, &b, &len) < 0)
		return -1;
	if (len < 4) {
		nv_seterr("'%s': %zu bytes is too short for max_token_length", path, len);
		goto out;
	}
	v->n = n;
	v->tokens = nv_calloc(n, sizeof(char *));
	v->scores = nv_malloc(n, sizeof(float));
	v->types = nv_malloc(n, sizeof(int32_t));
	if (!v->tokens || !v->scores || !v->types || read_pieces(path, b, len, v) < 0)
		goto out;
	v->unk = 0;
	v->bos = 1;
	v->eos = 2;
	v->add_bos = 1;
	v->add_space_prefix = 1;
	rc = 0;
out:
	free(b);
	if (rc < 0)
		nv_vocab_free(v);
	return rc;
}

void nv_vocab_default_ids(nv_vocab *v, int bos, int eos)
{
	if (v->bos < 0 && bos >= 0 && (size_t)bos < v->n)
		v->bos = bos;
	if (v->eos < 0 && eos >= 0 && (size_t)eos < v->n)
		v->eos = eos;
}
