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
#include "fuzz-vocab.h"
#include "le.h"
#include "tok.h"

#include <string.h>

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
