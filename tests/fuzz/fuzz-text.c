/*
 * fuzz-text.c - libFuzzer target for the text tokenizer (tok_encode,
 * tok_decode: cmf-eval and gram-capture --text).  The first byte picks the
 * vocabulary: llama2.c's tok512.bin (sentencepiece BPE with byte fallback,
 * built into the target from the real file), or a GPT-2 byte-level one
 * (256 byte pieces and a few merges), with digits split or not; the rest
 * is the text.  Both vocabularies spell every byte, so every text encodes:
 * to ids below the vocabulary size, bos first where the tokenizer adds it,
 * that decode back to the text (tok512: after a space prefix that a byte
 * piece keeps, llama2.c's decode).
 */
#include "fuzz.h"
#include "tok.h"
#include "tok512.inc"

#include <stdlib.h>
#include <string.h>

static const char *const merges[] = { "Ġ t", "h e", "Ġt he", "i n", "Ġ a",
				      "e r", "o n", "1 2", "Ġ Ġ", "Ċ Ċ" };

/* GPT-2's byte → code point map, as UTF-8 */
static void byte_piece(int b, char *out)
{
	int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
	unsigned c = (unsigned)b, next = 256;

	for (int i = 0; !keep && i < b; i++)
		if (!((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE))
			next++;
	c = keep ? c : next;
	if (c < 0x80) {
		out[0] = (char)c, out[1] = 0;
	} else {
		out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3F)), out[2] = 0;
	}
}

/* the GPT-2 vocabulary: 256 byte pieces, then one piece per merge */
static int gpt2_vocab(tok_vocab *t, int split)
{
	size_t nm = sizeof merges / sizeof *merges;
	nv_vocab v;
	char p[4];
	int rc;

	nv_vocab_init(&v, NV_VOCAB_GPT2);
	v.n = 256 + nm;
	v.nmerges = nm;
	v.tokens = calloc(v.n, sizeof(char *));
	v.types = calloc(v.n, sizeof(int32_t));
	v.merges = calloc(nm, sizeof(char *));
	if (!v.tokens || !v.types || !v.merges)
		abort();
	for (int b = 0; b < 256; b++) {
		byte_piece(b, p);
		v.tokens[b] = strdup(p);
	}
	for (size_t i = 0; i < nm; i++) {
		char *s = strdup(merges[i]), *sp = strchr(s, ' ');

		v.merges[i] = strdup(merges[i]);
		memmove(sp, sp + 1, strlen(sp));
		v.tokens[256 + i] = s;
	}
	strcpy(v.pre, split ? "smollm" : "gpt2");
	rc = tok_from_vocab(t, &v);
	nv_vocab_free(&v);
	return rc;
}

/* the decoded ids of text, concatenated, into a fresh buffer */
static char *decode_all(const tok_vocab *t, const uint32_t *ids, size_t n, size_t *len)
{
	size_t cap = 4 * n * 64 + 1;
	char *out = malloc(cap);

	*len = 0;
	for (size_t i = 0; out && i < n; i++) {
		size_t k;

		if (ids[i] >= t->n)
			abort();
		if (i == 0 && t->add_bos && (int)ids[0] == t->bos)
			continue;
		if (tok_decode(t, i ? (int)ids[i - 1] : -1, ids[i], out + *len, cap - *len, &k) < 0)
			abort();
		*len += k;
	}
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static tok_vocab v[3];
	const char *text = (const char *)data + 1;
	size_t len = size ? size - 1 : 0, n, dl;
	const tok_vocab *t;
	uint32_t *ids;
	char *dec;

	if (!v[0].n && (tok_load_llama2(&v[0], tok512, sizeof tok512, 512) < 0 ||
			gpt2_vocab(&v[1], 0) < 0 || gpt2_vocab(&v[2], 1) < 0))
		abort();
	t = &v[size ? data[0] % 3 : 0];
	if (tok_encode(t, text, len, &ids, &n) < 0)
		abort();
	if ((t->add_bos && (n == 0 || (int)ids[0] != t->bos)) || !(dec = decode_all(t, ids, n, &dl)))
		abort();
	if (!(dl == len && memcmp(dec, text, len) == 0) &&
	    !(t->add_space_prefix && dl == len + 1 && dec[0] == ' ' && memcmp(dec + 1, text, len) == 0))
		abort();
	free(dec);
	free(ids);
	return 0;
}
