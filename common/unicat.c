/* unicat.c - Unicode letters, numbers and the NFC quick check (see unicat.h) */
#include "unicat.h"

#include <stddef.h>

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
