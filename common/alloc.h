/*
 * alloc.h - the bit-budget allocator behind plan-alloc(1).
 *
 * Input: per-tensor error curves, one measurement a line
 *
 *   <tensor> <layer> <weights> <bpw> <error> [<spent>]   ('#' comments, blank
 *                                        lines, and a header row allowed)
 *
 * where bpw is the budget the tensor was encoded at (the request a plan
 * would make), error what that encoding cost (any additive measure: the
 * allocator minimises the sum) and spent the bits per weight it stored (the
 * rank rule rounds a request down, or up to its floor; bpw when absent):
 * the budget is counted in spent bits, so a plan spends what it says.  A group is one tensor, or one layer whose
 * tensors are summed at the budgets they share.  Choosing one point per
 * group so that Σ weights·spent ≤ target·Σ weights with the least Σ error is
 * a multiple-choice knapsack:
 *
 *   - the Lagrangian (convex-hull) relaxation: every group's points reduced
 *     to their lower convex hull, hull steps taken in order of error saved
 *     per bit while they fit, the last one fractionally; its value is a
 *     lower bound on every plan's error, and an exact solution whenever
 *     the budget falls on a hull step (always so for convex curves whose
 *     steps exhaust the budget);
 *   - branch and bound on that relaxation, from the greedy hull solution,
 *     closes the remaining gap: when the search finishes within its node
 *     limit the plan is the exact optimum over all points (convex or not),
 *     and the result says so; otherwise it is the best plan found and the
 *     bound says how far from optimal it can be.
 *
 * keep: the allocator first solves without keeping, then keeps exact the
 * N layers with the largest summed error in that solution, charges 16 bits
 * per weight for them, and solves again for the rest.
 */
#ifndef NV_ALLOC_H
#define NV_ALLOC_H

#include <stddef.h>
#include <stdio.h>

#include "plan.h"

/* the cost of a kept weight */
#define ALLOC_KEEP_BPW 16.0

/* a choice that marks a group as kept */
#define ALLOC_KEPT ((size_t)-1)

typedef struct {
	double bpw, spent, err; /* the request, the bits per weight it stored, the error */
} alloc_point;

typedef struct {
	char *name;        /* the tensor; NULL for a layer group */
	size_t layer;
	double weights;    /* an integer count, ≤ 2^53 */
	alloc_point *pts;  /* (npts) ascending bpw, distinct */
	size_t npts;
} alloc_curve;

typedef struct {
	alloc_curve *c;    /* (n) ascending by layer, then name */
	size_t n;
} alloc_set;

/* parse curve text; -1 with "line N: reason" on failure (s left empty) */
int alloc_parse(const char *text, size_t len, alloc_set *s);
int alloc_load(const char *path, alloc_set *s);
void alloc_free(alloc_set *s);

/* drop points outside [lo, hi]; -1 naming a curve left with none */
int alloc_bound(alloc_set *s, double lo, double hi);

/* one group per layer: its tensors' errors summed at the budgets they all
 * have, their weights summed; -1 naming a layer with no common budget */
int alloc_by_layer(const alloc_set *in, alloc_set *out);

typedef struct {
	double bpw;         /* target average over every weight of the set */
	size_t keep;        /* layers to keep exact */
	size_t node_limit;  /* branch-and-bound nodes; 0 = ALLOC_NODES */
} alloc_opts;

#define ALLOC_NODES 200000

typedef struct {
	size_t *choice;     /* (n) index into the curve's pts, or ALLOC_KEPT */
	double bits;        /* Σ weights·spent, kept weights at 16 */
	double weights;     /* Σ weights */
	double err;         /* Σ error of the encoded groups */
	double bound;       /* a lower bound on err for the same kept layers */
	int optimal;        /* 1: the search proved err optimal */
	size_t nodes;       /* branch-and-bound nodes visited */
	size_t *kept;       /* (nkept) kept layers, ascending */
	size_t nkept;
} alloc_result;

/* solve; -1 when the budget is below the least the curves allow (the
 * reason names that least budget) or keep asks for more layers than exist */
int alloc_solve(const alloc_set *s, const alloc_opts *o, alloc_result *r);
void alloc_result_free(alloc_result *r);

/* the largest average the curves can spend: every curve at its dearest point */
double alloc_ceiling(const alloc_set *s);

/* the plan: layer groups as "layer bpw" rows, tensor groups as tensor
 * rules, kept layers as keep rules; a comment line first */
int alloc_write_plan(FILE *f, const alloc_set *s, const alloc_result *r, double target);

/* per layer: the weighted mean spent bits of its groups (16 when kept) and its
 * summed error; arrays of *nl entries for layers 0..*nl-1 (a layer absent
 * from the curves gets NaN) */
int alloc_per_layer(const alloc_set *s, const alloc_result *r, double **bpw, double **err,
		    size_t *nl);

/* an SVG drawing of alloc_per_layer: bpw and error per layer */
int alloc_write_svg(FILE *f, const alloc_set *s, const alloc_result *r, double target);

#endif
