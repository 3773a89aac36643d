/* test-names.c - the naming rules, after the seed's body_linears_cover_attention_ffn_and_gdn */
#include "names.h"
#include "tap.h"

#include <string.h>

static void body_is(const char *name, int want_match, size_t want_l, const char *want_short)
{
	size_t l = 999;
	const char *s = "";
	int m = nv_body_linear(name, &l, &s);

	if (want_match)
		ok(m && l == want_l && strcmp(s, want_short) == 0, "body_linear(%s) = (%zu, %s)",
		   name, want_l, want_short);
	else
		ok(!m, "body_linear(%s) is none", name);
}

int main(void)
{
	static const char *const shorts[] = { "q", "k", "v", "o", "gate", "up", "down",
					      "qkv", "z", "out" };
	char buf[128];
	size_t l;

	body_is("model.layers.3.self_attn.k_proj.weight", 1, 3, "k");
	body_is("model.layers.0.mlp.down_proj.weight", 1, 0, "down");
	body_is("model.layers.2.linear_attn.in_proj_qkv.weight", 1, 2, "qkv");
	body_is("model.layers.2.linear_attn.in_proj_z.weight", 1, 2, "z");
	body_is("model.layers.2.linear_attn.out_proj.weight", 1, 2, "out");
	body_is("model.layers.2.linear_attn.in_proj_a.weight", 0, 0, NULL);
	body_is("model.embed_tokens.weight", 0, 0, NULL);
	body_is("model.layers.1.mlp.experts.3.up_proj.weight", 0, 0, NULL);
	body_is("model.layers.x.mlp.up_proj.weight", 0, 0, NULL);
	body_is("model.layers.12.mlp.up_proj.bias", 0, 0, NULL);
	ok(strcmp(nv_input_lead("z"), "qkv") == 0, "input_lead(z) = qkv");
	ok(strcmp(nv_input_lead("v"), "q") == 0, "input_lead(v) = q");
	ok(strcmp(nv_input_lead("up"), "gate") == 0, "input_lead(up) = gate");
	for (size_t i = 0; i < sizeof(shorts) / sizeof(shorts[0]); i++) {
		const char *lead = nv_input_lead(shorts[i]), *s = NULL;
		int m = nv_lead_name(5, lead, buf, sizeof(buf)) == 0 && nv_body_linear(buf, &l, &s);

		ok(m && l == 5 && strcmp(nv_input_lead(s), lead) == 0,
		   "lead of %s round-trips through its name %s", shorts[i], buf);
		nv_lead_name(2, lead, buf, sizeof(buf));
		ok(nv_is_layer_projection(buf, 2), "lead %s is a layer projection", buf);
	}
	ok(nv_is_layer_projection("model.layers.0.linear_attn.in_proj_a.weight", 2),
	   "in_proj_a is a layer projection");
	ok(nv_is_layer_projection("model.layers.0.linear_attn.in_proj_qkv.weight", 2),
	   "in_proj_qkv is a layer projection");
	ok(nv_is_layer_projection("model.layers.3.self_attn.q_proj.weight", 2),
	   "q_proj is a layer projection");
	ok(!nv_is_layer_projection("model.layers.3.self_attn.q_norm.weight", 2),
	   "q_norm is not");
	ok(!nv_is_layer_projection("model.layers.0.linear_attn.conv1d.weight", 2), "conv1d is not");
	ok(!nv_is_layer_projection("lm_head.weight", 2), "lm_head is not");
	ok(!nv_is_layer_projection("model.layers.3.self_attn.q_proj.weight", 1),
	   "a 1-d tensor is not");
	ok(nv_lead_name(123456, "gate", buf, 20) < 0, "a lead name that does not fit is an error");
	ok(nv_layer_of("model.layers.17.input_layernorm.weight", &l) && l == 17,
	   "layer_of finds 17");
	ok(!nv_layer_of("model.norm.weight", &l), "layer_of: model.norm is no layer");
	return done_testing();
}
