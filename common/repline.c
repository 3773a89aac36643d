/* repline.c - the encoder's report line (see repline.h) */
#include "repline.h"

#include <stdio.h>
#include <string.h>

void nv_rep_note(char *notes, size_t cap, const char *name, double e)
{
	size_t off = strlen(notes);

	if (off + 1 >= cap)
		return;
	snprintf(notes + off, cap - off, "%s%s %.4f", off ? " " : "", name, e);
}

void nv_rep_only(char *notes, size_t cap, size_t paths)
{
	if (cap)
		snprintf(notes, cap, "P%zu only", paths);
}

void nv_rep_line(char *line, size_t cap, size_t paths, size_t r, const char *notes, double fit,
		 double sel)
{
	if (cap)
		snprintf(line, cap, "pick P%zu r%zu | sel: %s | stored fit %.4f sel %.4f", paths, r,
			 notes, fit, sel);
}
