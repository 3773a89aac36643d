/*
 * fuzz-tok512.c - libFuzzer target for llama2.c tokenizer files
 * (tok512.bin: nv_vocab_read_llama2c, what cmf-patch import --vocab reads,
 * and tok_load_llama2), with the token count the file's whole records
 * give.  Either the read fails with a reason or: the vocabulary has that
 * many pieces, each valid UTF-8 without NUL, typed as vocab.h says (0
 * unknown, 1 and 2 control, "<0xNN>" with two upper-case hex digits byte,
 * the rest normal); its cmf.tokenizer JSON reads back as the same
 * vocabulary; tok_load_llama2 reads the same pieces; the tokenizer built
 * from it encodes a sample text to ids below the count that decode.
 * Input through a memfd.
 */
#include "fuzz.h"
#include "le.h"
#include "tok.h"

#include <string.h>

static const char sample[] = "Once upon a time, Lily saw a big <0x41> 42 \xe2\x80\x9c" "cat\xe2\x80\x9d.\n";

/* the count of whole (score, length, bytes) records after the 4-byte header */
static size_t records(const uint8_t *b, size_t len)
{
	size_t at = 4, n = 0;

	while (len >= at && len - at >= 8 && le_u32(b + at + 4) <= len - at - 8) {
		at += 8 + le_u32(b + at + 4);
		n++;
	}
	return n;
}

static int32_t want_type(size_t id, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	if (id == 0)
		return NV_TOK_UNKNOWN;
	if (id <= 2)
		return NV_TOK_CONTROL;
	if (strlen(s) == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && strchr(hex, s[3]) &&
	    strchr(hex, s[4]))
		return NV_TOK_BYTE;
	return NV_TOK_NORMAL;
}

/* the vocabulary's JSON reads back as itself */
static void check_json(const nv_vocab *v)
{
	char *json = nv_vocab_to_json(v);
	nv_vocab w;

	if (!json || nv_vocab_from_json(json, &w) < 0 || w.n != v->n || w.bos != v->bos ||
	    w.eos != v->eos || w.unk != v->unk || w.add_bos != v->add_bos ||
	    w.add_space_prefix != v->add_space_prefix)
		abort();
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(w.tokens[i], v->tokens[i]) || w.scores[i] != v->scores[i] ||
		    w.types[i] != v->types[i])
			abort();
	nv_vocab_free(&w);
	free(json);
}

/* the tokenizer encodes the sample to ids below n, each of which decodes */
static void check_encode(const nv_vocab *v)
{
	tok_vocab t;
	uint32_t *ids;
	size_t n, len;
	char *buf;

	if (tok_from_vocab(&t, v) < 0)
		abort();
	if (tok_encode(&t, sample, sizeof sample - 1, &ids, &n) == 0) {
		size_t cap = 4 * sizeof sample;

		for (size_t i = 0; i < t.n; i++)
			cap = 4 * t.len[i] > cap ? 4 * t.len[i] : cap;
		if (!(buf = malloc(cap)))
			abort();
		for (size_t i = 0; i < n; i++)
			if (ids[i] >= v->n || tok_decode(&t, i ? (int)ids[i - 1] : -1, ids[i], buf,
							 cap, &len) < 0)
				abort();
		free(buf);
		free(ids);
	}
	tok_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = records(data, size);
	nv_vocab v;
	tok_vocab t;

	if (n > 1 << 16 || nv_vocab_read_llama2c(fuzz_file(data, size), n, &v) < 0)
		return 0;
	if (v.n != n || tok_load_llama2(&t, data, size, n) < 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (v.types[i] != want_type(i, v.tokens[i]) || t.len[i] == 0)
			abort();
	tok_free(&t);
	check_json(&v);
	check_encode(&v);
	nv_vocab_free(&v);
	return 0;
}
