/*
 * test-pack.c - the packer both encoders share (common/pack.c): a path
 * packs, dead rank scales are zeroed, the scales rounded in place are the
 * stored ones, and every refusal (non-finite, ℓ beyond f16 after
 * rebalancing) holds for the device encoder's paths as for the CPU's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blr.h"
#include "err.h"
#include "pack.h"
#include "tap.h"

static tap_rng rng = { 77 };

static void test_pack(void)
{
	enum { M = 16, N = 8, R = 8 };
	double h[M], g[N], l[R];
	int8_t su[M * R], sv[N * R];
	uint8_t *out = NULL;
	size_t len = 0;
	float deq[M * N];

	for (int i = 0; i < M; i++)
		h[i] = 1.0 + 0.1 * i;
	for (int j = 0; j < N; j++)
		g[j] = 2.0 - 0.1 * j;
	for (int k = 0; k < R; k++)
		l[k] = 1.0 / (1 + k);
	for (int i = 0; i < M * R; i++)
		su[i] = rng_u64(&rng) & 1 ? 1 : -1;
	for (int i = 0; i < N * R; i++)
		sv[i] = rng_u64(&rng) & 1 ? 1 : -1;
	l[7] = 1e-9; /* below f16: a dead component, zeroed */
	nv_pack_path p = { h, l, g, su, sv };
	ok(nv_pack_paths(M, N, R, 1, &p, &out, &len) == 0 && len == blr_payload_size(M, N, R, 1),
	   "a path packs");
	ok(out && blr_verify_shape(out, len, M, N) == 0 && blr_dequantize(out, len, deq) == 0,
	   "the payload validates and dequantizes");
	ok(l[7] == 0.0, "a rank scale below f16 is zeroed");
	/* the stored scales (rounded in place) give the dequantized matrix */
	double e = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double w = 0;
			for (int k = 0; k < R; k++)
				w += h[i] * su[i * R + k] * l[k] * sv[j * R + k] * g[j];
			e = fmax(e, fabs(w - deq[i * N + j]));
		}
	ok(e < 1e-5, "the rounded scales in place are the stored ones (%.2g)", e);
	free(out);
	h[3] = INFINITY;
	ok(nv_pack_paths(M, N, R, 1, &p, &out, &len) == 1 && out == NULL, "a non-finite scale: refused");
	/* rebalancing moves the size of h and g into ℓ: 1e200·1e200 overflows */
	for (int i = 0; i < M; i++)
		h[i] = 1e200;
	for (int j = 0; j < N; j++)
		g[j] = 1e200;
	ok(nv_pack_paths(M, N, R, 1, &p, &out, &len) == 1 && out == NULL,
	   "a rank scale that overflows after rebalancing: refused");
	/* finite in f64 but beyond f16 once rebalanced: the device's pack once
	 * stored it as an f16 infinity (the CPU's refused it) */
	for (int i = 0; i < M; i++)
		h[i] = 1.0;
	for (int j = 0; j < N; j++)
		g[j] = 1.0;
	for (int k = 0; k < R; k++)
		l[k] = 1e5;
	ok(nv_pack_paths(M, N, R, 1, &p, &out, &len) == 1 && out == NULL &&
	   strstr(nv_err(), "exceeds the f16 range"), "a rank scale beyond f16: refused (%s)",
	   nv_err());
}

int main(void)
{
	test_pack();
	return done_testing();
}
