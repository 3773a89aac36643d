/*
 * fuzz.h - what the fuzz targets share: the input as a file for the readers
 * that take a path (a memfd, named through /proc/self/fd).
 */
#ifndef NV_FUZZ_H
#define NV_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* size bytes as a file: the path of a memfd kept for the life of the process */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];

	if (fd < 0 && (fd = memfd_create("fuzz", 0)) < 0)
		abort();
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return path;
}

#endif
