/* tok.c - llama2.c sentencepiece-style BPE and GPT-2 byte-level BPE (see tok.h) */
#include "tok.h"
#include "err.h"
#include "le.h"
#include "mem.h"
#include "unicat.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a byte-string → int map, open addressing ---- */

struct tok_map {
	size_t cap;      /* power of two */
	char **key;      /* owned copies */
	size_t *klen;
	int *val;
	size_t used;
};

static uint64_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h;
}

static tok_map *map_new(size_t n)
{
	tok_map *m = nv_calloc(1, sizeof *m);
	size_t cap = 16;

	if (!m)
		return NULL;
	while (cap < 2 * n + 16)
		cap *= 2;
	m->cap = cap;
	m->key = nv_calloc(cap, sizeof *m->key);
	m->klen = nv_calloc(cap, sizeof *m->klen);
	m->val = nv_calloc(cap, sizeof *m->val);
	if (!m->key || !m->klen || !m->val) {
		free(m->key);
		free(m->klen);
		free(m->val);
		free(m);
		return NULL;
	}
	return m;
}

static void map_free(tok_map *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->cap; i++)
		free(m->key[i]);
	free(m->key);
	free(m->klen);
	free(m->val);
	free(m);
}

static size_t map_slot(const tok_map *m, const char *p, size_t n)
{
	size_t i = hash_bytes(p, n) & (m->cap - 1);

	while (m->key[i] && (m->klen[i] != n || memcmp(m->key[i], p, n) != 0))
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int map_get(const tok_map *m, const char *p, size_t n)
{
	size_t i;

	if (!m)
		return -1;
	i = map_slot(m, p, n);
	return m->key[i] ? m->val[i] : -1;
}

/* 1 when inserted, 0 when the key was there (value unchanged), -1 on error */
static int map_put(tok_map *m, const char *p, size_t n, int val)
{
	size_t i = map_slot(m, p, n);

	if (m->key[i])
		return 0;
	if (2 * (m->used + 1) > m->cap) {
		nv_seterr("tokenizer map is full");
		return -1;
	}
	if (!(m->key[i] = nv_malloc(n + 1, 1)))
		return -1;
	memcpy(m->key[i], p, n);
	m->key[i][n] = 0;
	m->klen[i] = n;
	m->val[i] = val;
	m->used++;
	return 1;
}

/* ---- the vocabulary ---- */

int tok_init(tok_vocab *v, tok_kind kind, size_t n)
{
	memset(v, 0, sizeof *v);
	v->kind = kind;
	v->n = n;
	v->bos = v->eos = v->unk = -1;
	for (int i = 0; i < 256; i++)
		v->byte_fallback[i] = -1;
	if (n == 0 || n > INT32_MAX) {
		nv_seterr("vocabulary of %zu pieces, want 1..%d", n, INT32_MAX);
		return -1;
	}
	v->piece = nv_calloc(n, sizeof *v->piece);
	v->len = nv_calloc(n, sizeof *v->len);
	v->score = nv_calloc(n, sizeof *v->score);
	if (!v->piece || !v->len || !v->score) {
		tok_free(v);
		return -1;
	}
	return 0;
}

int tok_set_piece(tok_vocab *v, size_t id, const char *p, size_t len, float score)
{
	if (id >= v->n) {
		nv_seterr("piece id %zu beyond the vocabulary (0..%zu)", id, v->n - 1);
		return -1;
	}
	if (memchr(p, 0, len)) {
		nv_seterr("piece %zu holds a NUL byte", id);
		return -1;
	}
	free(v->piece[id]);
	if (!(v->piece[id] = nv_malloc(len + 1, 1)))
		return -1;
	memcpy(v->piece[id], p, len);
	v->piece[id][len] = 0;
	v->len[id] = len;
	v->score[id] = score;
	return 0;
}

int tok_add_merge(tok_vocab *v, const char *a, size_t alen, const char *b, size_t blen)
{
	char *k;
	int rc;

	if (!v->ranks && !(v->ranks = map_new(1 << 16)))
		return -1;
	if (2 * (v->ranks->used + 1) > v->ranks->cap) {
		tok_map *bigger = map_new(v->ranks->cap);

		if (!bigger)
			return -1;
		for (size_t i = 0; i < v->ranks->cap; i++)
			if (v->ranks->key[i] &&
			    map_put(bigger, v->ranks->key[i], v->ranks->klen[i], v->ranks->val[i]) < 0) {
				map_free(bigger);
				return -1;
			}
		map_free(v->ranks);
		v->ranks = bigger;
	}
	if (!(k = nv_malloc(alen + blen + 2, 1)))
		return -1;
	/* pieces hold no NUL, so "a\0b" names the pair whatever bytes they hold */
	memcpy(k, a, alen);
	k[alen] = 0;
	memcpy(k + alen + 1, b, blen);
	rc = map_put(v->ranks, k, alen + blen + 1, (int)v->nmerges);
	free(k);
	if (rc < 0)
		return -1;
	v->nmerges++;
	return rc == 0; /* 1: the pair was there, with its first rank */
}

/* added ids longest piece first, then lowest id */
typedef struct {
	size_t len;
	int id;
} added_key;

static int added_order(const void *a, const void *b)
{
	const added_key *x = a, *y = b;

	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

int tok_set_added(tok_vocab *v, int k, const int32_t *ids, size_t n)
{
	tok_added *a = &v->added[k];
	added_key *key = nv_malloc(n + 1, sizeof *key);

	if (!key || !(a->id = nv_malloc(n + 1, sizeof *a->id))) {
		free(key);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || (size_t)ids[i] >= v->n || !v->piece[ids[i]] || !v->len[ids[i]]) {
			nv_seterr("added token %d is not a non-empty piece of the vocabulary", ids[i]);
			free(key);
			return -1;
		}
		key[i] = (added_key){ v->len[ids[i]], ids[i] };
	}
	qsort(key, n, sizeof *key, added_order);
	for (size_t i = 0; i < n; i++) {
		a->id[i] = key[i].id;
		a->first[(uint8_t)v->piece[key[i].id][0]] = 1;
	}
	a->n = n;
	free(key);
	return 0;
}

int tok_finish(tok_vocab *v)
{
	if (!(v->ids = map_new(v->n)))
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		int b;

		if (!v->piece[i]) {
			nv_seterr("piece %zu is missing", i);
			return -1;
		}
		v->maxlen = v->len[i] > v->maxlen ? v->len[i] : v->maxlen;
		/* a duplicate piece keeps its first id (sentencepiece vocabularies have some) */
		if (map_put(v->ids, v->piece[i], v->len[i], (int)i) < 0)
			return -1;
		if (v->kind == TOK_SPM && (b = nv_vocab_byte_piece(v->piece[i], v->len[i])) >= 0 &&
		    v->byte_fallback[b] < 0)
			v->byte_fallback[b] = (int)i;
	}
	if (v->bos >= (int)v->n || v->eos >= (int)v->n) {
		nv_seterr("bos %d or eos %d beyond the vocabulary (0..%zu)", v->bos, v->eos,
			  v->n - 1);
		return -1;
	}
	return 0;
}

void tok_free(tok_vocab *v)
{
	if (v->piece)
		for (size_t i = 0; i < v->n; i++)
			free(v->piece[i]);
	free(v->piece);
	free(v->len);
	free(v->score);
	map_free(v->ids);
	map_free(v->ranks);
	free(v->added[0].id);
	free(v->added[1].id);
	memset(v, 0, sizeof *v);
}

int tok_lookup(const tok_vocab *v, const char *p, size_t len)
{
	return map_get(v->ids, p, len);
}

int tok_load_llama2(tok_vocab *v, const uint8_t *buf, size_t len, size_t n)
{
	size_t off = 4;

	if (tok_init(v, TOK_SPM, n) < 0)
		return -1;
	if (len < 4)
		goto short_file;
	for (size_t i = 0; i < n; i++) {
		uint32_t k;
		float sc;

		if (len - off < 8)
			goto short_file;
		sc = le_f32(buf + off);
		k = le_u32(buf + off + 4);
		off += 8;
		if (k > len - off)
			goto short_file;
		if (tok_set_piece(v, i, (const char *)buf + off, k, sc) < 0)
			goto fail;
		off += k;
	}
	v->bos = 1;
	v->eos = 2;
	v->add_bos = 1;
	v->add_space_prefix = 1;
	if (tok_finish(v) < 0)
		goto fail;
	return 0;
short_file:
	nv_seterr("tokenizer file ends at byte %zu before piece data of %zu pieces", len, n);
fail:
	tok_free(v);
	return -1;
}

/* ---- llama2.c's encode ---- */

typedef struct {
	int id;
	int prev, next;  /* neighbours in the list, -1 at the ends */
	unsigned ver;    /* bumped when the symbol changes */
} sym;

typedef struct {
	double score;    /* the piece's score, or minus the merge's rank */
	int left, right; /* symbols */
	int id;          /* the merged piece */
	unsigned lver, rver;
} cand;

typedef struct {
	cand *h;
	size_t n, cap;
} heap;

/* better: higher score, then the leftmost (symbols never change order) */
static int better(const cand *a, const cand *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(heap *hp, cand c)
{
	size_t i;

	if (hp->n == hp->cap) {
		size_t nc = hp->cap ? 2 * hp->cap : 256;
		cand *nh = nv_realloc(hp->h, nc, sizeof *nh);

		if (!nh)
			return -1;
		hp->h = nh;
		hp->cap = nc;
	}
	for (i = hp->n++; i > 0 && better(&c, &hp->h[(i - 1) / 2]); i = (i - 1) / 2)
		hp->h[i] = hp->h[(i - 1) / 2];
	hp->h[i] = c;
	return 0;
}

static cand heap_pop(heap *hp)
{
	cand top = hp->h[0], last = hp->h[--hp->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= hp->n)
			break;
		if (c + 1 < hp->n && better(&hp->h[c + 1], &hp->h[c]))
			c++;
		if (!better(&hp->h[c], &last))
			break;
		hp->h[i] = hp->h[c];
		i = c;
	}
	if (hp->n)
		hp->h[i] = last;
	return top;
}

/* the candidate merge of symbols a and b, pushed when their concatenation is a piece */
static int push_pair(const tok_vocab *v, heap *hp, const sym *s, int a, int b, char *buf)
{
	size_t la, lb;
	int id;

	if (a < 0 || b < 0)
		return 0;
	la = v->len[s[a].id];
	lb = v->len[s[b].id];
	memcpy(buf, v->piece[s[a].id], la);
	if (v->by_rank) {
		int rank;

		buf[la] = 0;
		memcpy(buf + la + 1, v->piece[s[b].id], lb);
		if ((rank = map_get(v->ranks, buf, la + lb + 1)) < 0)
			return 0;
		memmove(buf + la, buf + la + 1, lb);
		if ((id = tok_lookup(v, buf, la + lb)) < 0)
			return 0;
		return heap_push(hp, (cand){ -(double)rank, a, b, id, s[a].ver, s[b].ver });
	}
	memcpy(buf + la, v->piece[s[b].id], lb);
	if ((id = tok_lookup(v, buf, la + lb)) < 0)
		return 0;
	return heap_push(hp, (cand){ v->score[id], a, b, id, s[a].ver, s[b].ver });
}

/* the initial symbols: one per code point, or its bytes' fallback pieces */
/* t: a segment at byte off of the text, after shift bytes of space prefix */
static int spm_symbols(const tok_vocab *v, const char *t, size_t len, size_t shift, size_t off,
		       sym *s, size_t *ns)
{
	size_t n = 0;

	for (size_t i = 0; i < len;) {
		size_t k = 1;
		int id;

		/* run.c: a lead byte and up to 3 continuation bytes */
		while (i + k < len && k < 4 && ((uint8_t)t[i + k] & 0xC0) == 0x80)
			k++;
		if ((id = tok_lookup(v, t + i, k)) >= 0) {
			s[n++] = (sym){ id, -1, -1, 0 };
		} else {
			for (size_t j = 0; j < k; j++) {
				int b = v->byte_fallback[(uint8_t)t[i + j]];

				if (b < 0 && i + j < shift) {
					nv_seterr("the dummy-prefix space has no token");
					return -1;
				}
				if (b < 0) {
					nv_seterr("byte 0x%02x at offset %zu has no token and no byte "
						  "fallback", (uint8_t)t[i + j], off + i + j - shift);
					return -1;
				}
				s[n++] = (sym){ b, -1, -1, 0 };
			}
		}
		i += k;
	}
	for (size_t i = 0; i < n; i++) {
		s[i].prev = (int)i - 1;
		s[i].next = i + 1 < n ? (int)i + 1 : -1;
	}
	*ns = n;
	return 0;
}

static int spm_merge(const tok_vocab *v, sym *s, size_t ns, char *buf)
{
	heap hp = { 0 };
	int rc = 0;

	for (size_t i = 0; i + 1 < ns && rc == 0; i++)
		rc = push_pair(v, &hp, s, (int)i, (int)i + 1, buf);
	while (rc == 0 && hp.n) {
		cand c = heap_pop(&hp);
		int a = c.left, b = c.right;

		if (s[a].id < 0 || s[b].id < 0 || s[a].next != b || s[a].ver != c.lver ||
		    s[b].ver != c.rver)
			continue;
		s[a].id = c.id;
		s[a].ver++;
		s[a].next = s[b].next;
		if (s[b].next >= 0)
			s[s[b].next].prev = a;
		s[b].id = -1;
		rc = push_pair(v, &hp, s, s[a].prev, a, buf);
		if (rc == 0)
			rc = push_pair(v, &hp, s, a, s[a].next, buf);
	}
	free(hp.h);
	return rc;
}

static int spm_encode(const tok_vocab *v, const char *text, size_t len, size_t shift,
		      size_t off, uint32_t *out, size_t *n)
{
	sym *s = nv_malloc(len + 1, sizeof *s);
	char *buf = nv_malloc(2 * v->maxlen + 2, 1);
	size_t ns = 0;
	int rc = -1;

	if (!s || !buf || spm_symbols(v, text, len, shift, off, s, &ns) < 0 || spm_merge(v, s, ns, buf) < 0)
		goto out;
	for (int i = ns ? 0 : -1; i >= 0; i = s[i].next)
		out[(*n)++] = (uint32_t)s[i].id;
	rc = 0;
out:
	free(s);
	free(buf);
	return rc;
}

/* ---- GPT-2 byte-level BPE ---- */

/* GPT-2's byte → code point map: printable Latin-1 bytes are themselves, the rest 256+ */
static uint32_t byte_map[256];
static pthread_once_t byte_once = PTHREAD_ONCE_INIT;

static void byte_map_init(void)
{
	uint32_t next = 256;

	for (int i = 0; i < 256; i++) {
		int keep = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;

		byte_map[i] = keep ? (uint32_t)i : next++;
	}
}

static uint32_t byte_cp(uint8_t b)
{
	pthread_once(&byte_once, byte_map_init);
	return byte_map[b];
}

/* decode one code point at t (len bytes left); invalid bytes read as themselves */
static uint32_t get_utf8(const uint8_t *t, size_t len, size_t *k)
{
	uint32_t c = t[0];
	size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;

	if (n > len || c >= 0xF8)
		n = 1;
	for (size_t i = 1; i < n; i++)
		if ((t[i] & 0xC0) != 0x80)
			n = 1;
	if (n == 1) {
		*k = 1;
		return c;
	}
	c &= 0x7F >> n;
	for (size_t i = 1; i < n; i++)
		c = c << 6 | (t[i] & 0x3F);
	*k = n;
	return c;
}

enum { CL_SPACE, CL_LETTER, CL_NUMBER, CL_OTHER };

/* the classes of GPT-2's pattern: \s (White_Space), \p{L}, \p{N}, the rest */
static int cp_class(uint32_t c)
{
	if (c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xA0 || c == 0x1680 ||
	    (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
	    c == 0x205F || c == 0x3000)
		return CL_SPACE;
	switch (nv_unicat(c)) {
	case NV_UNI_LETTER: return CL_LETTER;
	case NV_UNI_NUMBER: return CL_NUMBER;
	default: return CL_OTHER;
	}
}

typedef struct {
	uint32_t *cp;  /* code points */
	size_t *off;   /* byte offset of each, plus the end */
	int *cl;       /* classes */
	size_t n;
} cps;

/* the length (in code points) of GPT-2's pattern match at i, within [i, end) */
/* 's 't 're 've 'm 'll 'd at i: its length, or 0; fold: any case (U+017F is an s) */
static size_t contraction(const cps *t, size_t i, size_t end, int fold)
{
	static const char *const contr[] = { "s", "t", "re", "ve", "m", "ll", "d" };

	if (t->cp[i] != '\'')
		return 0;
	for (size_t c = 0; c < 7; c++) {
		size_t k = strlen(contr[c]), m = 0;

		for (; m < k && i + 1 + m < end; m++) {
			uint32_t x = t->cp[i + 1 + m];

			if (fold && x == 0x17F)
				x = 's';
			else if (fold && x >= 'A' && x <= 'Z')
				x |= 0x20;
			if (x != (uint8_t)contr[c][m])
				break;
		}
		if (m == k)
			return k + 1;
	}
	return 0;
}

/* white space at i: \s+(?!\S)|\s+ — all of it at the end, else all but the last */
static size_t space_run(const cps *t, size_t i, size_t end)
{
	size_t j = i;

	while (j < end && t->cl[j] == CL_SPACE)
		j++;
	if (j == end || j - i == 1)
		return j - i;
	return j - i - 1;
}

/* the length (in code points) of GPT-2's pattern match at i, within [i, end) */
static size_t gpt2_match(const cps *t, size_t i, size_t end)
{
	size_t j = i, k;

	if ((k = contraction(t, i, end, 0)))
		return k;
	if (t->cp[i] == ' ' && i + 1 < end && t->cl[i + 1] != CL_SPACE)
		j = i + 1;
	if (t->cl[j] != CL_SPACE) {
		int c = t->cl[j];

		while (j < end && t->cl[j] == c)
			j++;
		return j - i;
	}
	return space_run(t, i, end);
}

static int is_nl(uint32_t c)
{
	return c == '\r' || c == '\n';
}

/*
 * Llama 3's pattern at i (Qwen2's with ndig 1): (?i:'s|'t|'re|'ve|'m|'ll|'d)
 * | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,ndig} | ?[^\s\p{L}\p{N}]+[\r\n]*
 * | \s*[\r\n]+ | \s+(?!\S) | \s+, each alternative tried in turn
 */
static size_t llama3_match(const cps *t, size_t i, size_t end, size_t ndig)
{
	size_t j = i, k;

	if ((k = contraction(t, i, end, 1)))
		return k;
	if (t->cl[i] == CL_LETTER ||
	    (t->cl[i] != CL_NUMBER && !is_nl(t->cp[i]) && i + 1 < end && t->cl[i + 1] == CL_LETTER)) {
		for (j = i + 1; j < end && t->cl[j] == CL_LETTER; j++)
			;
		return j - i;
	}
	if (t->cl[i] == CL_NUMBER) {
		while (j < end && j - i < ndig && t->cl[j] == CL_NUMBER)
			j++;
		return j - i;
	}
	if (t->cp[i] == ' ' && i + 1 < end && t->cl[i + 1] == CL_OTHER)
		j = i + 1;
	if (t->cl[j] == CL_OTHER) {
		while (j < end && t->cl[j] == CL_OTHER)
			j++;
		while (j < end && is_nl(t->cp[j]))
			j++;
		return j - i;
	}
	/* \s*[\r\n]+: up to the last newline of the white space */
	for (j = i; j < end && t->cl[j] == CL_SPACE; j++)
		;
	for (k = j; k > i; k--)
		if (is_nl(t->cp[k - 1]))
			return k - i;
	return space_run(t, i, end);
}

/*
 * the ids of a chunk's ns symbols (buf + so[i], sl[i] bytes); a symbol with
 * no piece (a byte outside the vocabulary: it merges with nothing) is an
 * error, dropped, or unk, consecutive ones fused (Hugging Face's BPE)
 */
static int gpt2_emit(const tok_vocab *v, const char *buf, const size_t *so, const size_t *sl,
		     size_t ns, uint32_t *out, size_t *n, size_t off)
{
	int unk_last = 0;

	for (size_t i = 0; i < ns; i++) {
		int id = tok_lookup(v, buf + so[i], sl[i]);

		if (id < 0 && v->missing == NV_MISSING_ERROR) {
			nv_seterr("text at byte offset %zu has no token", off);
			return -1;
		}
		if (id >= 0 || v->missing == NV_MISSING_DROP) {
			unk_last = 0;
			if (id >= 0)
				out[(*n)++] = (uint32_t)id;
			continue;
		}
		if (!(unk_last && v->missing == NV_MISSING_FUSE_UNK))
			out[(*n)++] = (uint32_t)v->unk;
		unk_last = 1;
	}
	return 0;
}

/* BPE of one chunk's mapped bytes; the ids appended to out */
static int gpt2_bpe(const tok_vocab *v, const char *chunk, size_t len, uint32_t *out, size_t *n,
		    char *buf, size_t off)
{
	size_t ns = 0, *so = nv_malloc(2 * len + 2, sizeof *so), *sl;
	int rc = -1;

	if (!so)
		return -1;
	sl = so + len + 1;
	for (size_t i = 0; i < len; i++) {
		char m[4];
		size_t k = nv_utf8_put(m, byte_cp((uint8_t)chunk[i]));

		so[ns] = ns ? so[ns - 1] + sl[ns - 1] : 0;
		memcpy(buf + so[ns], m, k);
		sl[ns++] = k;
	}
	if (v->ignore_merges && ns > 1 && (rc = tok_lookup(v, buf, so[ns - 1] + sl[ns - 1])) >= 0) {
		out[(*n)++] = (uint32_t)rc;
		free(so);
		return 0;
	}
	for (;;) {
		int best = -1, rank;
		size_t bi = 0;

		for (size_t i = 0; i + 1 < ns; i++) {
			/* the symbols are contiguous in buf: "a\0b" needs a NUL between */
			char key[512];

			if (sl[i] + sl[i + 1] + 1 > sizeof key)
				continue;
			memcpy(key, buf + so[i], sl[i]);
			key[sl[i]] = 0;
			memcpy(key + sl[i] + 1, buf + so[i + 1], sl[i + 1]);
			rank = map_get(v->ranks, key, sl[i] + sl[i + 1] + 1);
			if (rank >= 0 && (best < 0 || rank < best)) {
				best = rank;
				bi = i;
			}
		}
		if (best < 0)
			break;
		sl[bi] += sl[bi + 1];
		memmove(so + bi + 1, so + bi + 2, (ns - bi - 2) * sizeof *so);
		memmove(sl + bi + 1, sl + bi + 2, (ns - bi - 2) * sizeof *sl);
		ns--;
	}
	rc = gpt2_emit(v, buf, so, sl, ns, out, n, off);
	free(so);
	return rc;
}

static int to_cps(const char *text, size_t len, cps *t)
{
	t->n = 0;
	t->cp = nv_malloc(len + 1, sizeof *t->cp);
	t->off = nv_malloc(len + 1, sizeof *t->off);
	t->cl = nv_malloc(len + 1, sizeof *t->cl);
	if (!t->cp || !t->off || !t->cl)
		return -1;
	for (size_t i = 0; i < len;) {
		size_t k;

		t->off[t->n] = i;
		t->cp[t->n] = get_utf8((const uint8_t *)text + i, len - i, &k);
		t->cl[t->n] = cp_class(t->cp[t->n]);
		t->n++;
		i += k;
	}
	t->off[t->n] = len;
	return 0;
}

static int gpt2_encode(const tok_vocab *v, const char *text, size_t len, size_t shift,
		       size_t off, uint32_t *out, size_t *n)
{
	cps t = { 0 };
	char *buf = nv_malloc(4 * len + 4, 1);
	int rc = to_cps(text, len, &t);

	for (size_t i = 0; rc == 0 && buf && i < t.n;) {
		size_t end = i + 1, k;

		/* split_digits: every number code point is a chunk of its own */
		if (!(v->split_digits && t.cl[i] == CL_NUMBER))
			while (end < t.n && !(v->split_digits && t.cl[end] == CL_NUMBER))
				end++;
		for (; rc == 0 && i < end; i += k) {
			k = v->pattern == TOK_PAT_GPT2 ? gpt2_match(&t, i, end)
			    : llama3_match(&t, i, end, v->pattern == TOK_PAT_QWEN2 ? 1 : 3);
			rc = gpt2_bpe(v, text + t.off[i], t.off[i + k] - t.off[i], out, n, buf,
				      off + (t.off[i] > shift ? t.off[i] - shift : 0));
		}
	}
	if (!buf)
		rc = -1;
	free(buf);
	free(t.cp);
	free(t.off);
	free(t.cl);
	return rc;
}

/* p[0..n) with U+2581 (E2 96 81) turned into spaces, into b (n bytes at least); its length */
static size_t spm_spaces(const char *p, size_t n, char *b)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (i + 2 < n && memcmp(p + i, "\xE2\x96\x81", 3) == 0) {
			b[k++] = ' ';
			i += 2;
		} else {
			b[k++] = p[i];
		}
	}
	return k;
}

/* the ids of an encoding under way (capacity 2·len + 3: bos, eos, a prefix a segment) */
typedef struct {
	uint32_t *out;
	size_t n;
} enc;

/* one segment between added tokens, at byte off of the text, by the BPE */
static int enc_bpe(const tok_vocab *v, const char *text, size_t len, size_t off, enc *e)
{
	char *t = NULL;
	size_t shift = 0;
	int rc;

	if (len == 0)
		return 0;
	if (v->add_space_prefix && (off == 0 || v->prefix_each) &&
	    !(v->prefix_unless_space &&
	      (text[0] == ' ' || (len >= 3 && !memcmp(text, "\xE2\x96\x81", 3)))))
		shift = 1;
	/* Hugging Face's normalizer makes every space U+2581: one in the text is a space */
	if (shift || v->by_rank) {
		if (!(t = nv_malloc(len + 1, 1)))
			return -1;
		t[0] = ' ';
		len = shift + (v->by_rank ? spm_spaces(text, len, t + shift)
					  : (memcpy(t + shift, text, len), len));
		text = t;
	}
	rc = v->kind == TOK_SPM ? spm_encode(v, text, len, shift, off, e->out, &e->n)
				: gpt2_encode(v, text, len, shift, off, e->out, &e->n);
	free(t);
	return rc;
}

/* the leftmost, longest added piece of a in t[i..len): its id (*at, *k bytes), or -1 */
static int find_added(const tok_vocab *v, const tok_added *a, const char *t, size_t len,
		      size_t i, size_t *at, size_t *k)
{
	for (; i < len; i++) {
		if (!a->first[(uint8_t)t[i]])
			continue;
		for (size_t j = 0; j < a->n; j++) {
			size_t pl = v->len[a->id[j]];

			if (pl <= len - i && memcmp(t + i, v->piece[a->id[j]], pl) == 0) {
				*at = i;
				*k = pl;
				return a->id[j];
			}
		}
	}
	*at = len;
	*k = 0;
	return -1;
}

/* text at byte off: split on the added tokens of pass k, the rest to pass k + 1 or the BPE */
static int enc_pass(const tok_vocab *v, int k, const char *t, size_t len, size_t off, enc *e);

/*
 * a segment between the first list's pieces, normalized to NFC first when
 * the tokenizer does so (as the tokenizers library does: those pieces are
 * found in the text as it is, the second list's in the normalized text);
 * offsets in errors are then the segment's start
 */
static int enc_segment(const tok_vocab *v, const char *t, size_t len, size_t off, enc *e)
{
	char *nfc;
	size_t n;
	int rc;

	if (!v->nfc)
		return enc_pass(v, 1, t, len, off, e);
	if (nv_nfc(t, len, &nfc, &n) < 0)
		return -1;
	rc = enc_pass(v, 1, nfc ? nfc : t, n, off, e);
	free(nfc);
	return rc;
}

static int enc_pass(const tok_vocab *v, int k, const char *t, size_t len, size_t off, enc *e)
{
	for (size_t i = 0;;) {
		size_t at, pl;
		int id = find_added(v, &v->added[k], t, len, i, &at, &pl);
		int rc = k == 0 ? enc_segment(v, t + i, at - i, off + i, e)
				: enc_bpe(v, t + i, at - i, off + i, e);

		if (rc < 0)
			return -1;
		if (id < 0)
			return 0;
		e->out[e->n++] = (uint32_t)id;
		i = at + pl;
	}
}

int tok_encode(const tok_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n)
{
	enc e = { NULL, 0 };

	size_t grow = v->nfc ? 3 : 1; /* NFC makes a text at most three times as long */

	*ids = NULL;
	*n = 0;
	if (len > (SIZE_MAX - 3) / (8 * grow)) {
		nv_seterr("a text of %zu bytes is too long", len);
		return -1;
	}
	if (!(e.out = nv_malloc(2 * grow * len + 3, sizeof *e.out)))
		return -1;
	if (v->add_bos && v->bos >= 0)
		e.out[e.n++] = (uint32_t)v->bos;
	if (enc_pass(v, 0, text, len, 0, &e) < 0) {
		free(e.out);
		return -1;
	}
	if (v->add_eos && v->eos >= 0)
		e.out[e.n++] = (uint32_t)v->eos;
	*ids = e.out;
	*n = e.n;
	return 0;
}

int tok_gpt2_bytes(const char *p, size_t len, char *out, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < len; i++)
		*n += nv_utf8_put(out + *n, byte_cp((uint8_t)p[i]));
	return 0;
}

/* a GPT-2 piece back to bytes */
static int gpt2_unmap(const char *p, size_t len, char *buf, size_t cap, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < len;) {
		size_t k;
		uint32_t c = get_utf8((const uint8_t *)p + i, len - i, &k);
		int b = -1;

		for (int x = 0; x < 256 && b < 0; x++)
			if (byte_cp((uint8_t)x) == c)
				b = x;
		if (b < 0 || *n >= cap) {
			nv_seterr("piece '%.*s' is not byte-level", (int)len, p);
			return -1;
		}
		buf[(*n)++] = (char)b;
		i += k;
	}
	return 0;
}

int tok_decode(const tok_vocab *v, int prev, uint32_t id, char *buf, size_t cap, size_t *len)
{
	const char *p;
	size_t n;
	int b;

	if (id >= v->n) {
		nv_seterr("token id %u beyond the vocabulary (0..%zu)", id, v->n - 1);
		return -1;
	}
	p = v->piece[id];
	n = v->len[id];
	if (v->kind == TOK_GPT2)
		return gpt2_unmap(p, n, buf, cap, len);
	if ((b = nv_vocab_byte_piece(p, n)) >= 0) {
		buf[0] = (char)b;
		*len = 1;
		return 0;
	}
	if (prev >= 0 && prev == v->bos && n > 0 && p[0] == ' ') {
		p++;
		n--;
	}
	if (n > cap) {
		nv_seterr("piece %u longer than %zu bytes", id, cap);
		return -1;
	}
	memcpy(buf, p, n);
	*len = n;
	return 0;
}

/* ---- from cmf.tokenizer ---- */

/* a sentencepiece piece with its U+2581 turned into spaces */
static int set_spm_piece(tok_vocab *v, size_t id, const char *p, float score)
{
	size_t n = strlen(p);
	char *b = nv_malloc(n + 1, 1);
	int rc;

	if (!b)
		return -1;
	rc = tok_set_piece(v, id, b, spm_spaces(p, n, b), score);
	free(b);
	return rc;
}

static int gpt2_pre(tok_vocab *v, const char *pre)
{
	static const char *const plain[] = { "", "gpt2", "gpt-2", "default" };
	static const char *const digits[] = { "smollm", "starcoder", "refact" };

	if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "qwen2")) {
		v->pattern = pre[0] == 'q' ? TOK_PAT_QWEN2 : TOK_PAT_LLAMA3;
		return 0;
	}

	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
		if (strcmp(pre, plain[i]) == 0)
			return 0;
	for (size_t i = 0; i < sizeof digits / sizeof *digits; i++)
		if (strcmp(pre, digits[i]) == 0) {
			v->split_digits = 1;
			return 0;
		}
	nv_seterr("gpt2 pre-tokenizer '%s' is not supported (gpt2, smollm, starcoder, refact, "
		  "llama-bpe, qwen2)", pre);
	return -1;
}

/* the merges "A B" by rank; a sentencepiece vocabulary's with U+2581 turned into spaces */
static int add_merges(tok_vocab *v, const nv_vocab *src)
{
	for (size_t i = 0; i < src->nmerges; i++) {
		const char *m = src->merges[i], *sp = strchr(m, ' ');
		size_t n = strlen(m), la, lb;
		char *b;
		int rc;

		if (!sp || sp == m || !sp[1] || strchr(sp + 1, ' ')) {
			nv_seterr("merge %zu '%s' is not two pieces separated by one space", i, m);
			return -1;
		}
		if (v->kind == TOK_GPT2) {
			if (tok_add_merge(v, m, (size_t)(sp - m), sp + 1, strlen(sp + 1)) < 0)
				return -1;
			continue;
		}
		if (!(b = nv_malloc(n + 1, 1)))
			return -1;
		la = spm_spaces(m, (size_t)(sp - m), b);
		lb = spm_spaces(sp + 1, strlen(sp + 1), b + la);
		rc = tok_add_merge(v, b, la, b + la, lb);
		free(b);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* what the vocabulary says beyond its pieces: merges, added tokens, ids and flags */
static int from_vocab_rest(tok_vocab *v, const nv_vocab *src)
{
	if (v->kind == TOK_GPT2 && gpt2_pre(v, src->pre) < 0)
		return -1;
	v->by_rank = v->kind == TOK_SPM && src->merges;
	if (add_merges(v, src) < 0)
		return -1;
	for (int k = 0; k < 2; k++)
		if (tok_set_added(v, k, src->added[k], src->nadded[k]) < 0)
			return -1;
	v->bos = src->bos;
	v->eos = src->eos;
	v->add_bos = src->add_bos;
	v->add_eos = src->add_eos;
	v->add_space_prefix = src->add_space_prefix;
	v->prefix_each = src->prefix_each;
	v->prefix_unless_space = src->prefix_unless_space;
	v->missing = src->missing;
	v->unk = src->unk;
	v->ignore_merges = src->ignore_merges;
	v->nfc = src->nfc;
	if (v->missing >= NV_MISSING_UNK && (v->unk < 0 || (size_t)v->unk >= v->n)) {
		nv_seterr("a missing piece is unk, but the vocabulary has no unk");
		return -1;
	}
	return 0;
}

int tok_from_vocab(tok_vocab *v, const nv_vocab *src)
{
	tok_kind k = src->model == NV_VOCAB_GPT2 ? TOK_GPT2 : TOK_SPM;

	if (tok_init(v, k, src->n) < 0)
		return -1;
	for (size_t i = 0; i < src->n; i++) {
		float sc = src->scores ? src->scores[i] : 0;
		int rc = k == TOK_SPM ? set_spm_piece(v, i, src->tokens[i], sc)
				      : tok_set_piece(v, i, src->tokens[i], strlen(src->tokens[i]), sc);

		if (rc < 0)
			goto fail;
	}
	if (from_vocab_rest(v, src) < 0 || tok_finish(v) < 0)
		goto fail;
	return 0;
fail:
	tok_free(v);
	return -1;
}

int tok_from_cmf(tok_vocab *v, const cmf_file *f)
{
	const char *json = cmf_meta(f, "cmf.tokenizer");
	nv_vocab src;
	int rc;

	memset(v, 0, sizeof *v);
	if (!json) {
		nv_seterr("the model carries no tokenizer: import it from a directory with its "
			  "tokenizer.json (or a GGUF, or llama2.c with --vocab), or give --tokens");
		return -1;
	}
	if (nv_vocab_from_json(json, &src) < 0) {
		nv_preerr("cmf.tokenizer");
		return -1;
	}
	rc = tok_from_vocab(v, &src);
	nv_vocab_free(&src);
	return rc;
}

int tok_read_ids(const char *path, uint32_t **ids, size_t *n)
{
	uint8_t *b;
	size_t len;

	*ids = NULL;
	*n = 0;
	if (nv_read_file(path, &b, &len) < 0)
		return -1;
	if (len == 0 || len % 4) {
		if (len)
			nv_seterr("size %zu bytes is not a multiple of 4 (u32 token ids)", len);
		else
			nv_seterr("no tokens (the file is empty)");
		free(b);
		return -1;
	}
	if (!(*ids = nv_malloc(len / 4, sizeof **ids))) {
		free(b);
		return -1;
	}
	for (size_t i = 0; i < len / 4; i++)
		(*ids)[i] = le_u32(b + 4 * i);
	*n = len / 4;
	free(b);
	return 0;
}

int tok_text_ids(const cmf_file *f, const char *path, uint32_t **ids, size_t *n)
{
	tok_vocab v;
	uint8_t *b;
	size_t len;
	int rc;

	*ids = NULL;
	*n = 0;
	if (tok_from_cmf(&v, f) < 0)
		return -1;
	if (nv_read_file(path, &b, &len) < 0) {
		tok_free(&v);
		return -1;
	}
	rc = tok_encode(&v, (const char *)b, len, ids, n);
	free(b);
	tok_free(&v);
	return rc;
}
