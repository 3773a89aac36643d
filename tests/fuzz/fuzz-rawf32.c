/*
 * fuzz-rawf32.c - libFuzzer target for nv_read_raw_f32 (a raw f32 matrix,
 * its shape from the caller): the input read as (size/4/cols × cols) for
 * the cols its first byte picks either fails with a reason or gives
 * exactly the finite little-endian values of the file; a shape that does
 * not match the size is refused.  Input through a memfd.
 */
#include "fileio.h"
#include "fuzz.h"
#include "le.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cols = size ? data[0] % 8 + 1 : 1, rows = size / 4 / cols;
	const char *path = fuzz_file(data, size);
	float *v;

	if (rows * cols * 4 != size) {
		if ((v = nv_read_raw_f32(path, rows, cols)))
			abort();
		return 0;
	}
	if (nv_read_raw_f32(path, rows + 1, cols))
		abort();
	if (!(v = nv_read_raw_f32(path, rows, cols)))
		return 0;
	for (size_t i = 0; i < rows * cols; i++)
		if (!isfinite(v[i]) || v[i] != le_f32(data + 4 * i))
			abort();
	free(v);
	return 0;
}
