/* test-vocab.c - cmf.tokenizer JSON in and out, and llama2.c's tok512.bin */
#include "err.h"
#include "tap.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void round_trip(void)
{
	char *toks[3] = { "<|endoftext|>", "\xc4\xa0t", "h" }, *merges[1] = { "\xc4\xa0 t" };
	int32_t types[3] = { 3, 1, 1 };
	nv_vocab v, w;
	char *j;

	nv_vocab_init(&v, NV_VOCAB_GPT2);
	v.n = 3, v.tokens = toks, v.types = types, v.nmerges = 1, v.merges = merges;
	v.bos = 0, v.eos = 0, v.add_bos = 0;
	strcpy(v.pre, "smollm");
	j = nv_vocab_to_json(&v);
	ok(j && nv_vocab_from_json(j, &w) == 0, "gpt2 vocabulary to JSON and back");
	ok(w.model == NV_VOCAB_GPT2 && w.n == 3 && !strcmp(w.tokens[1], "\xc4\xa0t") &&
	   w.nmerges == 1 && !strcmp(w.merges[0], "\xc4\xa0 t") && w.types[0] == 3 &&
	   w.bos == 0 && w.unk == -1 && !w.add_bos && !strcmp(w.pre, "smollm") && !w.scores,
	   "every field survives");
	nv_vocab_free(&w);
	free(j);
}

static void rejects(const char *title, const char *json, const char *word)
{
	nv_vocab v;
	int rc = nv_vocab_from_json(json, &v);

	ok(rc < 0 && strstr(nv_err(), word), "%s is refused naming '%s'", title, word);
	if (rc < 0 && !strstr(nv_err(), word))
		diag("message: %s", nv_err());
	if (rc == 0)
		nv_vocab_free(&v);
}

#define FLAGS ",\"bos\":1,\"eos\":2,\"unk\":0,\"pad\":-1,\"add_bos\":true,\"add_eos\":false,\"add_space_prefix\":true}"

static void bad_json(void)
{
	rejects("an unknown model", "{\"model\":\"wordpiece\",\"tokens\":[\"a\"]}", "model");
	rejects("scores of the wrong length",
		"{\"model\":\"llama\",\"tokens\":[\"a\",\"b\",\"c\"],\"scores\":[0],\"types\":[1,1,1]" FLAGS,
		"scores");
	rejects("an eos beyond the vocabulary",
		"{\"model\":\"llama\",\"tokens\":[\"a\",\"b\"],\"scores\":[0,0],\"types\":[1,1]" FLAGS,
		"'eos' = 2");
	rejects("a type out of range",
		"{\"model\":\"llama\",\"tokens\":[\"a\",\"b\",\"c\"],\"scores\":[0,0,0],\"types\":[1,9,1]" FLAGS,
		"types[1]");
	rejects("a merge without a space",
		"{\"model\":\"gpt2\",\"tokens\":[\"a\",\"b\",\"c\"],\"types\":[1,1,1],\"merges\":[\"ab\"]" FLAGS,
		"merges[0]");
	rejects("a missing flag",
		"{\"model\":\"gpt2\",\"tokens\":[\"a\"],\"types\":[1],\"merges\":[],\"bos\":0,\"eos\":0,\"unk\":0,\"pad\":0}",
		"add_bos");
}

static void tok512(void)
{
	const char *d = getenv("NVG_DATA");
	char path[1024];
	nv_vocab v;
	size_t bytes = 0;

	snprintf(path, sizeof(path), "%s/tok512.bin", d ? d : "../shared/data");
	if (nv_vocab_read_llama2c(path, 512, &v) < 0) {
		ok(0, "read tok512.bin: %s", nv_err());
		return;
	}
	for (size_t i = 3; i < 259; i++) {
		char want[8];

		snprintf(want, sizeof(want), "<0x%02X>", (unsigned)(i - 3));
		bytes += !strcmp(v.tokens[i], want) && v.types[i] == NV_TOK_BYTE && v.scores[i] == 0;
	}
	/* the data README: 259 " t", 260 "he", 261 " a", scores -(id - 259) */
	ok(v.n == 512 && !strcmp(v.tokens[0], "<unk>") && v.types[0] == NV_TOK_UNKNOWN &&
	   v.types[1] == NV_TOK_CONTROL && v.types[2] == NV_TOK_CONTROL, "unk, bos, eos");
	is_int((long long)bytes, 256, "ids 3..258 are the byte pieces <0x00>..<0xFF>");
	ok(!strcmp(v.tokens[259], "\xe2\x96\x81t") && !strcmp(v.tokens[260], "he") &&
	   !strcmp(v.tokens[261], "\xe2\x96\x81" "a") && v.scores[261] == -2.0f &&
	   v.scores[511] == -252.0f && v.types[300] == NV_TOK_NORMAL,
	   "merged pieces with U+2581 for space and scores -(id-259)");
	ok(v.bos == 1 && v.eos == 2 && v.add_bos && v.add_space_prefix && !v.add_eos,
	   "ids and flags");
	nv_vocab_free(&v);
	ok(nv_vocab_read_llama2c(path, 511, &v) < 0 && strstr(nv_err(), "bytes after token 510"),
	   "a vocabulary size other than the file's is refused: %s", nv_err());
	ok(nv_vocab_read_llama2c(path, 513, &v) < 0 && strstr(nv_err(), "token 512"),
	   "a file shorter than the vocabulary is refused: %s", nv_err());
}

/* a llama2.c tokenizer file of the given pieces (scores 0) in a temporary file */
static void write_llama2c(const char *path, const char *const *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	uint32_t zero = 0;

	fwrite(&zero, 4, 1, f); /* max_token_length: not read */
	for (size_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)strlen(p[i]);

		fwrite(&zero, 4, 1, f);
		fwrite(&len, 4, 1, f);
		fwrite(p[i], 1, len, f);
	}
	fclose(f);
}

/* only "<0xNN>" with two upper-case hex digits is a byte piece (vocab.h) */
static void byte_types(void)
{
	static const char *const p[] = { "<unk>", "<s>", "</s>", "<0x4F>", "<0x\tF>", "<0x+1>",
					 "<0xab>", "<0x 4>", "<0x4G>" };
	char path[] = "/tmp/test-vocab.XXXXXX";
	int fd = mkstemp(path), bytes = 0;
	nv_vocab v;

	close(fd);
	write_llama2c(path, p, 9);
	if (!ok(nv_vocab_read_llama2c(path, 9, &v) == 0, "read: %s", nv_err())) {
		unlink(path);
		return;
	}
	for (size_t i = 3; i < 9; i++)
		bytes += v.types[i] == NV_TOK_BYTE;
	ok(v.types[3] == NV_TOK_BYTE && bytes == 1,
	   "<0x4F> is a byte piece; <0x\\tF>, <0x+1>, <0xab>, <0x 4>, <0x4G> are normal (%d bytes)",
	   bytes);
	is_int(nv_vocab_byte_piece("<0x4F>", 6), 0x4F, "the byte of <0x4F>");
	is_int(nv_vocab_byte_piece("<0x\tF>", 6), -1, "no byte for <0x\\tF>");
	nv_vocab_free(&v);
	unlink(path);
}

int main(void)
{
	round_trip();
	byte_types();
	bad_json();
	tok512();
	return done_testing();
}
