/*
 * names.h - the tensor naming rules (Hugging Face names, row = output).
 *
 * A body linear is one of the projections the encoder replaces:
 *   model.layers.{l}.self_attn.{q,k,v,o}_proj.weight  -> "q" "k" "v" "o"
 *   model.layers.{l}.mlp.{gate,up,down}_proj.weight   -> "gate" "up" "down"
 *   model.layers.{l}.linear_attn.in_proj_qkv.weight   -> "qkv"
 *   model.layers.{l}.linear_attn.in_proj_z.weight     -> "z"
 *   model.layers.{l}.linear_attn.out_proj.weight      -> "out"
 * (the gated-delta-net block's tiny in_proj_a/b are not: they stay float).
 * The "lead" of a body linear is the tensor whose input Gram it shares:
 * q/k/v -> q, gate/up -> gate, qkv/z -> qkv, o -> o, out -> out, down -> down.
 */
#ifndef NV_NAMES_H
#define NV_NAMES_H

#include <stddef.h>

/* 1 and (*layer, *short_name) when name is a body linear, else 0 */
int nv_body_linear(const char *name, size_t *layer, const char **short_name);

/* the lead of a body linear's short name ("down" for anything unknown) */
const char *nv_input_lead(const char *short_name);

/* the full tensor name of layer l's lead into buf; -1 (reason set) if it does not fit */
int nv_lead_name(size_t l, const char *lead, char *buf, size_t len);

/*
 * every projection matrix of the layer stack, whatever its codec: 2-d,
 * under model.layers., ending in .weight, and the part before .weight
 * contains "proj".  The denominator of the all-layer-projection bpw.
 */
int nv_is_layer_projection(const char *name, size_t ndim);

/* 1 and *layer when name is model.layers.{layer}.…, else 0 */
int nv_layer_of(const char *name, size_t *layer);

#endif
