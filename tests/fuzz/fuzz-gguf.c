/*
 * fuzz-gguf.c - libFuzzer target for the GGUF importer: any bytes either
 * fail with a reason or give a model whose every tensor's shape gives its
 * bytes and whose every tensor dequantizes (the lazy producers run as the
 * writer would run them).  Input through a memfd.  `make fuzz` links
 * import*.c, vocab.c, names.c and cmf.c beyond FUZZ_LIB (FUZZ_IMPORT).
 */
#include "fuzz-import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	imp_model m;

	if (fuzz_import(NV_FROM_GGUF, data, size, &m) < 0)
		return 0;
	fuzz_produce(&m);
	imp_model_free(&m);
	return 0;
}
