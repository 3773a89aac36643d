/*
 * test-tok.c - the tokenizers: llama2.c's encode on tok512.bin (ids from
 * tests/ref/llama2c.py, the independent port of run.c), the heap merge
 * against run.c's quadratic loop written out here, byte fallback and its
 * absence, decoding, and GPT-2 byte-level BPE on a hand-made vocabulary
 * whose ids follow from the pattern and the merge ranks by hand.
 */
#include "err.h"
#include "fileio.h"
#include "tap.h"
#include "tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same(const uint32_t *a, size_t n, const uint32_t *b, size_t m)
{
	return n == m && memcmp(a, b, n * 4) == 0;
}

static void show(const uint32_t *a, size_t n)
{
	printf("#  ");
	for (size_t i = 0; i < n && i < 40; i++)
		printf(" %u", a[i]);
	printf("\n");
}

/* run.c's merge loop, quadratic, on symbols already looked up */
static size_t naive_merge(const tok_vocab *v, int *t, size_t n)
{
	char buf[64];

	for (;;) {
		float best = -1e10f;
		int bi = -1, bid = -1;

		for (size_t i = 0; i + 1 < n; i++) {
			size_t a = v->len[t[i]], b = v->len[t[i + 1]];
			int id;

			memcpy(buf, v->piece[t[i]], a);
			memcpy(buf + a, v->piece[t[i + 1]], b);
			id = tok_lookup(v, buf, a + b);
			if (id >= 0 && v->score[id] > best) {
				best = v->score[id];
				bi = (int)i;
				bid = id;
			}
		}
		if (bi < 0)
			return n;
		t[bi] = bid;
		memmove(t + bi + 1, t + bi + 2, (n - (size_t)bi - 2) * sizeof *t);
		n--;
	}
}

static void check_heap_vs_naive(const tok_vocab *v)
{
	static const char alpha[] = "the cat sat, a dog ran. once upon";
	tap_rng r = { 7 };
	int bad = 0;

	for (int k = 0; k < 200 && !bad; k++) {
		char s[80];
		int t[82];
		size_t len = 1 + rng_u64(&r) % 70, n = 0, m;
		uint32_t *ids;

		for (size_t i = 0; i < len; i++)
			s[i] = alpha[rng_u64(&r) % (sizeof alpha - 1)];
		/* the symbols run.c starts from: bos, the dummy prefix, one per byte (ASCII) */
		t[n++] = tok_lookup(v, " ", 1);
		for (size_t i = 0; i < len; i++)
			t[n++] = tok_lookup(v, s + i, 1);
		n = naive_merge(v, t, n);
		if (tok_encode(v, s, len, &ids, &m) < 0 || m != n + 1 || ids[0] != 1)
			bad = 1;
		for (size_t i = 0; !bad && i < n; i++)
			bad = ids[i + 1] != (uint32_t)t[i];
		if (bad)
			diag("differs on '%.*s'", (int)len, s);
		free(ids);
	}
	ok(!bad, "the heap merge equals run.c's loop on 200 random strings");
}

static void check_spm(void)
{
	const char *dir = getenv("NVG_DATA");
	char path[4096];
	uint8_t *buf;
	size_t len, n;
	tok_vocab v;
	uint32_t *ids;
	/* tests/ref/llama2c.py encode of "Once upon a time" */
	static const uint32_t once[] = { 1, 403, 407, 261, 378 };

	snprintf(path, sizeof path, "%s/tok512.bin", dir ? dir : "../shared/data");
	if (!ok(nv_read_file(path, &buf, &len) == 0, "read %s", path))
		return;
	ok(tok_load_llama2(&v, buf, len, 512) == 0, "load tok512.bin: %s", nv_err());
	free(buf);
	ok(tok_encode(&v, "", 0, &ids, &n) == 0 && n == 1 && ids[0] == 1,
	   "the empty text is bos alone (no dummy prefix)");
	free(ids);
	ok(tok_encode(&v, "Once upon a time", 16, &ids, &n) == 0 && same(ids, n, once, 5),
	   "'Once upon a time' as run.c encodes it");
	show(ids, n);
	free(ids);
	/* ü = C3 BC has no piece (é has): the byte pieces are ids 3 + byte (tok512's layout) */
	ok(tok_encode(&v, "\xC3\xBC", 2, &ids, &n) == 0 && n == 4 &&
	   ids[1] == (uint32_t)tok_lookup(&v, " ", 1) && ids[2] == 3 + 0xC3 && ids[3] == 3 + 0xBC,
	   "a code point with no piece falls back to its bytes");
	free(ids);
	check_heap_vs_naive(&v);
	tok_free(&v);
}

static void check_decode(void)
{
	const char *dir = getenv("NVG_DATA");
	char path[4096], out[8];
	uint8_t *buf, *text;
	size_t len, tlen, n, k, m = 0;
	tok_vocab v;
	uint32_t *ids;
	char *back;

	snprintf(path, sizeof path, "%s/tok512.bin", dir ? dir : "../shared/data");
	if (nv_read_file(path, &buf, &len) < 0 || tok_load_llama2(&v, buf, len, 512) < 0)
		return;
	free(buf);
	snprintf(path, sizeof path, "%s/tinystories-sample.txt", dir ? dir : "../shared/data");
	if (!ok(nv_read_file(path, &text, &tlen) == 0, "read the TinyStories sample"))
		return;
	tlen = tlen > 20000 ? 20000 : tlen;
	back = malloc(tlen + 64);
	ok(tok_encode(&v, (char *)text, tlen, &ids, &n) == 0, "encode 20000 bytes of TinyStories");
	for (size_t i = 1; i < n; i++) {
		tok_decode(&v, (int)ids[i - 1], ids[i], out, sizeof out, &k);
		if (m + k <= tlen + 64)
			memcpy(back + m, out, k);
		m += k;
	}
	ok(m == tlen && memcmp(back, text, tlen) == 0, "decoding gives the text back (%zu bytes)", m);
	free(ids);
	free(back);
	free(text);
	tok_free(&v);
}

static void check_no_fallback(void)
{
	tok_vocab v;
	uint32_t *ids;
	size_t n;

	tok_init(&v, TOK_SPM, 4);
	tok_set_piece(&v, 0, "a", 1, 0);
	tok_set_piece(&v, 1, "b", 1, 0);
	tok_set_piece(&v, 2, "ab", 2, 1);
	tok_set_piece(&v, 3, " ", 1, 0);
	ok(tok_finish(&v) == 0, "a vocabulary without byte fallback");
	ok(tok_encode(&v, "abab", 4, &ids, &n) == 0 && n == 2 && ids[0] == 2 && ids[1] == 2,
	   "'abab' is two 'ab'");
	free(ids);
	ok(tok_encode(&v, "abx", 3, &ids, &n) < 0 &&
	   strstr(nv_err(), "byte 0x78 at offset 2 has no token and no byte fallback"),
	   "a byte with no token is refused: %s", nv_err());
	tok_free(&v);
	ok(tok_init(&v, TOK_SPM, 2) == 0 && tok_set_piece(&v, 0, "a", 1, 0) == 0 &&
	   tok_finish(&v) < 0 && strstr(nv_err(), "piece 1 is missing"), "a missing piece is refused");
	tok_free(&v);
}

/* GPT-2's byte → code point map, written out from its definition */
static void mapped(int b, char *out, size_t *len)
{
	int cp = b, extra = 0;

	if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
		for (int i = 0; i < b; i++)
			extra += !((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE);
		cp = 256 + extra;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		*len = 1;
	} else {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		*len = 2;
	}
}

static void gpt2_vocab(tok_vocab *v, int split)
{
	/* ids 0..255: the bytes; then the merges' results */
	static const char *const merges[][3] = {
		{ "\xC4\xA0", "t", "\xC4\xA0t" }, { "h", "e", "he" }, { "\xC4\xA0t", "he", "\xC4\xA0the" },
		{ "l", "l", "ll" }, { "4", "2", "42" },
	};
	char p[4];
	size_t n;

	tok_init(v, TOK_GPT2, 261);
	for (int b = 0; b < 256; b++) {
		mapped(b, p, &n);
		tok_set_piece(v, (size_t)b, p, n, 0);
	}
	for (int i = 0; i < 5; i++) {
		tok_set_piece(v, 256 + (size_t)i, merges[i][2], strlen(merges[i][2]), 0);
		tok_add_merge(v, merges[i][0], strlen(merges[i][0]), merges[i][1], strlen(merges[i][1]));
	}
	v->split_digits = split;
	tok_finish(v);
}

static void check_gpt2(void)
{
	/* chunks: "the" " " " hell" "'ll" then " " "4" "2" (split) or " 42" */
	static const uint32_t want_split[] = { 't', 257, ' ', ' ', 257, 259, '\'', 259, ' ', '4', '2' };
	static const uint32_t want_plain[] = { 't', 257, ' ', ' ', 257, 259, '\'', 259, ' ', 260 };
	static const uint32_t want_the[] = { 258, 258, 10, ' ', 10, 10, 258 };
	const char *s = "the  hell'll 42";
	tok_vocab v;
	uint32_t *ids;
	size_t n, k, m = 0;
	char out[16], back[64];

	gpt2_vocab(&v, 1);
	ok(tok_encode(&v, s, strlen(s), &ids, &n) == 0 && same(ids, n, want_split, 11),
	   "gpt2 with digits split one by one");
	show(ids, n);
	for (size_t i = 0; i < n; i++) {
		tok_decode(&v, i ? (int)ids[i - 1] : -1, ids[i], out, sizeof out, &k);
		memcpy(back + m, out, k);
		m += k;
	}
	ok(m == strlen(s) && memcmp(back, s, m) == 0, "gpt2 decoding gives the text back");
	free(ids);
	tok_free(&v);
	gpt2_vocab(&v, 0);
	ok(tok_encode(&v, s, strlen(s), &ids, &n) == 0 && same(ids, n, want_plain, 10),
	   "gpt2 without the digit split: ' 42' is one chunk");
	show(ids, n);
	free(ids);
	/* " the the\n \n\n the": newline runs split before the space that starts a word */
	s = " the the\n \n\n the";
	ok(tok_encode(&v, s, strlen(s), &ids, &n) == 0 && same(ids, n, want_the, 7),
	   "gpt2 whitespace runs");
	show(ids, n);
	free(ids);
	v.add_bos = 1;
	v.bos = 258;
	v.add_space_prefix = 1;
	ok(tok_encode(&v, "the", 3, &ids, &n) == 0 && n == 2 && ids[0] == 258 && ids[1] == 258,
	   "add_bos and add_space_prefix are honoured");
	free(ids);
	tok_free(&v);
}

int main(void)
{
	check_spm();
	check_decode();
	check_no_fallback();
	check_gpt2();
	return done_testing();
}
