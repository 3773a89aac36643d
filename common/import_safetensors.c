/* import_safetensors.c - Hugging Face safetensors (one file or an indexed shard set) with config.json (see import.h) */
#include "import.h"
#include "hfconfig.h"
#include "hftok.h"
#include "err.h"
#include "fileio.h"
#include "mem.h"

#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* dir of path (with its slash) + name, fresh */
static char *beside(const char *path, const char *name)
{
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
	char *s = nv_malloc(dl + strlen(name) + 1, 1);

	if (s) {
		memcpy(s, path, dl);
		strcpy(s + dl, name);
	}
	return s;
}

static char *read_text(const char *path)
{
	uint8_t *b, *s;
	size_t len;

	if (nv_read_file(path, &b, &len) < 0)
		return NULL;
	if (!(s = nv_realloc(b, len + 1, 1))) {
		free(b);
		return NULL;
	}
	s[len] = '\0';
	return (char *)s;
}

/* cmf.arch from config.json, every key honoured or refused (hfconfig.h) */
static int read_config(const char *src0, cmf_arch *a, int *untied)
{
	char *path = beside(src0, "config.json"), *text;
	int rc = -1;

	if (!path)
		return -1;
	if ((text = read_text(path))) {
		rc = cmf_arch_parse(text, path, a) < 0 || hf_config_check(text, path, a, untied) < 0
			     ? -1 : 0;
		free(text);
	}
	free(path);
	return rc;
}

/* path read: 1, absent: 0 (*text NULL), unreadable: -1 */
static int read_opt(const char *path, char **text)
{
	struct stat st;

	*text = NULL;
	if (stat(path, &st) != 0 && errno == ENOENT)
		return 0;
	return (*text = read_text(path)) ? 1 : -1;
}

/* name beside src0 (*path, fresh), read: 1, absent: 0 (*text NULL), unreadable: -1 */
static int read_beside(const char *src0, const char *name, char **path, char **text)
{
	*text = NULL;
	if (!(*path = beside(src0, name)))
		return -1;
	return read_opt(*path, text);
}

/*
 * the vocabulary of tokenizer.json (tok, read: 1, absent: 0) and the
 * tokenizer_config.json beside it; bos/eos from config.json when they say none
 */
static int hf_vocab_at(const char *tok, const cmf_arch *a, nv_vocab *v)
{
	char *path, *text;
	int rc = read_opt(tok, &text);

	if (rc > 0)
		rc = hf_tokenizer_parse(text, tok, v) < 0 ? -1 : 1;
	if (rc > 0 && (size_t)a->vocab < v->n) {
		nv_seterr("'%s' has %zu tokens, more than the model's vocab_size %d", tok, v->n,
			  a->vocab);
		nv_vocab_free(v);
		rc = -1;
	}
	free(text);
	if (rc <= 0)
		return rc;
	if ((rc = read_beside(tok, "tokenizer_config.json", &path, &text)) > 0)
		rc = hf_tokenizer_config(text, path, v);
	free(path);
	free(text);
	if (rc < 0)
		return nv_vocab_free(v), -1;
	nv_vocab_default_ids(v, a->bos, a->eos);
	return 1;
}

static int hf_vocab(const char *src0, const cmf_arch *a, nv_vocab *v)
{
	char *tok = beside(src0, "tokenizer.json");
	int rc = tok ? hf_vocab_at(tok, a, v) : -1;

	free(tok);
	return rc;
}

int nv_hf_vocab(const char *path, const cmf_arch *a, nv_vocab *v)
{
	int rc = hf_vocab_at(path, a, v);

	if (rc == 0)
		nv_seterr("cannot open '%s'", path);
	return rc > 0 ? 0 : -1;
}

/* cmf.tokenizer from the Hugging Face tokenizer files beside src0, when there are */
static int read_tokenizer(const char *src0, imp_model *m)
{
	nv_vocab v;
	int rc = hf_vocab(src0, &m->arch, &v);

	if (rc <= 0)
		return rc;
	m->tokenizer = nv_vocab_to_json(&v);
	nv_vocab_free(&v);
	return m->tokenizer ? 0 : -1;
}

/* the shard files an index names, in order of first appearance */
static int index_shards(const char *index, char ***files, size_t *n)
{
	char *text = read_text(index);
	cJSON *j = text ? cJSON_Parse(text) : NULL, *map, *x;
	int rc = -1;

	*files = NULL;
	*n = 0;
	if (!text)
		return -1;
	map = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
	if (!cJSON_IsObject(map)) {
		nv_seterr("'%s': no \"weight_map\" object", index);
		goto out;
	}
	if (!(*files = nv_calloc((size_t)cJSON_GetArraySize(map) + 1, sizeof(char *))))
		goto out;
	cJSON_ArrayForEach(x, map) {
		char *path;
		size_t k;

		if (!cJSON_IsString(x) || !x->valuestring[0] || strchr(x->valuestring, '/')) {
			nv_seterr("'%s': weight_map entry '%s' is not a file name", index, x->string);
			goto out;
		}
		if (!(path = beside(index, x->valuestring)))
			goto out;
		for (k = 0; k < *n; k++)
			if (strcmp((*files)[k], path) == 0)
				break;
		if (k < *n)
			free(path);
		else
			(*files)[(*n)++] = path;
	}
	if (*n == 0) {
		nv_seterr("'%s': weight_map is empty", index);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(j);
	free(text);
	return rc;
}

/*
 * old Llama checkpoints store RoPE's inverse frequencies as a buffer per
 * layer: config.json determines them, and the forward computes its own
 */
static int derived(const char *name)
{
	const char *tail = ".rotary_emb.inv_freq";
	size_t n = strlen(name), k = strlen(tail);

	return n > k && !strcmp(name + n - k, tail);
}

/* every tensor the index names was found in the shards */
static int index_check(const char *index, imp_model *m)
{
	char *text = read_text(index);
	cJSON *j = text ? cJSON_Parse(text) : NULL, *x;
	int rc = text ? 0 : -1;

	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "weight_map")) {
		if (!derived(x->string) && !imp_model_find(m, x->string)) {
			rc = (nv_seterr("'%s': weight_map names tensor '%s', which '%s' does not hold",
					index, x->string, x->valuestring), -1);
			break;
		}
	}
	cJSON_Delete(j);
	free(text);
	return rc;
}

static int source_f32(const void *p, float *w)
{
	return cmf_tensor_f32(*(const cmf_tensor *const *)p, w);
}

static int add_shard(const cmf_file *f, const char *path, int dtype, imp_model *m)
{
	for (size_t i = 0; i < f->ntensors; i++) {
		const cmf_tensor *t = &f->t[i];
		const cmf_tensor **z;

		if (derived(t->name))
			continue;
		if (t->dtype == CMF_U8 || t->blr)
			return nv_seterr("'%s': tensor '%s' has dtype %s (want F32, F16 or BF16)", path,
					 t->name, cmf_dtype_name(t->dtype)), -1;
		if (imp_check_finite(t->name, t->dtype, t->data, t->nbytes / cmf_dtype_size(t->dtype)) < 0)
			return nv_preerr("'%s'", path), -1;
		if (dtype < 0 || (cmf_dtype)dtype == t->dtype) {
			if (imp_model_add_raw(m, t->name, t->dtype, t->ndim, t->shape, t->data, NULL,
					     t->nbytes) < 0)
				return nv_preerr("'%s'", path), -1;
			continue;
		}
		/* converted when written: the tensor stays in the source mapping until then */
		if (!(z = nv_malloc(1, sizeof(*z))))
			return -1;
		*z = t;
		if (imp_model_add_lazy(m, t->name, (cmf_dtype)dtype, t->ndim, t->shape, source_f32,
				       z) < 0)
			return nv_preerr("'%s'", path), -1;
	}
	return 0;
}

static int import_files(size_t n, char *const *files, int dtype, imp_model *m)
{
	if (!(m->src = nv_calloc(n, sizeof(cmf_file))))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (cmf_open(files[i], &m->src[i]) < 0)
			return -1;
		m->nsrc++;
		if (add_shard(&m->src[i], files[i], dtype, m) < 0)
			return -1;
	}
	return 0;
}

/* a model directory: its index when it has one, else its model.safetensors */
static int import_dir(const char *dir, int dtype, imp_model *m)
{
	size_t dl = strlen(dir);
	char *p = nv_malloc(dl + sizeof("/model.safetensors.index.json"), 1);
	struct stat st;
	int rc;

	if (!p)
		return -1;
	sprintf(p, "%s%smodel.safetensors.index.json", dir, dl && dir[dl - 1] == '/' ? "" : "/");
	if (stat(p, &st) != 0)
		strcpy(strrchr(p, '/') + 1, "model.safetensors");
	rc = nv_import_safetensors(1, &p, dtype, m);
	free(p);
	return rc;
}

int nv_import_safetensors(size_t nsrc, char *const *src, int dtype, imp_model *m)
{
	size_t n0 = strlen(src[0]), nfiles;
	struct stat st;
	char **files;
	int rc, untied;

	if (nsrc == 1 && stat(src[0], &st) == 0 && S_ISDIR(st.st_mode))
		return import_dir(src[0], dtype, m);
	if (read_config(src[0], &m->arch, &untied) < 0 || read_tokenizer(src[0], m) < 0)
		return -1;
	if (nsrc == 1 && n0 >= 5 && strcmp(src[0] + n0 - 5, ".json") == 0) {
		rc = index_shards(src[0], &files, &nfiles);
		if (rc == 0)
			rc = import_files(nfiles, files, dtype, m);
		if (rc == 0)
			rc = index_check(src[0], m);
		for (size_t i = 0; files && files[i]; i++)
			free(files[i]);
		free(files);
	} else {
		rc = import_files(nsrc, src, dtype, m);
	}
	if (rc == 0 && !imp_model_find(m, "lm_head.weight")) {
		if (untied) {
			nv_seterr("config.json says tie_word_embeddings false, and there is no "
				  "lm_head.weight");
			return -1;
		}
		m->arch.tied = 1;
	}
	return rc;
}
