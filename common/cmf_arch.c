/*
 * cmf_arch.c - cmf.arch <-> JSON in Hugging Face's config.json keys (cmf.h),
 * every value checked and every combination the forward cannot run refused
 */
#include "cmf.h"
#include "err.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void cmf_arch_init(cmf_arch *a)
{
	memset(a, 0, sizeof(*a));
	a->bos = a->eos = -1;
}

static const char *const act_names[] = { "silu", "gelu", "gelu_pytorch_tanh" };
static const char *const rope_names[] = { "default", "linear", "llama3", "yarn" };

static int is(const cmf_arch *a, const char *name)
{
	return strcmp(a->arch, name) == 0;
}

/* Qwen2 and Qwen3 switch their window with use_sliding_window; Mistral's is on when set */
static int qwen(const cmf_arch *a)
{
	return is(a, "qwen2") || is(a, "qwen3");
}

static cJSON *add_int(cJSON *o, const char *k, long v)
{
	return cJSON_AddNumberToObject(o, k, (double)v);
}

static void rope_object(cJSON *o, const cmf_rope *r)
{
	cJSON *x;

	if (r->type == CMF_ROPE_NONE || !(x = cJSON_AddObjectToObject(o, "rope_scaling")))
		return;
	cJSON_AddStringToObject(x, "rope_type", rope_names[r->type]);
	cJSON_AddNumberToObject(x, "factor", r->factor);
	if (r->type == CMF_ROPE_LLAMA3) {
		cJSON_AddNumberToObject(x, "low_freq_factor", r->low_freq);
		cJSON_AddNumberToObject(x, "high_freq_factor", r->high_freq);
	}
	if (r->type == CMF_ROPE_YARN) {
		cJSON_AddNumberToObject(x, "beta_fast", r->beta_fast);
		cJSON_AddNumberToObject(x, "beta_slow", r->beta_slow);
		cJSON_AddNumberToObject(x, "attention_factor", r->attn_factor);
	}
	if (r->orig_max_pos > 0)
		add_int(x, "original_max_position_embeddings", r->orig_max_pos);
}

/* the sliding window in the arch's own keys */
static void window_keys(cJSON *o, const cmf_arch *a)
{
	if (qwen(a)) {
		cJSON_AddBoolToObject(o, "use_sliding_window", a->window > 0);
		if (a->window > 0) {
			add_int(o, "sliding_window", a->window);
			add_int(o, "max_window_layers", a->window_from);
		}
	} else if (is(a, "mistral")) {
		if (a->window > 0)
			add_int(o, "sliding_window", a->window);
		else
			cJSON_AddNullToObject(o, "sliding_window");
	}
}

static cJSON *arch_object(const cmf_arch *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "model_type", a->arch);
	add_int(o, "hidden_size", a->hidden);
	add_int(o, "intermediate_size", a->intermediate);
	add_int(o, "num_hidden_layers", a->layers);
	add_int(o, "num_attention_heads", a->heads);
	add_int(o, "num_key_value_heads", a->kv_heads);
	add_int(o, "head_dim", a->head_dim);
	cJSON_AddNumberToObject(o, "rms_norm_eps", a->rms_eps);
	cJSON_AddNumberToObject(o, "rope_theta", a->rope_theta);
	add_int(o, "vocab_size", a->vocab);
	cJSON_AddBoolToObject(o, "tie_word_embeddings", a->tied);
	if (a->bos >= 0)
		add_int(o, "bos_token_id", a->bos);
	if (a->eos >= 0)
		add_int(o, "eos_token_id", a->eos);
	if (a->max_pos > 0)
		add_int(o, "max_position_embeddings", a->max_pos);
	if (!is(a, "mistral"))
		cJSON_AddBoolToObject(o, "attention_bias", a->qkv_bias);
	if (is(a, "llama"))
		cJSON_AddBoolToObject(o, "mlp_bias", a->mlp_bias);
	cJSON_AddStringToObject(o, "hidden_act", act_names[a->act]);
	rope_object(o, &a->rope);
	window_keys(o, a);
	return o;
}

char *cmf_arch_json(const cmf_arch *a)
{
	cJSON *o = arch_object(a);
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing JSON");
	return s;
}

static const char *class_name(const cmf_arch *a)
{
	return is(a, "qwen2") ? "Qwen2ForCausalLM" : is(a, "qwen3") ? "Qwen3ForCausalLM"
	       : is(a, "mistral") ? "MistralForCausalLM" : "LlamaForCausalLM";
}

char *cmf_arch_config_json(const cmf_arch *a, cmf_dtype dtype)
{
	cJSON *o = arch_object(a), *arr;
	char *s;

	if (!o)
		return NULL;
	arr = cJSON_AddArrayToObject(o, "architectures");
	cJSON_AddItemToArray(arr, cJSON_CreateString(class_name(a)));
	cJSON_AddStringToObject(o, "torch_dtype",
				dtype == CMF_F16 ? "float16" : dtype == CMF_BF16 ? "bfloat16" : "float32");
	if (a->max_pos <= 0)
		add_int(o, "max_position_embeddings", 2048);
	s = cJSON_Print(o);
	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing JSON");
	return s;
}

/* ---------------------------------------------------------------- parsing */

/* an integer key in [lo, hi]; absent → def (or an error when required) */
static int get_int(const cJSON *o, const char *what, const char *key, int required, long def,
		   long lo, long hi, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0)
		x = cJSON_GetArrayItem(x, 0); /* eos lists: the first is the model's */
	if (!x || cJSON_IsNull(x)) {
		if (required)
			return nv_seterr("%s: missing key '%s'", what, key), -1;
		*out = (int)def;
		return 0;
	}
	if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
	    x->valuedouble < lo || x->valuedouble > hi)
		return nv_seterr("%s: key '%s' = %s is not an integer in [%ld, %ld]", what, key,
				 cJSON_IsNumber(x) ? "a number" : "not a number", lo, hi), -1;
	*out = (int)x->valuedouble;
	return 0;
}

/* a number key in (lo, hi); absent → def, or an error when def is NAN */
static int get_double(const cJSON *o, const char *what, const char *key, double def,
		      double lo, double hi, double *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!x || cJSON_IsNull(x)) {
		if (isnan(def))
			return nv_seterr("%s: missing key '%s'", what, key), -1;
		*out = def;
		return 0;
	}
	if (!cJSON_IsNumber(x) || !(x->valuedouble > lo) || !(x->valuedouble < hi))
		return nv_seterr("%s: key '%s' is not a number in (%g, %g)", what, key, lo, hi), -1;
	*out = x->valuedouble;
	return 0;
}

static int get_bool(const cJSON *o, const char *what, const char *key, int def, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!x || cJSON_IsNull(x)) {
		*out = def;
		return 0;
	}
	if (!cJSON_IsBool(x))
		return nv_seterr("%s: key '%s' is not true or false", what, key), -1;
	*out = cJSON_IsTrue(x);
	return 0;
}

/* hidden_act: the activations the forward implements, by their transformers names */
static int act_field(const cJSON *o, const char *what, cmf_arch *a)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
	const char *v = cJSON_IsString(x) ? x->valuestring : NULL;

	a->act = CMF_ACT_SILU;
	if (!x || cJSON_IsNull(x))
		return 0;
	if (v && (!strcmp(v, "silu") || !strcmp(v, "swish")))
		return 0;
	if (v && !strcmp(v, "gelu"))
		return a->act = CMF_ACT_GELU, 0;
	if (v && (!strcmp(v, "gelu_pytorch_tanh") || !strcmp(v, "gelu_new")))
		return a->act = CMF_ACT_GELU_TANH, 0;
	return nv_seterr("%s: key 'hidden_act' = '%.40s': the forward implements silu, gelu and "
			 "gelu_pytorch_tanh", what, v ? v : "(not a string)"), -1;
}

/* the keys a rope_scaling object of a type may hold (beyond rope_type/type) */
static int rope_key_ok(int type, const char *k, int params)
{
	static const char *const keys[][5] = {
		[CMF_ROPE_NONE] = { NULL },
		[CMF_ROPE_LINEAR] = { "factor", NULL },
		[CMF_ROPE_LLAMA3] = { "factor", "low_freq_factor", "high_freq_factor",
				      "original_max_position_embeddings", NULL },
		[CMF_ROPE_YARN] = { "factor", "attention_factor", "beta_fast", "beta_slow",
				    "original_max_position_embeddings" },
	};

	if (!strcmp(k, "rope_type") || !strcmp(k, "type") || (params && !strcmp(k, "rope_theta")))
		return 1;
	for (int i = 0; i < 5 && keys[type][i]; i++)
		if (!strcmp(k, keys[type][i]))
			return 1;
	return 0;
}

static int rope_type(const cJSON *r, const char *what, const char *key, int *type)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "rope_type");

	if (!t)
		t = cJSON_GetObjectItemCaseSensitive(r, "type");
	for (int i = 0; cJSON_IsString(t) && i < (int)(sizeof rope_names / sizeof *rope_names); i++)
		if (!strcmp(t->valuestring, rope_names[i]))
			return *type = i, 0;
	return nv_seterr("%s: key '%s' = '%.40s': the forward implements the RoPE types default, "
			 "linear, llama3 and yarn", what, key,
			 cJSON_IsString(t) ? t->valuestring : "(no rope_type)"), -1;
}

/* the numbers of a type, each in its range */
static int rope_numbers(const cJSON *r, const char *w, cmf_rope *p)
{
	const double nan_ = NAN, big = 1e6;

	if (p->type == CMF_ROPE_NONE)
		return 0;
	if (get_double(r, w, "factor", nan_, 0, big, &p->factor) < 0)
		return -1;
	if (p->type == CMF_ROPE_LLAMA3 &&
	    (get_double(r, w, "low_freq_factor", nan_, 0, big, &p->low_freq) < 0 ||
	     get_double(r, w, "high_freq_factor", nan_, p->low_freq, big, &p->high_freq) < 0 ||
	     get_int(r, w, "original_max_position_embeddings", 1, 0, 1, 1L << 30,
		     &p->orig_max_pos) < 0))
		return -1;
	if (p->type == CMF_ROPE_YARN &&
	    (get_double(r, w, "beta_fast", 32, 0, big, &p->beta_fast) < 0 ||
	     get_double(r, w, "beta_slow", 1, 0, p->beta_fast, &p->beta_slow) < 0 ||
	     get_double(r, w, "attention_factor", 0.1 * log(p->factor) + 1.0, 0, big,
			&p->attn_factor) < 0 ||
	     get_int(r, w, "original_max_position_embeddings", 0, 0, 1, 1L << 30,
		     &p->orig_max_pos) < 0))
		return -1;
	return 0;
}

/*
 * rope_scaling, or transformers 5's rope_parameters (params: its rope_theta
 * is the theta when the top level has none): the type, every key known
 */
static int rope_field(const cJSON *o, const cJSON *r, const char *what, int params,
		      cmf_arch *a)
{
	const char *key = params ? "rope_parameters" : "rope_scaling";
	const cJSON *x;
	char w[200];

	if (!r || cJSON_IsNull(r))
		return 0;
	if (!cJSON_IsObject(r))
		return nv_seterr("%s: key '%s' is not an object", what, key), -1;
	if (rope_type(r, what, key, &a->rope.type) < 0)
		return -1;
	cJSON_ArrayForEach(x, r) {
		if (!rope_key_ok(a->rope.type, x->string, params))
			return nv_seterr("%s: key '%s.%s': not a key of the %s RoPE that the forward "
					 "implements", what, key, x->string, rope_names[a->rope.type]), -1;
	}
	snprintf(w, sizeof w, "%s: %s", what, key);
	if (rope_numbers(r, w, &a->rope) < 0)
		return -1;
	x = cJSON_GetObjectItemCaseSensitive(r, "rope_theta");
	if (params && x && !cJSON_GetObjectItemCaseSensitive(o, "rope_theta"))
		return get_double(r, w, "rope_theta", 0, 0, 1e12, &a->rope_theta);
	return 0;
}

static int rope_fields(const cJSON *o, const char *what, cmf_arch *a)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters");

	memset(&a->rope, 0, sizeof a->rope);
	if (s && !cJSON_IsNull(s) && p && !cJSON_IsNull(p))
		return nv_seterr("%s: both 'rope_scaling' and 'rope_parameters' are set: which one "
				 "transformers reads depends on its version", what), -1;
	if (rope_field(o, s, what, 0, a) < 0 || rope_field(o, p, what, 1, a) < 0)
		return -1;
	if (a->rope.type == CMF_ROPE_YARN && !a->rope.orig_max_pos && a->max_pos <= 0)
		return nv_seterr("%s: yarn RoPE needs original_max_position_embeddings or "
				 "max_position_embeddings", what), -1;
	return 0;
}

/* the biases each architecture has, by its keys */
static int bias_fields(const cJSON *o, const char *what, cmf_arch *a)
{
	int ab = 0;

	if (get_bool(o, what, "attention_bias", is(a, "qwen2"), &ab) < 0 ||
	    get_bool(o, what, "mlp_bias", 0, &a->mlp_bias) < 0)
		return -1;
	if (is(a, "mistral") && ab)
		return nv_seterr("%s: key 'attention_bias' = true: Mistral has no biases", what), -1;
	if (a->mlp_bias && !is(a, "llama"))
		return nv_seterr("%s: key 'mlp_bias' = true: only llama has MLP biases", what), -1;
	a->qkv_bias = ab;
	a->o_bias = ab && !is(a, "qwen2"); /* Qwen2's o_proj has none */
	a->qk_norm = is(a, "qwen3");
	return 0;
}

/* layer_types, when given, must say what the window keys say */
static int layer_types(const cJSON *o, const char *what, const cmf_arch *a)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "layer_types"), *x;
	int l = 0;

	if (!t || cJSON_IsNull(t))
		return 0;
	if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != a->layers)
		return nv_seterr("%s: key 'layer_types' is not a list of %d strings", what,
				 a->layers), -1;
	cJSON_ArrayForEach(x, t) {
		const char *want = a->window > 0 && l >= a->window_from ? "sliding_attention"
									 : "full_attention";

		if (!cJSON_IsString(x) || strcmp(x->valuestring, want))
			return nv_seterr("%s: key 'layer_types' = '%.40s' at layer %d, the window keys "
					 "say '%s'", what, cJSON_IsString(x) ? x->valuestring : "?",
					 l, want), -1;
		l++;
	}
	return 0;
}

/* the sliding window: Mistral's on every layer; Qwen's from max_window_layers, when used */
static int window_fields(const cJSON *o, const char *what, cmf_arch *a)
{
	const long big = 1L << 30;
	int use = 0;

	a->window = a->window_from = 0;
	if (get_bool(o, what, "use_sliding_window", 0, &use) < 0)
		return -1;
	if (use && !qwen(a))
		return nv_seterr("%s: key 'use_sliding_window' = true: only Qwen2 and Qwen3 switch "
				 "a window with it", what), -1;
	if (is(a, "mistral") || use) {
		/* MistralConfig's window is 4096 when the key is absent (null: none) */
		long def = is(a, "mistral") && !cJSON_GetObjectItemCaseSensitive(o, "sliding_window")
				   ? 4096 : 0;

		if (get_int(o, what, "sliding_window", use, def, 1, big, &a->window) < 0 ||
		    (use && get_int(o, what, "max_window_layers", 0, 28, 0, big, &a->window_from) < 0))
			return -1;
	}
	if (a->window_from >= a->layers)
		a->window = a->window_from = 0;
	return layer_types(o, what, a);
}

static int name_field(const cJSON *o, const char *what, cmf_arch *a)
{
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");

	if (!cJSON_IsString(mt))
		return nv_seterr("%s: missing key 'model_type'", what), -1;
	if (strlen(mt->valuestring) >= sizeof(a->arch) || !mt->valuestring[0])
		return nv_seterr("%s: key 'model_type' = '%.40s' is empty or too long", what,
				 mt->valuestring), -1;
	strcpy(a->arch, mt->valuestring);
	return 0;
}

/* transformers' own: Qwen3Config's head_dim is 128 when absent, the others' hidden / heads */
static long head_dim_default(const cmf_arch *a)
{
	return is(a, "qwen3") ? 128 : a->hidden / a->heads;
}

static int arch_fields(const cJSON *o, const char *what, cmf_arch *a)
{
	const long big = 1L << 30;

	if (name_field(o, what, a) < 0 ||
	    get_int(o, what, "hidden_size", 1, 0, 1, big, &a->hidden) < 0 ||
	    get_int(o, what, "intermediate_size", 1, 0, 1, big, &a->intermediate) < 0 ||
	    get_int(o, what, "num_hidden_layers", 1, 0, 1, 1 << 16, &a->layers) < 0 ||
	    get_int(o, what, "num_attention_heads", 1, 0, 1, 1 << 16, &a->heads) < 0 ||
	    get_int(o, what, "vocab_size", 1, 0, 1, big, &a->vocab) < 0)
		return -1;
	if (get_int(o, what, "num_key_value_heads", 0, a->heads, 1, a->heads, &a->kv_heads) < 0 ||
	    get_int(o, what, "head_dim", 0, head_dim_default(a), 1, big, &a->head_dim) < 0 ||
	    get_double(o, what, "rms_norm_eps", 1e-6, 0, 1, &a->rms_eps) < 0 ||
	    get_double(o, what, "rope_theta", 10000.0, 0, 1e12, &a->rope_theta) < 0 ||
	    get_bool(o, what, "tie_word_embeddings", 0, &a->tied) < 0 ||
	    get_int(o, what, "bos_token_id", 0, -1, -1, a->vocab - 1, &a->bos) < 0 ||
	    get_int(o, what, "eos_token_id", 0, -1, -1, a->vocab - 1, &a->eos) < 0 ||
	    get_int(o, what, "max_position_embeddings", 0, 0, 0, big, &a->max_pos) < 0)
		return -1;
	if (bias_fields(o, what, a) < 0 || act_field(o, what, a) < 0 ||
	    rope_fields(o, what, a) < 0 || window_fields(o, what, a) < 0)
		return -1;
	if (a->heads % a->kv_heads != 0)
		return nv_seterr("%s: num_key_value_heads = %d does not divide num_attention_heads = %d",
				 what, a->kv_heads, a->heads), -1;
	return 0;
}

int cmf_arch_parse(const char *json, const char *what, cmf_arch *a)
{
	cJSON *o = cJSON_Parse(json);
	int rc;

	cmf_arch_init(a);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return nv_seterr("%s is not a JSON object", what), -1;
	}
	rc = arch_fields(o, what, a);
	cJSON_Delete(o);
	return rc;
}
