/* names.c - tensor naming rules (see names.h) */
#include "names.h"
#include "err.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const layer_prefix = "model.layers.";

int nv_layer_of(const char *name, size_t *layer)
{
	const char *p;
	size_t l = 0;

	if (strncmp(name, layer_prefix, strlen(layer_prefix)) != 0)
		return 0;
	p = name + strlen(layer_prefix);
	if (*p < '0' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (l > (SIZE_MAX - 9) / 10)
			return 0;
		l = 10 * l + (size_t)(*p - '0');
	}
	if (*p != '.')
		return 0;
	*layer = l;
	return 1;
}

static const struct {
	const char *tail, *short_name;
} body_tails[] = {
	{ "self_attn.q_proj.weight", "q" },
	{ "self_attn.k_proj.weight", "k" },
	{ "self_attn.v_proj.weight", "v" },
	{ "self_attn.o_proj.weight", "o" },
	{ "mlp.gate_proj.weight", "gate" },
	{ "mlp.up_proj.weight", "up" },
	{ "mlp.down_proj.weight", "down" },
	{ "linear_attn.in_proj_qkv.weight", "qkv" },
	{ "linear_attn.in_proj_z.weight", "z" },
	{ "linear_attn.out_proj.weight", "out" },
};

int nv_body_linear(const char *name, size_t *layer, const char **short_name)
{
	const char *tail;
	size_t l;

	if (!nv_layer_of(name, &l))
		return 0;
	tail = strchr(name + strlen(layer_prefix), '.') + 1;
	for (size_t i = 0; i < sizeof(body_tails) / sizeof(body_tails[0]); i++) {
		if (strcmp(tail, body_tails[i].tail) == 0) {
			*layer = l;
			*short_name = body_tails[i].short_name;
			return 1;
		}
	}
	return 0;
}

const char *nv_input_lead(const char *s)
{
	if (!strcmp(s, "q") || !strcmp(s, "k") || !strcmp(s, "v"))
		return "q";
	if (!strcmp(s, "o"))
		return "o";
	if (!strcmp(s, "gate") || !strcmp(s, "up"))
		return "gate";
	if (!strcmp(s, "qkv") || !strcmp(s, "z"))
		return "qkv";
	if (!strcmp(s, "out"))
		return "out";
	return "down";
}

int nv_lead_name(size_t l, const char *lead, char *buf, size_t len)
{
	const char *tail = "mlp.down_proj.weight";
	int n;

	if (!strcmp(lead, "q"))
		tail = "self_attn.q_proj.weight";
	else if (!strcmp(lead, "o"))
		tail = "self_attn.o_proj.weight";
	else if (!strcmp(lead, "gate"))
		tail = "mlp.gate_proj.weight";
	else if (!strcmp(lead, "qkv"))
		tail = "linear_attn.in_proj_qkv.weight";
	else if (!strcmp(lead, "out"))
		tail = "linear_attn.out_proj.weight";
	n = snprintf(buf, len, "%s%zu.%s", layer_prefix, l, tail);
	if (n < 0 || (size_t)n >= len) {
		nv_seterr("tensor name for layer %zu, lead '%s' does not fit in %zu bytes", l, lead,
			  len);
		return -1;
	}
	return 0;
}

int nv_is_layer_projection(const char *name, size_t ndim)
{
	size_t n = strlen(name), suf = strlen(".weight");
	const char *last, *end;

	if (ndim != 2 || strncmp(name, layer_prefix, strlen(layer_prefix)) != 0)
		return 0;
	if (n < suf || strcmp(name + n - suf, ".weight") != 0)
		return 0;
	end = name + n - suf;
	/* the last dot-separated component before .weight */
	for (last = end; last > name && last[-1] != '.'; last--)
		;
	for (const char *p = last; p + 4 <= end; p++)
		if (memcmp(p, "proj", 4) == 0)
			return 1;
	return 0;
}
