/* unicat.c - Unicode letters, numbers, the NFC quick check and NFC (see unicat.h) */
#include "unicat.h"
#include "mem.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unicat_tab.h"

/* the range holding c (c ≥ 0x80), or -1 */
static long find(uint32_t c)
{
	size_t lo = 0, hi = sizeof cat / sizeof *cat;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c < cat[mid].lo)
			hi = mid;
		else if (c > cat[mid].hi)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

int nv_unicat(uint32_t c)
{
	long k;

	if (c < 0x80) {
		if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
			return NV_UNI_LETTER;
		return c >= '0' && c <= '9' ? NV_UNI_NUMBER : NV_UNI_OTHER;
	}
	k = find(c);
	return k < 0 ? NV_UNI_OTHER : cat[k].cl;
}

int nv_uninfc(uint32_t c, int *ccc)
{
	long k = c < 0x80 ? -1 : find(c);

	*ccc = k < 0 ? 0 : cat[k].ccc;
	return k < 0 ? NV_NFC_YES : cat[k].qc;
}

/* ---------------------------------------------------------------- NFC */

enum {
	S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
	L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT,
	S_COUNT = L_COUNT * N_COUNT,
	RAW = 0x80000000u /* a byte outside UTF-8, kept as it is */
};

static int ccc_of(uint32_t c)
{
	int ccc;

	if (c & RAW)
		return 0;
	nv_uninfc(c, &ccc);
	return ccc;
}

/* the UTF-8 sequence at s (len ≥ 1 bytes): its code point and length, or RAW | byte */
static uint32_t utf8_at(const uint8_t *s, size_t len, size_t *k)
{
	uint32_t c = s[0], min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t n = c < 0x80 ? 1 : c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;

	*k = 1;
	if (n == 1)
		return c;
	if (n == 0 || n > len)
		return RAW | c;
	c &= 0x7F >> n;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return RAW | s[0];
		c = c << 6 | (s[i] & 0x3F);
	}
	if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000))
		return RAW | s[0];
	*k = n;
	return c;
}

size_t nv_utf8_put(char *o, uint32_t c)
{
	if (c < 0x80)
		return o[0] = (char)c, 1;
	if (c < 0x800)
		return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
	if (c < 0x10000) {
		o[0] = (char)(0xE0 | c >> 12);
		o[1] = (char)(0x80 | (c >> 6 & 0x3F));
		o[2] = (char)(0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | c >> 18);
	o[1] = (char)(0x80 | (c >> 12 & 0x3F));
	o[2] = (char)(0x80 | (c >> 6 & 0x3F));
	o[3] = (char)(0x80 | (c & 0x3F));
	return 4;
}

/* c's full canonical decomposition appended at o: the count (at most 4) */
static size_t decompose(uint32_t c, uint32_t *o)
{
	size_t lo = 0, hi = sizeof decomp / sizeof *decomp, n;

	if (c >= S_BASE && c < S_BASE + S_COUNT) {
		uint32_t s = c - S_BASE;

		o[0] = L_BASE + s / N_COUNT;
		o[1] = V_BASE + s % N_COUNT / T_COUNT;
		if (s % T_COUNT == 0)
			return 2;
		o[2] = T_BASE + s % T_COUNT;
		return 3;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (decomp[mid].c < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	if ((c & RAW) || lo == sizeof decomp / sizeof *decomp || decomp[lo].c != c)
		return o[0] = c, 1;
	n = decompose(decomp[lo].a, o);
	return decomp[lo].b ? n + decompose(decomp[lo].b, o + n) : n;
}

/* the primary composite of (a, b), or 0 */
static uint32_t compose(uint32_t a, uint32_t b)
{
	size_t lo = 0, hi = sizeof comp / sizeof *comp;

	if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
		return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
	if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
	    b < T_BASE + T_COUNT)
		return a + (b - T_BASE);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (comp[mid].a < a || (comp[mid].a == a && comp[mid].b < b))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sizeof comp / sizeof *comp && comp[lo].a == a && comp[lo].b == b ? comp[lo].c
										     : 0;
}

/* NFC leaves s alone: every code point's quick check Yes, the marks in canonical order */
static int nfc_quick(const char *s, size_t n)
{
	int last = 0;

	for (size_t i = 0, k; i < n; i += k) {
		uint32_t c = utf8_at((const uint8_t *)s + i, n - i, &k);
		int ccc, qc = (c & RAW) ? (ccc = 0, NV_NFC_YES) : nv_uninfc(c, &ccc);

		if (qc != NV_NFC_YES || (ccc && last > ccc))
			return 0;
		last = ccc;
	}
	return 1;
}

/* the run c[0..n) of non-starters sorted by class, stably: by insertion when short, else by count (tmp: n) */
static void sort_run(uint32_t *c, size_t n, uint32_t *tmp)
{
	size_t at[257] = { 0 };

	if (n <= 8) {
		for (size_t i = 1; i < n; i++) {
			uint32_t x = c[i];
			int cx = ccc_of(x);
			size_t j = i;

			while (j > 0 && ccc_of(c[j - 1]) > cx) {
				c[j] = c[j - 1];
				j--;
			}
			c[j] = x;
		}
		return;
	}
	for (size_t i = 0; i < n; i++)
		at[ccc_of(c[i]) + 1]++;
	for (int k = 1; k < 257; k++)
		at[k] += at[k - 1];
	for (size_t i = 0; i < n; i++)
		tmp[at[ccc_of(c[i])]++] = c[i];
	memcpy(c, tmp, n * sizeof *c);
}

/* canonical order: each run of non-starters sorted by class, stably (tmp: n) */
static void reorder(uint32_t *c, size_t n, uint32_t *tmp)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && ccc_of(c[j]))
			j++;
		if (j - i > 1)
			sort_run(c + i, j - i, tmp);
		i = j > i ? j : i + 1;
	}
}

/* canonical composition in place (UAX #15's algorithm): the new count */
static size_t recompose(uint32_t *c, size_t n)
{
	size_t starter = 0, w = 1;
	int last;

	if (n == 0)
		return 0;
	last = ccc_of(c[0]) ? 256 : 0;
	for (size_t i = 1; i < n; i++) {
		uint32_t x = c[i], y;
		int cx = ccc_of(x);

		if (!(c[starter] & RAW) && !(x & RAW) && (last < cx || last == 0) &&
		    (y = compose(c[starter], x))) {
			c[starter] = y;
			continue;
		}
		if (cx == 0)
			starter = w;
		last = cx;
		c[w++] = x;
	}
	return w;
}

int nv_nfc(const char *s, size_t n, char **out, size_t *outn)
{
	uint32_t *c;
	size_t m = 0;

	*out = NULL;
	*outn = n;
	if (nfc_quick(s, n))
		return 0;
	if (n > SIZE_MAX / 32 || !(c = nv_malloc(8 * n + 1, sizeof *c)))
		return -1;
	for (size_t i = 0, k; i < n; i += k)
		m += decompose(utf8_at((const uint8_t *)s + i, n - i, &k), c + m);
	reorder(c, m, c + 4 * n);
	m = recompose(c, m);
	if (!(*out = nv_malloc(4 * m + 1, 1))) {
		free(c);
		return -1;
	}
	*outn = 0;
	for (size_t i = 0; i < m; i++)
		if (c[i] & RAW)
			(*out)[(*outn)++] = (char)(c[i] & 0xFF);
		else
			*outn += nv_utf8_put(*out + *outn, c[i]);
	free(c);
	return 0;
}
