/* cmf_ops.c - cmf-patch's operations on a CMF file (see cmf_ops.h) */
#include "cmf_ops.h"
#include "aout.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "fileio.h"
#include "le.h"
#include "mem.h"
#include "names.h"
#include "provenance.h"
#include "vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void shape_text(const cmf_tensor *t, char *buf, size_t len)
{
	size_t k = 0;

	if (t->blr) {
		snprintf(buf, len, "%zux%zu", t->rows, t->cols);
		return;
	}
	buf[0] = '\0';
	if (t->ndim == 0)
		snprintf(buf, len, "scalar");
	for (size_t d = 0; d < t->ndim && k < len; d++)
		k += (size_t)snprintf(buf + k, len - k, "%s%zu", d ? "x" : "", t->shape[d]);
}

int cmf_op_list(const cmf_file *f, FILE *out)
{
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		const char *s;
		char shape[96], tag[48] = "-";
		size_t l;

		shape_text(t, shape, sizeof(shape));
		if (nv_body_linear(t->name, &l, &s))
			snprintf(tag, sizeof(tag), "L%zu %s", l, s);
		fprintf(out, "%s\t%s\t%s\t%zu\t%s\t%s\n", t->name, cmf_dtype_name(t->dtype), shape,
			t->nbytes, t->blr ? "blr" : "-", tag);
	}
	return 0;
}

static void info_tokenizer(const cmf_file *f, FILE *out)
{
	const char *tj = cmf_meta(f, "cmf.tokenizer");
	nv_vocab v;

	if (!tj) {
		fprintf(out, "tokenizer: none\n");
		return;
	}
	if (nv_vocab_from_json(tj, &v) < 0) {
		fprintf(out, "tokenizer: invalid (%s)\n", nv_err());
		return;
	}
	fprintf(out, "tokenizer: %s, %zu tokens", nv_vocab_model_name(v.model), v.n);
	if (v.model == NV_VOCAB_GPT2)
		fprintf(out, ", %zu merges", v.nmerges);
	fprintf(out, "\n");
	nv_vocab_free(&v);
}

/* the features beyond a plain llama: biases, norms, activation, RoPE scaling, window */
static void info_features(const cmf_arch *a, FILE *out)
{
	static const char *const act[] = { "silu", "gelu", "gelu_pytorch_tanh" };
	static const char *const rope[] = { "none", "linear", "llama3", "yarn" };

	fprintf(out, "biases:%s%s%s%s\nqk_norm: %s\nact: %s\nrope_scaling: %s", a->qkv_bias ? " q k v" : "",
		a->o_bias ? " o" : "", a->mlp_bias ? " gate up down" : "",
		a->qkv_bias || a->o_bias || a->mlp_bias ? "" : " none", a->qk_norm ? "yes" : "no",
		act[a->act], rope[a->rope.type]);
	if (a->rope.type != CMF_ROPE_NONE)
		fprintf(out, " factor %g", a->rope.factor);
	if (a->window > 0)
		fprintf(out, "\nsliding_window: %d from layer %d\n", a->window, a->window_from);
	else
		fprintf(out, "\nsliding_window: none\n");
}

int cmf_op_info(const cmf_file *f, FILE *out)
{
	const cmf_arch *a = &f->arch;
	double params = 0, bytes = 0;
	size_t nblr = 0;

	if (f->has_arch) {
		fprintf(out, "arch: %s\nhidden: %d\nintermediate: %d\nlayers: %d\nheads: %d\n"
			"kv_heads: %d\nhead_dim: %d\nvocab: %d\ntied: %s\nrms_eps: %g\nrope_theta: %g\n"
			"bos: %d\neos: %d\nmax_pos: %d\n",
			a->arch, a->hidden, a->intermediate, a->layers, a->heads, a->kv_heads,
			a->head_dim, a->vocab, a->tied ? "yes" : "no", a->rms_eps, a->rope_theta,
			a->bos, a->eos, a->max_pos);
		info_features(a, out);
	} else {
		fprintf(out, "arch: none\n");
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		params += (double)f->t[i].rows * (double)f->t[i].cols;
		bytes += (double)f->t[i].nbytes;
		nblr += (size_t)f->t[i].blr;
	}
	fprintf(out, "tensors: %zu\nparameters: %.0f\nbytes: %.0f\nblr tensors: %zu\n",
		f->ntensors, params, bytes, nblr);
	info_tokenizer(f, out);
	if (cmf_meta(f, "cmf.provenance"))
		fprintf(out, "provenance: %s\n", cmf_meta(f, "cmf.provenance"));
	return 0;
}

int cmf_op_extract(const cmf_file *f, const char *name, const char *path)
{
	const cmf_tensor *t = cmf_find(f, name);
	float *w;
	aout o;
	int rc;

	if (!t)
		return nv_seterr("no tensor '%s' in the model", name), -1;
	if (!(w = cmf_tensor_f32_alloc(t)))
		return -1;
	if (aout_open(&o, path, AOUT_BINARY) < 0) {
		free(w);
		return -1;
	}
	rc = nv_write_f32(&o, w, t->rows * t->cols);
	free(w);
	if (rc < 0) {
		aout_abort(&o);
		return -1;
	}
	return aout_commit(&o);
}

/* the payloads read and checked against their tensors before anything is written */
static int load_patches(const cmf_file *f, const cmf_patch *p, size_t np, uint8_t **buf,
			size_t *len)
{
	for (size_t i = 0; i < np; i++) {
		const cmf_tensor *t = cmf_find(f, p[i].name);

		for (size_t k = 0; k < i; k++)
			if (strcmp(p[k].name, p[i].name) == 0)
				return nv_seterr("tensor '%s' is patched twice", p[i].name), -1;
		if (!t)
			return nv_seterr("no tensor '%s' in the model", p[i].name), -1;
		if (!t->blr && (t->ndim != 2 || t->dtype == CMF_U8))
			return nv_seterr("tensor '%s' is not a float matrix (dtype %s, %zu dimensions)",
					 p[i].name, cmf_dtype_name(t->dtype), t->ndim), -1;
		if (p[i].bytes) {
			if (!(buf[i] = nv_malloc(p[i].len ? p[i].len : 1, 1)))
				return -1;
			memcpy(buf[i], p[i].bytes, len[i] = p[i].len);
		} else if (nv_read_file(p[i].payload, &buf[i], &len[i]) < 0) {
			return -1;
		}
		if (blr_verify_shape(buf[i], len[i], t->rows, t->cols) < 0)
			return nv_preerr("payload '%s' for tensor '%s' (%zux%zu)", p[i].payload,
					 p[i].name, t->rows, t->cols), -1;
	}
	return 0;
}

static const cmf_patch *patch_for(const cmf_patch *p, size_t np, const char *name, size_t *k)
{
	for (size_t i = 0; i < np; i++)
		if (strcmp(p[i].name, name) == 0)
			return *k = i, &p[i];
	return NULL;
}

/* a writer holding every tensor of f (data borrowed) and its metadata */
static int copy_tensor(cmf_writer *w, const cmf_tensor *t)
{
	if (t->blr)
		return cmf_writer_add_blr(w, t->name, t->data, t->nbytes, 0);
	return cmf_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, 0);
}

int cmf_op_apply(const cmf_file *f, const cmf_patch *p, size_t np, const char *out)
{
	return cmf_op_apply_prov(f, p, np, NULL, out);
}

int cmf_op_truncate(const cmf_file *f, size_t n, const char *out)
{
	cmf_writer *w;
	cmf_arch a = f->arch;
	int rc = -1;

	if (!f->has_arch)
		return nv_seterr("the model has no cmf.arch"), -1;
	if (n < 1 || n > (size_t)a.layers)
		return nv_seterr("--layers %zu is outside [1, %d]", n, a.layers), -1;
	if (!(w = cmf_writer_new()))
		return -1;
	for (size_t i = 0; i < f->ntensors; i++) {
		size_t l;

		const char *nm = f->t[i].name;

		/* multi-token-prediction heads belong to the full model only (the seed drops them too) */
		if ((nv_layer_of(nm, &l) && l >= n) || !strncmp(nm, "model.mtp.", 10) ||
		    !strncmp(nm, "mtp.", 4))
			continue;
		if (copy_tensor(w, &f->t[i]) < 0)
			goto out;
	}
	a.layers = (int)n;
	if (cmf_writer_copy_meta(w, f) < 0 || cmf_writer_set_arch(w, &a) < 0)
		goto out;
	rc = cmf_writer_commit(w, out);
out:
	cmf_writer_free(w);
	return rc;
}

/* a tensor exported lazily: dequantized and converted when the writer needs its bytes */
typedef struct {
	const cmf_tensor *t;
	cmf_dtype dtype;
} export_src;

static int export_fill(void *p, void *out)
{
	const export_src *e = p;
	size_t n = e->t->rows * e->t->cols;
	uint8_t *b = out;
	float *w;
	int rc;

	if (e->dtype == CMF_F32) {
		/* the writer's scratch is malloc'd, aligned for floats */
		if (cmf_tensor_f32(e->t, out) < 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			put_f32(b + 4 * i, ((float *)out)[i]);
		return 0;
	}
	if (!(w = cmf_tensor_f32_alloc(e->t)))
		return -1;
	rc = cmf_put_half(e->t->name, e->dtype, w, n, b);
	free(w);
	return rc;
}

/* config.json beside out, written whole to its temporary file but not renamed (*o) */
static int write_config(const cmf_file *f, cmf_dtype dtype, const char *out, aout *o)
{
	const char *slash = strrchr(out, '/');
	char *path, *json;
	size_t dl = slash ? (size_t)(slash - out) + 1 : 0;
	int rc = -1;

	if (!(json = cmf_arch_config_json(&f->arch, dtype)))
		return -1;
	if (!(path = nv_malloc(dl + sizeof("config.json"), 1))) {
		free(json);
		return -1;
	}
	memcpy(path, out, dl);
	strcpy(path + dl, "config.json");
	if (aout_open(o, path, 0) == 0) {
		if (aout_write(o, json, strlen(json)) < 0 || aout_write(o, "\n", 1) < 0)
			aout_abort(o);
		else
			rc = aout_finish(o);
	}
	free(path);
	free(json);
	return rc;
}

cmf_dtype cmf_op_export_dtype(const cmf_file *f)
{
	int dt = -1;

	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];

		if (t->blr || t->dtype == CMF_U8)
			continue;
		if (dt >= 0 && (cmf_dtype)dt != t->dtype)
			return CMF_F32;
		dt = (int)t->dtype;
	}
	return dt < 0 ? CMF_F32 : (cmf_dtype)dt;
}

int cmf_op_export(const cmf_file *f, cmf_dtype dtype, const char *out)
{
	export_src *src;
	cmf_writer *w;
	aout cfg;
	int rc = -1;

	if (!f->has_arch)
		return nv_seterr("the model has no cmf.arch (config.json needs it)"), -1;
	if (aout_is_stdout(out))
		return nv_seterr("export writes config.json beside its output: give a file name"), -1;
	if (!(src = nv_malloc(f->ntensors ? f->ntensors : 1, sizeof(*src))))
		return -1;
	if (!(w = cmf_writer_new())) {
		free(src);
		return -1;
	}
	cmf_writer_set_plain(w);
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		size_t shape[2] = { t->rows, t->cols };

		if (t->dtype == CMF_U8 && !t->blr) {
			nv_seterr("tensor '%s' is U8 without a codec: nothing to export it as", t->name);
			goto out;
		}
		src[i] = (export_src){ t, dtype };
		if (cmf_writer_add_lazy(w, t->name, dtype, t->blr ? 2 : t->ndim,
					t->blr ? shape : t->shape, export_fill, &src[i]) < 0)
			goto out;
	}
	/* both files or neither: config.json is written whole before the model,
	 * and renamed into place only once the model is */
	if (write_config(f, dtype, out, &cfg) < 0)
		goto out;
	if (cmf_writer_commit(w, out) < 0) {
		aout_abort(&cfg);
		goto out;
	}
	if ((rc = aout_commit(&cfg)) < 0)
		unlink(out);
out:
	cmf_writer_free(w);
	free(src);
	return rc;
}

/* a tensor's stored bits: the BLR container formula (header excluded), else 8 per byte */
static double tensor_bits(const cmf_tensor *t, blr_header *hd)
{
	blr_view v[2];

	if (t->blr && blr_parse(t->data, t->nbytes, hd, v) == 0)
		return blr_bits(hd->m, hd->n, hd->r, hd->paths);
	return 8.0 * (double)t->nbytes;
}

int cmf_op_bits(const cmf_file *f, cmf_bits *b)
{
	memset(b, 0, sizeof(*b));
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		double n = (double)t->rows * (double)t->cols, bits;
		blr_header hd;

		if (!nv_is_layer_projection(t->name, t->blr ? 2 : t->ndim) && !t->blr)
			continue;
		bits = tensor_bits(t, &hd);
		if (t->blr) {
			b->blr_bits += bits;
			b->blr_weights += n;
		}
		if (nv_is_layer_projection(t->name, t->blr ? 2 : t->ndim)) {
			b->all_bits += bits;
			b->all_weights += n;
		}
	}
	return 0;
}

int cmf_op_report(const cmf_file *f, FILE *out)
{
	cmf_bits b;

	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		double n = (double)t->rows * (double)t->cols;
		blr_header hd;
		double bits;

		if (!t->blr && !nv_is_layer_projection(t->name, t->ndim))
			continue;
		bits = tensor_bits(t, &hd);
		if (t->blr)
			fprintf(out, "%s\tblr\t%u\t%u\t%.4f\n", t->name, (unsigned)hd.r,
				(unsigned)hd.paths, bits / n);
		else
			fprintf(out, "%s\t%s\t-\t-\t%.4f\n", t->name, cmf_dtype_name(t->dtype), bits / n);
	}
	cmf_op_bits(f, &b);
	fprintf(out, "blr body: %.4f bpw over %.0f weights\n",
		b.blr_weights > 0 ? b.blr_bits / b.blr_weights : 0.0, b.blr_weights);
	fprintf(out, "all layer projections: %.4f bpw over %.0f weights\n",
		b.all_weights > 0 ? b.all_bits / b.all_weights : 0.0, b.all_weights);
	return 0;
}

/*
 * added for pipelines/convert.mk: cmf_op_apply that also merges a
 * conversion's provenance (a JSON object) into cmf.provenance; without prov,
 * cmf_op_apply
 */
/* f's metadata, with cmf.provenance replaced by merged when given, then the file */
static int commit_meta(cmf_writer *w, const cmf_file *f, const char *merged, const char *out)
{
	if (cmf_writer_copy_meta(w, f) < 0 ||
	    (merged && cmf_writer_set_meta(w, "cmf.provenance", merged) < 0))
		return -1;
	return cmf_writer_commit(w, out);
}

int cmf_op_apply_prov(const cmf_file *f, const cmf_patch *p, size_t np, const char *prov,
		      const char *out)
{
	uint8_t **buf = nv_calloc(np ? np : 1, sizeof(*buf));
	size_t *len = nv_calloc(np ? np : 1, sizeof(*len));
	cmf_writer *w = cmf_writer_new();
	char *merged = NULL;
	int rc = -1;

	if (!buf || !len || !w || load_patches(f, p, np, buf, len) < 0)
		goto out;
	if (prov && !(merged = prov_merge(cmf_meta(f, "cmf.provenance"), prov)))
		goto out;
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		size_t k;

		if (patch_for(p, np, t->name, &k)) {
			if (cmf_writer_add_blr(w, t->name, buf[k], len[k], 0) < 0)
				goto out;
		} else if (copy_tensor(w, t) < 0) {
			goto out;
		}
	}
	rc = commit_meta(w, f, merged, out);
out:
	for (size_t i = 0; buf && i < np; i++)
		free(buf[i]);
	free(buf);
	free(len);
	free(merged);
	cmf_writer_free(w);
	return rc;
}

float cmf_round_dtype(cmf_dtype dt, float v)
{
	if (dt == CMF_F16)
		return nv_f16_to_f32(nv_f32_to_f16(v));
	if (dt == CMF_BF16)
		return nv_bf16_to_f32(nv_f32_to_bf16(v));
	return v;
}

/* v (n) in dtype dt into b; a value that does not fit is an error naming it */
static int encode_values(const char *name, cmf_dtype dt, const float *v, size_t n, uint8_t *b)
{
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(v[i])) {
			nv_seterr("element %zu of '%s' (%g) is not finite", i, name, (double)v[i]);
			return -1;
		}
		if (dt == CMF_F32)
			put_f32(b + 4 * i, v[i]);
	}
	return dt == CMF_F32 ? 0 : cmf_put_half(name, dt, v, n, b);
}

int cmf_op_set_tensor(const cmf_file *f, const char *name, const float *v, const char *prov,
		      const char *out)
{
	const cmf_tensor *t = cmf_find(f, name);
	cmf_writer *w = NULL;
	uint8_t *b = NULL;
	char *merged = NULL;
	int rc = -1;

	if (!t || t->blr || (t->dtype != CMF_F32 && t->dtype != CMF_F16 && t->dtype != CMF_BF16)) {
		nv_seterr("'%s' is not a float tensor of the model", name);
		return -1;
	}
	if (!(b = nv_malloc(t->nbytes, 1)) || encode_values(name, t->dtype, v, t->rows * t->cols, b) < 0 ||
	    (prov && !(merged = prov_merge(cmf_meta(f, "cmf.provenance"), prov))) ||
	    !(w = cmf_writer_new()))
		goto out;
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *u = &f->t[i];

		if (u == t ? cmf_writer_add(w, u->name, u->dtype, u->ndim, u->shape, b, u->nbytes, 0) < 0
			   : copy_tensor(w, u) < 0)
			goto out;
	}
	rc = commit_meta(w, f, merged, out);
out:
	cmf_writer_free(w);
	free(merged);
	free(b);
	return rc;
}
