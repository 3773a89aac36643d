/* lines.c - the lines of an in-memory text (see lines.h) */
#include "lines.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "mem.h"

void nv_lines_init(nv_lines *it, const char *text, size_t len)
{
	it->text = text;
	it->len = len;
	it->pos = 0;
	it->line = 0;
	it->buf = NULL;
}

int nv_lines_next(nv_lines *it)
{
	const char *s = it->text + it->pos, *nl;
	size_t n;

	if (it->pos >= it->len)
		return 0;
	nl = memchr(s, '\n', it->len - it->pos);
	n = nl ? (size_t)(nl - s) : it->len - it->pos;
	it->line++;
	if (memchr(s, '\0', n)) {
		nv_seterr("line %zu: a NUL byte (not a text file)", it->line);
		return -1;
	}
	free(it->buf);
	if (!(it->buf = nv_malloc(n + 1, 1)))
		return -1;
	memcpy(it->buf, s, n);
	it->buf[n] = '\0';
	it->pos += n + 1;
	return 1;
}

void nv_lines_free(nv_lines *it)
{
	free(it->buf);
	it->buf = NULL;
}

size_t nv_fields(char *s, char **tok, size_t max)
{
	size_t nt = 0;
	char *hash = strchr(s, '#');

	if (hash)
		*hash = '\0';
	for (;;) {
		s += strspn(s, NV_BLANKS);
		if (!*s)
			return nt;
		if (nt < max)
			tok[nt] = s;
		nt++;
		s += strcspn(s, NV_BLANKS);
		if (*s)
			*s++ = '\0';
	}
}
