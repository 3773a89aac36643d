/*
 * fuzz-hctx.c - libFuzzer target for nv_hctx_parse: any bytes either fail
 * with a reason or give a context whose fields are what the parser
 * promises (every value finite, rho ≥ 0, hf symmetric, l lower and uc
 * upper triangular with positive diagonals, sqd positive, perm a
 * permutation of 0..n-1) and that serializes back to the same bytes.  The
 * target writes the right CRC into a copy of its input first: a mutation
 * would almost never pass the CRC check, and what lies behind it is the
 * parse worth fuzzing.
 */
#include "fileio.h"
#include "fuzz.h"
#include "hctx.h"

#include <math.h>
#include <string.h>

/* the promises about the n × n factor l: finite, lower triangular */
static void check_lower(const nv_mat *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			if (!isfinite(a->d[i * n + j]) || (j > i && a->d[i * n + j] != 0))
				abort();
}

static void check(const nv_hctx *hc, const uint8_t *buf, size_t len)
{
	size_t n = hc->n;
	uint8_t *seen = calloc(n, 1), *out;
	size_t olen;

	if (!seen || len != nv_hctx_file_size(n) || !(hc->rho >= 0) || !isfinite(hc->rho))
		abort();
	check_lower(&hc->l, n);
	for (size_t i = 0; i < n * (n + 1) / 2; i++)
		if (!isfinite(hc->uc[i]))
			abort();
	for (size_t i = 0; i < n; i++) {
		if (hc->perm[i] >= n || seen[hc->perm[i]]++ || !(hc->sqd[i] > 0) ||
		    !isfinite(hc->sqd[i]) || !(hc->l.d[i * n + i] > 0) || !(nv_hctx_uc_at(hc, i, i) > 0))
			abort();
		for (size_t j = 0; j < n; j++)
			if (!isfinite(hc->hf.d[i * n + j]) || hc->hf.d[i * n + j] != hc->hf.d[j * n + i])
				abort();
	}
	free(seen);
	if (nv_hctx_serialize(hc, &out, &olen) < 0)
		abort();
	if (olen != len || memcmp(out, buf, len) != 0)
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size + 1);
	nv_hctx hc;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size >= 4) {
		uint32_t crc = nv_crc32(buf, size - 4);

		for (int k = 0; k < 4; k++)
			buf[size - 4 + k] = (uint8_t)(crc >> 8 * k);
	}
	if (nv_hctx_parse(buf, size, &hc) == 0) {
		check(&hc, buf, size);
		nv_hctx_free(&hc);
	}
	free(buf);
	return 0;
}
