/*
 * test-unicat.c - the Unicode class table: letters (\p{L}) and numbers
 * (\p{N}) of several scripts, and what is neither (marks, symbols, emoji,
 * punctuation, white space, unassigned and out-of-range code points), the
 * ends of ranges included; the canonical combining class and NFC quick
 * check of marks, singletons, composing jamo and the rest; the
 * expectations are Unicode 14.0's.  NFC on UAX #15's cases (composition,
 * Hangul, singletons, canonical order, exclusions, blocking, a long run of
 * marks, bytes outside UTF-8), each worked out by hand from the algorithm
 * and Unicode's data (and equal to Python's unicodedata); t0308 compares
 * it with the tokenizers library on every decomposable code point.
 */
#include "tap.h"
#include "unicat.h"

#include <stdlib.h>
#include <string.h>

/* nv_nfc of in is want (NULL: left as it is) */
static void nfc_is(const char *in, const char *want, const char *what)
{
	char *out;
	size_t n;
	int rc = nv_nfc(in, strlen(in), &out, &n);

	if (!want)
		ok(rc == 0 && !out && n == strlen(in), "NFC leaves %s alone", what);
	else
		ok(rc == 0 && out && n == strlen(want) && memcmp(out, want, n) == 0, "NFC of %s",
		   what);
	free(out);
}

static void nfc_cases(void)
{
	char in[64] = "a", want[64] = "\xc3\xa1"; /* á */

	nfc_is("plain ASCII", NULL, "ASCII");
	nfc_is("\xc3\xa9t\xc3\xa9", NULL, "precomposed e-acute");
	nfc_is("e\xcc\x81", "\xc3\xa9", "e + U+0301 (composes)");
	nfc_is("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81", "Hangul L V T");
	nfc_is("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81", "Hangul LV + T");
	nfc_is("\xe2\x84\xab", "\xc3\x85", "Angstrom sign (a singleton)");
	nfc_is("\xe1\xb8\x8b\xcc\xa3", "\xe1\xb8\x8d\xcc\x87",
	       "d-dot-above + dot below (decomposed, reordered, recomposed)");
	nfc_is("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87", "q + marks out of order");
	nfc_is("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc", "U+0958 (a composition exclusion)");
	nfc_is("\xcc\x81" "e", "\xcc\x81" "e", "a mark before any starter");
	nfc_is("\xff" "e\xcc\x81", "\xff\xc3\xa9", "a stray byte, then e + U+0301");
	nfc_is("e\xff" "e\xcc\x81\xcc", "e\xff\xc3\xa9\xcc", "stray and truncated bytes kept");
	/* a + (U+0316 class 220, U+0301 class 230) × 10: sorted by count, then the first
	 * U+0301 composes with a past the 220s, the others are blocked */
	for (int i = 0; i < 10; i++)
		memcpy(in + 1 + 4 * i, "\xcc\x96\xcc\x81", 4);
	for (int i = 0; i < 10; i++)
		memcpy(want + 2 + 2 * i, "\xcc\x96", 2);
	for (int i = 0; i < 9; i++)
		memcpy(want + 22 + 2 * i, "\xcc\x81", 2);
	in[41] = want[40] = 0;
	nfc_is(in, want, "a long run of marks of two classes");
}

int main(void)
{
	static const struct {
		uint32_t c;
		int want;
		const char *what;
	} t[] = {
		{ 'a', NV_UNI_LETTER, "a" },           { 'Z', NV_UNI_LETTER, "Z" },
		{ '0', NV_UNI_NUMBER, "0" },           { '9', NV_UNI_NUMBER, "9" },
		{ '_', NV_UNI_OTHER, "_" },            { ' ', NV_UNI_OTHER, "space" },
		{ 0xAA, NV_UNI_LETTER, "ª (Lo)" },     { 0xB2, NV_UNI_NUMBER, "² (No)" },
		{ 0xBD, NV_UNI_NUMBER, "½ (No)" },     { 0xD7, NV_UNI_OTHER, "× (Sm)" },
		{ 0xE9, NV_UNI_LETTER, "é" },          { 0x301, NV_UNI_OTHER, "combining acute (Mn)" },
		{ 0x416, NV_UNI_LETTER, "Ж" },         { 0x663, NV_UNI_NUMBER, "Arabic-Indic 3 (Nd)" },
		{ 0x93F, NV_UNI_OTHER, "Devanagari vowel sign i (Mc)" },
		{ 0x928, NV_UNI_LETTER, "Devanagari na" }, { 0x2163, NV_UNI_NUMBER, "Ⅳ (Nl)" },
		{ 0x2581, NV_UNI_OTHER, "U+2581 (So)" }, { 0x3000, NV_UNI_OTHER, "ideographic space" },
		{ 0x4E2D, NV_UNI_LETTER, "中" },       { 0xAC00, NV_UNI_LETTER, "가 (first)" },
		{ 0xD7A3, NV_UNI_LETTER, "힣 (last)" }, { 0xD7A4, NV_UNI_OTHER, "after Hangul" },
		{ 0xFF11, NV_UNI_NUMBER, "fullwidth 1" }, { 0x1F600, NV_UNI_OTHER, "😀 (So)" },
		{ 0x200D, NV_UNI_OTHER, "zero width joiner" }, { 0x20000, NV_UNI_LETTER, "CJK ext B" },
		{ 0x10FFFF, NV_UNI_OTHER, "U+10FFFF" }, { 0x110000, NV_UNI_OTHER, "beyond Unicode" },
	};

	static const struct {
		uint32_t c;
		int qc, ccc;
		const char *what;
	} q[] = {
		{ 'e', NV_NFC_YES, 0, "e" },              { 0xE9, NV_NFC_YES, 0, "é precomposed" },
		{ 0x301, NV_NFC_MAYBE, 230, "combining acute" },
		{ 0x340, NV_NFC_NO, 230, "combining grave tone mark (a singleton)" },
		{ 0x212B, NV_NFC_NO, 0, "Angstrom sign" }, { 0x93C, NV_NFC_MAYBE, 7, "Devanagari nukta" },
		{ 0x94D, NV_NFC_YES, 9, "Devanagari virama" }, { 0x1161, NV_NFC_MAYBE, 0, "Hangul vowel a" },
		{ 0x11A8, NV_NFC_MAYBE, 0, "Hangul final g" }, { 0x1100, NV_NFC_YES, 0, "Hangul initial g" },
		{ 0xAC00, NV_NFC_YES, 0, "가" },          { 0xF900, NV_NFC_NO, 0, "CJK compatibility" },
		{ 0x2581, NV_NFC_YES, 0, "U+2581" },      { 0xFB01, NV_NFC_YES, 0, "ﬁ (compatibility only)" },
	};

	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		is_int(nv_unicat(t[i].c), t[i].want, "U+%04X %s", (unsigned)t[i].c, t[i].what);
	for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
		int ccc, qc = nv_uninfc(q[i].c, &ccc);

		ok(qc == q[i].qc && ccc == q[i].ccc, "U+%04X %s: NFC quick check %d, class %d",
		   (unsigned)q[i].c, q[i].what, q[i].qc, q[i].ccc);
		if (qc != q[i].qc || ccc != q[i].ccc)
			diag("got %d, %d", qc, ccc);
	}
	nfc_cases();
	return done_testing();
}
