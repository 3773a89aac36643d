/*
 * cmf.h - CMF, the model container: a safetensors file with conventions
 * (man/man5/cmf.5, DESIGN.md "CMF").
 *
 * A file is opened by mapping it; every tensor is validated (known dtype,
 * shape × element size = its byte range, ranges inside the data buffer, no
 * overlaps, no holes, no duplicate names) before anything points into it.
 * Tensor names and layouts are Hugging Face's (row = output).
 */
#ifndef NV_CMF_H
#define NV_CMF_H

#include <stddef.h>
#include <stdint.h>

#include "fileio.h"

typedef enum { CMF_F32 = 0, CMF_F16, CMF_BF16, CMF_U8 } cmf_dtype;

#define CMF_MAX_DIMS 4

typedef struct {
	char *name;
	cmf_dtype dtype;
	size_t ndim;
	size_t shape[CMF_MAX_DIMS];
	const uint8_t *data; /* into the mapping */
	size_t nbytes;
	int blr;             /* codec "blr": data is a BLR payload (dtype U8, 1-d) */
	size_t rows, cols;   /* the logical matrix: a BLR payload's m × n; else shape[0] × rest (1-d: 1 × n) */
} cmf_tensor;

/* hidden_act: silu, gelu (erf), gelu_pytorch_tanh (and its alias gelu_new) */
enum { CMF_ACT_SILU, CMF_ACT_GELU, CMF_ACT_GELU_TANH };

/* rope_scaling's types: none, linear, llama3 (Llama 3.1), yarn */
enum { CMF_ROPE_NONE, CMF_ROPE_LINEAR, CMF_ROPE_LLAMA3, CMF_ROPE_YARN };

typedef struct {
	int type;             /* CMF_ROPE_* */
	double factor;        /* all but none */
	double low_freq, high_freq; /* llama3's low_freq_factor, high_freq_factor */
	double beta_fast, beta_slow; /* yarn (32, 1 when absent) */
	double attn_factor;   /* yarn: cos and sin scaled by it (0.1·ln factor + 1 when absent) */
	int orig_max_pos;     /* llama3, yarn: original_max_position_embeddings (0: absent) */
} cmf_rope;

typedef struct {
	char arch[32];        /* "llama", "qwen2", "qwen3", "mistral" */
	int hidden;           /* hidden size */
	int intermediate;     /* FFN size */
	int layers;
	int heads, kv_heads, head_dim;
	double rms_eps, rope_theta;
	int vocab;
	int tied;             /* output head = token embeddings */
	int bos, eos;         /* -1 when unknown */
	int qkv_bias;         /* q/k/v biases (Qwen2; llama and Qwen3 attention_bias) */
	int o_bias;           /* o_proj bias (llama and Qwen3 attention_bias) */
	int mlp_bias;         /* gate/up/down biases (llama mlp_bias) */
	int qk_norm;          /* Qwen3: RMSNorm of each head of q and k before RoPE */
	int act;              /* CMF_ACT_*: the FFN's activation (hidden_act) */
	int window;           /* sliding window: a position sees the last `window` (0: all) */
	int window_from;      /* the first layer with the sliding window (Qwen max_window_layers) */
	cmf_rope rope;        /* RoPE scaling (rope_scaling) */
	int max_pos;          /* context length (max_position_embeddings), 0 when unknown */
} cmf_arch;

typedef struct {
	nv_map map;
	size_t ntensors;
	cmf_tensor *t;        /* in file order */
	size_t nmeta;
	char **meta_key, **meta_val; /* __metadata__ strings */
	cmf_arch arch;
	int has_arch;         /* cmf.arch present and valid */
} cmf_file;

/* map and validate path; -1 with reason (naming field and value) on failure */
int cmf_open(const char *path, cmf_file *f);
void cmf_close(cmf_file *f);

/* the tensor called name, or NULL */
const cmf_tensor *cmf_find(const cmf_file *f, const char *name);

/* a __metadata__ value, or NULL */
const char *cmf_meta(const cmf_file *f, const char *key);

/* the tensor as f32 (rows × cols): F16/BF16 converted, BLR dequantized;
 * -1 with reason naming the weight when one is not finite (a CRC-valid
 * file can hold a NaN: every reader of weights gets them checked here) */
int cmf_tensor_f32(const cmf_tensor *t, float *out);

/* the tensor as f32 in a fresh buffer (rows × cols) */
float *cmf_tensor_f32_alloc(const cmf_tensor *t);
/*
 * n f32 values as F16 or BF16 little-endian bytes (2n), rounded to nearest
 * even; a finite value beyond the dtype's range is an error naming the
 * tensor and the element, never an infinity
 */
int cmf_put_half(const char *name, cmf_dtype dt, const float *w, size_t n, uint8_t *out);

/* bytes per element of a dtype */
size_t cmf_dtype_size(cmf_dtype d);
const char *cmf_dtype_name(cmf_dtype d);

/*
 * writing: collect tensors (borrowed pointers, or owned copies), metadata,
 * then cmf_writer_commit() lays out the header and data, computes the CRCs
 * into cmf.crc32, sets format/cmf.version, and renames into place.
 */
typedef struct cmf_writer cmf_writer;

cmf_writer *cmf_writer_new(void);
/* add a tensor; data is borrowed until commit (copy = 1 takes a copy) */
int cmf_writer_add(cmf_writer *w, const char *name, cmf_dtype dtype, size_t ndim,
		   const size_t *shape, const void *data, size_t nbytes, int copy);
/* add a BLR payload for a tensor (dtype U8, shape [bytes], codec blr) */
int cmf_writer_add_blr(cmf_writer *w, const char *name, const void *payload, size_t nbytes,
		       int copy);
int cmf_writer_set_meta(cmf_writer *w, const char *key, const char *value);
int cmf_writer_set_arch(cmf_writer *w, const cmf_arch *a);
int cmf_writer_commit(cmf_writer *w, const char *path);
void cmf_writer_free(cmf_writer *w);

/* ---- extensions (cmf.c) ---- */

/* the dtype called name ("F32", "F16", "BF16", "U8"); -1 when unknown */
int cmf_dtype_parse(const char *name);

/*
 * cmf.arch <-> JSON.  The keys are Hugging Face's config.json names
 * (model_type, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps,
 * rope_theta, vocab_size, tie_word_embeddings, bos_token_id, eos_token_id,
 * max_position_embeddings, attention_bias), so a config.json parses too.
 * cmf_arch_parse: -1 with reason naming the key and value; `what` names the
 * source in messages ("cmf.arch", "config.json").
 */
char *cmf_arch_json(const cmf_arch *a);
int cmf_arch_parse(const char *json, const char *what, cmf_arch *a);
/* a Hugging Face config.json for a (architectures, model_type, torch_dtype = dtype) */
char *cmf_arch_config_json(const cmf_arch *a, cmf_dtype dtype);
/* an arch with every field unknown (ints 0, bos/eos -1) */
void cmf_arch_init(cmf_arch *a);

/* recompute every tensor's CRC-32 against cmf.crc32; -1 naming the first bad tensor */
int cmf_verify(const cmf_file *f);

/* the stored CRC-32 of a tensor from cmf.crc32; -1 when absent */
int cmf_stored_crc(const cmf_file *f, const char *name, uint32_t *crc);

/* copy every __metadata__ entry of f except those the writer generates
 * (format, cmf.version, cmf.crc32, cmf.codec) */
int cmf_writer_copy_meta(cmf_writer *w, const cmf_file *f);

/*
 * a lazy tensor: fill(ctx, out) writes its nbytes (dtype size × shape)
 * little-endian bytes when the writer needs them, twice (once for the CRC
 * in the header, once for the data), so that only one tensor is in memory
 * at a time; it must give the same bytes both times.  ctx is borrowed.
 */
typedef int (*cmf_fill_fn)(void *ctx, void *out);
int cmf_writer_add_lazy(cmf_writer *w, const char *name, cmf_dtype dtype, size_t ndim,
			const size_t *shape, cmf_fill_fn fill, void *ctx);

/* write a plain Hugging Face safetensors file: __metadata__ is only
 * {"format": "pt"} plus keys set with cmf_writer_set_meta, no cmf.* keys */
void cmf_writer_set_plain(cmf_writer *w);

#endif
