/* alloc.c - curves in, an error-minimising plan under a bit budget out (see alloc.h) */
#include "alloc.h"
#include "err.h"
#include "fileio.h"
#include "lines.h"
#include "mem.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NFIELDS 6

/* one measurement line */
typedef struct {
	char *name;
	size_t layer;
	double w, bpw, err, spent;
	size_t line;
} rec;

static void free_set_curves(alloc_curve *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].name);
		free(c[i].pts);
	}
	free(c);
}

void alloc_free(alloc_set *s)
{
	free_set_curves(s->c, s->n);
	s->c = NULL;
	s->n = 0;
}

static int parse_num(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return end != s && *end == '\0' && isfinite(*v) ? 0 : -1;
}

static int parse_index(const char *s, double max, double *v)
{
	if (!*s)
		return -1;
	for (const char *c = s; *c; c++)
		if (*c < '0' || *c > '9')
			return -1;
	return parse_num(s, v) == 0 && *v <= max ? 0 : -1;
}

/* one line's five or six fields (nt) into r */
static int parse_rec(char **tok, size_t nt, size_t line, rec *r)
{
	double layer;

	if (parse_index(tok[1], (double)PLAN_MAX_LAYER, &layer) < 0) {
		nv_seterr("line %zu: layer '%s' is not a layer number (0..%ld)", line, tok[1],
			  PLAN_MAX_LAYER);
		return -1;
	}
	if (parse_index(tok[2], 9007199254740992.0, &r->w) < 0 || r->w < 1) {
		nv_seterr("line %zu: weights '%s' is not a count (1..2^53)", line, tok[2]);
		return -1;
	}
	if (parse_num(tok[3], &r->bpw) < 0 || !(r->bpw > 0 && r->bpw < 16)) {
		nv_seterr("line %zu: bpw '%s' is not a budget (0 < bpw < 16)", line, tok[3]);
		return -1;
	}
	if (parse_num(tok[4], &r->err) < 0 || r->err < 0) {
		nv_seterr("line %zu: error '%s' is not a finite number ≥ 0", line, tok[4]);
		return -1;
	}
	r->spent = r->bpw;
	if (nt == 6 && (parse_num(tok[5], &r->spent) < 0 || !(r->spent > 0 && r->spent < 16))) {
		nv_seterr("line %zu: spent '%s' is not a budget (0 < spent < 16)", line, tok[5]);
		return -1;
	}
	r->layer = (size_t)layer;
	r->line = line;
	return (r->name = nv_strdup(tok[0])) ? 0 : -1;
}

static int is_header(char **tok, size_t nt)
{
	return !strcmp(tok[0], "tensor") && !strcmp(tok[1], "layer") &&
	       !strcmp(tok[2], "weights") && !strcmp(tok[3], "bpw") && !strcmp(tok[4], "error") &&
	       (nt == 5 || !strcmp(tok[5], "spent"));
}

/* every measurement line of text into *out (n records) */
static int read_recs(const char *text, size_t len, rec **out, size_t *n)
{
	size_t cap = 0, nt;
	char *tok[NFIELDS];
	nv_lines it;
	int rc;

	*out = NULL;
	*n = 0;
	nv_lines_init(&it, text, len);
	while ((rc = nv_lines_next(&it)) > 0) {
		nt = nv_fields(it.buf, tok, NFIELDS);
		if (nt == 0)
			continue;
		if (nt != 5 && nt != 6) {
			nv_seterr("line %zu: %zu fields, want 5 or 6 (tensor layer weights bpw error "
				  "[spent])", it.line, nt);
			goto fail;
		}
		if (is_header(tok, nt))
			continue;
		if (*n == cap) {
			rec *nr = nv_realloc(*out, cap = cap ? 2 * cap : 64, sizeof(rec));
			if (!nr)
				goto fail;
			*out = nr;
		}
		if (parse_rec(tok, nt, it.line, &(*out)[*n]) < 0)
			goto fail;
		(*n)++;
	}
	if (rc < 0)
		goto fail;
	nv_lines_free(&it);
	return 0;
fail:
	nv_lines_free(&it);
	for (size_t i = 0; i < *n; i++)
		free((*out)[i].name);
	free(*out);
	*out = NULL;
	*n = 0;
	return -1;
}

static int cmp_rec(const void *a, const void *b)
{
	const rec *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->bpw != y->bpw)
		return x->bpw < y->bpw ? -1 : 1;
	return (x->line > y->line) - (x->line < y->line);
}

static int cmp_curve(const void *a, const void *b)
{
	const alloc_curve *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (!x->name || !y->name)
		return 0;
	return strcmp(x->name, y->name);
}

/* two records of one tensor must agree on its layer and weights, never on bpw */
static int check_pair(const rec *a, const rec *b)
{
	const rec *late = a->line > b->line ? a : b, *early = late == a ? b : a;

	if (a->layer != b->layer) {
		nv_seterr("line %zu: tensor '%s' in layer %zu, but in layer %zu on line %zu",
			  late->line, a->name, late->layer, early->layer, early->line);
		return -1;
	}
	if (a->w != b->w) {
		nv_seterr("line %zu: tensor '%s' has %.0f weights, but %.0f on line %zu",
			  late->line, a->name, late->w, early->w, early->line);
		return -1;
	}
	if (a->bpw == b->bpw) {
		nv_seterr("line %zu: tensor '%s' at %g bpw already measured on line %zu",
			  late->line, a->name, a->bpw, early->line);
		return -1;
	}
	return 0;
}

/* sorted records → one curve per tensor */
static int group_recs(rec *r, size_t n, alloc_set *s)
{
	size_t ncur = 0;

	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(r[i].name, r[i - 1].name))
			ncur++;
	s->c = nv_calloc(ncur ? ncur : 1, sizeof(alloc_curve));
	if (!s->c)
		return -1;
	for (size_t i = 0, j; i < n; i = j) {
		alloc_curve *c = &s->c[s->n];

		for (j = i + 1; j < n && !strcmp(r[j].name, r[i].name); j++)
			if (check_pair(&r[j - 1], &r[j]) < 0)
				return -1;
		if (!(c->pts = nv_malloc(j - i, sizeof(alloc_point))))
			return -1;
		c->name = r[i].name;
		r[i].name = NULL;
		c->layer = r[i].layer;
		c->weights = r[i].w;
		for (size_t k = i; k < j; k++)
			c->pts[c->npts++] = (alloc_point){ r[k].bpw, r[k].spent, r[k].err };
		s->n++;
	}
	qsort(s->c, s->n, sizeof(*s->c), cmp_curve);
	return 0;
}

int alloc_parse(const char *text, size_t len, alloc_set *s)
{
	rec *r;
	size_t n;
	int rc;

	s->c = NULL;
	s->n = 0;
	if (read_recs(text, len, &r, &n) < 0)
		return -1;
	if (n == 0) {
		free(r);
		nv_seterr("no curve points");
		return -1;
	}
	qsort(r, n, sizeof(*r), cmp_rec);
	rc = group_recs(r, n, s);
	for (size_t i = 0; i < n; i++)
		free(r[i].name);
	free(r);
	if (rc < 0)
		alloc_free(s);
	return rc;
}

int alloc_load(const char *path, alloc_set *s)
{
	uint8_t *buf;
	size_t len;
	int rc;

	s->c = NULL;
	s->n = 0;
	if (nv_read_file(path, &buf, &len) < 0)
		return -1;
	rc = alloc_parse((const char *)buf, len, s);
	free(buf);
	return rc;
}

int alloc_bound(alloc_set *s, double lo, double hi)
{
	for (size_t i = 0; i < s->n; i++) {
		alloc_curve *c = &s->c[i];
		size_t k = 0;

		for (size_t j = 0; j < c->npts; j++)
			if (c->pts[j].bpw >= lo && c->pts[j].bpw <= hi)
				c->pts[k++] = c->pts[j];
		if (k == 0) {
			nv_seterr("tensor '%s' has no point within [%g, %g] bpw", c->name, lo, hi);
			return -1;
		}
		c->npts = k;
	}
	return 0;
}

/* the index of bpw in c's points, or -1 */
static long find_bpw(const alloc_curve *c, double bpw)
{
	for (size_t j = 0; j < c->npts; j++)
		if (c->pts[j].bpw == bpw)
			return (long)j;
	return -1;
}

/* curves [i, j) of one layer summed at the budgets they all have */
static int layer_curve(const alloc_curve *c, size_t i, size_t j, alloc_curve *out)
{
	out->layer = c[i].layer;
	out->name = NULL;
	out->npts = 0;
	if (!(out->pts = nv_malloc(c[i].npts, sizeof(alloc_point))))
		return -1;
	for (size_t k = i; k < j; k++)
		out->weights += c[k].weights;
	for (size_t p = 0; p < c[i].npts; p++) {
		double b = c[i].pts[p].bpw, e = 0, bits = 0;
		size_t k;

		for (k = i; k < j; k++) {
			long q = find_bpw(&c[k], b);
			if (q < 0)
				break;
			e += c[k].pts[q].err;
			bits += c[k].weights * c[k].pts[q].spent;
		}
		if (k == j)
			out->pts[out->npts++] = (alloc_point){ b, bits / out->weights, e };
	}
	if (out->npts == 0) {
		nv_seterr("layer %zu: its %zu tensors share no bpw value ('%s' and '%s' differ)",
			  c[i].layer, j - i, c[i].name, c[j - 1].name);
		return -1;
	}
	return 0;
}

int alloc_by_layer(const alloc_set *in, alloc_set *out)
{
	out->n = 0;
	if (!(out->c = nv_calloc(in->n ? in->n : 1, sizeof(alloc_curve))))
		return -1;
	for (size_t i = 0, j; i < in->n; i = j) {
		for (j = i + 1; j < in->n && in->c[j].layer == in->c[i].layer; j++)
			;
		if (layer_curve(in->c, i, j, &out->c[out->n++]) < 0) {
			alloc_free(out);
			return -1;
		}
	}
	return 0;
}

/* ---- the multiple-choice knapsack ---- */

/* one group's options as costs (bits) and errors, ascending cost (then
 * error); ord maps an option back to its curve point */
typedef struct {
	const double *cost, *err; /* (n) */
	const size_t *ord;        /* (n) */
	size_t n;
	size_t start;             /* the cheapest option (least error among equals) */
} grp;

/* one step along a group's lower convex hull */
typedef struct {
	size_t g, from, to;
	double dc, de;            /* dc > 0, de < 0 */
} step;

typedef struct {
	const grp *g;
	size_t ng;
	step *st;                 /* all hull steps, most error saved per bit first */
	size_t nst;
	size_t *cur, *best;       /* (ng) choices */
	double best_err;
	size_t nodes, limit;
	int stopped;
} mckp;

static int cmp_step(const void *a, const void *b)
{
	const step *x = a, *y = b;
	double ex = -x->de / x->dc, ey = -y->de / y->dc;

	if (ex != ey)
		return ex > ey ? -1 : 1;
	if (x->g != y->g)
		return x->g < y->g ? -1 : 1;
	return (x->from > y->from) - (x->from < y->from);
}

/* the lower convex hull from the cheapest option towards lower error:
 * appends its steps to st; slopes strictly flatten along it */
static size_t hull_steps(const grp *g, size_t gi, step *st, size_t *h)
{
	size_t nh = 0, ns = 0;

	h[nh++] = g->start;
	for (size_t j = g->start + 1; j < g->n; j++) {
		if (g->cost[j] <= g->cost[h[nh - 1]] || g->err[j] >= g->err[h[nh - 1]])
			continue;
		/* pop while the last point lies on or above the chord to j */
		while (nh >= 2) {
			size_t a = h[nh - 2], b = h[nh - 1];
			double cross = (g->cost[b] - g->cost[a]) * (g->err[j] - g->err[a]) -
				       (g->err[b] - g->err[a]) * (g->cost[j] - g->cost[a]);
			if (cross > 0)
				break;
			nh--;
		}
		h[nh++] = j;
	}
	for (size_t k = 1; k < nh; k++)
		st[ns++] = (step){ gi, h[k - 1], h[k], g->cost[h[k]] - g->cost[h[k - 1]],
				   g->err[h[k]] - g->err[h[k - 1]] };
	return ns;
}

/* the relaxation over groups [d, ng) with r bits: a lower bound on their
 * summed error (INFINITY when even their cheapest options do not fit) */
static double relax(const mckp *k, size_t d, double r)
{
	double v = 0, slack = r;

	for (size_t i = d; i < k->ng; i++) {
		slack -= k->g[i].cost[k->g[i].start];
		v += k->g[i].err[k->g[i].start];
	}
	if (slack < 0)
		return INFINITY;
	for (size_t s = 0; s < k->nst; s++) {
		const step *t = &k->st[s];
		if (t->g < d)
			continue;
		if (t->dc <= slack) {
			slack -= t->dc;
			v += t->de;
		} else {
			v += t->de * (slack / t->dc);
			break;
		}
	}
	return v;
}

/* the greedy integer solution along the hulls: the first incumbent */
static void greedy(mckp *k, double r)
{
	unsigned char *blocked = calloc(k->ng, 1);
	double e = 0;

	for (size_t i = 0; i < k->ng; i++) {
		k->best[i] = k->g[i].start;
		r -= k->g[i].cost[k->g[i].start];
		e += k->g[i].err[k->g[i].start];
	}
	for (size_t s = 0; s < k->nst; s++) {
		const step *t = &k->st[s];
		if (blocked && blocked[t->g])
			continue;
		if (t->dc <= r && k->best[t->g] == t->from) {
			r -= t->dc;
			e += t->de;
			k->best[t->g] = t->to;
		} else if (blocked) {
			blocked[t->g] = 1;
		} else {
			break;
		}
	}
	free(blocked);
	k->best_err = e;
}

static void search(mckp *k, size_t d, double r, double e)
{
	const grp *g;

	if (d == k->ng) {
		if (e < k->best_err) {
			k->best_err = e;
			memcpy(k->best, k->cur, k->ng * sizeof(*k->cur));
		}
		return;
	}
	g = &k->g[d];
	/* the most accurate options first: they lead to good plans soonest */
	for (size_t jj = g->n; jj-- > 0;) {
		size_t j = jj;
		double b;

		if (g->cost[j] > r)
			continue;
		b = e + g->err[j] + relax(k, d + 1, r - g->cost[j]);
		if (!(b < k->best_err - 1e-12 * fabs(k->best_err)))
			continue;
		if (++k->nodes > k->limit) {
			k->stopped = 1;
			return;
		}
		k->cur[d] = j;
		search(k, d + 1, r - g->cost[j], e + g->err[j]);
		if (k->stopped)
			return;
	}
}

/* solve over ng groups with budget bits; choice (ng) out */
static int mckp_solve(const grp *g, size_t ng, double budget, size_t limit, size_t *choice,
		      double *err, double *bound, int *optimal, size_t *nodes)
{
	mckp k = { .g = g, .ng = ng, .limit = limit };
	size_t total = 0, *h;

	for (size_t i = 0; i < ng; i++)
		total += g[i].n;
	k.st = nv_malloc(total ? total : 1, sizeof(step));
	k.cur = nv_malloc(ng ? ng : 1, sizeof(size_t));
	h = nv_malloc(total ? total : 1, sizeof(size_t));
	k.best = choice;
	if (!k.st || !k.cur || !h) {
		free(k.st);
		free(k.cur);
		free(h);
		return -1;
	}
	for (size_t i = 0; i < ng; i++)
		k.nst += hull_steps(&g[i], i, k.st + k.nst, h);
	free(h);
	qsort(k.st, k.nst, sizeof(step), cmp_step);
	*bound = relax(&k, 0, budget);
	greedy(&k, budget);
	search(&k, 0, budget, 0);
	*err = k.best_err;
	*optimal = !k.stopped;
	*nodes = k.nodes;
	free(k.st);
	free(k.cur);
	return 0;
}

/* a curve point as an option: ascending spent bits, then error, then bpw */
typedef struct {
	double spent, err, bpw;
	size_t j;
} opt;

static int cmp_opt(const void *a, const void *b)
{
	const opt *x = a, *y = b;

	if (x->spent != y->spent)
		return x->spent < y->spent ? -1 : 1;
	if (x->err != y->err)
		return x->err < y->err ? -1 : 1;
	return (x->bpw > y->bpw) - (x->bpw < y->bpw);
}

/* curve c as a group: cost, err and ord in one allocation each (freed by free_groups) */
static int group_of(const alloc_curve *c, grp *g)
{
	double *cost = nv_malloc(2 * c->npts, sizeof(double));
	size_t *ord = nv_malloc(c->npts, sizeof(size_t));
	opt *o = nv_malloc(c->npts, sizeof(opt));

	if (!cost || !ord || !o) {
		free(cost);
		free(ord);
		free(o);
		return -1;
	}
	for (size_t j = 0; j < c->npts; j++)
		o[j] = (opt){ c->pts[j].spent, c->pts[j].err, c->pts[j].bpw, j };
	qsort(o, c->npts, sizeof(opt), cmp_opt);
	for (size_t j = 0; j < c->npts; j++) {
		cost[j] = c->weights * o[j].spent;
		cost[c->npts + j] = o[j].err;
		ord[j] = o[j].j;
	}
	free(o);
	*g = (grp){ cost, cost + c->npts, ord, c->npts, 0 };
	return 0;
}

static void free_groups(grp *g, size_t ng)
{
	for (size_t i = 0; i < ng; i++) {
		free((void *)g[i].cost);
		free((void *)g[i].ord);
	}
	free(g);
}

/* options of the curves not kept, as groups over bits; idx maps back */
static grp *make_groups(const alloc_set *s, const unsigned char *kept, size_t *ng, size_t **idx)
{
	grp *g = nv_calloc(s->n ? s->n : 1, sizeof(grp));
	size_t n = 0;

	*idx = nv_malloc(s->n ? s->n : 1, sizeof(size_t));
	if (!g || !*idx)
		goto fail;
	for (size_t i = 0; i < s->n; i++) {
		if (kept[i])
			continue;
		if (group_of(&s->c[i], &g[n]) < 0)
			goto fail;
		(*idx)[n++] = i;
	}
	*ng = n;
	return g;
fail:
	if (g)
		free_groups(g, n);
	free(*idx);
	*idx = NULL;
	return NULL;
}

/* the least bits the groups can be stored in */
static double floor_bits(const grp *g, size_t ng)
{
	double b = 0;

	for (size_t i = 0; i < ng; i++)
		b += g[i].cost[g[i].start];
	return b;
}

/* one solve with the curves flagged in kept held exact */
static int solve_kept(const alloc_set *s, const alloc_opts *o, const unsigned char *kept,
		      alloc_result *r)
{
	size_t ng, *idx, *ch;
	double budget, kept_w = 0, least;
	grp *g = make_groups(s, kept, &ng, &idx);
	int rc = -1;

	if (!g)
		return -1;
	for (size_t i = 0; i < s->n; i++)
		if (kept[i])
			kept_w += s->c[i].weights;
	/* a relative slack of 1e-12 absorbs the rounding of Σ w·b against b·Σ w */
	budget = (o->bpw * r->weights - ALLOC_KEEP_BPW * kept_w) * (1 + 1e-12);
	least = floor_bits(g, ng);
	if (least > budget) {
		nv_seterr("target %g bpw is below the floor of the curves: at least %.6g bpw%s",
			  o->bpw, (least + ALLOC_KEEP_BPW * kept_w) / r->weights,
			  kept_w > 0 ? " with the kept layers at 16" : "");
		goto out;
	}
	if (!(ch = nv_malloc(ng ? ng : 1, sizeof(size_t))))
		goto out;
	if (mckp_solve(g, ng, budget, o->node_limit ? o->node_limit : ALLOC_NODES, ch, &r->err,
		       &r->bound, &r->optimal, &r->nodes) == 0) {
		r->bits = ALLOC_KEEP_BPW * kept_w;
		for (size_t i = 0; i < s->n; i++)
			r->choice[i] = ALLOC_KEPT;
		for (size_t i = 0; i < ng; i++) {
			r->choice[idx[i]] = g[i].ord[ch[i]];
			r->bits += g[i].cost[ch[i]];
		}
		rc = 0;
	}
	free(ch);
out:
	free(idx);
	free_groups(g, ng);
	return rc;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

/* the keep layers with the largest summed error in r; flags their curves */
static int pick_kept(const alloc_set *s, alloc_result *r, size_t keep, unsigned char *kept)
{
	double *bpw, *err;
	size_t nl;

	if (alloc_per_layer(s, r, &bpw, &err, &nl) < 0)
		return -1;
	if (!(r->kept = nv_malloc(keep, sizeof(size_t)))) {
		free(bpw);
		free(err);
		return -1;
	}
	for (r->nkept = 0; r->nkept < keep; r->nkept++) {
		size_t top = SIZE_MAX;
		for (size_t l = 0; l < nl; l++)
			if (!isnan(err[l]) && (top == SIZE_MAX || err[l] > err[top]))
				top = l;
		r->kept[r->nkept] = top;
		err[top] = NAN;
	}
	qsort(r->kept, r->nkept, sizeof(size_t), cmp_size);
	for (size_t i = 0; i < s->n; i++)
		for (size_t k = 0; k < r->nkept; k++)
			if (s->c[i].layer == r->kept[k])
				kept[i] = 1;
	free(bpw);
	free(err);
	return 0;
}

static size_t count_layers(const alloc_set *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		if (i == 0 || s->c[i].layer != s->c[i - 1].layer)
			n++;
	return n;
}

int alloc_solve(const alloc_set *s, const alloc_opts *o, alloc_result *r)
{
	unsigned char *kept;
	size_t nlayers = count_layers(s);
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (o->keep > nlayers || (o->keep > 0 && o->keep == nlayers)) {
		nv_seterr("cannot keep %zu layers: the curves cover %zu, and at least one must be "
			  "encoded", o->keep, nlayers);
		return -1;
	}
	r->choice = nv_malloc(s->n ? s->n : 1, sizeof(size_t));
	kept = nv_calloc(s->n ? s->n : 1, 1);
	if (!r->choice || !kept)
		goto out;
	for (size_t i = 0; i < s->n; i++)
		r->weights += s->c[i].weights;
	if (solve_kept(s, o, kept, r) < 0)
		goto out;
	if (o->keep > 0) {
		if (pick_kept(s, r, o->keep, kept) < 0 || solve_kept(s, o, kept, r) < 0) {
			nv_preerr("keeping %zu layers exact", o->keep);
			goto out;
		}
	}
	rc = 0;
out:
	free(kept);
	if (rc < 0)
		alloc_result_free(r);
	return rc;
}

void alloc_result_free(alloc_result *r)
{
	free(r->choice);
	free(r->kept);
	r->choice = r->kept = NULL;
	r->nkept = 0;
}

int alloc_per_layer(const alloc_set *s, const alloc_result *r, double **bpw, double **err,
		    size_t *nl)
{
	double *w;

	*nl = s->n ? s->c[s->n - 1].layer + 1 : 0;
	*bpw = nv_malloc(*nl ? *nl : 1, sizeof(double));
	*err = nv_malloc(*nl ? *nl : 1, sizeof(double));
	w = nv_calloc(*nl ? *nl : 1, sizeof(double));
	if (!*bpw || !*err || !w) {
		free(*bpw);
		free(*err);
		free(w);
		return -1;
	}
	for (size_t l = 0; l < *nl; l++)
		(*bpw)[l] = (*err)[l] = NAN;
	for (size_t i = 0; i < s->n; i++) {
		const alloc_curve *c = &s->c[i];
		size_t l = c->layer;
		int k = r->choice[i] == ALLOC_KEPT;

		if (w[l] == 0)
			(*bpw)[l] = (*err)[l] = 0;
		(*bpw)[l] += c->weights * (k ? ALLOC_KEEP_BPW : c->pts[r->choice[i]].spent);
		(*err)[l] += k ? 0 : c->pts[r->choice[i]].err;
		w[l] += c->weights;
	}
	for (size_t l = 0; l < *nl; l++)
		if (w[l] > 0)
			(*bpw)[l] /= w[l];
	free(w);
	return 0;
}

int alloc_write_plan(FILE *f, const alloc_set *s, const alloc_result *r, double target)
{
	char b[40];
	int layers = s->n > 0 && s->c[0].name == NULL;

	fprintf(f, "# plan-alloc: target %s bpw over %.0f weights; plan %.6f bpw, error %.6g "
		"(%s)\n", plan_fmt_bpw(target, b, sizeof(b)), r->weights, r->bits / r->weights,
		r->err, r->optimal ? "optimal" : "best found, search stopped");
	for (size_t k = 0; k < r->nkept; k++)
		fprintf(f, "keep layer %zu\n", r->kept[k]);
	if (layers)
		fprintf(f, "layer bpw\n");
	for (size_t i = 0; i < s->n; i++) {
		const alloc_curve *c = &s->c[i];

		if (r->choice[i] == ALLOC_KEPT)
			continue;
		plan_fmt_bpw(c->pts[r->choice[i]].bpw, b, sizeof(b));
		if (layers)
			fprintf(f, "%zu %s\n", c->layer, b);
		else
			fprintf(f, "tensor %s %s\n", c->name, b);
	}
	if (ferror(f)) {
		nv_seterr("write failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* the value axis of a panel: 0, half and the top, labelled at the left */
static void svg_axis(FILE *f, double x0, double y0, double h, double vmax)
{
	for (int i = 0; i <= 2; i++)
		fprintf(f, "<text x=\"%g\" y=\"%.2f\" font-size=\"10\" text-anchor=\"end\">%.3g</text>\n",
			x0 - 4, y0 + h - h * i / 2.0 + 3, vmax * i / 2.0);
}

/*
 * one panel of bars: values v (nl) at y0..y0+h; the scale reaches past the
 * largest value and past ref, so the dashed reference is always on the chart
 */
static void svg_panel(FILE *f, const double *v, size_t nl, double y0, double h, double vmax,
		      const char *title, const char *fill, double ref)
{
	const double x0 = 60, wd = 560, bw = nl ? wd / (double)nl : wd;

	fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"13\">%s (max %.4g)</text>\n", x0,
		y0 - 6, title, vmax);
	vmax = 1.1 * (ref > vmax ? ref : vmax);
	svg_axis(f, x0, y0, h, vmax);
	fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
		"stroke=\"#888\"/>\n", x0, y0, wd, h);
	for (size_t l = 0; l < nl; l++) {
		double bh = isnan(v[l]) || vmax <= 0 ? 0 : h * v[l] / vmax;
		fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
			"<title>layer %zu: %.6g</title></rect>\n", x0 + bw * (double)l + 1,
			y0 + h - bh, bw > 2 ? bw - 2 : bw, bh, fill, l, v[l]);
	}
	if (ref > 0 && vmax > 0)
		fprintf(f, "<line x1=\"%g\" x2=\"%g\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#c00\" "
			"stroke-dasharray=\"4 3\"><title>target %.6g</title></line>\n", x0, x0 + wd,
			y0 + h - h * ref / vmax, y0 + h - h * ref / vmax, ref);
	fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"11\">layer 0</text>\n", x0, y0 + h + 14);
	fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"end\">layer %zu</text>\n",
		x0 + wd, y0 + h + 14, nl ? nl - 1 : 0);
}

static double max_of(const double *v, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		if (!isnan(v[i]) && v[i] > m)
			m = v[i];
	return m;
}

int alloc_write_svg(FILE *f, const alloc_set *s, const alloc_result *r, double target)
{
	double *bpw, *err;
	size_t nl;

	if (alloc_per_layer(s, r, &bpw, &err, &nl) < 0)
		return -1;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"420\" "
		"viewBox=\"0 0 640 420\" font-family=\"sans-serif\">\n"
		"<rect width=\"640\" height=\"420\" fill=\"white\"/>\n");
	svg_panel(f, bpw, nl, 30, 150, max_of(bpw, nl), "bits per weight per layer (dashed: target)",
		  "#3a6ea5", target);
	svg_panel(f, err, nl, 230, 150, max_of(err, nl), "summed error per layer", "#d08a2e", 0);
	fprintf(f, "</svg>\n");
	free(bpw);
	free(err);
	if (ferror(f)) {
		nv_seterr("write failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

double alloc_ceiling(const alloc_set *s)
{
	double bits = 0, w = 0;

	for (size_t i = 0; i < s->n; i++) {
		const alloc_curve *c = &s->c[i];

		double top = 0;

		for (size_t j = 0; j < c->npts; j++)
			top = fmax(top, c->pts[j].spent);
		bits += c->weights * top;
		w += c->weights;
	}
	return w > 0 ? bits / w : 0;
}
