/*
 * state.h - the S_L state file: the hidden states of every calibration
 * window entering layer L (man/man5/state.5).
 *
 *   offset 0   u32  magic 0x5453564E ("NVST")
 *   offset 4   u32  version (1)
 *   offset 8   u32  layer L        (the layer these states enter; 0 = embeddings)
 *   offset 12  u32  width d
 *   offset 16  u32  window W       (tokens per window)
 *   offset 20  u32  crc            CRC-32 of the token ids as u32 little-endian
 *   offset 24  u64  tokens         ids in the token stream
 *   offset 32  u64  fit            FIT tokens
 *   offset 40  u64  sel            SEL tokens
 *   offset 48  u64  rows           positions fed: Σ over windows of (len − 1)
 *   offset 56  f32  X[rows × d]    row-major, windows in order (FIT then SEL)
 *
 * Size exactly 56 + 4·rows·d.  A state is only usable with the token
 * stream, window split, width and layer it was made for: st_check()
 * compares them and names the field that differs.
 */
#ifndef NV_STATE_H
#define NV_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "aout.h"
#include "fileio.h"

#define ST_MAGIC 0x5453564Eu
#define ST_VERSION 1u
#define ST_HEADER 56

typedef struct {
	uint32_t layer, width, window, crc;
	uint64_t tokens, fit, sel, rows;
} st_header;

/* a state opened for reading: the header and the mapped rows */
typedef struct {
	st_header h;
	nv_map map;
	const uint8_t *x; /* (rows × width) f32 little-endian, into the mapping */
} st_reader;

/* CRC-32 of n token ids as u32 little-endian bytes */
uint32_t st_token_crc(const uint32_t *tok, size_t n);

/* the header of the states entering layer `layer` of a run over tok's FIT and SEL
 * windows (rows: the positions those windows feed); what every writer writes and
 * every reader checks */
st_header st_header_of(uint32_t layer, size_t width, size_t window, const uint32_t *tok,
		       size_t ntok, size_t fit, size_t sel, size_t rows);

/* map and validate path (magic, version, size = 56 + 4·rows·width) */
int st_open(st_reader *r, const char *path);
void st_close(st_reader *r);

/* -1 with reason (naming the field, the file's value and the expected one) unless equal */
int st_check(const st_header *got, const st_header *want);

/*
 * rows [r0, r0+n) as f32 into x (n × width); a non-finite value is an
 * error naming its row and column
 */
int st_rows(const st_reader *r, size_t r0, size_t n, float *x);

/* a state being written: the header first, then rows in order */
typedef struct {
	aout o;
	st_header h;
	uint64_t written;
} st_writer;

int st_create(st_writer *w, const char *path, const st_header *h);
/* n rows (n × width) */
int st_append(st_writer *w, const float *x, size_t n);
/* every row written, then rename into place */
int st_commit(st_writer *w);
void st_abort(st_writer *w);

#endif
