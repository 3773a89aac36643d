/*
 * fuzz-cmf.c - libFuzzer target for cmf_open: any bytes either fail with a
 * reason or give a file whose every float tensor converts to f32 and whose
 * CRC check runs to an answer.  The reader maps files, so the input goes
 * through a memfd.  `make fuzz` links cmf.c beyond FUZZ_LIB (FUZZ_CMF).
 */
#include "cmf.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cmf_file f;

	if (cmf_open(fuzz_file(data, size), &f) < 0)
		return 0;
	for (size_t i = 0; i < f.ntensors; i++) {
		const cmf_tensor *t = &f.t[i];

		if ((t->dtype != CMF_U8 || t->blr) && t->rows * t->cols < (1u << 22))
			free(cmf_tensor_f32_alloc(t));
	}
	cmf_verify(&f);
	cmf_close(&f);
	return 0;
}
