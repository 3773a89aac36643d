/* test-lines: a text's lines, one at a time; NUL bytes named by line */
#include <string.h>

#include "err.h"
#include "lines.h"
#include "tap.h"

/* the lines of text (len bytes) joined by '|', and the last return code */
static int walk(const char *text, size_t len, char *got, size_t cap)
{
	nv_lines it;
	int rc;

	got[0] = '\0';
	nv_lines_init(&it, text, len);
	while ((rc = nv_lines_next(&it)) > 0) {
		strncat(got, it.buf, cap - strlen(got) - 2);
		strcat(got, "|");
	}
	nv_lines_free(&it);
	return rc;
}

/* fields split at every blank the plan and curves texts allow, comments cut */
static void fields(void)
{
	char line[] = "a\tb\vc\fd\re  f # g h", *tok[4];

	is_int((long long)nv_fields(line, tok, 4), 6, "six fields before the comment, four stored");
	ok(!strcmp(tok[0], "a") && !strcmp(tok[1], "b") && !strcmp(tok[2], "c") &&
	   !strcmp(tok[3], "d"), "split at tab, vertical tab, form feed, carriage return");
}

int main(void)
{
	char got[256];
	static const char nul[] = "a b\nc\0d\ne\n";

	is_int(walk("a b\n\nc d", 8, got, sizeof(got)), 0, "three lines, the last unterminated");
	ok(!strcmp(got, "a b||c d|"), "lines: %s", got);
	is_int(walk("x\n", 2, got, sizeof(got)), 0, "a final newline ends no empty line");
	ok(!strcmp(got, "x|"), "lines: %s", got);
	is_int(walk("", 0, got, sizeof(got)), 0, "empty text: no line");
	ok(!strcmp(got, ""), "nothing");
	is_int(walk("x\r\n", 3, got, sizeof(got)), 0, "a carriage return stays in its line");
	ok(!strcmp(got, "x\r|"), "kept for the caller");
	is_int(walk(nul, sizeof(nul) - 1, got, sizeof(got)), -1, "a NUL byte is an error");
	ok(!strcmp(got, "a b|"), "after the lines before it");
	ok(!strcmp(nv_err(), "line 2: a NUL byte (not a text file)"), "reason: %s", nv_err());
	fields();
	return done_testing();
}
