/*
 * fuzz-nvgg.c - libFuzzer target for nvgg_parse: any bytes either fail with a
 * reason or give a Gram whose every value passes the documented checks.
 */
#include "err.h"
#include "nvgg.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nvgg g;
	size_t n;

	if (nvgg_parse(data, size, &g) < 0)
		return 0;
	n = g.n;
	if (size != 16 + 4 * n * n || g.count == 0)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (!(g.g[i * n + i] >= 0))
			abort();
		for (size_t j = 0; j < n; j++)
			if (!isfinite(g.g[i * n + j]))
				abort();
	}
	nvgg_free(&g);
	return 0;
}
