/*
 * replay.c - a main() for the fuzz targets without libFuzzer: runs the
 * target over each file named on the command line (a crash reproducer or a
 * corpus), so any compiler with ASan can replay what the fuzzer found.
 */
#include "fileio.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		uint8_t *buf;
		size_t len;

		if (nv_read_file(argv[i], &buf, &len) < 0) {
			fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
			return 1;
		}
		LLVMFuzzerTestOneInput(buf, len);
		free(buf);
	}
	return 0;
}
