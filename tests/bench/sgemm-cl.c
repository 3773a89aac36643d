/*
 * sgemm-cl.c - the OpenCL device's measured clBLAST sgemm rate, the yardstick
 * of tests/bench/device.sh:  sgemm-cl [N [REPS]]  prints
 *   "sgemm-cl: N×N×N on 'DEVICE' (GPU | not a GPU): median S s over REPS runs, R GFLOP/s"
 * The device is chosen as nvg-encode --device opencl chooses it
 * (NVG_CL_PLATFORM / NVG_CL_DEVICE).  Built by device.sh against libnvgkit.a.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "clops.h"
#include "err.h"


int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	double t[64];
	nvcl_ctx c;
	nvcl_q q;

	if (n < 16 || reps < 1 || reps > 64) {
		fprintf(stderr, "usage: sgemm-cl [N >= 16 [REPS 1..64]]\n");
		return 2;
	}
	if (nvcl_open(-1, -1, &c) < 0 || nvcl_q_init(&q, &c) < 0) {
		fprintf(stderr, "sgemm-cl: %s\n", nv_err());
		return 1;
	}
	cl_mem a = nvcl_q_buf(&q, n * n, "A"), b = nvcl_q_buf(&q, n * n, "B");
	cl_mem cm = nvcl_q_buf(&q, n * n, "C");
	nvcl_q_zero(&q, a, n * n);
	nvcl_q_zero(&q, b, n * n);
	/* the first call builds clBLAST's kernels: not timed */
	nvcl_gemm(&q, 0, 0, n, n, n, 1.0f, a, b, 0.0f, cm);
	nvcl_q_ok(&q);
	for (int i = 0; i < reps && !q.err; i++) {
		double s = bench_now();
		nvcl_gemm(&q, 0, 0, n, n, n, 1.0f, a, b, 0.0f, cm);
		nvcl_q_ok(&q);
		t[i] = bench_now() - s;
	}
	if (q.err) {
		fprintf(stderr, "sgemm-cl: %s\n", q.why);
		return 1;
	}
	qsort(t, (size_t)reps, sizeof(t[0]), bench_cmp);
	printf("sgemm-cl: %zu×%zu×%zu on '%s' (%s): median %.4f s over %d runs, %.1f GFLOP/s\n",
	       n, n, n, c.dev_name, c.is_gpu ? "GPU" : "not a GPU", t[reps / 2], reps,
	       2.0 * n * n * n / t[reps / 2] * 1e-9);
	nvcl_release(&a), nvcl_release(&b), nvcl_release(&cm);
	nvcl_q_free(&q);
	nvcl_close(&c);
	return 0;
}
