/* fileio.c - whole files, mappings, raw matrices, CRC-32 (see fileio.h) */
#include "fileio.h"
#include "err.h"
#include "le.h"
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int read_fd(int fd, const char *name, uint8_t **buf, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	uint8_t *b = nv_malloc(cap, 1);

	if (!b)
		return -1;
	for (;;) {
		ssize_t got;

		if (n == cap) {
			uint8_t *nb;

			if (cap > SIZE_MAX / 2) {
				nv_seterr("'%s' is too large", name);
				free(b);
				return -1;
			}
			nb = nv_realloc(b, cap * 2, 1);
			if (!nb) {
				free(b);
				return -1;
			}
			b = nb;
			cap *= 2;
		}
		got = read(fd, b + n, cap - n);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			nv_seterr("cannot read '%s': %s", name, strerror(errno));
			free(b);
			return -1;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	*buf = b;
	*len = n;
	return 0;
}

int nv_read_file(const char *path, uint8_t **buf, size_t *len)
{
	int fd, rc;
	struct stat st;

	if (strcmp(path, "-") == 0)
		return read_fd(STDIN_FILENO, "standard input", buf, len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		nv_seterr("cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		nv_seterr("cannot read '%s': it is a directory", path);
		close(fd);
		return -1;
	}
	rc = read_fd(fd, path, buf, len);
	close(fd);
	return rc;
}

int nv_map_file(const char *path, nv_map *m)
{
	struct stat st;
	int fd;
	void *p;

	memset(m, 0, sizeof(*m));
	if (strcmp(path, "-") == 0)
		return nv_read_file(path, (uint8_t **)&m->data, &m->len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		nv_seterr("cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		nv_seterr("cannot stat '%s': %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		nv_seterr("cannot read '%s': it is a directory", path);
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		int rc = read_fd(fd, path, (uint8_t **)&m->data, &m->len);

		close(fd);
		return rc;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		nv_seterr("cannot map '%s': %s", path, strerror(errno));
		return -1;
	}
	m->data = p;
	m->len = (size_t)st.st_size;
	m->mapped = 1;
	return 0;
}

void nv_map_free(nv_map *m)
{
	if (m->mapped)
		munmap((void *)m->data, m->len);
	else
		free((void *)m->data);
	memset(m, 0, sizeof(*m));
}

void nv_map_drop(const nv_map *m, size_t upto)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t k;

	if (!m->mapped || pg <= 0)
		return;
	k = upto < m->len ? upto : m->len;
	k -= k % (size_t)pg;
	if (k > 0)
		madvise((void *)m->data, k, MADV_DONTNEED);
}

uint32_t nv_map_crc32(const nv_map *m, size_t len)
{
	const size_t piece = (size_t)1 << 24;
	uint32_t c = 0;

	for (size_t off = 0; off < len; off += piece) {
		size_t k = len - off < piece ? len - off : piece;
		c = nv_crc32_update(c, m->data + off, k);
		nv_map_drop(m, off + k);
	}
	return c;
}

float *nv_read_raw_f32(const char *path, size_t rows, size_t cols)
{
	uint8_t *buf;
	size_t len, n, bytes;
	float *v;

	if (nv_mul(rows, cols, &n) < 0 || nv_mul(n, 4, &bytes) < 0)
		return NULL;
	if (nv_read_file(path, &buf, &len) < 0)
		return NULL;
	if (len != bytes) {
		nv_seterr("size %zu bytes is not %zu×%zu×4 = %zu", len, rows, cols, bytes);
		free(buf);
		return NULL;
	}
	v = nv_malloc(n ? n : 1, sizeof(float));
	if (!v) {
		free(buf);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		v[i] = le_f32(buf + 4 * i);
		if (!isfinite(v[i])) {
			nv_seterr("value %s at row %zu, column %zu is not finite",
				  isnan(v[i]) ? "nan" : "inf", i / cols, i % cols);
			free(buf);
			free(v);
			return NULL;
		}
	}
	free(buf);
	return v;
}

int nv_write_f32(aout *o, const float *v, size_t n)
{
	uint8_t chunk[4096];
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < sizeof(chunk) / 4 ? n - done : sizeof(chunk) / 4;

		for (size_t i = 0; i < k; i++)
			put_f32(chunk + 4 * i, v[done + i]);
		if (aout_write(o, chunk, 4 * k) < 0)
			return -1;
		done += k;
	}
	return 0;
}

uint32_t nv_crc32_update(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uLong c = crc;

	/* zlib takes uInt lengths: feed large buffers in pieces */
	while (n > 0) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;

		c = crc32(c, b, k);
		b += k;
		n -= k;
	}
	return (uint32_t)c;
}

uint32_t nv_crc32(const void *p, size_t n)
{
	return nv_crc32_update(0, p, n);
}
