/*
 * fileio.h - reading whole files, mapping them, and raw f32 matrices.
 *
 * A raw matrix is f32 little-endian, row-major, with no header: its shape
 * comes from the caller, and the byte count must be exactly rows·cols·4.
 */
#ifndef NV_FILEIO_H
#define NV_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "aout.h"

/* the whole of path ("-" = stdin) in a fresh buffer; *len its size */
int nv_read_file(const char *path, uint8_t **buf, size_t *len);

/* a read-only mapping of a whole regular file */
typedef struct {
	const uint8_t *data; /* (len bytes) */
	size_t len;
	int mapped;          /* 1: munmap on free, 0: free() */
} nv_map;

/* map path read-only (falls back to reading it for pipes and "-") */
int nv_map_file(const char *path, nv_map *m);
void nv_map_free(nv_map *m);
/* the pages of a mapping wholly before offset upto are given back (a reader
 * that has consumed them keeps its resident memory to what it holds); a
 * later read of them reads the file again.  Nothing for a read buffer. */
void nv_map_drop(const nv_map *m, size_t upto);
/* CRC-32 of a mapping's bytes [0, len), giving back each piece once read */
uint32_t nv_map_crc32(const nv_map *m, size_t len);

/*
 * a raw f32 matrix (rows × cols) from path ("-" = stdin): the size must be
 * exactly rows·cols·4 and every value finite.  NULL with reason set.
 */
float *nv_read_raw_f32(const char *path, size_t rows, size_t cols);

/* n floats to o as f32 little-endian */
int nv_write_f32(aout *o, const float *v, size_t n);

/* the CRC-32 (zlib's) of n bytes */
uint32_t nv_crc32(const void *p, size_t n);

/* continue a CRC-32 over more bytes (start with crc = 0) */
uint32_t nv_crc32_update(uint32_t crc, const void *p, size_t n);

#endif
