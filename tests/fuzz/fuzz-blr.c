/*
 * fuzz-blr.c - libFuzzer target for blr_parse: any bytes either fail with a
 * reason or give a payload that verifies against its own shape and
 * dequantizes to finite values (`make fuzz`, see tests/fuzz/README).
 */
#include "blr.h"
#include "err.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	blr_header hd;
	blr_view v[2];
	float *w;

	if (blr_parse(data, size, &hd, v) < 0)
		return 0;
	if (blr_verify_shape(data, size, hd.m, hd.n) < 0)
		abort();
	if ((size_t)hd.m * hd.n > (1u << 22))
		return 0; /* the parse is what is fuzzed; skip huge products */
	w = malloc((size_t)hd.m * hd.n * sizeof(float));
	if (!w)
		return 0;
	if (blr_dequantize(data, size, w) < 0)
		abort();
	for (size_t i = 0; i < (size_t)hd.m * hd.n; i++)
		if (!isfinite(w[i]))
			abort();
	free(w);
	return 0;
}
