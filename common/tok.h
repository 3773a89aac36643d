/*
 * tok.h - the tokenizers of the vocabularies CMF carries (cmf.tokenizer):
 *
 * - TOK_SPM: llama2.c's sentencepiece-style BPE with scores.  The text is
 *   cut into UTF-8 code points (an optional dummy-prefix space first), each
 *   looked up as a piece or, when absent, spelt with the byte-fallback
 *   pieces <0xNN>; then the adjacent pair whose concatenated piece has the
 *   best score is merged (the leftmost among equals) until none is in the
 *   vocabulary.  This is run.c's encode(), done with a heap so that long
 *   texts cost O(n log n), with the same result.
 * - TOK_GPT2: GPT-2 byte-level BPE with ranked merges.  The text is split
 *   by GPT-2's pre-tokenizer pattern ('s 't 're 've 'm 'll 'd, ␠?letters,
 *   ␠?numbers, ␠?other, whitespace), digits first split one by one when
 *   split_digits is set (SmolLM2), or by Llama 3's pattern (numbers in
 *   threes; Qwen2's: one by one); each chunk's bytes are mapped to GPT-2's
 *   printable code points and merged by lowest rank (with ignore_merges, a
 *   chunk that is a piece is taken whole).  Letters and numbers are the
 *   Unicode categories L and N (unicat.h).
 *
 * - TOK_SPM with merges (by_rank): Hugging Face's BPE with byte fallback
 *   (Llama 2, Mistral): as TOK_SPM, but the adjacent pair merged is the one
 *   of lowest merge rank (the leftmost among equals).
 *
 * Added tokens (Hugging Face's) are found first: the leftmost, longest
 * piece of the first list in the text, then of the second list in the text
 * between those; the text between them is encoded by the BPE, each such
 * segment on its own.  All honour add_bos (prepend bos), add_eos (append
 * eos) and add_space_prefix (a space before the non-empty segment at the
 * start of the text, or before every non-empty segment with prefix_each).
 * A byte with no token and no byte fallback is an error naming its offset.
 * With nfc (Hugging Face's NFC normalizer, Qwen2), each segment between
 * the first list's pieces is normalized to NFC (unicat.h) before the second
 * list's pieces are found in it.
 */
#ifndef NV_TOK_H
#define NV_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "cmf.h"
#include "vocab.h"

typedef enum { TOK_SPM = 1, TOK_GPT2 = 2 } tok_kind;

/* TOK_GPT2's pre-tokenizer pattern: GPT-2's, Llama 3's, Qwen2's (Llama 3's with single digits) */
enum { TOK_PAT_GPT2 = 0, TOK_PAT_LLAMA3, TOK_PAT_QWEN2 };

typedef struct tok_map tok_map;

/* added tokens of one pass: ids, longest piece first; first[b]: some piece starts with b */
typedef struct {
	size_t n;
	int *id;
	uint8_t first[256];
} tok_added;

typedef struct {
	tok_kind kind;
	size_t n;            /* vocabulary size */
	char **piece;        /* n pieces (NUL-terminated, may hold any byte but NUL) */
	size_t *len;         /* their lengths */
	size_t maxlen;       /* the longest (set by tok_finish) */
	float *score;        /* n scores (TOK_SPM) */
	size_t nmerges;
	int bos, eos, unk;   /* -1 when none */
	int missing;         /* TOK_GPT2: a byte with no piece: NV_MISSING_* (vocab.h) */
	int pattern;         /* TOK_GPT2: TOK_PAT_* */
	int ignore_merges;   /* TOK_GPT2: a chunk that is a piece is that piece, unmerged */
	int nfc;             /* the text is normalized to NFC first */
	int add_bos, add_eos, add_space_prefix, split_digits;
	int prefix_each;     /* the space prefix before every segment between added tokens */
	int prefix_unless_space; /* but not before one that starts with a space (Metaspace) */
	int by_rank;         /* TOK_SPM: merge by rank (tok_add_merge), not by score */
	tok_added added[2];  /* found in the text, then in the text between those */
	int byte_fallback[256]; /* id of <0xNN>, or -1 */
	tok_map *ids;        /* piece → id */
	tok_map *ranks;      /* "a b" → merge rank (TOK_GPT2) */
} tok_vocab;

/* an empty vocabulary of n pieces; fill it with tok_set_piece / tok_add_merge */
int tok_init(tok_vocab *v, tok_kind kind, size_t n);
int tok_set_piece(tok_vocab *v, size_t id, const char *p, size_t len, float score);
/* the next merge "a b" (rank = merges added before it); 1 when the pair was there (first rank kept) */
int tok_add_merge(tok_vocab *v, const char *a, size_t alen, const char *b, size_t blen);
/* the added tokens of pass k (0, 1): n ids, each a non-empty piece */
int tok_set_added(tok_vocab *v, int k, const int32_t *ids, size_t n);
/* index the pieces (a missing or duplicate piece is an error); call once filled */
int tok_finish(tok_vocab *v);
void tok_free(tok_vocab *v);

/*
 * from a cmf.tokenizer vocabulary (vocab.h): "llama" pieces have U+2581
 * turned back into spaces; "gpt2" takes the merges and the pre-tokenizer
 * ("", "gpt2"; "smollm", "starcoder", "refact" split digits one by one;
 * any other is refused by name)
 */
int tok_from_vocab(tok_vocab *v, const nv_vocab *src);

/* the tokenizer of a CMF file's cmf.tokenizer (absent: an error) */
int tok_from_cmf(tok_vocab *v, const cmf_file *f);

/*
 * token ids for a tool: a u32 little-endian file (--tokens; the byte count
 * must be a non-zero multiple of 4), or a text file encoded with the
 * model's tokenizer (--text).  Ids are not checked against a vocabulary
 * here: the forward refuses an id beyond it.
 */
int tok_read_ids(const char *path, uint32_t **ids, size_t *n);
int tok_text_ids(const cmf_file *f, const char *path, uint32_t **ids, size_t *n);

/* llama2.c's tokenizer file (tokenizer.bin, tok512.bin): bos 1, eos 2, add_bos, space prefix */
int tok_load_llama2(tok_vocab *v, const uint8_t *buf, size_t len, size_t n);

/* len bytes as GPT-2's byte-level code points (UTF-8, at most 2·len bytes) into out */
int tok_gpt2_bytes(const char *p, size_t len, char *out, size_t *n);

/* the id of a piece, or -1 */
int tok_lookup(const tok_vocab *v, const char *p, size_t len);

/* encode len bytes of text; *ids fresh (free), *n ids */
int tok_encode(const tok_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n);

/*
 * the bytes of token id following prev (llama2.c's decode: after BOS a
 * leading space is dropped; <0xNN> is its byte; GPT-2 pieces are mapped
 * back to bytes); *len bytes into buf (cap ≥ 4·longest piece)
 */
int tok_decode(const tok_vocab *v, int prev, uint32_t id, char *buf, size_t cap, size_t *len);

#endif
