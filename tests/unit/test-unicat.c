/*
 * test-unicat.c - the Unicode class table: letters (\p{L}) and numbers
 * (\p{N}) of several scripts, and what is neither (marks, symbols, emoji,
 * punctuation, white space, unassigned and out-of-range code points), the
 * ends of ranges included; the expectations are the Unicode 14.0 general
 * categories.
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

	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		is_int(nv_unicat(t[i].c), t[i].want, "U+%04X %s", (unsigned)t[i].c, t[i].what);
	return done_testing();
}
