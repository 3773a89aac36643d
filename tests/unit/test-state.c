/*
 * test-state.c - the S_L state file: round trip, the header checks that
 * refuse a state made for other tokens, window, width or layer, and the
 * malformed files.
 */
#include "err.h"
#include "state.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[256];

static void path_of(char *p, const char *name)
{
	snprintf(p, 512, "%s/%s", dir, name);
}

static int write_raw(const char *p, const void *b, size_t n)
{
	FILE *f = fopen(p, "wb");

	return f && fwrite(b, 1, n, f) == n && fclose(f) == 0 ? 0 : -1;
}

int main(void)
{
	uint32_t tok[5] = { 1, 403, 407, 261, 378 };
	st_header h = { 3, 4, 16, 0, 5, 5, 0, 6 }, w;
	tap_rng r = { 3 };
	float x[24], y[24];
	char p[512], q[512];
	st_writer sw;
	st_reader sr;
	uint8_t *buf;
	FILE *f;
	size_t len;

	snprintf(dir, sizeof dir, "/tmp/test-state.%d", (int)getpid());
	if (mkdir(dir, 0700) != 0)
		return 1;
	/* the CRC of the ids as little-endian bytes: zlib over the array (x86 is little-endian) */
	h.crc = st_token_crc(tok, 5);
	ok(h.crc == (uint32_t)crc32(0, (const Bytef *)tok, sizeof tok), "token CRC is zlib's over u32 LE");
	for (int i = 0; i < 24; i++)
		x[i] = (float)rng_normal(&r);
	path_of(p, "s.state");
	ok(st_create(&sw, p, &h) == 0 && st_append(&sw, x, 4) == 0 && st_append(&sw, x + 16, 2) == 0 &&
	   st_commit(&sw) == 0, "write a state of 6 rows × 4");
	ok(st_open(&sr, p) == 0 && st_check(&sr.h, &h) == 0, "read it back, header equal");
	ok(st_rows(&sr, 0, 6, y) == 0 && memcmp(x, y, sizeof y) == 0, "rows equal");
	ok(st_rows(&sr, 5, 2, y) < 0, "rows beyond the end refused");
	w = h; w.layer = 4;
	ok(st_check(&sr.h, &w) < 0 && strstr(nv_err(), "state is for layer 3, this run has 4"),
	   "another layer: %s", nv_err());
	w = h; w.window = 32;
	ok(st_check(&sr.h, &w) < 0 && strstr(nv_err(), "window size 16"), "another window: %s", nv_err());
	w = h; w.width = 8;
	ok(st_check(&sr.h, &w) < 0 && strstr(nv_err(), "width 4"), "another width: %s", nv_err());
	w = h; w.crc ^= 1;
	ok(st_check(&sr.h, &w) < 0 && strstr(nv_err(), "CRC-32"), "other tokens: %s", nv_err());
	w = h; w.fit = 4;
	ok(st_check(&sr.h, &w) < 0 && strstr(nv_err(), "FIT tokens 5"), "another split: %s", nv_err());
	st_close(&sr);

	/* malformed files */
	f = fopen(p, "rb");
	buf = malloc(56 + 96 + 4);
	len = fread(buf, 1, 56 + 96 + 4, f);
	fclose(f);
	ok(len == 56 + 96, "file size is 56 + 4·rows·width");
	path_of(q, "short.state");
	write_raw(q, buf, len - 4);
	ok(st_open(&sr, q) < 0 && strstr(nv_err(), "want 56 + 4·rows·width = 152"),
	   "a truncated state is refused: %s", nv_err());
	buf[0] ^= 1;
	write_raw(q, buf, len);
	ok(st_open(&sr, q) < 0 && strstr(nv_err(), "magic"), "a bad magic is refused: %s", nv_err());
	buf[0] ^= 1;
	memcpy(buf + 56 + 4 * 5, &(float){ NAN }, 4);
	write_raw(q, buf, len);
	ok(st_open(&sr, q) == 0 && st_rows(&sr, 0, 6, y) < 0 && strstr(nv_err(), "row 1, column 1"),
	   "a non-finite value is named: %s", nv_err());
	st_close(&sr);
	write_raw(q, buf, 10);
	ok(st_open(&sr, q) < 0 && strstr(nv_err(), "shorter than the 56-byte header"),
	   "a file shorter than the header: %s", nv_err());
	path_of(q, "partial.state");
	ok(st_create(&sw, q, &h) == 0 && st_append(&sw, x, 4) == 0 && st_commit(&sw) < 0 &&
	   access(q, F_OK) != 0, "a state missing rows is not committed");
	free(buf);
	unlink(p);
	path_of(q, "short.state");
	unlink(q);
	rmdir(dir);
	return done_testing();
}
