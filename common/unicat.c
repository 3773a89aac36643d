/* unicat.c - Unicode letters and numbers (see unicat.h) */
#include "unicat.h"

#include <stddef.h>

#include "unicat_tab.h"

int nv_unicat(uint32_t c)
{
	size_t lo = 0, hi = sizeof cat / sizeof *cat;

	if (c < 0x80) {
		if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
			return NV_UNI_LETTER;
		return c >= '0' && c <= '9' ? NV_UNI_NUMBER : NV_UNI_OTHER;
	}
	/* binary search of the ranges */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c < cat[mid].lo)
			hi = mid;
		else if (c > cat[mid].hi)
			lo = mid + 1;
		else
			return cat[mid].cl;
	}
	return NV_UNI_OTHER;
}
