/*
 * fuzz-llama2c.c - libFuzzer target for the llama2.c checkpoint importer:
 * any bytes either fail with a reason or give a model whose architecture
 * matches its tensors (imp_model_check), whose every tensor's shape gives
 * its bytes and whose every tensor produces its values (the lazy producers
 * run as the writer would run them).  Input through a memfd.
 */
#include "fuzz-import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	imp_model m;

	if (fuzz_import(NV_FROM_LLAMA2C, data, size, &m) < 0)
		return 0;
	if (m.arch.hidden <= 0 || m.arch.layers <= 0 || m.arch.heads <= 0 ||
	    m.arch.heads % m.arch.kv_heads != 0 || m.arch.head_dim % 2 != 0)
		abort();
	fuzz_produce(&m);
	imp_model_free(&m);
	return 0;
}
