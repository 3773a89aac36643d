/*
 * forward.h - the model's own forward: a Llama-family decoder run over
 * whole token windows, one layer at a time (DESIGN.md, "The forward engine").
 *
 * The model is a CMF file (cmf.h) with Hugging Face names and layouts:
 *
 *   model.embed_tokens.weight                       (vocab × d)
 *   model.layers.L.input_layernorm.weight           (d)
 *   model.layers.L.self_attn.q_proj.weight          (H·hd × d)    .bias (H·hd)
 *   model.layers.L.self_attn.k_proj.weight          (K·hd × d)    .bias (K·hd)
 *   model.layers.L.self_attn.v_proj.weight          (K·hd × d)    .bias (K·hd)
 *   model.layers.L.self_attn.o_proj.weight          (d × H·hd)    .bias (d)
 *   model.layers.L.self_attn.q_norm.weight          (hd)          qwen3
 *   model.layers.L.self_attn.k_norm.weight          (hd)          qwen3
 *   model.layers.L.post_attention_layernorm.weight  (d)
 *   model.layers.L.mlp.gate_proj.weight             (ff × d)      .bias (ff)
 *   model.layers.L.mlp.up_proj.weight               (ff × d)      .bias (ff)
 *   model.layers.L.mlp.down_proj.weight             (d × ff)      .bias (d)
 *   model.norm.weight                               (d)
 *   lm_head.weight                                  (vocab × d), absent when tied
 *
 * with the biases that cmf.arch says the model has (q, k, v: qwen2, and
 * llama and qwen3 with attention_bias, which adds o; gate, up, down: llama
 * with mlp_bias).  One layer, on the hidden states x (T × d) of a window
 * whose positions restart at 0:
 *
 *   a  = rmsnorm(x)·w_attn                      lead "q"    (T × d)
 *   q,k,v = a·Wqᵀ + bq, a·Wkᵀ + bk, a·Wvᵀ + bv
 *   q_h, k_h = rmsnorm(q_h)·w_qn, rmsnorm(k_h)·w_kn   per head (qwen3)
 *   rotate-half RoPE on q, k (its frequencies scaled by rope_scaling)
 *   o  = softmax(q_h k_gᵀ/√hd + mask) v_g       lead "o"  (T × H·hd)
 *   x += o·Woᵀ + bo
 *   f  = rmsnorm(x)·w_ffn                        lead "gate" (T × d)
 *   m  = act(f·Wgᵀ + bg) ⊙ (f·Wuᵀ + bu)          lead "down" (T × ff)
 *   x += m·Wdᵀ + bd
 *
 * The mask is causal, and with a sliding window of W (from layer
 * window_from on) position t sees positions t−W+1 … t only; act is silu,
 * gelu or gelu's tanh form (hidden_act).  The head: logits =
 * rmsnorm(x)·w_final·Eᵀ (E = lm_head or the tied embeddings).
 * Activations are f32; every product of a window goes through nv_sgemm
 * (fixed tiles: the same bits at any thread count), and the attention's
 * blocks, the norms' rows and the activation's elements go to
 * fw_threads() threads, each computed whole by one of them.  A layer's
 * weights are converted to f32 once (F16, BF16, BLR dequantized) by
 * fw_layer_load(); nothing else of the model is copied,
 * so memory beyond the mapping is one layer's weights, a block of head rows
 * and one window's activations.
 *
 * Calibration windows (DESIGN.md): the first fit tokens are FIT, the next
 * sel tokens SEL; each part is cut into windows of W tokens, windows of
 * fewer than 2 tokens are dropped, and a window of L tokens feeds its first
 * L−1 tokens (the positions that predict a next token).  Evaluation uses
 * the same windows over its tokens.
 */
#ifndef NV_FORWARD_H
#define NV_FORWARD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cmf.h"

/* the tensors of one layer, pointers into the CMF file */
enum { FW_Q, FW_K, FW_V, FW_O, FW_GATE, FW_UP, FW_DOWN, FW_NMAT };

typedef struct {
	const cmf_tensor *w[FW_NMAT];     /* the seven projections */
	const cmf_tensor *bias[FW_NMAT];  /* each projection's bias, or NULL */
	const cmf_tensor *q_norm, *k_norm; /* (hd) qwen3, else NULL */
	const cmf_tensor *attn_norm, *ffn_norm;
} fw_layer_src;

typedef struct {
	const cmf_file *f;     /* borrowed; must outlive the model */
	cmf_arch a;
	size_t d, ff, hd, nh, nkv, vocab; /* widths */
	size_t qdim, kvdim;    /* nh·hd, nkv·hd */
	const cmf_tensor *embed, *head, *final_norm;
	fw_layer_src *layer;   /* a.layers entries */
	float *final_w;        /* (d) final norm as f32 */
	float *head_blk;       /* (FW_HEAD_ROWS × d) head rows converted per block */
	float *head_all;       /* (vocab × d) when the head is a BLR payload */
	double flops_done;     /* sgemm flops of the layer-major passes (fw_eval) */
} fw_model;

/* rows of the head converted and multiplied at a time */
#define FW_HEAD_ROWS 4096

/*
 * check the architecture (llama or qwen2; anything else is refused by
 * name), find every tensor and check its shape; f is borrowed
 */
int fw_open(fw_model *m, const cmf_file *f);
void fw_close(fw_model *m);

/* the canonical name of a layer's projection (FW_Q … FW_DOWN) into buf */
int fw_tensor_name(char *buf, size_t cap, int layer, int which);

/* the rows (outputs) and columns (inputs) of projection which (FW_Q … FW_DOWN) of m */
size_t fw_rows(const fw_model *m, int which);
size_t fw_cols(const fw_model *m, int which);

/* a replacement for one projection of the layer: a BLR payload */
typedef struct {
	const char *name;        /* full tensor name */
	const uint8_t *payload;  /* BLR bytes (blr.h), or NULL: the matrix is allocated, not
				  * filled (the caller writes it, or frees it) */
	size_t len;
} fw_override;

/* one layer's weights as f32 */
typedef struct {
	int index;
	float *w[FW_NMAT];       /* row-major (out × in) as in fw_layer_src */
	float *bias[FW_NMAT];    /* or NULL */
	float *q_norm, *k_norm;  /* (hd) or NULL */
	float *attn_norm, *ffn_norm; /* (d) */
} fw_layer;

/*
 * convert layer l to f32; each override replaces its tensor (a name that
 * is not a projection of layer l, a duplicate, or a payload of another
 * shape is an error naming it)
 */
int fw_layer_load(const fw_model *m, int l, const fw_override *ov, size_t nov, fw_layer *out);
void fw_layer_free(fw_layer *ly);

/* scratch for windows of up to tmax positions */
typedef struct {
	size_t tmax;
	size_t nthr;             /* threads s holds the attention's scores for */
	float *a, *q, *k, *v, *o, *f, *g, *u; /* see forward.c for shapes */
	float *s;                /* (nthr × FW_ATT_ROWS × tmax) fw_attend's work */
	float *cos_t, *sin_t;    /* (tmax × hd/2) RoPE tables */
	double flops;            /* sgemm flops issued so far (2·m·n·k each) */
} fw_scratch;

int fw_scratch_init(fw_scratch *s, const fw_model *m, size_t tmax);

/* the threads a scratch serves: OpenBLAS's count, 1..NV_PAR_MAX */
size_t fw_threads(void);

/* elements of a part below which a loop of the forward stays on the calling thread */
#define FW_PAR_GRAIN 65536

/*
 * The causal attention of q (T × qdim), k and v (T × kvdim) after RoPE into
 * o (T × qdim): for each head h with kv head g = h / (nh/nkv),
 * softmax(q_h k_gᵀ/√hd + mask) v_g.  The query rows go in blocks of
 * FW_ATT_ROWS (fw_att_block: rows r0..r1−1 see the columns c0..r1−1 only,
 * so the products skip what the mask zeroes), each (head, block) on any of
 * up to nthr threads with a block's bits independent of the thread.  work
 * holds nthr × FW_ATT_ROWS × T scores; with keep (nh × T × T) each head's
 * probabilities are left there instead (zero where masked) and work is
 * not used.  fw_attend_flops: the products' flops.
 */
#define FW_ATT_ROWS 128
void fw_att_block(size_t T, size_t window, size_t b, size_t *r0, size_t *r1, size_t *c0);
void fw_attend(const fw_model *m, const float *q, const float *k, const float *v, float *o,
	       size_t T, size_t window, float *work, size_t nthr, float *keep);
double fw_attend_flops(const fw_model *m, size_t T, size_t window);
void fw_scratch_free(fw_scratch *s);

/* the four inputs of a layer's projections after fw_layer_run (into scratch) */
typedef struct {
	const float *q;    /* (T × d)   attention-norm output */
	const float *o;    /* (T × qdim) attention output */
	const float *gate; /* (T × d)   FFN-norm output */
	const float *down; /* (T × ff)  silu(gate)·up */
} fw_leads;

/* x (T × d) = the embeddings of tok[0..T); ids ≥ vocab are an error */
int fw_embed(const fw_model *m, const uint32_t *tok, size_t T, float *x);

/* x (T × d) ← layer ly applied to x, positions 0..T−1; leads may be NULL */
int fw_layer_run(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x, size_t T,
		 fw_leads *leads);

/* the leads of fw_layer_run, the same bits, without down_proj's product: x
 * is left partway (the input plus the attention's output), not the layer's
 * output.  For the Grams of a layer whose output is not wanted */
int fw_layer_leads(const fw_model *m, const fw_layer *ly, fw_scratch *s, float *x, size_t T,
		   fw_leads *leads);

/* logits (T × vocab) of the final states x (T × d); x is left unchanged */
int fw_logits(fw_model *m, fw_scratch *s, const float *x, size_t T, float *logits);

/* row(j, t) for each row t of T, rows of n elements, on fw_threads() threads */
typedef struct fw_rowjob {
	void (*row)(const struct fw_rowjob *j, size_t t);
	const float *x, *w, *dy;
	float *y;
	size_t n;
	double eps;
} fw_rowjob;
void fw_each_row(const fw_rowjob *j, size_t T);

/* y (T × n) = x / sqrt(mean(x²) + eps) · w, or with unit weights when w is NULL (fw_each_row) */
void fw_rmsnorm(const float *x, const float *w, float *y, size_t T, size_t n, double eps);

/* y = act(g) ⊙ u over n elements (y may be g), on fw_threads() threads */
void fw_act_mul(int act, const float *g, const float *u, float *y, size_t n);

/*
 * rotate-half RoPE on the heads of y (T × nh·hd): in each head, the pair
 * (j, j + hd/2) turns by the angle of position t and frequency j (by its
 * negative with inverse: the transpose, for a backward pass)
 */
void fw_rope(const fw_scratch *s, float *y, size_t T, size_t nh, size_t hd, int inverse);

/* the sliding window of layer l (0: none) */
size_t fw_window_of(const fw_model *m, int l);

/*
 * RoPE's inverse frequency of each of the hd/2 pairs, rope_scaling applied
 * (llama3, linear, yarn as transformers computes them, in f64), and the
 * factor that scales cos and sin (yarn's attention factor, else 1)
 */
void fw_rope_freqs(const cmf_arch *a, size_t hd, double *inv, double *scale);

/* the FFN's activation act(g) and its derivative (cmf.h CMF_ACT_*) */
static inline float fw_act(int act, float g)
{
	if (act == CMF_ACT_SILU)
		return g / (1.0f + expf(-g));
	if (act == CMF_ACT_GELU)
		return (float)(0.5 * g * (1.0 + erf(g / sqrt(2.0))));
	return (float)(0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))));
}

static inline float fw_act_grad(int act, float g)
{
	if (act == CMF_ACT_SILU) {
		float s = 1.0f / (1.0f + expf(-g));

		return s * (1.0f + g * (1.0f - s));
	}
	if (act == CMF_ACT_GELU)
		return (float)(0.5 * (1.0 + erf(g / sqrt(2.0))) +
			       g * exp(-0.5 * g * g) * 0.3989422804014327);
	double k = 0.7978845608028654, t = tanh(k * (g + 0.044715 * g * g * g));
	return (float)(0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * g * g));
}

/* the whole head (vocab × d) as f32, fresh; NULL with reason */
float *fw_head_f32(const fw_model *m);

/* log Σ exp(row) and the argmax of a row of n logits */
double fw_logsumexp(const float *row, size_t n, size_t *argmax);

/* KL(p ‖ q) of the softmaxes of two logit rows of n */
double fw_kl(const float *p, double lse_p, const float *q, double lse_q, size_t n);

/*
 * the whole model over one window: logits (T × vocab) of tok[0..T); every
 * layer is converted on the fly (for evaluation and generation)
 */
int fw_window_logits(fw_model *m, fw_scratch *s, const uint32_t *tok, size_t T, float *x,
		     float *logits);

/* calibration windows */
typedef struct {
	size_t start;  /* first token in the token array */
	size_t len;    /* tokens in the window (≥ 2); it feeds len − 1 */
	int sel;       /* 0 FIT, 1 SEL */
} fw_window;

/*
 * cut tokens [0, fit) and [fit, fit+sel) into windows of w tokens; *rows
 * is Σ (len − 1), the positions fed.  NULL with reason on exhaustion.
 */
fw_window *fw_windows(size_t fit, size_t sel, size_t w, size_t *nwin, size_t *rows);

/*
 * the most positions one of the windows w[0..nw) feeds, max (len − 1): what
 * scratch for them needs, never more than the tokens hold however large the
 * window asked for
 */
size_t fw_windows_tmax(const fw_window *w, size_t nw);

/*
 * the final hidden states (before the final norm) of every window's fed
 * positions, windows in order: x (Σ (len − 1) × d).  Layer-major: each
 * layer is converted to f32 once and run on every window.
 */
int fw_final_states(fw_model *m, const uint32_t *tok, const fw_window *w, size_t nw, float *x);

/*
 * the same from layer l0 on: x holds the states entering layer l0 (a
 * conversion's stream, state.h) and becomes the final ones, the bits of
 * fw_final_states where x holds what its layers before l0 gave (l0 equal
 * to the layer count: x as it is)
 */
int fw_final_states_from(fw_model *m, int l0, const fw_window *w, size_t nw, float *x);

/*
 * evaluation over the windows of n tokens (fw_windows(n, 0, window)):
 * mean NLL of each window's tokens 2..L given the ones before; with a
 * base, also the base's NLL, the mean KL(base ‖ model) per position and
 * the fraction of positions whose argmax agree.  Layer-major: every
 * window's states are kept ((n × d) floats a model) so that each layer is
 * converted once; progress(ctx, done, nsteps, rows, total) after each
 * layer pass and the scoring
 */
typedef struct {
	size_t tokens;     /* tokens evaluated */
	size_t predicted;  /* positions scored */
	double nll;        /* mean, nats */
	double base_nll, kl, top1;
	double flops, seconds;
} fw_eval_result;

int fw_eval(fw_model *m, fw_model *base, const uint32_t *tok, size_t n, size_t window,
	    fw_eval_result *r,
	    void (*progress)(void *ctx, size_t done, size_t nwin, size_t rows, size_t total),
	    void *ctx);

/*
 * greedy decoding: extend the prompt tok[0..n) by up to steps tokens
 * (argmax, the whole window recomputed each step, at most window
 * positions); stops after bos or eos.  *out (fresh) holds prompt and
 * continuation, *nout their count.
 */
int fw_generate(fw_model *m, const uint32_t *tok, size_t n, size_t steps, size_t window,
		uint32_t **out, size_t *nout);

#endif
