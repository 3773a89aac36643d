/*
 * fuzz-state.c - libFuzzer target for st_open: any bytes either fail with
 * a reason or give a state of exactly 56 + 4·rows·width bytes whose header
 * reads back as itself (st_check) and whose rows come out one at a time as
 * finite values or as an error naming the value; a row beyond the last is
 * refused.  Input through a memfd.
 */
#include "fuzz.h"
#include "state.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	st_reader r;
	float *x;

	if (st_open(&r, fuzz_file(data, size)) < 0)
		return 0;
	if (r.h.width == 0 || r.map.len != ST_HEADER + 4 * r.h.rows * r.h.width ||
	    st_check(&r.h, &r.h) != 0 || st_rows(&r, r.h.rows, 1, NULL) == 0)
		abort();
	/* a row is in the file: width is bounded by its size (not so with no rows) */
	if (r.h.rows == 0 || !(x = malloc(r.h.width * sizeof(float)))) {
		st_close(&r);
		return 0;
	}
	for (size_t i = 0; i < r.h.rows; i++) {
		if (st_rows(&r, i, 1, x) < 0)
			continue;
		for (size_t j = 0; j < r.h.width; j++)
			if (!isfinite(x[j]))
				abort();
	}
	free(x);
	st_close(&r);
	return 0;
}
