/*
 * fuzz-vocab.h - the promises every vocabulary reader's target checks: the
 * vocabulary's cmf.tokenizer JSON reads back as itself, and the tokenizer
 * built from it encodes a sample text to ids below its size that decode.
 */
#ifndef NV_FUZZ_VOCAB_H
#define NV_FUZZ_VOCAB_H

#include "tok.h"
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

static const char fuzz_sample[] = "Once upon a time, Lily saw a big <0x41> 42 \xe2\x80\x9c"
				  "cat\xe2\x80\x9d.\n";

/* the vocabulary's JSON reads back as itself */
static inline void check_json(const nv_vocab *v)
{
	char *json = nv_vocab_to_json(v);
	nv_vocab w;

	if (!json || nv_vocab_from_json(json, &w) < 0 || w.model != v->model || w.n != v->n ||
	    w.bos != v->bos || w.eos != v->eos || w.unk != v->unk || w.pad != v->pad ||
	    w.add_bos != v->add_bos || w.add_eos != v->add_eos ||
	    w.add_space_prefix != v->add_space_prefix || w.prefix_each != v->prefix_each ||
	    w.prefix_unless_space != v->prefix_unless_space || w.missing != v->missing ||
	    w.ignore_merges != v->ignore_merges || w.nfc != v->nfc || strcmp(w.pre, v->pre) ||
	    !w.scores != !v->scores || w.nmerges != v->nmerges || !w.merges != !v->merges)
		abort();
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(w.tokens[i], v->tokens[i]) || (v->scores && w.scores[i] != v->scores[i]) ||
		    w.types[i] != v->types[i])
			abort();
	for (size_t i = 0; v->merges && i < v->nmerges; i++)
		if (strcmp(w.merges[i], v->merges[i]))
			abort();
	for (int k = 0; k < 2; k++)
		if (w.nadded[k] != v->nadded[k] ||
		    (v->nadded[k] && memcmp(w.added[k], v->added[k], v->nadded[k] * sizeof(int32_t))))
			abort();
	nv_vocab_free(&w);
	free(json);
}

/* the tokenizer encodes the sample to ids below n, each of which decodes */
static inline void check_encode(const nv_vocab *v)
{
	tok_vocab t;
	uint32_t *ids;
	size_t n, len;
	char *buf;

	if (tok_from_vocab(&t, v) < 0)
		abort();
	if (tok_encode(&t, fuzz_sample, sizeof fuzz_sample - 1, &ids, &n) == 0) {
		size_t cap = 4 * sizeof fuzz_sample;

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

#endif
