/* gram.c - Gram accumulation, filter mode and the layer capture (see gram.h) */
#include "gram.h"
#include "err.h"
#include "le.h"
#include "linalg.h"
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const gr_lead_name[GR_NLEAD] = { "q", "o", "gate", "down" };

int gr_init(gr_acc *a, size_t n)
{
	memset(a, 0, sizeof *a);
	a->n = n;
	a->g = nv_calloc(n, n * sizeof(double));
	a->buf = nv_malloc(GR_BLOCK, n * sizeof(double));
	if (!a->g || !a->buf) {
		gr_free(a);
		return -1;
	}
	return 0;
}

int gr_init_cross(gr_acc *a, size_t n)
{
	if (gr_init(a, n) < 0)
		return -1;
	a->cross = 1;
	if (!(a->buf2 = nv_malloc(GR_BLOCK, n * sizeof(double)))) {
		gr_free(a);
		return -1;
	}
	return 0;
}

void gr_free(gr_acc *a)
{
	free(a->g);
	free(a->buf);
	free(a->buf2);
	memset(a, 0, sizeof *a);
}

/* rows r0..r0+k of x (· × n) as f64 into buf; a non-finite value is an error */
static int block_f64(const float *x, size_t r0, size_t k, size_t n, double *buf)
{
	for (size_t i = 0; i < k * n; i++) {
		float v = x[r0 * n + i];

		if (!isfinite(v)) {
			nv_seterr("row %zu, channel %zu is %s", r0 + i / n, i % n,
				  isnan(v) ? "nan" : "infinite");
			return -1;
		}
		buf[i] = v;
	}
	return 0;
}

int gr_add(gr_acc *a, const float *x, size_t T)
{
	size_t n = a->n;

	for (size_t r0 = 0; r0 < T; r0 += GR_BLOCK) {
		size_t k = T - r0 < GR_BLOCK ? T - r0 : GR_BLOCK;

		if (block_f64(x, r0, k, n, a->buf) < 0)
			return -1;
		/* G (n × n) += Bᵀ B, B (k × n) */
		nv_dsyrk(1, 1, n, k, 1.0, a->buf, n, 1.0, a->g, n);
		a->count += k;
	}
	return 0;
}

int gr_add_cross(gr_acc *a, const float *xq, const float *xs, size_t T)
{
	size_t n = a->n;

	for (size_t r0 = 0; r0 < T; r0 += GR_BLOCK) {
		size_t k = T - r0 < GR_BLOCK ? T - r0 : GR_BLOCK;

		if (block_f64(xq, r0, k, n, a->buf) < 0 || block_f64(xs, r0, k, n, a->buf2) < 0)
			return -1;
		/* C (n × n) += Bqᵀ Bs, Bq and Bs (k × n) */
		nv_dgemm(1, 0, n, n, k, 1.0, a->buf, n, a->buf2, n, 1.0, a->g, n);
		a->count += k;
	}
	return 0;
}

int gr_finish(const gr_acc *a, nvgg *out)
{
	size_t n = a->n;
	double inv;

	memset(out, 0, sizeof *out);
	if (a->count == 0) {
		nv_seterr("no rows accumulated");
		return -1;
	}
	if (n > UINT32_MAX || !(out->g = nv_malloc(n, n * sizeof(float))))
		return -1;
	inv = 1.0 / (double)a->count;
	out->cross = a->cross;
	for (size_t i = 0; a->cross && i < n * n; i++)
		out->g[i] = (float)(a->g[i] * inv);
	for (size_t i = 0; !a->cross && i < n; i++)
		for (size_t j = i; j < n; j++) {
			float v = (float)(a->g[i * n + j] * inv);

			out->g[i * n + j] = v;
			out->g[j * n + i] = v;
		}
	/* the f64 sums cannot overflow, but a mean beyond f32 would store inf */
	for (size_t i = 0; i < n * n; i++)
		if (!isfinite(out->g[i])) {
			nv_seterr("entry [%zu,%zu] = %g of the mean is beyond f32", i / n, i % n,
				  a->g[i] * inv);
			free(out->g);
			out->g = NULL;
			return -1;
		}
	out->n = (uint32_t)n;
	out->count = a->count;
	return 0;
}

/* read exactly len bytes unless the file ends; *got the bytes read */
static int read_full(int fd, const char *name, uint8_t *p, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t k = read(fd, p + *got, len - *got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			nv_seterr("cannot read '%s': %s", name, strerror(errno));
			return -1;
		}
		if (k == 0)
			break;
		*got += (size_t)k;
	}
	return 0;
}

typedef struct {
	size_t n, fit, sel, rows;
	int split;
	gr_acc *acc;
	float *x;   /* (GR_BLOCK × n) */
	uint8_t *raw;
} filter_ctx;

/* the rows of one block to the parts they belong to; 1 when every wanted row is in */
static int filter_rows(filter_ctx *c, size_t k, int *done)
{
	for (size_t i = 0; i < k * c->n; i++)
		c->x[i] = le_f32(c->raw + 4 * i);
	for (size_t i = 0; i < k; i++, c->rows++) {
		int part = c->split && c->rows >= c->fit;

		if (c->split && c->rows >= c->fit + c->sel) {
			*done = 1;
			return 0;
		}
		if (gr_add(&c->acc[part], c->x + i * c->n, 1) < 0) {
			nv_preerr("%s row %zu", part ? "SEL" : "FIT",
				  part ? c->rows - c->fit : c->rows);
			return -1;
		}
	}
	return 0;
}

static int filter_file(filter_ctx *c, const char *path, int *done)
{
	int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	const char *name = strcmp(path, "-") == 0 ? "standard input" : path;
	size_t blk = GR_BLOCK * c->n * 4, bytes = 0, got;
	int rc = 0;

	if (fd < 0) {
		nv_seterr("cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	while (!*done && rc == 0) {
		if ((rc = read_full(fd, name, c->raw, blk, &got)) < 0 || got == 0)
			break;
		bytes += got;
		if (got % (4 * c->n)) {
			nv_seterr("'%s' holds %zu bytes, not a multiple of 4·%zu (whole rows)", name,
				  bytes, c->n);
			rc = -1;
			break;
		}
		rc = filter_rows(c, got / (4 * c->n), done);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}

int gr_filter(const char *const *files, size_t nfiles, size_t n, int split, size_t fit,
	      size_t sel, gr_acc acc[2])
{
	filter_ctx c = { n, fit, sel, 0, split, acc, NULL, NULL };
	int done = 0, rc = 0;

	c.x = nv_malloc(GR_BLOCK, n * sizeof(float));
	c.raw = nv_malloc(GR_BLOCK, n * 4);
	if (!c.x || !c.raw)
		rc = -1;
	for (size_t i = 0; rc == 0 && i < nfiles && !done; i++)
		rc = filter_file(&c, files[i], &done);
	if (rc == 0 && split && c.rows < fit + sel) {
		nv_seterr("%zu rows of width %zu, the split needs %zu (FIT %zu + SEL %zu)", c.rows,
			  n, fit + sel, fit, sel);
		rc = -1;
	} else if (rc == 0 && c.rows == 0) {
		nv_seterr("no activation rows");
		rc = -1;
	}
	free(c.x);
	free(c.raw);
	return rc;
}

int gr_state_header(const fw_model *m, const gr_capture_opts *o, uint32_t layer, st_header *h)
{
	size_t nwin, rows;
	fw_window *w = fw_windows(o->fit, o->sel, o->window, &nwin, &rows);

	if (!w)
		return -1;
	free(w);
	*h = st_header_of(layer, m->d, o->window, o->tok, o->ntok, o->fit, o->sel, rows);
	return 0;
}

typedef struct {
	fw_model *m;
	const gr_capture_opts *o;
	size_t tmax;    /* the most positions a window feeds (≤ the window, ≤ the tokens) */
	fw_scratch s;
	fw_layer ly;
	float *x;       /* (tmax × d) hidden states */
	st_reader in;
	st_writer out;
	int has_in, has_out;
	/* the source stream, for the cross-moments */
	fw_scratch s2;
	float *x2;      /* (tmax × d) its hidden states */
	st_reader xin;
	int has_xin;
} cap_ctx;

static void cap_free(cap_ctx *c)
{
	if (c->has_in)
		st_close(&c->in);
	if (c->has_out)
		st_abort(&c->out);
	if (c->has_xin)
		st_close(&c->xin);
	fw_layer_free(&c->ly);
	fw_scratch_free(&c->s);
	fw_scratch_free(&c->s2);
	free(c->x);
	free(c->x2);
}

/* the source stream's state S_L^src: the same tokens, windows and layer as S_L */
static int cross_open(cap_ctx *c, const st_header *want)
{
	const gr_capture_opts *o = c->o;

	if (fw_scratch_init(&c->s2, c->m, c->tmax) < 0 ||
	    !(c->x2 = nv_malloc(c->tmax, c->m->d * sizeof(float))))
		return -1;
	if (st_open(&c->xin, o->cross_in) < 0)
		goto bad;
	c->has_xin = 1;
	if (st_check(&c->xin.h, want) < 0)
		goto bad;
	return 0;
bad:
	nv_preerr("source state file '%s'", o->cross_in);
	return -1;
}

static int cap_open(cap_ctx *c)
{
	const gr_capture_opts *o = c->o;
	st_header want;

	if (fw_scratch_init(&c->s, c->m, c->tmax) < 0 ||
	    !(c->x = nv_malloc(c->tmax, c->m->d * sizeof(float))))
		return -1;
	if (o->state_in) {
		if (st_open(&c->in, o->state_in) < 0)
			goto bad_state;
		c->has_in = 1;
		if (gr_state_header(c->m, o, (uint32_t)o->layer, &want) < 0)
			return -1;
		if (st_check(&c->in.h, &want) < 0)
			goto bad_state;
		if (o->cross_in && cross_open(c, &want) < 0)
			return -1;
	}
	if (fw_layer_load(c->m, o->layer, o->ov, o->nov, &c->ly) < 0)
		return -1;
	if (o->state_out) {
		if (gr_state_header(c->m, o, (uint32_t)o->layer + 1, &want) < 0 ||
		    st_create(&c->out, o->state_out, &want) < 0)
			return -1;
		c->has_out = 1;
	}
	return 0;
bad_state:
	nv_preerr("state file '%s'", o->state_in);
	return -1;
}

/* x (T × d): the window's states entering layer L */
static int window_input(cap_ctx *c, const fw_window *w, size_t row0)
{
	size_t T = w->len - 1;

	if (c->has_in) {
		if (st_rows(&c->in, row0, T, c->x) < 0) {
			nv_preerr("state file '%s'", c->o->state_in);
			return -1;
		}
		return 0;
	}
	if (fw_embed(c->m, c->o->tok + w->start, T, c->x) < 0)
		return -1;
	for (int l = 0; l < c->o->layer; l++) {
		fw_layer ly;
		int rc;

		if (fw_layer_load(c->m, l, NULL, 0, &ly) < 0)
			return -1;
		rc = fw_layer_run(c->m, &ly, &c->s, c->x, T, NULL);
		fw_layer_free(&ly);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int window_grams(cap_ctx *c, const fw_leads *ld, const fw_window *w, size_t wi,
			gr_acc acc[GR_NLEAD][2])
{
	const float *p[GR_NLEAD] = { ld->q, ld->o, ld->gate, ld->down };

	for (int i = 0; i < GR_NLEAD; i++)
		if (gr_add(&acc[i][w->sel], p[i], w->len - 1) < 0) {
			nv_preerr("layer %d, lead %s, window %zu", c->o->layer, gr_lead_name[i], wi);
			return -1;
		}
	return 0;
}

/*
 * the source stream's window through the same float layer: each lead's
 * cross-moment with the converted stream's lead ld at the same positions
 */
static int window_cross(cap_ctx *c, const fw_leads *ld, const fw_window *w, size_t wi,
			size_t row0, gr_acc xacc[GR_NLEAD][2])
{
	size_t T = w->len - 1;
	fw_leads ls;

	if (st_rows(&c->xin, row0, T, c->x2) < 0) {
		nv_preerr("source state file '%s'", c->o->cross_in);
		return -1;
	}
	if (fw_layer_leads(c->m, &c->ly, &c->s2, c->x2, T, &ls) < 0)
		return -1;
	const float *q[GR_NLEAD] = { ld->q, ld->o, ld->gate, ld->down };
	const float *p[GR_NLEAD] = { ls.q, ls.o, ls.gate, ls.down };
	for (int i = 0; i < GR_NLEAD; i++)
		if (gr_add_cross(&xacc[i][w->sel], q[i], p[i], T) < 0) {
			nv_preerr("layer %d, source lead %s, window %zu", c->o->layer,
				  gr_lead_name[i], wi);
			return -1;
		}
	return 0;
}

static int init_accs(const fw_model *m, gr_acc acc[GR_NLEAD][2], int cross)
{
	size_t n[GR_NLEAD] = { m->d, m->qdim, m->d, m->ff };

	memset(acc, 0, sizeof(gr_acc) * GR_NLEAD * 2);
	for (int i = 0; i < GR_NLEAD; i++)
		for (int p = 0; p < 2; p++)
			if ((cross ? gr_init_cross : gr_init)(&acc[i][p], n[i]) < 0)
				return -1;
	return 0;
}

static int check_tokens(const fw_model *m, const gr_capture_opts *o)
{
	if (o->ntok == 0) {
		nv_seterr("no tokens");
		return -1;
	}
	if (o->ntok < o->fit + o->sel) {
		nv_seterr("%zu tokens, FIT %zu + SEL %zu need %zu", o->ntok, o->fit, o->sel,
			  o->fit + o->sel);
		return -1;
	}
	for (size_t i = 0; i < o->fit + o->sel; i++)
		if (o->tok[i] >= m->vocab) {
			nv_seterr("token id %u at position %zu is beyond the vocabulary (0..%zu)",
				  o->tok[i], i, m->vocab - 1);
			return -1;
		}
	if (o->layer < 0 || o->layer >= m->a.layers) {
		nv_seterr("layer %d is beyond the model's layers 0..%d", o->layer, m->a.layers - 1);
		return -1;
	}
	return 0;
}

static int run_windows(cap_ctx *c, const fw_window *w, size_t nwin, size_t rows,
		       gr_acc acc[GR_NLEAD][2], gr_acc xacc[GR_NLEAD][2])
{
	size_t row0 = 0;

	for (size_t i = 0; i < nwin; i++) {
		size_t T = w[i].len - 1;
		fw_leads ld;

		if (window_input(c, &w[i], row0) < 0)
			return -1;
		/* down_proj's product only where the layer's output is written */
		if ((c->has_out ? fw_layer_run(c->m, &c->ly, &c->s, c->x, T, &ld)
				: fw_layer_leads(c->m, &c->ly, &c->s, c->x, T, &ld)) < 0)
			return -1;
		if (c->o->grams && window_grams(c, &ld, &w[i], i, acc) < 0)
			return -1;
		if (c->has_xin && window_cross(c, &ld, &w[i], i, row0, xacc) < 0)
			return -1;
		if (c->has_out && st_append(&c->out, c->x, T) < 0)
			return -1;
		row0 += T;
		if (c->o->progress)
			c->o->progress(c->o->ctx, i + 1, nwin, row0, rows);
	}
	return 0;
}

int gr_capture(fw_model *m, const gr_capture_opts *o, gr_acc acc[GR_NLEAD][2], double *flops)
{
	return gr_capture_cross(m, o, acc, NULL, flops);
}

/* what a cross capture needs beyond a plain one */
static int check_cross(const gr_capture_opts *o, gr_acc xacc[GR_NLEAD][2])
{
	if (!o->cross_in)
		return 0;
	if (!xacc || !o->state_in || o->nov) {
		nv_seterr("the cross-moments need S_L and S_L^src, and take no patches");
		return -1;
	}
	return 0;
}

int gr_capture_cross(fw_model *m, const gr_capture_opts *o, gr_acc acc[GR_NLEAD][2],
		     gr_acc xacc[GR_NLEAD][2], double *flops)
{
	cap_ctx c = { .m = m, .o = o };
	fw_window *w = NULL;
	size_t nwin, rows;
	int rc = -1;

	memset(acc, 0, sizeof(gr_acc) * GR_NLEAD * 2);
	if (xacc)
		memset(xacc, 0, sizeof(gr_acc) * GR_NLEAD * 2);
	if (check_tokens(m, o) < 0 || check_cross(o, xacc) < 0 ||
	    !(w = fw_windows(o->fit, o->sel, o->window, &nwin, &rows)))
		return -1;
	if (nwin == 0) {
		nv_seterr("no window of at least 2 tokens in FIT %zu + SEL %zu", o->fit, o->sel);
		goto out;
	}
	c.tmax = fw_windows_tmax(w, nwin);
	if ((o->grams && init_accs(m, acc, 0) < 0) || (o->cross_in && init_accs(m, xacc, 1) < 0) ||
	    cap_open(&c) < 0)
		goto out;
	if (run_windows(&c, w, nwin, rows, acc, xacc) < 0)
		goto out;
	if (c.has_out) {
		c.has_out = 0;
		if (st_commit(&c.out) < 0)
			goto out;
	}
	rc = 0;
out:
	if (flops)
		*flops = c.s.flops + c.s2.flops;
	cap_free(&c);
	free(w);
	return rc;
}
