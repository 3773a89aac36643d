/*
 * lines.h - the lines of an in-memory text, one at a time, each as a fresh
 * NUL-terminated copy the caller may cut up (the form the plan and the
 * curves readers parse).  A line ends at '\n' or at the end of the text; a
 * NUL byte inside the text is an error naming its line.
 */
#ifndef NV_LINES_H
#define NV_LINES_H

#include <stddef.h>

typedef struct {
	const char *text; /* (len bytes), not owned */
	size_t len, pos;
	size_t line;      /* the number of the line in buf, from 1 */
	char *buf;        /* the current line, without its '\n' (malloc'd) */
} nv_lines;

void nv_lines_init(nv_lines *it, const char *text, size_t len);
/* 1: the next line is in it->buf; 0: no more lines; -1: a NUL byte
 * ("line N: a NUL byte (not a text file)") or no memory, reason set */
int nv_lines_next(nv_lines *it);
void nv_lines_free(nv_lines *it);

/* the blanks that separate fields in the plan, curves and tensor-list texts */
#define NV_BLANKS " \t\r\v\f"

/*
 * split a line (modified in place) into fields: a '#' cuts a comment, the
 * fields are runs of non-blanks (NV_BLANKS).  The first max are stored in
 * tok; the count returned may exceed max.  Every reader of these texts
 * splits here, so that what one tool writes the next reads the same way.
 */
size_t nv_fields(char *s, char **tok, size_t max);

#endif
