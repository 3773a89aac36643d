/* hftok.c - Hugging Face tokenizer.json and tokenizer_config.json into cmf.tokenizer (see hftok.h) */
#include "hftok.h"
#include "err.h"
#include "mem.h"
#include "tok.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPACE_MARK "\xE2\x96\x81" /* U+2581, sentencepiece's space */

/* what the file says, as it is read */
typedef struct {
	const char *what;    /* the file, for messages */
	nv_vocab *v;
	tok_vocab ix;        /* the pieces as written, for piece → id */
	int bytelevel;       /* pre_tokenizer ByteLevel */
	int digits;          /* with Digits (individual) before it */
	int split;           /* with a Split of Llama 3's pattern (1) or Qwen2's (2) before it */
	int ignore_merges;
	int replace;         /* normalizer Replace " " → U+2581 */
	int prepend;         /* normalizer Prepend U+2581 */
	int nfc;             /* normalizer NFC */
	int meta;            /* pre_tokenizer Metaspace: 1 never, 2 first, 3 always prepend */
	int prefix_each;     /* the prefix before every segment */
	int byte_fallback;
	int fuse_unk;
	int template_bos, template_eos; /* ids the post-processor adds, -1 none */
} hfp;

static int bad(const hfp *p, const char *fmt, ...) NV_PRINTF(2, 3);

/* -1 with the reason "'file': ..." */
static int bad(const hfp *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	nv_seterr("'%s': %s", p->what, msg);
	return -1;
}

static const char *str_or(const cJSON *x, const char *dflt)
{
	return cJSON_IsString(x) ? x->valuestring : dflt;
}

/* a non-negative integer id below lim */
static int id_of(const cJSON *x, double lim, int *out)
{
	if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
	    x->valuedouble >= lim)
		return -1;
	*out = (int)x->valuedouble;
	return 0;
}

/* every key of o is one of the NULL-terminated keys */
static int known_keys(const hfp *p, const cJSON *o, const char *field, const char *const *keys)
{
	const cJSON *x;

	cJSON_ArrayForEach(x, o) {
		size_t i = 0;

		while (keys[i] && strcmp(keys[i], x->string) != 0)
			i++;
		if (!keys[i])
			return bad(p, "unknown key '%s%s%s': nvgkit does not know what it does to the "
				   "ids, and will not ignore it", field, *field ? "." : "", x->string);
	}
	return 0;
}

/* ---------------------------------------------------------------- pieces */

static int lookup(const hfp *p, const char *s)
{
	return tok_lookup(&p->ix, s, strlen(s));
}

/* piece s as token id; the same id twice with another piece is an error */
static int put_piece(hfp *p, int id, const char *s, const char *field)
{
	nv_vocab *v = p->v;

	if (!*s || !nv_utf8_ok(s, strlen(s)))
		return bad(p, "%s: piece of id %d is empty or not valid UTF-8", field, id);
	if (v->tokens[id])
		return bad(p, "%s: id %d is '%.40s' and '%.40s'", field, id, v->tokens[id], s);
	v->types[id] = NV_TOK_NORMAL;
	return (v->tokens[id] = nv_strdup(s)) ? 0 : -1;
}

/* the model's pieces: ids 0..n-1, each once (the library counts on it) */
static int model_pieces(hfp *p, const cJSON *vocab, size_t cap)
{
	nv_vocab *v = p->v;
	const cJSON *x;
	int id;

	v->n = (size_t)cJSON_GetArraySize(vocab);
	if (v->n == 0)
		return bad(p, "model.vocab is empty");
	if (!(v->tokens = nv_calloc(cap, sizeof(char *))) || !(v->types = nv_malloc(cap, sizeof(int32_t))))
		return -1;
	cJSON_ArrayForEach(x, vocab) {
		if (id_of(x, (double)v->n, &id) < 0) {
			char *val = cJSON_PrintUnformatted(x);

			bad(p, "model.vocab['%.40s'] = %.40s is not a token id below %zu (the number "
			    "of entries)", x->string, val ? val : "?", v->n);
			free(val);
			return -1;
		}
		if (put_piece(p, id, x->string, "model.vocab") < 0)
			return -1;
	}
	return 0;
}

/* the piece index of the model's pieces; a piece under two ids is an error */
static int index_pieces(hfp *p)
{
	const nv_vocab *v = p->v;

	if (tok_init(&p->ix, TOK_GPT2, v->n) < 0)
		return -1;
	for (size_t i = 0; i < v->n; i++)
		if (tok_set_piece(&p->ix, i, v->tokens[i], strlen(v->tokens[i]), 0) < 0)
			return -1;
	if (tok_finish(&p->ix) < 0)
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		int j = tok_lookup(&p->ix, v->tokens[i], strlen(v->tokens[i]));

		if (j != (int)i)
			return bad(p, "model.vocab: piece '%.40s' has ids %d and %zu", v->tokens[i], j, i);
	}
	return 0;
}

/*
 * the added tokens' pieces: one of the model's keeps its id, another takes
 * the next id after the model's, in order, as the library gives them (it
 * does not read the ids of the file, so they must agree)
 */
static int added_pieces(hfp *p, const cJSON *added, size_t nmodel)
{
	nv_vocab *v = p->v;
	const cJSON *x;
	size_t i = 0;

	cJSON_ArrayForEach(x, added) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(x, "content");
		int id, want;

		if (!cJSON_IsString(c))
			return bad(p, "added_tokens[%zu]: 'content' is missing or not a string", i);
		if (id_of(cJSON_GetObjectItemCaseSensitive(x, "id"), 2147483647.0, &id) < 0)
			return bad(p, "added_tokens[%zu]: 'id' is missing or not a token id", i);
		want = lookup(p, c->valuestring);
		for (size_t k = nmodel; want < 0 && k < v->n; k++)
			if (!strcmp(v->tokens[k], c->valuestring))
				want = (int)k;
		if (want < 0)
			want = (int)v->n;
		if (id != want)
			return bad(p, "added_tokens[%zu]: '%.40s' has id %d, but the tokenizers library "
				   "gives it %d", i, c->valuestring, id, want);
		if ((size_t)want == v->n && put_piece(p, (int)v->n++, c->valuestring, "added_tokens") < 0)
			return -1;
		i++;
	}
	return 0;
}

/* v->tokens from model.vocab and added_tokens */
static int read_pieces(hfp *p, const cJSON *vocab, const cJSON *added)
{
	size_t cap = (size_t)cJSON_GetArraySize(vocab) + (size_t)cJSON_GetArraySize(added) + 1;

	if (model_pieces(p, vocab, cap) < 0 || index_pieces(p) < 0)
		return -1;
	return added_pieces(p, added, p->v->n);
}

/* ---------------------------------------------------------------- merges */

/* merge i as two pieces: "a b" or ["a", "b"] */
static int merge_parts(const hfp *p, const cJSON *x, size_t i, char **a, char **b)
{
	const char *sp;

	if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2 &&
	    cJSON_IsString(cJSON_GetArrayItem(x, 0)) && cJSON_IsString(cJSON_GetArrayItem(x, 1))) {
		*a = nv_strdup(cJSON_GetArrayItem(x, 0)->valuestring);
		*b = nv_strdup(cJSON_GetArrayItem(x, 1)->valuestring);
	} else if (cJSON_IsString(x) && (sp = strchr(x->valuestring, ' ')) &&
		   !strchr(sp + 1, ' ')) {
		*a = strndup(x->valuestring, (size_t)(sp - x->valuestring));
		*b = nv_strdup(sp + 1);
	} else {
		return bad(p, "model.merges[%zu] is not \"a b\" or [\"a\", \"b\"]", i);
	}
	if (!*a || !*b)
		return nv_seterr("out of memory"), -1;
	return 0;
}

/* merge i: both parts and their concatenation are pieces, none holds a space */
static int check_merge(const hfp *p, size_t i, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *ab;
	int id;

	if (lookup(p, a) < 0 || lookup(p, b) < 0)
		return bad(p, "model.merges[%zu]: '%.40s' is not in the vocabulary", i,
			   lookup(p, a) < 0 ? a : b);
	if (strchr(a, ' ') || strchr(b, ' '))
		return bad(p, "model.merges[%zu]: a piece with a space is not implemented", i);
	if (!(ab = nv_malloc(la + lb + 1, 1)))
		return -1;
	memcpy(ab, a, la);
	memcpy(ab + la, b, lb + 1);
	id = lookup(p, ab);
	if (id < 0)
		bad(p, "model.merges[%zu]: '%.40s' is not in the vocabulary", i, ab);
	free(ab);
	return id < 0 ? -1 : 0;
}

/* v->merges as "a b", checked, each pair once */
static int read_merges(hfp *p, const cJSON *merges)
{
	nv_vocab *v = p->v;
	const cJSON *x;
	int rc = 0;

	if (!cJSON_IsArray(merges))
		return bad(p, "model.merges is missing or not an array");
	if (!(v->merges = nv_calloc((size_t)cJSON_GetArraySize(merges) + 1, sizeof(char *))))
		return -1;
	cJSON_ArrayForEach(x, merges) {
		size_t i = v->nmerges;
		char *a = NULL, *b = NULL;

		rc = merge_parts(p, x, i, &a, &b);
		if (rc == 0)
			rc = check_merge(p, i, a, b);
		if (rc == 0 && (rc = tok_add_merge(&p->ix, a, strlen(a), b, strlen(b))) > 0)
			rc = bad(p, "model.merges[%zu]: '%.40s %.40s' is there twice", i, a, b);
		if (rc == 0 && (v->merges[i] = nv_malloc(strlen(a) + strlen(b) + 2, 1)))
			sprintf(v->merges[i], "%s %s", a, b);
		free(a);
		free(b);
		if (rc < 0 || !v->merges[i])
			return -1;
		v->nmerges++;
	}
	return 0;
}

/* ---------------------------------------------------------------- model */

static int null_or_empty(const cJSON *x)
{
	return !x || cJSON_IsNull(x) || (cJSON_IsString(x) && !*x->valuestring);
}

/* model: a BPE without dropout, subword affixes or ignore_merges */
static int read_model(hfp *p, const cJSON *m)
{
	static const char *const keys[] = { "type", "dropout", "unk_token",
		"continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", "byte_fallback",
		"ignore_merges", "vocab", "merges", NULL };
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
	const cJSON *bf = cJSON_GetObjectItemCaseSensitive(m, "byte_fallback");
	const cJSON *im = cJSON_GetObjectItemCaseSensitive(m, "ignore_merges");
	const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");

	if (!cJSON_IsObject(m))
		return bad(p, "field 'model' is missing or not an object");
	if (!cJSON_IsString(t) || strcmp(t->valuestring, "BPE") != 0)
		return bad(p, "model.type '%s' is not implemented (BPE)", str_or(t, "?"));
	if (known_keys(p, m, "model", keys) < 0)
		return -1;
	if (!null_or_empty(cJSON_GetObjectItemCaseSensitive(m, "dropout")))
		return bad(p, "model.dropout is not null: BPE dropout is not implemented");
	if (!null_or_empty(cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix")) ||
	    !null_or_empty(cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix")))
		return bad(p, "model.continuing_subword_prefix or end_of_word_suffix is set: not "
			   "implemented");
	if (im && !cJSON_IsBool(im))
		return bad(p, "model.ignore_merges is not true or false");
	p->ignore_merges = cJSON_IsTrue(im);
	if (bf && !cJSON_IsBool(bf))
		return bad(p, "model.byte_fallback is not true or false");
	p->byte_fallback = cJSON_IsTrue(bf);
	p->fuse_unk = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "fuse_unk"));
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "vocab")))
		return bad(p, "model.vocab is missing or not an object");
	if (unk && !cJSON_IsNull(unk) && !cJSON_IsString(unk))
		return bad(p, "model.unk_token is not a string or null");
	return 0;
}

/* ---------------------------------------------------------------- normalizer, pre-tokenizer */

/* one normalizer: Prepend U+2581 or Replace " " by U+2581 */
static int normalizer_one(hfp *p, const cJSON *x)
{
	const char *t = str_or(cJSON_GetObjectItemCaseSensitive(x, "type"), "?");
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(x, "pattern");

	if (!strcmp(t, "NFC") && !p->nfc)
		return p->nfc = 1, 0;
	if (!strcmp(t, "Prepend") && !p->prepend && !p->replace &&
	    !strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "prepend"), ""), SPACE_MARK))
		return p->prepend = p->prefix_each = 1, 0;
	if (!strcmp(t, "Replace") && !p->replace &&
	    !strcmp(str_or(cJSON_GetObjectItemCaseSensitive(pat, "String"), ""), " ") &&
	    !strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "content"), ""), SPACE_MARK))
		return p->replace = 1, 0;
	return bad(p, "normalizer '%s' is not implemented (NFC; a Prepend of U+2581 then a Replace "
		   "of \" \" by U+2581)", t);
}

static int read_normalizer(hfp *p, const cJSON *x)
{
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(x, "normalizers"), *y;

	if (!x || cJSON_IsNull(x))
		return 0;
	if (strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "type"), "?"), "Sequence") != 0)
		return normalizer_one(p, x);
	if (!cJSON_IsArray(seq))
		return bad(p, "normalizer.normalizers is not an array");
	cJSON_ArrayForEach(y, seq)
		if (normalizer_one(p, y) < 0)
			return -1;
	if (p->prepend && !p->replace)
		return bad(p, "normalizer: a Prepend without a Replace of \" \" by U+2581 is not "
			   "implemented");
	return 0;
}

/* ByteLevel with GPT-2's pattern and no prefix space */
static int bytelevel(hfp *p, const cJSON *x)
{
	const cJSON *aps = cJSON_GetObjectItemCaseSensitive(x, "add_prefix_space");
	const cJSON *re = cJSON_GetObjectItemCaseSensitive(x, "use_regex");

	if (aps && !cJSON_IsFalse(aps))
		return bad(p, "pre_tokenizer ByteLevel add_prefix_space true is not implemented");
	if (!p->split && re && !cJSON_IsTrue(re))
		return bad(p, "pre_tokenizer ByteLevel use_regex false without a Split before it is "
			   "not implemented");
	if (p->split && !cJSON_IsFalse(re))
		return bad(p, "pre_tokenizer ByteLevel use_regex true after a Split is not implemented");
	p->bytelevel = 1;
	return 0;
}

/* a Split by Llama 3's or Qwen2's pattern, the matches isolated */
static int split(hfp *p, const cJSON *x)
{
	static const char *const pat[] = {
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
		"[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
		"[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
	};
	const char *re = str_or(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(x, "pattern"), "Regex"), "");

	for (int k = 0; k < 2; k++)
		if (!strcmp(re, pat[k]))
			p->split = k + 1;
	if (!p->split)
		return bad(p, "pre_tokenizer 'Split' of the pattern '%.60s' is not implemented "
			   "(Llama 3's, Qwen2's)", re);
	if (strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "behavior"), ""), "Isolated") != 0 ||
	    !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(x, "invert")))
		return bad(p, "pre_tokenizer 'Split': only behavior Isolated, invert false is "
			   "implemented");
	return 0;
}

/* Metaspace by U+2581 without splitting, alone, after no sentencepiece normalizer */
static int metaspace(hfp *p, const cJSON *x)
{
	static const char *const scheme[] = { "never", "first", "always" };
	const char *ps = str_or(cJSON_GetObjectItemCaseSensitive(x, "prepend_scheme"), NULL);
	const cJSON *aps = cJSON_GetObjectItemCaseSensitive(x, "add_prefix_space");

	if (p->replace || p->prepend)
		return bad(p, "pre_tokenizer Metaspace after a Replace or Prepend normalizer is not "
			   "implemented");
	if (strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "replacement"), ""), SPACE_MARK) != 0 ||
	    !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(x, "split")))
		return bad(p, "pre_tokenizer Metaspace: only replacement U+2581 with split false is "
			   "implemented");
	for (int k = 0; ps && k < 3; k++)
		if (!strcmp(ps, scheme[k]))
			p->meta = k + 1;
	if (!ps && cJSON_IsBool(aps))
		p->meta = cJSON_IsTrue(aps) ? 3 : 1;
	if (!p->meta)
		return bad(p, "pre_tokenizer Metaspace: prepend_scheme '%s' is not never, first or "
			   "always", ps ? ps : "?");
	p->prepend = p->meta > 1;
	p->prefix_each = p->meta == 3;
	return 0;
}

/* one pre-tokenizer: first -1 alone, 1 first of a Sequence, 0 later in it */
static int pre_one(hfp *p, const cJSON *x, int first)
{
	const char *t = str_or(cJSON_GetObjectItemCaseSensitive(x, "type"), "?");

	if (!strcmp(t, "ByteLevel") && !p->bytelevel)
		return bytelevel(p, x);
	if (!strcmp(t, "Metaspace") && first < 0)
		return metaspace(p, x);
	if (!strcmp(t, "Digits") && first > 0 &&
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "individual_digits")))
		return p->digits = 1, 0;
	if (!strcmp(t, "Split") && first > 0 &&
	    cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(x, "pattern")))
		return split(p, x);
	return bad(p, "pre_tokenizer '%s'%s is not implemented (Metaspace; ByteLevel, after Digits "
		   "with individual_digits or a Split of Llama 3's or Qwen2's pattern)", t,
		   !strcmp(t, "Digits") || !strcmp(t, "Split") || !strcmp(t, "Metaspace") ||
		   !strcmp(t, "ByteLevel") ? " here" : "");
}

static int read_pre(hfp *p, const cJSON *x)
{
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(x, "pretokenizers"), *y;
	int first = 1;

	if (!x || cJSON_IsNull(x))
		return 0;
	if (strcmp(str_or(cJSON_GetObjectItemCaseSensitive(x, "type"), "?"), "Sequence") != 0)
		return pre_one(p, x, -1);
	if (!cJSON_IsArray(seq))
		return bad(p, "pre_tokenizer.pretokenizers is not an array");
	cJSON_ArrayForEach(y, seq) {
		if (pre_one(p, y, first) < 0)
			return -1;
		first = 0;
	}
	if (!p->bytelevel)
		return bad(p, "pre_tokenizer: Digits or Split without ByteLevel is not implemented");
	return 0;
}

/* ---------------------------------------------------------------- post-processor */

/* a SpecialToken of a template: its one id (special_tokens[name].ids) */
static int template_id(const hfp *p, const cJSON *pp, const cJSON *st, int *id)
{
	const char *name = str_or(cJSON_GetObjectItemCaseSensitive(st, "id"), NULL);
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(sp, name ? name : ""), "ids");

	if (!name || !cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != 1 ||
	    id_of(cJSON_GetArrayItem(ids, 0), (double)p->v->n, id) < 0)
		return bad(p, "post_processor: special token '%s' is not one token id below %zu",
			   name ? name : "?", p->v->n);
	return 0;
}

/* TemplateProcessing: single is [SpecialToken]? Sequence A [SpecialToken]? */
static int template(hfp *p, const cJSON *pp)
{
	const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single"), *x;
	int seen_a = 0;

	if (!cJSON_IsArray(single))
		return bad(p, "post_processor.single is not an array");
	cJSON_ArrayForEach(x, single) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(x, "SpecialToken");
		const cJSON *sq = cJSON_GetObjectItemCaseSensitive(x, "Sequence");
		int *slot = seen_a ? &p->template_eos : &p->template_bos;

		if (sq && !seen_a && !st) {
			seen_a = 1;
			continue;
		}
		if (!st || sq || *slot >= 0)
			return bad(p, "post_processor.single is not [bos] $A [eos]: not implemented");
		if (template_id(p, pp, st, slot) < 0)
			return -1;
	}
	if (!seen_a)
		return bad(p, "post_processor.single has no $A sequence");
	return 0;
}

static int read_post(hfp *p, const cJSON *pp)
{
	const char *t = str_or(cJSON_GetObjectItemCaseSensitive(pp, "type"), "?");
	const cJSON *x;

	if (!pp || cJSON_IsNull(pp) || !strcmp(t, "ByteLevel"))
		return 0;
	if (!strcmp(t, "TemplateProcessing"))
		return template(p, pp);
	if (!strcmp(t, "Sequence")) {
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
			if (read_post(p, x) < 0)
				return -1;
		return 0;
	}
	return bad(p, "post_processor '%s' is not implemented (TemplateProcessing, ByteLevel)", t);
}

/* ---------------------------------------------------------------- added tokens */

/* one added token: plain (no lstrip, rstrip, single_word); normalized ones after the others */
static int added_one(hfp *p, const cJSON *x, size_t i)
{
	static const char *const keys[] = { "id", "content", "single_word", "lstrip", "rstrip",
		"normalized", "special", NULL };
	static const char *const no[] = { "single_word", "lstrip", "rstrip" };
	const cJSON *norm = cJSON_GetObjectItemCaseSensitive(x, "normalized");
	nv_vocab *v = p->v;
	int id, k;

	if (known_keys(p, x, "added_tokens[]", keys) < 0)
		return -1;
	for (size_t j = 0; j < sizeof no / sizeof *no; j++)
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, no[j])))
			return bad(p, "added_tokens[%zu]: %s true is not implemented", i, no[j]);
	if (id_of(cJSON_GetObjectItemCaseSensitive(x, "id"), (double)v->n, &id) < 0)
		return bad(p, "added_tokens[%zu]: id is not a token id", i);
	k = cJSON_IsTrue(norm) ? 1 : 0;
	if (k && p->replace)
		return bad(p, "added_tokens[%zu]: normalized true with a normalizer is not implemented", i);
	if (v->types[id] != NV_TOK_NORMAL)
		return bad(p, "added_tokens[%zu]: id %d is there twice", i, id);
	v->added[k][v->nadded[k]++] = id;
	v->types[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "special")) ? NV_TOK_CONTROL
										   : NV_TOK_USER;
	return 0;
}

static int read_added(hfp *p, const cJSON *added)
{
	size_t n = (size_t)cJSON_GetArraySize(added), i = 0;
	const cJSON *x;

	for (int k = 0; k < 2; k++)
		if (!(p->v->added[k] = nv_malloc(n + 1, sizeof(int32_t))))
			return -1;
	cJSON_ArrayForEach(x, added)
		if (added_one(p, x, i++) < 0)
			return -1;
	return 0;
}

/* ---------------------------------------------------------------- the whole */

/* sentencepiece with byte fallback: the 256 <0xNN> pieces, of type byte */
static int check_bytes(hfp *p)
{
	for (int b = 0; b < 256; b++) {
		char s[8];
		int id;

		snprintf(s, sizeof s, "<0x%02X>", b);
		if ((id = lookup(p, s)) < 0)
			return bad(p, "model.vocab has no piece for byte 0x%02X ('%s')", b, s);
		if (p->v->types[id] == NV_TOK_NORMAL)
			p->v->types[id] = NV_TOK_BYTE;
	}
	return 0;
}

/* byte-level BPE or sentencepiece-style BPE, from what was read */
static int settle(hfp *p, const cJSON *model)
{
	nv_vocab *v = p->v;
	const char *unk = str_or(cJSON_GetObjectItemCaseSensitive(model, "unk_token"), NULL);

	if (p->bytelevel && (p->replace || p->prepend))
		return bad(p, "a normalizer with the ByteLevel pre_tokenizer is not implemented");
	if (!p->bytelevel && !p->replace && !p->meta)
		return bad(p, "a BPE with neither the ByteLevel pre_tokenizer nor the sentencepiece "
			   "normalizer (Replace \" \" by U+2581) is not implemented");
	if (!p->bytelevel && !p->byte_fallback)
		return bad(p, "model.byte_fallback false is not implemented for sentencepiece-style BPE");
	if (!p->bytelevel && p->ignore_merges)
		return bad(p, "model.ignore_merges true is not implemented for sentencepiece-style BPE");
	v->model = p->bytelevel ? NV_VOCAB_GPT2 : NV_VOCAB_LLAMA;
	strcpy(v->pre, !p->bytelevel ? "" : p->split == 1 ? "llama-bpe" : p->split == 2 ? "qwen2"
		       : p->digits ? "smollm" : "gpt2");
	v->ignore_merges = p->ignore_merges;
	v->nfc = p->nfc;
	v->add_space_prefix = p->prepend;
	v->prefix_each = p->prefix_each;
	v->prefix_unless_space = p->meta != 0;
	if (unk && (v->unk = lookup(p, unk)) < 0)
		return bad(p, "model.unk_token '%.40s' is not in the vocabulary", unk);
	if (v->unk >= 0)
		v->types[v->unk] = NV_TOK_UNKNOWN;
	v->add_bos = p->template_bos >= 0;
	v->add_eos = p->template_eos >= 0;
	v->bos = p->template_bos;
	v->eos = p->template_eos;
	v->missing = v->unk < 0 ? NV_MISSING_DROP : p->fuse_unk ? NV_MISSING_FUSE_UNK : NV_MISSING_UNK;
	return p->bytelevel ? 0 : check_bytes(p);
}

static int parse_object(hfp *p, const cJSON *o)
{
	static const char *const keys[] = { "version", "truncation", "padding", "added_tokens",
		"normalizer", "pre_tokenizer", "post_processor", "decoder", "model", NULL };
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(o, "added_tokens");

	if (known_keys(p, o, "", keys) < 0)
		return -1;
	if (!null_or_empty(cJSON_GetObjectItemCaseSensitive(o, "truncation")) ||
	    !null_or_empty(cJSON_GetObjectItemCaseSensitive(o, "padding")))
		return bad(p, "truncation or padding is not null: not implemented");
	if (added && !cJSON_IsArray(added))
		return bad(p, "added_tokens is not an array");
	if (read_model(p, model) < 0 ||
	    read_pieces(p, cJSON_GetObjectItemCaseSensitive(model, "vocab"), added) < 0 ||
	    read_merges(p, cJSON_GetObjectItemCaseSensitive(model, "merges")) < 0 ||
	    read_normalizer(p, cJSON_GetObjectItemCaseSensitive(o, "normalizer")) < 0 ||
	    read_pre(p, cJSON_GetObjectItemCaseSensitive(o, "pre_tokenizer")) < 0 ||
	    read_added(p, added) < 0 ||
	    read_post(p, cJSON_GetObjectItemCaseSensitive(o, "post_processor")) < 0)
		return -1;
	return settle(p, model);
}

int hf_tokenizer_parse(const char *json, const char *what, nv_vocab *v)
{
	hfp p = { .what = what, .v = v, .template_bos = -1, .template_eos = -1 };
	const char *end = NULL;
	cJSON *o = cJSON_ParseWithOpts(json, &end, 1);
	int rc;

	nv_vocab_init(v, NV_VOCAB_GPT2);
	if (!o) {
		size_t at = end && end >= json ? (size_t)(end - json) : 0;

		return nv_seterr("'%s' is not valid JSON (at byte %zu of %zu)", what, at,
				 strlen(json)), -1;
	}
	rc = cJSON_IsObject(o) ? parse_object(&p, o) : bad(&p, "not a JSON object");
	cJSON_Delete(o);
	tok_free(&p.ix);
	if (rc < 0)
		nv_vocab_free(v);
	return rc;
}

/* ---------------------------------------------------------------- tokenizer_config.json */

/* a special token of tokenizer_config.json (a string or {"content": ...}): its id, -1 when null */
static int config_token(const hfp *p, const cJSON *o, const char *key, int *id)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	const char *s;

	*id = -1;
	if (!x || cJSON_IsNull(x))
		return 0;
	s = str_or(cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "content") : x, NULL);
	if (!s)
		return bad(p, "%s is not a string or an object with a string 'content'", key);
	for (size_t i = 0; i < p->v->n; i++)
		if (strcmp(p->v->tokens[i], s) == 0)
			return *id = (int)i, 0;
	return bad(p, "%s '%.40s' is not a token of tokenizer.json", key, s);
}

int hf_tokenizer_config(const char *json, const char *what, nv_vocab *v)
{
	hfp p = { .what = what, .v = v };
	cJSON *o = cJSON_Parse(json);
	int bos, eos, pad, rc = -1;

	if (!cJSON_IsObject(o))
		bad(&p, "not a JSON object");
	else if (config_token(&p, o, "bos_token", &bos) == 0 &&
		 config_token(&p, o, "eos_token", &eos) == 0 &&
		 config_token(&p, o, "pad_token", &pad) == 0)
		rc = 0;
	cJSON_Delete(o);
	if (rc < 0)
		return -1;
	if (!v->add_bos && bos >= 0)
		v->bos = bos;
	if (!v->add_eos && eos >= 0)
		v->eos = eos;
	if (pad >= 0)
		v->pad = pad;
	return 0;
}
