/*
 * hftok.h - a Hugging Face tokenizer.json, and its tokenizer_config.json,
 * as the cmf.tokenizer vocabulary (vocab.h) that tok.h encodes with.
 *
 * What is read is what the tokenizers library would do to a text, no more:
 * a BPE model (vocab, merges as "a b" or ["a", "b"], byte_fallback,
 * unk_token), added tokens (found whole in the text first), and either
 *
 * - byte-level BPE: no normalizer; pre_tokenizer ByteLevel (use_regex
 *   true, add_prefix_space false), or a Sequence of Digits
 *   (individual_digits true) and that ByteLevel (SmolLM2), or of a Split
 *   (Isolated) by Llama 3's or Qwen2's pattern and a ByteLevel without
 *   use_regex: model "gpt2", pre "gpt2", "smollm", "llama-bpe" or "qwen2",
 *   ignore_merges as the model says; a byte whose piece is not in the
 *   vocabulary is dropped, or is unk_token (once for a run with fuse_unk); or
 * - sentencepiece-style BPE with byte fallback (Llama 2, Mistral): no
 *   pre_tokenizer; normalizer Replace " " by U+2581, after an optional
 *   Prepend of U+2581 (each segment between added tokens): model "llama"
 *   with merges, add_space_prefix and prefix_each_segment; or, instead of
 *   that normalizer, a Metaspace pre_tokenizer (U+2581, split false,
 *   prepend_scheme never, first or always; prefix_unless_space).
 *
 * A post_processor TemplateProcessing whose single sequence is [bos] $A
 * [eos] sets add_bos/add_eos and those ids; ByteLevel and null post
 * processors add nothing.  Anything else that changes the ids (another
 * model type, normalizer, pre-tokenizer or post-processor, dropout,
 * subword affixes, truncation, padding, added tokens with
 * lstrip, rstrip or single_word) is refused by name, never approximated.
 * The decoder is not read (tok_decode decodes).
 *
 * Every value is checked (untrusted input): ids integers covering 0..n-1
 * once each, pieces distinct, valid UTF-8 without NUL, merges of pieces
 * whose concatenation is a piece, each merge once.  Errors are -1 with a
 * reason "'WHAT': field = value: why".
 */
#ifndef NV_HFTOK_H
#define NV_HFTOK_H

#include "vocab.h"

/* the tokenizer.json text json (named what in errors) into v (fresh; free with nv_vocab_free) */
int hf_tokenizer_parse(const char *json, const char *what, nv_vocab *v);

/*
 * a tokenizer_config.json text: bos_token and eos_token (a string or an
 * object with "content") name v's bos and eos unless the post-processor
 * already set them; pad_token names pad; the other keys change no id
 */
int hf_tokenizer_config(const char *json, const char *what, nv_vocab *v);

#endif
