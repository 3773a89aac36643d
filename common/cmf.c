/* cmf.c - the CMF container: validated reading and atomic writing (see cmf.h) */
#include "cmf.h"
#include "aout.h"
#include "blr.h"
#include "err.h"
#include "f16.h"
#include "le.h"
#include "mem.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* safetensors' own limit on the JSON header */
#define CMF_MAX_HEADER (100u << 20)
/* integers in JSON are doubles: exact up to 2^53 */
#define JSON_MAX_INT 9007199254740992.0

static const char *const dtype_names[] = { "F32", "F16", "BF16", "U8" };

size_t cmf_dtype_size(cmf_dtype d)
{
	switch (d) {
	case CMF_F32: return 4;
	case CMF_F16: return 2;
	case CMF_BF16: return 2;
	case CMF_U8: return 1;
	}
	return 0;
}

const char *cmf_dtype_name(cmf_dtype d)
{
	return (unsigned)d < 4 ? dtype_names[d] : "?";
}

int cmf_dtype_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, dtype_names[i]) == 0)
			return i;
	return -1;
}

/* ---------------------------------------------------------------- reading */

/* a JSON number that is a non-negative integer below 2^53 */
static int json_size(const cJSON *j, size_t *out)
{
	double v;

	if (!cJSON_IsNumber(j))
		return -1;
	v = j->valuedouble;
	if (!(v >= 0) || v > JSON_MAX_INT || v != floor(v) || v > (double)SIZE_MAX)
		return -1;
	*out = (size_t)v;
	return 0;
}

/* shape × element size must be the byte range; products checked for overflow */
static int tensor_bytes(const cmf_tensor *t, size_t *bytes)
{
	size_t n = cmf_dtype_size(t->dtype);

	for (size_t d = 0; d < t->ndim; d++)
		if (nv_mul(n, t->shape[d], &n) < 0)
			return -1;
	*bytes = n;
	return 0;
}

static int parse_tensor(const cJSON *e, cmf_tensor *t, size_t *begin, size_t *end)
{
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
	const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
	const cJSON *x;
	size_t bytes;
	int d;

	if (!cJSON_IsObject(e))
		return nv_seterr("entry is not an object"), -1;
	if (!cJSON_IsString(dt))
		return nv_seterr("field 'dtype' is missing or not a string"), -1;
	d = cmf_dtype_parse(dt->valuestring);
	if (d < 0)
		return nv_seterr("dtype '%.32s' is not one of F32, F16, BF16, U8", dt->valuestring), -1;
	t->dtype = (cmf_dtype)d;
	if (!cJSON_IsArray(sh))
		return nv_seterr("field 'shape' is missing or not an array"), -1;
	if ((size_t)cJSON_GetArraySize(sh) > CMF_MAX_DIMS)
		return nv_seterr("shape has %d dimensions (at most %d)", cJSON_GetArraySize(sh),
				 CMF_MAX_DIMS), -1;
	t->ndim = 0;
	cJSON_ArrayForEach(x, sh) {
		if (json_size(x, &t->shape[t->ndim]) < 0)
			return nv_seterr("shape[%zu] is not a non-negative integer", t->ndim), -1;
		t->ndim++;
	}
	if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
	    json_size(cJSON_GetArrayItem(of, 0), begin) < 0 ||
	    json_size(cJSON_GetArrayItem(of, 1), end) < 0)
		return nv_seterr("field 'data_offsets' is not two non-negative integers"), -1;
	if (*end < *begin)
		return nv_seterr("data_offsets [%zu, %zu] end before they begin", *begin, *end), -1;
	if (tensor_bytes(t, &bytes) < 0)
		return nv_preerr("shape product"), -1;
	if (bytes != *end - *begin)
		return nv_seterr("shape × %zu bytes = %zu, but data_offsets [%zu, %zu] hold %zu bytes",
				 cmf_dtype_size(t->dtype), bytes, *begin, *end, *end - *begin), -1;
	t->nbytes = bytes;
	return 0;
}

typedef struct {
	size_t begin, end, idx;
} range;

static int range_cmp(const void *a, const void *b)
{
	const range *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	const cmf_tensor *x = *(const cmf_tensor *const *)a, *y = *(const cmf_tensor *const *)b;

	return strcmp(x->name, y->name);
}

/* ranges sorted: the first starts at 0, each begins where the last ended, the last ends the buffer */
static int check_ranges(cmf_file *f, range *r, size_t datalen)
{
	size_t at = 0;

	qsort(r, f->ntensors, sizeof(*r), range_cmp);
	for (size_t i = 0; i < f->ntensors; i++) {
		const char *nm = f->t[r[i].idx].name;

		if (r[i].end > datalen)
			return nv_seterr("tensor '%s': data_offsets [%zu, %zu] outside the data buffer (%zu bytes)",
					 nm, r[i].begin, r[i].end, datalen), -1;
		if (r[i].begin < at)
			return nv_seterr("tensor '%s': data_offsets [%zu, %zu] overlap the previous tensor (ending at %zu)",
					 nm, r[i].begin, r[i].end, at), -1;
		if (r[i].begin > at)
			return nv_seterr("tensor '%s': data_offsets [%zu, %zu] leave a hole after byte %zu",
					 nm, r[i].begin, r[i].end, at), -1;
		at = r[i].end;
	}
	if (at != datalen)
		return nv_seterr("the data buffer has %zu bytes after the last tensor", datalen - at), -1;
	return 0;
}

static int check_duplicates(cmf_file *f)
{
	const cmf_tensor **p = nv_malloc(f->ntensors ? f->ntensors : 1, sizeof(*p));
	int rc = 0;

	if (!p)
		return -1;
	for (size_t i = 0; i < f->ntensors; i++)
		p[i] = &f->t[i];
	qsort(p, f->ntensors, sizeof(*p), name_cmp);
	for (size_t i = 1; i < f->ntensors && rc == 0; i++)
		if (strcmp(p[i - 1]->name, p[i]->name) == 0)
			rc = (nv_seterr("duplicate tensor name '%s'", p[i]->name), -1);
	free(p);
	return rc;
}

static int parse_meta(cmf_file *f, const cJSON *m)
{
	const cJSON *x;
	size_t n = (size_t)cJSON_GetArraySize(m), i = 0;

	if (!cJSON_IsObject(m))
		return nv_seterr("__metadata__ is not an object"), -1;
	f->meta_key = nv_calloc(n ? n : 1, sizeof(char *));
	f->meta_val = nv_calloc(n ? n : 1, sizeof(char *));
	if (!f->meta_key || !f->meta_val)
		return -1;
	cJSON_ArrayForEach(x, m) {
		if (!cJSON_IsString(x))
			return nv_seterr("__metadata__ value of '%s' is not a string", x->string), -1;
		for (size_t k = 0; k < i; k++)
			if (strcmp(f->meta_key[k], x->string) == 0)
				return nv_seterr("__metadata__ key '%s' appears twice", x->string), -1;
		f->meta_key[i] = nv_strdup(x->string);
		f->meta_val[i] = nv_strdup(x->valuestring);
		f->nmeta = ++i;
		if (!f->meta_key[i - 1] || !f->meta_val[i - 1])
			return -1;
	}
	return 0;
}

/* the logical matrix: shape[0] × the rest; 1-d tensors are one row */
static void set_matrix_shape(cmf_tensor *t)
{
	size_t rest = 1;

	if (t->ndim == 0) {
		t->rows = t->cols = 1;
		return;
	}
	if (t->ndim == 1) {
		t->rows = 1;
		t->cols = t->shape[0];
		return;
	}
	for (size_t d = 1; d < t->ndim; d++)
		rest *= t->shape[d]; /* cannot overflow: the byte product was checked */
	t->rows = t->shape[0];
	t->cols = rest;
}

/* the per-tensor table __metadata__[key] as a JSON object: 1 with *j (to
 * cJSON_Delete), 0 when there is none, -1 when it is not an object */
static int meta_table(const cmf_file *f, const char *key, cJSON **j)
{
	const char *s = cmf_meta(f, key);

	*j = NULL;
	if (!s)
		return 0;
	*j = cJSON_Parse(s);
	if (!cJSON_IsObject(*j)) {
		cJSON_Delete(*j);
		*j = NULL;
		return nv_seterr("__metadata__ '%s' is not a JSON object", key), -1;
	}
	return 1;
}

/* the tensor an entry of table key names; NULL (reason set) when absent */
static const cmf_tensor *table_tensor(const cmf_file *f, const char *key, const cJSON *x)
{
	const cmf_tensor *t = cmf_find(f, x->string);

	if (!t)
		nv_seterr("%s: tensor '%s' is not in the file", key, x->string);
	return t;
}

static int apply_codec(cmf_file *f)
{
	cJSON *j, *x;
	int rc = meta_table(f, "cmf.codec", &j);

	if (rc <= 0)
		return rc;
	rc = 0;
	cJSON_ArrayForEach(x, j) {
		cmf_tensor *t;
		blr_header hd;
		blr_view v[2];

		if (!cJSON_IsString(x) || strcmp(x->valuestring, "blr") != 0) {
			rc = (nv_seterr("cmf.codec: tensor '%s': codec is not \"blr\"", x->string), -1);
			break;
		}
		if (!(t = (cmf_tensor *)table_tensor(f, "cmf.codec", x))) {
			rc = -1;
			break;
		}
		if (t->dtype != CMF_U8 || t->ndim != 1) {
			rc = (nv_seterr("cmf.codec: tensor '%s' is a blr payload but has dtype %s and %zu dimensions (want U8, 1)",
					x->string, cmf_dtype_name(t->dtype), t->ndim), -1);
			break;
		}
		if (blr_parse(t->data, t->nbytes, &hd, v) < 0) {
			rc = (nv_preerr("tensor '%s': blr payload", x->string), -1);
			break;
		}
		t->blr = 1;
		t->rows = hd.m;
		t->cols = hd.n;
	}
	cJSON_Delete(j);
	return rc;
}

static int parse_crc_meta(const cmf_file *f)
{
	cJSON *j, *x;
	int rc = meta_table(f, "cmf.crc32", &j);

	if (rc <= 0)
		return rc;
	rc = 0;
	cJSON_ArrayForEach(x, j) {
		size_t v;

		if (json_size(x, &v) < 0 || v > 0xffffffffu) {
			rc = (nv_seterr("cmf.crc32: tensor '%s': value is not a 32-bit unsigned integer",
					x->string), -1);
			break;
		}
		if (!table_tensor(f, "cmf.crc32", x)) {
			rc = -1;
			break;
		}
	}
	cJSON_Delete(j);
	return rc;
}

static int parse_header(cmf_file *f, const char *json, size_t hlen, const uint8_t *base,
			size_t datalen)
{
	cJSON *root = cJSON_ParseWithLength(json, hlen), *e;
	range *r = NULL;
	size_t n = 0;
	int rc = -1;

	if (!root) {
		const char *at = cJSON_GetErrorPtr();

		nv_seterr("header JSON does not parse (near byte %zu of %zu)",
			  at && at >= json ? (size_t)(at - json) : (size_t)0, hlen);
		return -1;
	}
	if (!cJSON_IsObject(root)) {
		nv_seterr("header JSON is not an object");
		goto out;
	}
	cJSON_ArrayForEach(e, root)
		n += strcmp(e->string, "__metadata__") != 0;
	f->t = nv_calloc(n ? n : 1, sizeof(*f->t));
	r = nv_malloc(n ? n : 1, sizeof(*r));
	if (!f->t || !r)
		goto out;
	cJSON_ArrayForEach(e, root) {
		cmf_tensor *t = &f->t[f->ntensors];

		if (strcmp(e->string, "__metadata__") == 0) {
			if (f->meta_key) {
				nv_seterr("__metadata__ appears twice");
				goto out;
			}
			if (parse_meta(f, e) < 0)
				goto out;
			continue;
		}
		if (!(t->name = nv_strdup(e->string)))
			goto out;
		f->ntensors++;
		if (parse_tensor(e, t, &r[f->ntensors - 1].begin, &r[f->ntensors - 1].end) < 0) {
			nv_preerr("tensor '%s'", t->name);
			goto out;
		}
		r[f->ntensors - 1].idx = f->ntensors - 1;
		set_matrix_shape(t);
	}
	if (check_duplicates(f) < 0 || check_ranges(f, r, datalen) < 0)
		goto out;
	/* only now, with every range inside the buffer, point into it */
	for (size_t i = 0; i < f->ntensors; i++)
		f->t[r[i].idx].data = base + r[i].begin;
	rc = 0;
out:
	free(r);
	cJSON_Delete(root);
	return rc;
}

static int open_checked(const char *path, cmf_file *f)
{
	size_t hlen, datalen;
	uint64_t h;

	if (nv_map_file(path, &f->map) < 0)
		return -1;
	if (f->map.len < 8)
		return nv_seterr("'%s': %zu bytes is too short for a header length", path,
				 f->map.len), -1;
	h = le_u64(f->map.data);
	if (h > CMF_MAX_HEADER || h > f->map.len - 8)
		return nv_seterr("'%s': header length %llu is beyond the file (%zu bytes) or the %u-byte limit",
				 path, (unsigned long long)h, f->map.len, CMF_MAX_HEADER), -1;
	hlen = (size_t)h;
	datalen = f->map.len - 8 - hlen;
	if (parse_header(f, (const char *)f->map.data + 8, hlen, f->map.data + 8 + hlen,
			 datalen) < 0)
		return nv_preerr("'%s'", path), -1;
	return 0;
}

int cmf_open(const char *path, cmf_file *f)
{
	const char *arch;

	memset(f, 0, sizeof(*f));
	cmf_arch_init(&f->arch);
	if (open_checked(path, f) < 0)
		goto fail;
	if (apply_codec(f) < 0 || parse_crc_meta(f) < 0)
		goto fail_named;
	arch = cmf_meta(f, "cmf.arch");
	if (arch) {
		if (cmf_arch_parse(arch, "cmf.arch", &f->arch) < 0)
			goto fail_named;
		f->has_arch = 1;
	}
	return 0;
fail_named:
	nv_preerr("'%s'", path);
fail:
	cmf_close(f);
	return -1;
}

void cmf_close(cmf_file *f)
{
	for (size_t i = 0; i < f->ntensors; i++)
		free(f->t[i].name);
	free(f->t);
	for (size_t i = 0; i < f->nmeta; i++) {
		free(f->meta_key[i]);
		free(f->meta_val[i]);
	}
	free(f->meta_key);
	free(f->meta_val);
	nv_map_free(&f->map);
	memset(f, 0, sizeof(*f));
}

const cmf_tensor *cmf_find(const cmf_file *f, const char *name)
{
	for (size_t i = 0; i < f->ntensors; i++)
		if (strcmp(f->t[i].name, name) == 0)
			return &f->t[i];
	return NULL;
}

const char *cmf_meta(const cmf_file *f, const char *key)
{
	for (size_t i = 0; i < f->nmeta; i++)
		if (strcmp(f->meta_key[i], key) == 0)
			return f->meta_val[i];
	return NULL;
}

/* the values as stored, converted to f32 */
static int tensor_values(const cmf_tensor *t, float *out)
{
	size_t n = t->rows * t->cols;

	if (t->blr)
		return blr_dequantize(t->data, t->nbytes, out);
	switch (t->dtype) {
	case CMF_F32:
		for (size_t i = 0; i < n; i++)
			out[i] = le_f32(t->data + 4 * i);
		return 0;
	case CMF_F16:
		for (size_t i = 0; i < n; i++)
			out[i] = nv_f16_to_f32(le_u16(t->data + 2 * i));
		return 0;
	case CMF_BF16:
		for (size_t i = 0; i < n; i++)
			out[i] = nv_bf16_to_f32(le_u16(t->data + 2 * i));
		return 0;
	case CMF_U8:
		break;
	}
	nv_seterr("tensor '%s' has dtype U8 without a codec: not a float tensor", t->name);
	return -1;
}

int cmf_tensor_f32(const cmf_tensor *t, float *out)
{
	size_t n = t->rows * t->cols;

	if (tensor_values(t, out) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(out[i])) {
			nv_seterr("tensor '%s': weight (%zu,%zu) = %g is not finite", t->name,
				  i / (t->cols ? t->cols : 1), i % (t->cols ? t->cols : 1),
				  (double)out[i]);
			return -1;
		}
	return 0;
}

float *cmf_tensor_f32_alloc(const cmf_tensor *t)
{
	float *w = nv_malloc(t->rows ? t->rows : 1, (t->cols ? t->cols : 1) * sizeof(float));

	if (w && cmf_tensor_f32(t, w) < 0) {
		free(w);
		return NULL;
	}
	return w;
}

static int crc_table(const cmf_file *f, cJSON **j)
{
	const char *s = cmf_meta(f, "cmf.crc32");

	if (!s)
		return nv_seterr("no cmf.crc32 in the metadata"), -1;
	*j = cJSON_Parse(s);
	return *j ? 0 : (nv_seterr("cmf.crc32 does not parse"), -1);
}

int cmf_stored_crc(const cmf_file *f, const char *name, uint32_t *crc)
{
	cJSON *j;
	size_t v;
	int rc = -1;

	if (crc_table(f, &j) < 0)
		return -1;
	if (json_size(cJSON_GetObjectItemCaseSensitive(j, name), &v) == 0) {
		*crc = (uint32_t)v;
		rc = 0;
	} else {
		nv_seterr("tensor '%s' has no CRC in cmf.crc32", name);
	}
	cJSON_Delete(j);
	return rc;
}

int cmf_verify(const cmf_file *f)
{
	cJSON *j;
	int rc = 0;

	if (crc_table(f, &j) < 0)
		return -1;
	for (size_t i = 0; i < f->ntensors && rc == 0; i++) {
		const cmf_tensor *t = &f->t[i];
		uint32_t got = nv_crc32(t->data, t->nbytes);
		size_t want;

		if (json_size(cJSON_GetObjectItemCaseSensitive(j, t->name), &want) < 0)
			rc = (nv_seterr("tensor '%s' has no CRC in cmf.crc32", t->name), -1);
		else if (got != want)
			rc = (nv_seterr("tensor '%s': CRC-32 %08x, cmf.crc32 says %08x", t->name, got,
					(unsigned)want), -1);
	}
	cJSON_Delete(j);
	return rc;
}

/* ---------------------------------------------------------------- arch */

void cmf_arch_init(cmf_arch *a)
{
	memset(a, 0, sizeof(*a));
	a->bos = a->eos = -1;
}

static cJSON *add_int(cJSON *o, const char *k, long v)
{
	return cJSON_AddNumberToObject(o, k, (double)v);
}

static cJSON *arch_object(const cmf_arch *a)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "model_type", a->arch);
	add_int(o, "hidden_size", a->hidden);
	add_int(o, "intermediate_size", a->intermediate);
	add_int(o, "num_hidden_layers", a->layers);
	add_int(o, "num_attention_heads", a->heads);
	add_int(o, "num_key_value_heads", a->kv_heads);
	add_int(o, "head_dim", a->head_dim);
	cJSON_AddNumberToObject(o, "rms_norm_eps", a->rms_eps);
	cJSON_AddNumberToObject(o, "rope_theta", a->rope_theta);
	add_int(o, "vocab_size", a->vocab);
	cJSON_AddBoolToObject(o, "tie_word_embeddings", a->tied);
	if (a->bos >= 0)
		add_int(o, "bos_token_id", a->bos);
	if (a->eos >= 0)
		add_int(o, "eos_token_id", a->eos);
	if (a->max_pos > 0)
		add_int(o, "max_position_embeddings", a->max_pos);
	cJSON_AddBoolToObject(o, "attention_bias", a->qkv_bias);
	return o;
}

static char *print_free(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing JSON");
	return s;
}

char *cmf_arch_json(const cmf_arch *a)
{
	return print_free(arch_object(a));
}

char *cmf_arch_config_json(const cmf_arch *a, cmf_dtype dtype)
{
	cJSON *o = arch_object(a), *arr;
	const char *cls = strcmp(a->arch, "qwen2") == 0 ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
	char *s;

	if (!o)
		return NULL;
	arr = cJSON_AddArrayToObject(o, "architectures");
	cJSON_AddItemToArray(arr, cJSON_CreateString(cls));
	cJSON_AddStringToObject(o, "hidden_act", "silu");
	cJSON_AddStringToObject(o, "torch_dtype",
				dtype == CMF_F16 ? "float16" : dtype == CMF_BF16 ? "bfloat16" : "float32");
	if (a->max_pos <= 0)
		add_int(o, "max_position_embeddings", 2048);
	s = cJSON_Print(o);
	cJSON_Delete(o);
	if (!s)
		nv_seterr("out of memory printing JSON");
	return s;
}

/* an integer key in [lo, hi]; absent → def (or an error when required) */
static int get_int(const cJSON *o, const char *what, const char *key, int required, long def,
		   long lo, long hi, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > 0)
		x = cJSON_GetArrayItem(x, 0); /* eos lists: the first is the model's */
	if (!x || cJSON_IsNull(x)) {
		if (required)
			return nv_seterr("%s: missing key '%s'", what, key), -1;
		*out = (int)def;
		return 0;
	}
	if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
	    x->valuedouble < lo || x->valuedouble > hi)
		return nv_seterr("%s: key '%s' = %s is not an integer in [%ld, %ld]", what, key,
				 cJSON_IsNumber(x) ? "a number" : "not a number", lo, hi), -1;
	*out = (int)x->valuedouble;
	return 0;
}

static int get_double(const cJSON *o, const char *what, const char *key, double def,
		      double lo, double hi, double *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!x || cJSON_IsNull(x)) {
		*out = def;
		return 0;
	}
	if (!cJSON_IsNumber(x) || !(x->valuedouble > lo) || !(x->valuedouble < hi))
		return nv_seterr("%s: key '%s' is not a number in (%g, %g)", what, key, lo, hi), -1;
	*out = x->valuedouble;
	return 0;
}

static int get_bool(const cJSON *o, const char *what, const char *key, int def, int *out)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!x || cJSON_IsNull(x)) {
		*out = def;
		return 0;
	}
	if (!cJSON_IsBool(x))
		return nv_seterr("%s: key '%s' is not true or false", what, key), -1;
	*out = cJSON_IsTrue(x);
	return 0;
}

static int arch_fields(const cJSON *o, const char *what, cmf_arch *a)
{
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
	const long big = 1L << 30;

	if (!cJSON_IsString(mt))
		return nv_seterr("%s: missing key 'model_type'", what), -1;
	if (strlen(mt->valuestring) >= sizeof(a->arch) || !mt->valuestring[0])
		return nv_seterr("%s: key 'model_type' = '%.40s' is empty or too long", what,
				 mt->valuestring), -1;
	strcpy(a->arch, mt->valuestring);
	if (get_int(o, what, "hidden_size", 1, 0, 1, big, &a->hidden) < 0 ||
	    get_int(o, what, "intermediate_size", 1, 0, 1, big, &a->intermediate) < 0 ||
	    get_int(o, what, "num_hidden_layers", 1, 0, 1, 1 << 16, &a->layers) < 0 ||
	    get_int(o, what, "num_attention_heads", 1, 0, 1, 1 << 16, &a->heads) < 0 ||
	    get_int(o, what, "vocab_size", 1, 0, 1, big, &a->vocab) < 0)
		return -1;
	if (get_int(o, what, "num_key_value_heads", 0, a->heads, 1, a->heads, &a->kv_heads) < 0 ||
	    get_int(o, what, "head_dim", 0, a->hidden / a->heads, 1, big, &a->head_dim) < 0 ||
	    get_double(o, what, "rms_norm_eps", 1e-6, 0, 1, &a->rms_eps) < 0 ||
	    get_double(o, what, "rope_theta", 10000.0, 0, 1e12, &a->rope_theta) < 0 ||
	    get_bool(o, what, "tie_word_embeddings", 0, &a->tied) < 0 ||
	    get_int(o, what, "bos_token_id", 0, -1, -1, a->vocab - 1, &a->bos) < 0 ||
	    get_int(o, what, "eos_token_id", 0, -1, -1, a->vocab - 1, &a->eos) < 0 ||
	    get_int(o, what, "max_position_embeddings", 0, 0, 0, big, &a->max_pos) < 0 ||
	    get_bool(o, what, "attention_bias", strcmp(a->arch, "qwen2") == 0, &a->qkv_bias) < 0)
		return -1;
	if (a->heads % a->kv_heads != 0)
		return nv_seterr("%s: num_key_value_heads = %d does not divide num_attention_heads = %d",
				 what, a->kv_heads, a->heads), -1;
	return 0;
}

int cmf_arch_parse(const char *json, const char *what, cmf_arch *a)
{
	cJSON *o = cJSON_Parse(json);
	int rc;

	cmf_arch_init(a);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return nv_seterr("%s is not a JSON object", what), -1;
	}
	rc = arch_fields(o, what, a);
	cJSON_Delete(o);
	return rc;
}

/* ---------------------------------------------------------------- writing */

typedef struct {
	char *name;
	cmf_dtype dtype;
	size_t ndim, shape[CMF_MAX_DIMS];
	const void *data;
	void *owned;
	size_t nbytes;
	int blr;
	cmf_fill_fn fill;   /* lazy: produces the bytes on demand (data NULL) */
	void *ctx;
} wtensor;

struct cmf_writer {
	wtensor *t;
	size_t n, cap;
	char **key, **val;
	size_t nmeta;
	int plain;
	uint8_t *scratch;   /* (scratch_len) the bytes of one lazy tensor */
	size_t scratch_len;
};

cmf_writer *cmf_writer_new(void)
{
	return nv_calloc(1, sizeof(cmf_writer));
}

void cmf_writer_free(cmf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++) {
		free(w->t[i].name);
		free(w->t[i].owned);
	}
	for (size_t i = 0; i < w->nmeta; i++) {
		free(w->key[i]);
		free(w->val[i]);
	}
	free(w->t);
	free(w->key);
	free(w->val);
	free(w->scratch);
	free(w);
}

static wtensor *writer_slot(cmf_writer *w, const char *name, const void *data, size_t nbytes,
			    int copy)
{
	wtensor *t;

	if (!name[0])
		return nv_seterr("empty tensor name"), NULL;
	if (strcmp(name, "__metadata__") == 0)
		return nv_seterr("'__metadata__' is not a tensor name"), NULL;
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->t[i].name, name) == 0)
			return nv_seterr("duplicate tensor name '%s'", name), NULL;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		wtensor *nt = nv_realloc(w->t, cap, sizeof(*nt));

		if (!nt)
			return NULL;
		w->t = nt;
		w->cap = cap;
	}
	t = &w->t[w->n];
	memset(t, 0, sizeof(*t));
	if (!(t->name = nv_strdup(name)))
		return NULL;
	t->nbytes = nbytes;
	t->data = data;
	if (copy && nbytes) {
		if (!(t->owned = nv_malloc(nbytes, 1))) {
			free(t->name);
			return NULL;
		}
		memcpy(t->owned, data, nbytes);
		t->data = t->owned;
	}
	w->n++;
	return t;
}

int cmf_writer_add(cmf_writer *w, const char *name, cmf_dtype dtype, size_t ndim,
		   const size_t *shape, const void *data, size_t nbytes, int copy)
{
	size_t want = cmf_dtype_size(dtype);
	wtensor *t;

	if (want == 0 || ndim > CMF_MAX_DIMS)
		return nv_seterr("tensor '%s': bad dtype or %zu dimensions", name, ndim), -1;
	for (size_t d = 0; d < ndim; d++)
		if (nv_mul(want, shape[d], &want) < 0)
			return nv_preerr("tensor '%s': shape", name), -1;
	if (want != nbytes)
		return nv_seterr("tensor '%s': shape needs %zu bytes, %zu given", name, want,
				 nbytes), -1;
	if (!(t = writer_slot(w, name, data, nbytes, copy)))
		return -1;
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(size_t));
	return 0;
}

int cmf_writer_add_lazy(cmf_writer *w, const char *name, cmf_dtype dtype, size_t ndim,
			const size_t *shape, cmf_fill_fn fill, void *ctx)
{
	size_t nbytes = cmf_dtype_size(dtype);
	wtensor *t;

	if (nbytes == 0 || ndim > CMF_MAX_DIMS)
		return nv_seterr("tensor '%s': bad dtype or %zu dimensions", name, ndim), -1;
	for (size_t d = 0; d < ndim; d++)
		if (nv_mul(nbytes, shape[d], &nbytes) < 0)
			return nv_preerr("tensor '%s': shape", name), -1;
	if (!(t = writer_slot(w, name, NULL, nbytes, 0)))
		return -1;
	t->dtype = dtype;
	t->ndim = ndim;
	memcpy(t->shape, shape, ndim * sizeof(size_t));
	t->fill = fill;
	t->ctx = ctx;
	return 0;
}

/* the bytes of tensor i: its data, or a lazy tensor produced into the scratch buffer */
static const void *tensor_bytes_of(cmf_writer *w, size_t i)
{
	wtensor *t = &w->t[i];

	if (!t->fill)
		return t->data;
	if (t->nbytes > w->scratch_len) {
		uint8_t *s = nv_realloc(w->scratch, t->nbytes, 1);

		if (!s)
			return NULL;
		w->scratch = s;
		w->scratch_len = t->nbytes;
	}
	if (t->fill(t->ctx, w->scratch) < 0)
		return nv_preerr("tensor '%s'", t->name), NULL;
	return w->scratch;
}

int cmf_writer_add_blr(cmf_writer *w, const char *name, const void *payload, size_t nbytes,
		       int copy)
{
	blr_header hd;
	blr_view v[2];
	wtensor *t;

	if (blr_parse(payload, nbytes, &hd, v) < 0)
		return nv_preerr("tensor '%s': blr payload", name), -1;
	if (!(t = writer_slot(w, name, payload, nbytes, copy)))
		return -1;
	t->dtype = CMF_U8;
	t->ndim = 1;
	t->shape[0] = nbytes;
	t->blr = 1;
	return 0;
}

int cmf_writer_set_meta(cmf_writer *w, const char *key, const char *value)
{
	char **nk, **nv;
	char *k, *v;

	if (!(v = nv_strdup(value)))
		return -1;
	for (size_t i = 0; i < w->nmeta; i++) {
		if (strcmp(w->key[i], key) == 0) {
			free(w->val[i]);
			w->val[i] = v;
			return 0;
		}
	}
	nk = nv_realloc(w->key, w->nmeta + 1, sizeof(char *));
	if (nk)
		w->key = nk;
	nv = nk ? nv_realloc(w->val, w->nmeta + 1, sizeof(char *)) : NULL;
	if (nv)
		w->val = nv;
	k = nv ? nv_strdup(key) : NULL;
	if (!k) {
		free(v);
		return -1;
	}
	w->key[w->nmeta] = k;
	w->val[w->nmeta] = v;
	w->nmeta++;
	return 0;
}

int cmf_writer_set_arch(cmf_writer *w, const cmf_arch *a)
{
	char *s = cmf_arch_json(a);
	int rc;

	if (!s)
		return -1;
	rc = cmf_writer_set_meta(w, "cmf.arch", s);
	free(s);
	return rc;
}

static int generated_key(const char *k)
{
	return strcmp(k, "format") == 0 || strcmp(k, "cmf.version") == 0 ||
	       strcmp(k, "cmf.crc32") == 0 || strcmp(k, "cmf.codec") == 0;
}

int cmf_writer_copy_meta(cmf_writer *w, const cmf_file *f)
{
	for (size_t i = 0; i < f->nmeta; i++)
		if (!generated_key(f->meta_key[i]) &&
		    cmf_writer_set_meta(w, f->meta_key[i], f->meta_val[i]) < 0)
			return -1;
	return 0;
}

/* a size as a raw JSON integer (never exponent notation) */
static cJSON *raw_size(size_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%zu", v);
	return cJSON_CreateRaw(buf);
}

void cmf_writer_set_plain(cmf_writer *w)
{
	w->plain = 1;
}

static cJSON *build_meta(cmf_writer *w)
{
	cJSON *m = cJSON_CreateObject(), *crc = cJSON_CreateObject(), *codec = cJSON_CreateObject();
	char *s;
	int nblr = 0;

	if (w->plain) {
		cJSON_AddStringToObject(m, "format", "pt");
		for (size_t i = 0; i < w->nmeta; i++)
			if (!generated_key(w->key[i]))
				cJSON_AddStringToObject(m, w->key[i], w->val[i]);
		cJSON_Delete(crc);
		cJSON_Delete(codec);
		return m;
	}
	for (size_t i = 0; i < w->n; i++) {
		const void *b = tensor_bytes_of(w, i);

		if (!b) {
			cJSON_Delete(m);
			cJSON_Delete(crc);
			cJSON_Delete(codec);
			return NULL;
		}
		cJSON_AddItemToObject(crc, w->t[i].name, raw_size(nv_crc32(b, w->t[i].nbytes)));
		if (w->t[i].blr) {
			cJSON_AddStringToObject(codec, w->t[i].name, "blr");
			nblr++;
		}
	}
	cJSON_AddStringToObject(m, "format", "cmf");
	cJSON_AddStringToObject(m, "cmf.version", "1");
	for (size_t i = 0; i < w->nmeta; i++)
		if (!generated_key(w->key[i]))
			cJSON_AddStringToObject(m, w->key[i], w->val[i]);
	if (nblr) {
		s = cJSON_PrintUnformatted(codec);
		cJSON_AddStringToObject(m, "cmf.codec", s ? s : "{}");
		free(s);
	}
	s = cJSON_PrintUnformatted(crc);
	cJSON_AddStringToObject(m, "cmf.crc32", s ? s : "{}");
	free(s);
	cJSON_Delete(crc);
	cJSON_Delete(codec);
	return m;
}

static char *build_header(cmf_writer *w, size_t *len)
{
	cJSON *root = cJSON_CreateObject(), *meta;
	size_t at = 0;
	char *s;

	if (!root)
		return nv_seterr("out of memory"), NULL;
	if (!(meta = build_meta(w))) {
		cJSON_Delete(root);
		return NULL;
	}
	cJSON_AddItemToObject(root, "__metadata__", meta);
	for (size_t i = 0; i < w->n; i++) {
		const wtensor *t = &w->t[i];
		cJSON *e = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *of = cJSON_CreateArray();

		cJSON_AddStringToObject(e, "dtype", cmf_dtype_name(t->dtype));
		for (size_t d = 0; d < t->ndim; d++)
			cJSON_AddItemToArray(sh, raw_size(t->shape[d]));
		cJSON_AddItemToObject(e, "shape", sh);
		cJSON_AddItemToArray(of, raw_size(at));
		cJSON_AddItemToArray(of, raw_size(at + t->nbytes));
		cJSON_AddItemToObject(e, "data_offsets", of);
		cJSON_AddItemToObject(root, t->name, e);
		at += t->nbytes;
	}
	s = print_free(root);
	if (s)
		*len = strlen(s);
	return s;
}

int cmf_writer_commit(cmf_writer *w, const char *path)
{
	size_t hlen, padded;
	char *hdr = build_header(w, &hlen);
	uint8_t lenbuf[8];
	aout o;

	if (!hdr)
		return -1;
	/* pad the header with spaces so the data buffer starts 8-aligned */
	padded = (hlen + 7) & ~(size_t)7;
	if (aout_open(&o, path, AOUT_BINARY) < 0) {
		free(hdr);
		return -1;
	}
	put_u64(lenbuf, padded);
	if (aout_write(&o, lenbuf, 8) < 0 || aout_write(&o, hdr, hlen) < 0 ||
	    aout_write(&o, "       ", padded - hlen) < 0)
		goto fail;
	for (size_t i = 0; i < w->n; i++) {
		const void *b;

		if (!w->t[i].nbytes)
			continue;
		if (!(b = tensor_bytes_of(w, i)) || aout_write(&o, b, w->t[i].nbytes) < 0)
			goto fail;
	}
	free(hdr);
	return aout_commit(&o);
fail:
	free(hdr);
	aout_abort(&o);
	return -1;
}
