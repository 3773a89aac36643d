/*
 * repline.h - the encoder's report line, written the same way by the CPU
 * driver (nvgdrv.c) and the device driver (cl/nvg_cl.c):
 *
 *   pick P2 r192 | sel: init 0.4120 P2 0.4031 P1 0.4188 | stored fit 0.3487 sel 0.4040
 *
 * the SEL notes between the bars name each candidate measured and its
 * error, or "P2 only" / "P1 only" where a lone candidate was not measured.
 * Every function truncates to cap (a NUL always written) and never fails.
 */
#ifndef NV_REPLINE_H
#define NV_REPLINE_H

#include <stddef.h>

/* "name e" appended to notes, a space before it when notes is not empty */
void nv_rep_note(char *notes, size_t cap, const char *name, double e);
/* notes set to "P<paths> only": the lone candidate, not measured */
void nv_rep_only(char *notes, size_t cap, size_t paths);
/* "pick P<paths> r<r> | sel: <notes> | stored fit <fit> sel <sel>" */
void nv_rep_line(char *line, size_t cap, size_t paths, size_t r, const char *notes, double fit,
		 double sel);

#endif
