/*
 * fuzz-ids.c - libFuzzer target for tok_read_ids (--tokens files): any
 * bytes either fail with a reason (empty, or not a multiple of 4) or give
 * len/4 ids, each the u32 little-endian value at its place.  Input through
 * a memfd.
 */
#include "fuzz.h"
#include "le.h"
#include "tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t *ids;
	size_t n;

	if (tok_read_ids(fuzz_file(data, size), &ids, &n) < 0) {
		if (size && size % 4 == 0)
			abort();
		return 0;
	}
	if (n == 0 || n * 4 != size)
		abort();
	for (size_t i = 0; i < n; i++)
		if (ids[i] != le_u32(data + 4 * i))
			abort();
	free(ids);
	return 0;
}
