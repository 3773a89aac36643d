/*
 * hfconfig.h - the keys of a Hugging Face config.json, honoured or refused.
 *
 * A key that changes the forward and is not implemented must never be
 * ignored: the model would import with exit 0 and run as another model.
 * One table (hfconfig.c, listed in cmf-patch(1)) says, for every key nvgkit
 * knows, whether it is read into cmf.arch, has no effect on the forward, or
 * is accepted only with the value that the forward implements
 * (rope_interleaved false).  The values of the keys read are checked by
 * cmf_arch_parse (cmf_arch.c), which refuses what the forward does not run:
 * a hidden_act, a RoPE type or a key of rope_scaling it does not know, a
 * bias the architecture does not have.  Any other key is refused by name,
 * as is a model_type the forward does not run (llama, qwen2, qwen3,
 * mistral run).
 */
#ifndef NV_HFCONFIG_H
#define NV_HFCONFIG_H

#include "cmf.h"

/*
 * check the config.json text against the table, after cmf_arch_parse has
 * read a from it: -1 with reason naming the key and its value; *untied is
 * 1 when the config says tie_word_embeddings false in so many words
 */
int hf_config_check(const char *json, const char *what, const cmf_arch *a, int *untied);

#endif
