/*
 * test-unicat.c - the Unicode class table: letters (\p{L}) and numbers
 * (\p{N}) of several scripts, and what is neither (marks, symbols, emoji,
 * punctuation, white space, unassigned and out-of-range code points), the
 * ends of ranges included; the canonical combining class and NFC quick
 * check of marks, singletons, composing jamo and the rest; the
 * expectations are Unicode 14.0's.
 */
#include "tap.h"
#include "unicat.h"

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
	return done_testing();
}
