/* test-fileio.c - whole files, mappings, raw f32 matrices, CRC-32, little-endian access */
#include "aout.h"
#include "err.h"
#include "fileio.h"
#include "le.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/test-fileio.XXXXXX";

static void put(const char *name, const void *p, size_t n, char *path)
{
	FILE *f;

	sprintf(path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	fwrite(p, 1, n, f);
	fclose(f);
}

static void le(void)
{
	uint8_t b[8];

	put_u16(b, 0xBEEF);
	ok(b[0] == 0xEF && b[1] == 0xBE && le_u16(b) == 0xBEEF, "u16 little-endian");
	put_u32(b, 0x31524C42);
	ok(memcmp(b, "BLR1", 4) == 0 && le_u32(b) == 0x31524C42, "u32 little-endian: BLR1");
	put_u64(b, 0x0102030405060708ull);
	ok(b[0] == 8 && b[7] == 1 && le_u64(b) == 0x0102030405060708ull, "u64 little-endian");
	put_f32(b, 1.0f);
	ok(b[0] == 0 && b[1] == 0 && b[2] == 0x80 && b[3] == 0x3f && le_f32(b) == 1.0f, "f32 1.0 is 00 00 80 3f");
	put_f64(b, -2.5);
	ok(le_f64(b) == -2.5 && b[7] == 0xc0, "f64 round trip");
}

static void files(void)
{
	char path[600];
	uint8_t *buf;
	size_t len;
	nv_map m;
	int rc;

	put("a.bin", "abcdef", 6, path);
	ok(nv_read_file(path, &buf, &len) == 0 && len == 6 && memcmp(buf, "abcdef", 6) == 0, "read a whole file");
	free(buf);
	ok(nv_map_file(path, &m) == 0 && m.mapped && m.len == 6 && memcmp(m.data, "abcdef", 6) == 0,
	   "map a regular file");
	nv_map_free(&m);
	put("empty.bin", "", 0, path);
	ok(nv_map_file(path, &m) == 0 && m.len == 0, "map an empty file (read, not mapped)");
	nv_map_free(&m);
	sprintf(path, "%s/missing", dir);
	rc = nv_read_file(path, &buf, &len);
	ok(rc < 0 && strstr(nv_err(), "No such file"), "a missing file: %s", nv_err());
	rc = nv_map_file(dir, &m);
	ok(rc < 0 && strstr(nv_err(), "it is a directory"), "a directory: %s", nv_err());
}

static void raw(void)
{
	char path[600];
	uint8_t b[24];
	float *v;
	aout o;

	for (int i = 0; i < 6; i++)
		put_f32(b + 4 * i, (float)i - 2.5f);
	put("m.f32", b, 24, path);
	v = nv_read_raw_f32(path, 2, 3);
	ok(v && v[0] == -2.5f && v[5] == 2.5f, "a 2×3 raw matrix");
	free(v);
	v = nv_read_raw_f32(path, 3, 3);
	ok(!v && strstr(nv_err(), "size 24 bytes is not 3"), "the wrong shape: %s", nv_err());
	v = nv_read_raw_f32(path, SIZE_MAX / 2, 3);
	ok(!v && strstr(nv_err(), "overflow"), "an overflowing shape: %s", nv_err());
	put_f32(b + 8, NAN);
	put("nan.f32", b, 24, path);
	v = nv_read_raw_f32(path, 2, 3);
	ok(!v && strstr(nv_err(), "row 0, column 2"), "a NaN is named by row and column: %s", nv_err());
	sprintf(path, "%s/w.f32", dir);
	{
		float w[3] = { 1.0f, -0.0f, 3.5f };
		uint8_t *got;
		size_t len;

		ok(aout_open(&o, path, 0) == 0 && nv_write_f32(&o, w, 3) == 0 && aout_commit(&o) == 0,
		   "write f32");
		ok(nv_read_file(path, &got, &len) == 0 && len == 12 && le_f32(got) == 1.0f &&
		   got[7] == 0x80 && le_f32(got + 8) == 3.5f, "as little-endian bytes");
		free(got);
	}
}

static void crc(void)
{
	const char *s = "123456789";
	uint32_t c = nv_crc32_update(0, s, 4);

	is_int(nv_crc32(s, 9), 0xCBF43926, "CRC-32 of '123456789' is the standard check value");
	is_int(nv_crc32_update(c, s + 4, 5), 0xCBF43926, "a CRC continued over pieces equals the whole");
	is_int(nv_crc32("", 0), 0, "CRC-32 of nothing is 0");
}

int main(void)
{
	char cmd[700];

	if (!mkdtemp(dir)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	le();
	files();
	raw();
	crc();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		diag("cleanup of %s failed", dir);
	return done_testing();
}
