/* hfconfig.c - the config.json keys honoured or refused (hfconfig.h) */
#include "hfconfig.h"

#include "err.h"

#include <cJSON.h>
#include <math.h>
#include <string.h>

/* what a key is to the forward */
enum {
	HK_READ,  /* read into cmf.arch by cmf_arch_parse */
	HK_INERT, /* no effect on the forward: metadata, training, caching */
	HK_ONLY,  /* accepted with the one value the forward implements (checked below) */
};

static const struct {
	const char *key;
	int kind;
} keys[] = {
	{ "model_type", HK_ONLY },           { "hidden_size", HK_READ },
	{ "intermediate_size", HK_READ },    { "num_hidden_layers", HK_READ },
	{ "num_attention_heads", HK_READ },  { "num_key_value_heads", HK_READ },
	{ "head_dim", HK_READ },             { "rms_norm_eps", HK_READ },
	{ "rope_theta", HK_READ },           { "vocab_size", HK_READ },
	{ "tie_word_embeddings", HK_READ },  { "bos_token_id", HK_READ },
	{ "eos_token_id", HK_READ },         { "max_position_embeddings", HK_READ },
	{ "attention_bias", HK_READ },       { "hidden_act", HK_READ },
	{ "rope_scaling", HK_READ },         { "rope_parameters", HK_READ },
	{ "mlp_bias", HK_READ },             { "use_sliding_window", HK_READ },
	{ "sliding_window", HK_READ },       { "max_window_layers", HK_READ },
	{ "layer_types", HK_READ },          { "rope_interleaved", HK_ONLY },
	{ "architectures", HK_INERT },       { "torch_dtype", HK_INERT },
	{ "dtype", HK_INERT },               { "transformers_version", HK_INERT },
	{ "_name_or_path", HK_INERT },       { "use_cache", HK_INERT },
	{ "pad_token_id", HK_INERT },        { "initializer_range", HK_INERT },
	{ "attention_dropout", HK_INERT },   { "pretraining_tp", HK_INERT },
	{ "is_llama_config", HK_INERT },     { "transformers.js_config", HK_INERT },
	{ "tokenizer_class", HK_INERT },     { "output_attentions", HK_INERT },
	{ "output_hidden_states", HK_INERT },
};

static int kind_of(const char *key)
{
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		if (!strcmp(keys[i].key, key))
			return keys[i].kind;
	return -1;
}

static int is_false(const cJSON *x)
{
	return !x || cJSON_IsNull(x) || cJSON_IsFalse(x);
}

static int refuse(const char *what, const char *key, const char *value, const char *why)
{
	nv_seterr("%s: %s '%s'%s%s: %s", what, value ? "key" : "unknown key", key,
		  value ? " = " : "", value ? value : "", why);
	return -1;
}

/* a key accepted with one value: the value the forward implements */
static int only(const cJSON *x, const char *what, const cmf_arch *a)
{
	const char *k = x->string;
	static const char *const runs[] = { "llama", "qwen2", "qwen3", "mistral" };

	if (!strcmp(k, "model_type")) {
		for (size_t i = 0; i < sizeof runs / sizeof *runs; i++)
			if (!strcmp(a->arch, runs[i]))
				return 0;
		return refuse(what, k, a->arch, "the forward runs llama, qwen2, qwen3 and mistral");
	}
	return is_false(x) ? 0 : refuse(what, k, "true", "not implemented");
}

int hf_config_check(const char *json, const char *what, const cmf_arch *a, int *untied)
{
	cJSON *o = cJSON_Parse(json), *x;
	int rc = 0;

	*untied = 0;
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return nv_seterr("%s is not a JSON object", what), -1;
	}
	cJSON_ArrayForEach(x, o) {
		int kind = kind_of(x->string);

		if (kind < 0)
			rc = refuse(what, x->string, NULL, "nvgkit does not know what it does to the "
					"forward, and will not ignore it");
		else if (kind == HK_ONLY)
			rc = only(x, what, a);
		if (rc < 0)
			break;
	}
	x = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
	*untied = cJSON_IsFalse(x);
	cJSON_Delete(o);
	return rc;
}
