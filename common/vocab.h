/*
 * vocab.h - a model's vocabulary as CMF carries it: the `cmf.tokenizer`
 * metadata value (man/man5/cmf.5, "TOKENIZER").
 *
 * `cmf.tokenizer` is one JSON object:
 *
 *   {
 *     "model": "llama" | "gpt2",
 *     "tokens": [ "piece", ... ],       n strings; the token id is the index
 *     "scores": [ 0.0, -1.0, ... ],     n numbers (model "llama" without merges)
 *     "types":  [ 1, 3, 6, ... ],       n integers, sentencepiece/GGUF token types:
 *                                       1 normal, 2 unknown, 3 control,
 *                                       4 user-defined, 5 unused, 6 byte
 *     "merges": [ "Ġ t", ... ],         merge rules in priority order (rank =
 *                                       index), the two parts separated by one
 *                                       space: always for "gpt2"; for "llama"
 *                                       (a Hugging Face BPE with byte fallback)
 *                                       they replace the scores
 *     "bos": 1, "eos": 2,               ids, -1 when the model has none
 *     "unk": 0, "pad": -1,              ids, -1 when none
 *     "add_bos": true,                  prepend bos when encoding
 *     "add_eos": false,                 append eos when encoding
 *     "add_space_prefix": true,         prepend one space to the text (sentencepiece's
 *                                       dummy prefix)
 *     "pre": "smollm",                  gpt2 pre-tokenizer name (GGUF's
 *                                       tokenizer.ggml.pre: "gpt2", "smollm",
 *                                       "llama-bpe", "qwen2", ...), "" when unknown
 *     "added": [ 0, 1, 2 ],             optional: ids whose pieces are found whole
 *                                       in the text before anything else (Hugging
 *                                       Face's added tokens), the text between
 *                                       them encoded piece by piece
 *     "added_normalized": [ 7 ],        optional: ids found the same way, after
 *                                       "added", in the text between those
 *                                       (added tokens with normalized true)
 *     "prefix_each_segment": true,      optional: the space prefix goes before
 *                                       every such piece of text, not only the
 *                                       one at the start (Hugging Face's Prepend
 *                                       normalizer)
 *     "ignore_merges": true,            optional, "gpt2": a pre-tokenized chunk that is
 *                                       a piece is that piece (default: true for
 *                                       pre "llama-bpe", as llama.cpp does)
 *     "prefix_unless_space": true,      optional: no space prefix before a segment
 *                                       that starts with a space or U+2581
 *                                       (Hugging Face's Metaspace pre-tokenizer)
 *     "nfc": true,                      optional: the text is normalized to NFC first
 *     "missing": "drop"                 optional, "gpt2": a byte whose piece is not
 *                                       in the vocabulary is dropped, or is "unk",
 *                                       or "fuse_unk" (one unk for a run of them);
 *                                       absent: an error (Hugging Face's BPE drops
 *                                       them without an unk_token)
 *   }
 *
 * Piece text conventions:
 * - "llama" (sentencepiece BPE with scores, llama2.c and GGUF "llama"): a
 *   space is U+2581 (the llama2.c importer turns tok512.bin's ' ' into it);
 *   byte-fallback pieces are the text "<0xNN>" (two upper-case hex digits)
 *   with type 6; merging picks the adjacent pair whose concatenation is a
 *   token with the highest score, or, when there are merges, the adjacent
 *   pair with the lowest merge rank (Hugging Face's BPE).
 * - "gpt2" (byte-level BPE): pieces are in GPT-2's byte-to-unicode alphabet
 *   (a space is U+0120 'Ġ', a newline U+010A 'Ċ'), exactly as in GGUF and
 *   Hugging Face tokenizer.json; merges apply by rank.
 * Every piece is valid UTF-8 without NUL bytes.  Pieces need not be unique
 * (some real vocabularies repeat unused pieces): an encoder maps a piece to
 * its lowest id.
 */
#ifndef NV_VOCAB_H
#define NV_VOCAB_H

#include <stddef.h>
#include <stdint.h>

typedef enum { NV_VOCAB_LLAMA = 0, NV_VOCAB_GPT2 } nv_vocab_model;

/* what a gpt2 encoder does with a byte whose piece is not in the vocabulary */
enum { NV_MISSING_ERROR = 0, NV_MISSING_DROP, NV_MISSING_UNK, NV_MISSING_FUSE_UNK };

enum {
	NV_TOK_NORMAL = 1,
	NV_TOK_UNKNOWN = 2,
	NV_TOK_CONTROL = 3,
	NV_TOK_USER = 4,
	NV_TOK_UNUSED = 5,
	NV_TOK_BYTE = 6
};

typedef struct {
	nv_vocab_model model;
	size_t n;             /* tokens */
	char **tokens;        /* (n) NUL-terminated UTF-8 pieces */
	float *scores;        /* (n), "llama" only; NULL otherwise */
	int32_t *types;       /* (n) */
	size_t nmerges;
	char **merges;        /* (nmerges), "gpt2"; "llama" ranked by merges when not NULL */
	int bos, eos, unk, pad;      /* -1 when none */
	int add_bos, add_eos, add_space_prefix;
	char pre[64];         /* gpt2 pre-tokenizer name, "" when unknown */
	size_t nadded[2];
	int32_t *added[2];    /* (nadded[k]) ids found whole in the text: [0] first, [1] then */
	int prefix_each;      /* add_space_prefix before every segment between added tokens */
	int prefix_unless_space; /* but not before a segment that starts with a space */
	int missing;          /* NV_MISSING_*: "missing" */
	int ignore_merges;    /* gpt2: a chunk that is a piece is not merged ("ignore_merges") */
	int nfc;              /* the tokenizer normalizes to NFC first ("nfc") */
} nv_vocab;

/* an empty vocabulary of the given model (all ids -1, flags 0) */
void nv_vocab_init(nv_vocab *v, nv_vocab_model model);
void nv_vocab_free(nv_vocab *v);

/* the `cmf.tokenizer` JSON text of v (malloc'd) ; NULL with reason set */
char *nv_vocab_to_json(const nv_vocab *v);

/* parse and validate a `cmf.tokenizer` value; -1 with reason naming the field */
int nv_vocab_from_json(const char *json, nv_vocab *v);

/*
 * a llama2.c tokenizer file (tok512.bin: i32 max_token_length, then per
 * token f32 score, i32 length, bytes) of exactly n tokens; bos 1, eos 2,
 * unk 0, types derived (unknown, control, byte "<0xNN>", normal), add_bos
 * and add_space_prefix set.  -1 with reason naming the file and field.
 */
int nv_vocab_read_llama2c(const char *path, size_t n, nv_vocab *v);

/* the byte of a byte-fallback piece "<0xNN>" (two upper-case hex digits,
 * n bytes), or -1 for any other piece */
int nv_vocab_byte_piece(const char *p, size_t n);

/* bos and eos (a model config's; -1: none) where v names none, when they are tokens of v */
void nv_vocab_default_ids(nv_vocab *v, int bos, int eos);

/* 1 when s[0..n) is well-formed UTF-8 without NUL (no overlongs, no surrogates) */
int nv_utf8_ok(const char *s, size_t n);

/* "llama" / "gpt2" */
const char *nv_vocab_model_name(nv_vocab_model m);

#endif
