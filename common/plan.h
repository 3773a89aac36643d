/*
 * plan.h - a bit-budget plan (man/man5/plan.5): the global --bpw is the
 * default, a plan refines it per layer and per tensor, and keeps some layers
 * or tensors out of the encoder altogether.
 *
 * One rule a line, '#' starts a comment, fields separated by blanks:
 *
 *   layer <n> <bpw>        every tensor of layer n
 *   tensor <name> <bpw>    one tensor (wins over its layer's rule)
 *   <n> <bpw>              a bare layer rule (the allocator's own output)
 *   keep layer <n>         layer n stays in its source dtype
 *   keep tensor <name>     one tensor stays in its source dtype
 *   keep <n>               the same as keep layer <n>
 *   layer bpw | tensor bpw a header row, skipped
 *
 * Budgets lie in the open interval (0, 16).  An unknown key, a bad number,
 * a budget out of range, a missing or extra field, and a second rule for
 * the same layer or tensor are errors naming the line: a silently ignored
 * rule would spend the wrong bytes.  (The seed lets a later duplicate
 * override an earlier one; we refuse it instead, as every reader here
 * refuses duplicates.)
 */
#ifndef NV_PLAN_H
#define NV_PLAN_H

#include <stddef.h>
#include <stdio.h>

/* the largest layer number a plan may name */
#define PLAN_MAX_LAYER 1000000L

typedef struct {
	size_t layer;
	double bpw;
	size_t line;   /* where the rule was written (for messages) */
} plan_layer_rule;

typedef struct {
	char *name;
	double bpw;
	size_t line;
} plan_tensor_rule;

typedef struct {
	plan_layer_rule *layers;   /* (nlayers) ascending by layer */
	size_t nlayers;
	plan_tensor_rule *tensors; /* (ntensors) ascending by name */
	size_t ntensors;
	plan_layer_rule *keep_layers;  /* (nkeep_layers) ascending; bpw 0 */
	size_t nkeep_layers;
	plan_tensor_rule *keep_tensors; /* (nkeep_tensors) ascending; bpw 0 */
	size_t nkeep_tensors;
} plan;

/* an empty plan: every tensor gets the default, nothing is kept */
void plan_init(plan *p);
void plan_free(plan *p);

/* parse len bytes of plan text into p (initialised here); -1 with
 * "line N: reason" on failure, p left empty */
int plan_parse(const char *text, size_t len, plan *p);

/* read and parse a plan file ("-" = stdin); the reason is the parser's */
int plan_load(const char *path, plan *p);

/* the budget of a tensor: its own rule, else its layer's, else dflt */
double plan_bpw_for(const plan *p, const char *name, size_t layer, double dflt);

/* 1 when the tensor stays in its source dtype (a keep tensor or keep layer rule) */
int plan_keeps(const plan *p, const char *name, size_t layer);

/* 1 when the plan has no rule at all */
int plan_is_empty(const plan *p);

/*
 * every rule of p must name one of the n tensors (names[i] in layer
 * layers[i]) or one of their layers; -1 naming the rule's line and what it
 * names otherwise.  A plan for a model is checked against its body linears:
 * a rule that matches nothing is a typo, not a no-op.
 */
int plan_check(const plan *p, const char *const *names, const size_t *layers, size_t n);

/*
 * resolve a tensor list against p: text holds lines "name layer [more…]"
 * ('#' comments and blank lines skipped; layer a decimal number); each is
 * written to out as "name layer B [more…]" with B the tensor's budget
 * (dflt when no rule covers it; dflt ≤ 0 means there is none, and such a
 * tensor is an error) or "keep".  The plan is checked against the list
 * first (plan_check).  -1 with "line N: reason" (of the list) or the
 * plan's reason on failure.
 */
int plan_resolve(const plan *p, const char *text, size_t len, double dflt, FILE *out);

/* the shortest decimal form of v that reads back as exactly v (buf ≥ 32) */
const char *plan_fmt_bpw(double v, char *buf, size_t len);

/* write p back in the plan grammar (one rule a line, canonical order) */
int plan_write(FILE *f, const plan *p);

#endif
