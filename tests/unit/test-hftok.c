/*
 * test-hftok.c - tokenizer.json into cmf.tokenizer: a sentencepiece-style
 * BPE (Prepend and Replace normalizers, byte fallback, a template adding
 * <s>) and a byte-level BPE (Digits then ByteLevel), built here piece by
 * piece so that every id follows by hand (and equals the tokenizers
 * library's); merges by rank, not by score;
 * added tokens split the text first, and each segment gets the space
 * prefix; the vocabulary's JSON round trip; refusals naming the field.
 */
#include "err.h"
#include "hftok.h"
#include "tap.h"
#include "tok.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define SP "\xE2\x96\x81" /* U+2581 */

/* ids: <unk> 0, <s> 1, </s> 2, <0x00>.. 3..258, then the extra pieces from 259 */
static cJSON *spm_json(const char *const *extra, size_t nextra, const char *const (*merges)[2],
		       size_t nmerges)
{
	cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "model");
	cJSON *vocab = cJSON_AddObjectToObject(m, "vocab"), *a, *n;
	const char *const sp[] = { "<unk>", "<s>", "</s>" };
	char b[8];

	cJSON_AddStringToObject(m, "type", "BPE");
	cJSON_AddStringToObject(m, "unk_token", "<unk>");
	cJSON_AddBoolToObject(m, "byte_fallback", 1);
	for (int i = 0; i < 3; i++)
		cJSON_AddNumberToObject(vocab, sp[i], i);
	for (int i = 0; i < 256; i++) {
		snprintf(b, sizeof b, "<0x%02X>", i);
		cJSON_AddNumberToObject(vocab, b, 3 + i);
	}
	for (size_t i = 0; i < nextra; i++)
		cJSON_AddNumberToObject(vocab, extra[i], (double)(259 + i));
	a = cJSON_AddArrayToObject(m, "merges");
	for (size_t i = 0; i < nmerges; i++)
		cJSON_AddItemToArray(a, cJSON_CreateStringArray(merges[i], 2));
	a = cJSON_AddArrayToObject(o, "added_tokens");
	for (int i = 1; i < 3; i++) {
		cJSON *t = cJSON_CreateObject();

		cJSON_AddNumberToObject(t, "id", i);
		cJSON_AddStringToObject(t, "content", sp[i]);
		cJSON_AddBoolToObject(t, "special", 1);
		cJSON_AddBoolToObject(t, "normalized", 0);
		cJSON_AddItemToArray(a, t);
	}
	n = cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" SP
			"\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" SP
			"\"}]}");
	cJSON_AddItemToObject(o, "normalizer", n);
	cJSON_AddItemToObject(o, "post_processor", cJSON_Parse(
		"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
		"\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":"
		"{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}"));
	return o;
}

/* the tokenizer of a tokenizer.json object; the ids of text compared with want */
static int encodes(cJSON *o, const char *text, const uint32_t *want, size_t nwant)
{
	char *j = cJSON_PrintUnformatted(o);
	nv_vocab v;
	tok_vocab t;
	uint32_t *ids = NULL;
	size_t n = 0;
	int good = 0;

	if (hf_tokenizer_parse(j, "t.json", &v) == 0) {
		if (tok_from_vocab(&t, &v) == 0) {
			good = tok_encode(&t, text, strlen(text), &ids, &n) == 0 && n == nwant &&
			       memcmp(ids, want, n * 4) == 0;
			tok_free(&t);
		}
		nv_vocab_free(&v);
	}
	if (!good) {
		diag("%s: %s", text, nv_err());
		for (size_t i = 0; i < n; i++)
			diag("  id %u", ids[i]);
	}
	free(ids);
	free(j);
	return good;
}

static void spm(void)
{
	static const char *const pieces[] = { SP, "a", "b", "c", "ab", "bc", SP "a", SP "ab" };
	static const char *const merges[][2] = { { "b", "c" }, { "a", "b" }, { SP, "a" },
						 { SP "a", "b" } };
	cJSON *o = spm_json(pieces, 8, merges, 4);
	char *j = cJSON_PrintUnformatted(o), *back;
	nv_vocab v, w;

	ok(hf_tokenizer_parse(j, "t.json", &v) == 0, "a sentencepiece-style tokenizer.json reads");
	ok(v.model == NV_VOCAB_LLAMA && v.n == 267 && v.nmerges == 4 && !v.scores &&
	   !strcmp(v.merges[3], SP "a b"), "model llama with its merges, no scores");
	ok(v.add_bos && v.bos == 1 && !v.add_eos && v.unk == 0 && v.add_space_prefix &&
	   v.prefix_each, "bos added by the template, unk, the prefix before every segment");
	ok(v.types[0] == NV_TOK_UNKNOWN && v.types[1] == NV_TOK_CONTROL &&
	   v.types[3 + 'A'] == NV_TOK_BYTE && v.types[260] == NV_TOK_NORMAL, "token types");
	ok(v.nadded[0] == 2 && v.nadded[1] == 0, "two added tokens, matched in the raw text");
	back = nv_vocab_to_json(&v);
	ok(back && nv_vocab_from_json(back, &w) == 0 && w.prefix_each && w.nadded[0] == 2 &&
	   w.added[0][1] == 2 && w.nmerges == 4 && !w.scores, "cmf.tokenizer round trip");
	nv_vocab_free(&w);
	nv_vocab_free(&v);
	free(back);
	free(j);
	/* "▁abc": (b c) has rank 0, so ▁ a bc, then (▁ a): ▁a bc, though ▁ab is a piece */
	ok(encodes(o, "abc", (uint32_t[]){ 1, 265, 264 }, 3), "merged by rank");
	/* "▁ab": (a b) has rank 1, (▁ a) 2: ▁ ab, and there is no merge (▁ ab) */
	ok(encodes(o, "ab</s>ab", (uint32_t[]){ 1, 259, 263, 2, 259, 263 }, 6),
	   "an added token splits the text; each segment gets the prefix");
	ok(encodes(o, "</s>", (uint32_t[]){ 1, 2 }, 2), "no prefix for an empty segment");
	ok(encodes(o, "a\xC3\xA9", (uint32_t[]){ 1, 265, 3 + 0xC3, 3 + 0xA9 }, 4),
	   "a code point that is no piece falls back to its bytes");
	ok(encodes(o, "a" SP "b", (uint32_t[]){ 1, 265, 259, 261 }, 4),
	   "U+2581 in the text is a space (the normalizer makes them one)");
	cJSON_Delete(o);
}

/* a byte-level vocabulary: GPT-2's 256 byte pieces, then "Ġ" merges */
static void bytelevel(void)
{
	cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "model");
	cJSON *vocab = cJSON_AddObjectToObject(m, "vocab"), *a;
	char *j;
	nv_vocab v;
	int id = 0;

	cJSON_AddStringToObject(m, "type", "BPE");
	for (int b = 0; b < 256; b++) {
		char c = (char)b, s[8];
		size_t k;

		tok_gpt2_bytes(&c, 1, s, &k);
		s[k] = 0;
		cJSON_AddNumberToObject(vocab, s, id++);
	}
	cJSON_AddNumberToObject(vocab, "\xC4\xA0t", id++);
	cJSON_AddNumberToObject(vocab, "12", id++);
	a = cJSON_AddArrayToObject(m, "merges");
	for (int i = 0; i < 2; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(i ? "1 2" : "\xC4\xA0 t"));
	cJSON_AddItemToObject(o, "pre_tokenizer", cJSON_Parse(
		"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":"
		"true},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}"));
	j = cJSON_PrintUnformatted(o);
	ok(hf_tokenizer_parse(j, "t.json", &v) == 0 && v.model == NV_VOCAB_GPT2 &&
	   !strcmp(v.pre, "smollm") && v.n == 258 && !v.add_bos && v.bos == -1,
	   "a byte-level tokenizer.json with Digits reads as gpt2, pre smollm");
	nv_vocab_free(&v);
	/* digits one by one: the merge "1 2" never applies */
	ok(encodes(o, "a t12", (uint32_t[]){ 'a', 256, '1', '2' }, 4),
	   "GPT-2's pattern and digits one by one");
	free(j);
	cJSON_Delete(o);
}

static void refuses(const char *title, const char *json, const char *word)
{
	nv_vocab v;
	int rc = hf_tokenizer_parse(json, "t.json", &v);

	ok(rc < 0 && strstr(nv_err(), word) && !strncmp(nv_err(), "'t.json'", 8),
	   "%s is refused naming '%s'", title, word);
	if (rc < 0 && !strstr(nv_err(), word))
		diag("message: %s", nv_err());
	if (rc == 0)
		nv_vocab_free(&v);
}

static void bad(void)
{
	refuses("not JSON", "{\"model\": {", "not valid JSON");
	refuses("no model", "{}", "'model'");
	refuses("a WordPiece model", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "WordPiece");
	refuses("an empty vocabulary", "{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}",
		"empty");
	refuses("a vocabulary without normalizer or pre-tokenizer",
		"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", "neither");
	refuses("an unknown model key",
		"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"x\":1}}", "model.x");
}

int main(void)
{
	spm();
	bytelevel();
	bad();
	return done_testing();
}
