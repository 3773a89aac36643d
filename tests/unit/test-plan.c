/* test-plan.c - the plan grammar and its strict parser (common/plan.c) */
#include "err.h"
#include "plan.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static int parse(const char *s, plan *p)
{
	return plan_parse(s, strlen(s), p);
}

/* the seed's plan_resolves_layer_tensor_and_default */
static void resolves_layer_tensor_and_default(void)
{
	plan p;

	ok(parse("# a comment\n"
		 "layer 0 1.0\n"
		 "\n"
		 "layer 3 0.56   # inline comment\n"
		 "tensor model.layers.1.mlp.down_proj.weight 0.11\n", &p) == 0,
	   "seed plan parses");
	is_int(p.nlayers, 2, "two layer rules");
	is_int(p.ntensors, 1, "one tensor rule");
	ok(plan_bpw_for(&p, "model.layers.0.mlp.gate_proj.weight", 0, 0.55) == 1.0,
	   "layer rule of layer 0");
	ok(plan_bpw_for(&p, "model.layers.3.self_attn.q_proj.weight", 3, 0.55) == 0.56,
	   "layer rule of layer 3");
	ok(plan_bpw_for(&p, "model.layers.1.mlp.down_proj.weight", 1, 0.55) == 0.11,
	   "the tensor rule wins over the layer rule");
	ok(plan_bpw_for(&p, "model.layers.2.mlp.gate_proj.weight", 2, 0.55) == 0.55,
	   "the default covers the rest");
	ok(!plan_is_empty(&p), "a plan with rules is not empty");
	plan_free(&p);
	plan_init(&p);
	ok(plan_is_empty(&p), "the default plan is empty");

	ok(parse("layer\tbpw\n0\t1.5\n7\t0.1\n", &p) == 0, "the allocator's output parses");
	is_int(p.nlayers, 2, "the header row is skipped");
	ok(plan_bpw_for(&p, "model.layers.0.mlp.gate_proj.weight", 0, 0.55) == 1.5,
	   "bare rule of layer 0");
	ok(plan_bpw_for(&p, "model.layers.7.mlp.gate_proj.weight", 7, 0.55) == 0.1,
	   "bare rule of layer 7");
	plan_free(&p);
}

/* the seed's plan_rejects_bad_rules, and the line number in each message */
static void rejects_bad_rules(void)
{
	static const char *bad[] = {
		"layer 0",
		"layer 0 abc",
		"layer 0 0",
		"layer 0 -1",
		"layer 0 16",
		"layer 0 1.0 extra",
		"layers 0 1.0",
		"tensor model.layers.0.mlp.gate_proj.weight",
		"layer x 1.0",
		"0 abc",
		"0 1.0 extra",
		/* ours besides the seed's */
		"layer 0 nan",
		"layer 0 inf",
		"layer -1 1.0",
		"layer 0x1 1.0",
		"layer 0 1.0x",
		"keep",
		"keep layer",
		"keep layer x",
		"keep layer 1 2",
		"keep tensor",
		"keep tensor a b",
		"keep x",
		"keep 1 2",
		"tensor a 1.0 2.0",
		"layer 99999999999999999999 1.0",
		"0",
	};
	plan p;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[200];

		/* put the bad rule on line 3 after two good ones */
		snprintf(text, sizeof(text), "layer 1 0.5\n# fine\n%s\n", bad[i]);
		ok(parse(text, &p) < 0 && strncmp(nv_err(), "line 3: ", 8) == 0,
		   "rejects '%s' on line 3: %s", bad[i], nv_err());
		ok(plan_is_empty(&p), "a failed parse leaves an empty plan ('%s')", bad[i]);
	}
}

static void messages_name_the_fault(void)
{
	plan p;

	ok(parse("layer 0 abc\n", &p) < 0 && strcmp(nv_err(), "line 1: 'abc' is not a number") == 0,
	   "bad number named: %s", nv_err());
	ok(parse("\n\nlayer 0 16\n", &p) < 0 &&
	   strcmp(nv_err(), "line 3: budget 16 out of range (0 < bpw < 16)") == 0,
	   "budget range named: %s", nv_err());
	ok(parse("layers 0 1\n", &p) < 0 && strstr(nv_err(), "unknown key 'layers'"),
	   "unknown key named: %s", nv_err());
	ok(parse("layer 2 1\nlayer 2 0.5\n", &p) < 0 &&
	   strcmp(nv_err(), "line 2: layer 2 already has a rule on line 1") == 0,
	   "a duplicate layer rule is refused: %s", nv_err());
	ok(parse("2 1\nlayer 2 1\n", &p) < 0, "a bare and a keyed rule for one layer collide");
	ok(parse("tensor a 1\ntensor a 1\n", &p) < 0 && strstr(nv_err(), "line 2: tensor 'a'"),
	   "a duplicate tensor rule is refused: %s", nv_err());
	ok(parse("keep 3\nkeep layer 3\n", &p) < 0, "a duplicate keep is refused");
	ok(plan_parse("layer 0 1\0", 10, &p) < 0 && strstr(nv_err(), "NUL"),
	   "a NUL byte is refused: %s", nv_err());
}

static void keep_rules(void)
{
	plan p;

	ok(parse("keep layer 2\nkeep 5\nkeep tensor model.layers.1.mlp.up_proj.weight\n"
		 "layer 2 0.8\n", &p) == 0, "keep rules parse");
	is_int(p.nkeep_layers, 2, "two kept layers");
	is_int(p.nkeep_tensors, 1, "one kept tensor");
	ok(plan_keeps(&p, "model.layers.2.mlp.up_proj.weight", 2), "keep layer 2");
	ok(plan_keeps(&p, "model.layers.5.self_attn.q_proj.weight", 5), "bare keep 5");
	ok(plan_keeps(&p, "model.layers.1.mlp.up_proj.weight", 1), "keep tensor");
	ok(!plan_keeps(&p, "model.layers.1.mlp.down_proj.weight", 1),
	   "the other tensors of layer 1 are encoded");
	ok(!plan_keeps(&p, "model.layers.0.mlp.up_proj.weight", 0), "layer 0 is encoded");
	plan_free(&p);
}

static void crlf_and_blanks(void)
{
	plan p;

	ok(parse("layer 0 1.0\r\n\t \r\n  tensor  t.weight   0.25  \r\nkeep 4", &p) == 0,
	   "CRLF, blanks and a last line without newline: %s", nv_err());
	ok(plan_bpw_for(&p, "t.weight", 9, 1) == 0.25 && plan_bpw_for(&p, "x", 0, 2) == 1.0 &&
	   plan_keeps(&p, "y", 4), "all three rules read");
	plan_free(&p);
	ok(parse("", &p) == 0 && plan_is_empty(&p), "an empty file is an empty plan");
}

/* plan_write then plan_parse gives the same rules and the same doubles */
static void write_round_trip(void)
{
	tap_rng rng = { 7 };
	plan p, q;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int same = 1;

	/* twenty random budgets, layer and tensor rules */
	f = open_memstream(&text, &len);
	fprintf(f, "keep 9\nkeep tensor k.weight\n");
	for (size_t i = 0; i < 20; i++)
		fprintf(f, "layer %zu %.17g\ntensor t%zu.weight %.17g\n", i,
			1e-3 + 15.9 * rng_unif(&rng), i, 1e-3 + 15.9 * rng_unif(&rng));
	fclose(f);
	ok(plan_parse(text, len, &p) == 0, "random plan parses");
	free(text);
	f = open_memstream(&text, &len);
	ok(plan_write(f, &p) == 0, "plan written");
	fclose(f);
	ok(plan_parse(text, len, &q) == 0, "written plan parses");
	free(text);
	same = p.nlayers == q.nlayers && p.ntensors == q.ntensors &&
	       p.nkeep_layers == q.nkeep_layers && p.nkeep_tensors == q.nkeep_tensors;
	for (size_t i = 0; same && i < p.nlayers; i++)
		same = p.layers[i].layer == q.layers[i].layer && p.layers[i].bpw == q.layers[i].bpw;
	for (size_t i = 0; same && i < p.ntensors; i++)
		same = !strcmp(p.tensors[i].name, q.tensors[i].name) &&
		       p.tensors[i].bpw == q.tensors[i].bpw;
	ok(same, "the written plan reads back bit for bit");
	plan_free(&p);
	plan_free(&q);
}

static void fmt_bpw(void)
{
	char b[40];

	ok(!strcmp(plan_fmt_bpw(0.55, b, sizeof(b)), "0.55"), "0.55 prints short: %s", b);
	ok(!strcmp(plan_fmt_bpw(1.0, b, sizeof(b)), "1"), "1 prints short: %s", b);
	ok(strtod(plan_fmt_bpw(0.1 + 0.2, b, sizeof(b)), NULL) == 0.1 + 0.2,
	   "0.1+0.2 reads back exactly: %s", b);
}

static void check_and_resolve(void)
{
	static const char *names[] = { "model.layers.0.self_attn.q_proj.weight",
				       "model.layers.1.mlp.up_proj.weight" };
	static const size_t layers[] = { 0, 1 };
	static const char list[] = "# name layer shape\n"
				   "model.layers.0.self_attn.q_proj.weight 0 64x64 q\n"
				   "\n"
				   "model.layers.1.mlp.up_proj.weight\t1\n"
				   "model.layers.2.mlp.up_proj.weight 2 172x64\n";
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	plan p;

	ok(parse("layer 1 0.5\ntensor model.layers.0.self_attn.q_proj.weight 2\n", &p) == 0 &&
	   plan_check(&p, names, layers, 2) == 0, "a plan naming present tensors and layers passes");
	plan_free(&p);
	ok(parse("layer 1 0.5\nlayer 4 1\n", &p) == 0 && plan_check(&p, names, layers, 2) < 0 &&
	   !strcmp(nv_err(), "line 2: layer 4 has no tensor to encode"), "an absent layer: %s",
	   nv_err());
	plan_free(&p);
	ok(parse("keep 7\n", &p) == 0 && plan_check(&p, names, layers, 2) < 0,
	   "an absent kept layer");
	plan_free(&p);
	ok(parse("tensor model.layers.0.self_attn.q_proj.weigth 1\n", &p) == 0 &&
	   plan_check(&p, names, layers, 2) < 0 && strstr(nv_err(), "'model.layers.0.self_attn.q_proj.weigth' is not one"),
	   "a misspelt tensor: %s", nv_err());
	plan_free(&p);
	ok(parse("keep tensor model.embed_tokens.weight\n", &p) == 0 &&
	   plan_check(&p, names, layers, 2) < 0, "a kept tensor outside the list");
	plan_free(&p);

	ok(parse("layer 1 0.5\nkeep layer 2\n", &p) == 0, "plan to resolve");
	f = open_memstream(&text, &len);
	ok(plan_resolve(&p, list, strlen(list), 0.55, f) == 0, "resolved: %s", nv_err());
	fclose(f);
	ok(!strcmp(text, "model.layers.0.self_attn.q_proj.weight 0 0.55 64x64 q\n"
			 "model.layers.1.mlp.up_proj.weight 1 0.5\n"
			 "model.layers.2.mlp.up_proj.weight 2 keep 172x64\n"),
	   "default, layer rule and keep, the rest of each line kept");
	free(text);
	f = open_memstream(&text, &len);
	ok(plan_resolve(&p, list, strlen(list), 0, f) < 0 && strstr(nv_err(), "no budget for tensor"),
	   "no default: %s", nv_err());
	fclose(f);
	free(text);
	f = open_memstream(&text, &len);
	ok(plan_resolve(&p, "a x\n", 4, 1, f) < 0 && !strcmp(nv_err(), "tensor list: line 1: layer 'x' of 'a' is not a layer number"),
	   "a bad list line: %s", nv_err());
	fclose(f);
	free(text);
	plan_free(&p);
}

int main(void)
{
	check_and_resolve();
	resolves_layer_tensor_and_default();
	rejects_bad_rules();
	messages_name_the_fault();
	keep_rules();
	crlf_and_blanks();
	write_round_trip();
	fmt_bpw();
	return done_testing();
}
