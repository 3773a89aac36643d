/*
 * fuzz-gguf.c - libFuzzer target for the GGUF importer: any bytes either
 * fail with a reason or give a model whose every tensor dequantizes (the
 * lazy producers run as the writer would run them).  Input through a memfd.
 * `make fuzz` links import*.c, vocab.c, names.c and cmf.c beyond FUZZ_LIB
 * (FUZZ_GGUF).
 */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64], *src[1] = { path };
	nv_import_opts o = { NV_FROM_GGUF, -1, NULL };
	imp_model m;

	if (fd < 0 && (fd = memfd_create("fuzz-gguf", 0)) < 0)
		abort();
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (nv_import(1, src, &o, &m) < 0)
		return 0;
	for (size_t i = 0; i < m.n; i++) {
		const nv_itensor *t = &m.t[i];
		size_t n = t->nbytes / cmf_dtype_size(t->dtype);
		float *w;

		if (!t->f32 || n > (1u << 22) || !(w = malloc(n * sizeof(float) + 1)))
			continue;
		t->f32(t->ctx, w);
		free(w);
	}
	imp_model_free(&m);
	return 0;
}
