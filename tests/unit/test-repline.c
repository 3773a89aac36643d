/* test-repline: the encoder's report line, as both drivers write it and
 * as convert-lib.sh reads it (follow: "pick P<p> " first and " P2 … P1 "
 * where both candidates were measured; report: the number after the last
 * "sel" past "stored") */
#include <string.h>

#include "repline.h"
#include "tap.h"

/* a choice between two candidates, noted in the order the drivers note them */
static void chosen(void)
{
	char notes[256] = "", line[512];

	nv_rep_note(notes, sizeof(notes), "init", 0.41204);
	nv_rep_note(notes, sizeof(notes), "P2", 0.40312);
	nv_rep_note(notes, sizeof(notes), "P1", 0.41876);
	ok(!strcmp(notes, "init 0.4120 P2 0.4031 P1 0.4188"), "notes: %s", notes);
	nv_rep_line(line, sizeof(line), 2, 192, notes, 0.34871, 0.40398);
	ok(!strcmp(line, "pick P2 r192 | sel: init 0.4120 P2 0.4031 P1 0.4188 | stored fit 0.3487 sel 0.4040"),
	   "line: %s", line);
	ok(!strncmp(line, "pick P2 ", 8) && strstr(strstr(line, " P2 "), " P1 "),
	   "follow reads the pick and both candidates");
}

/* a lone candidate: "P<p> only", no number between the bars */
static void lone(void)
{
	char notes[64] = "leftover", line[512];

	nv_rep_only(notes, sizeof(notes), 1);
	ok(!strcmp(notes, "P1 only"), "a lone candidate replaces what was there: %s", notes);
	nv_rep_line(line, sizeof(line), 1, 384, notes, 0.5, 0.25);
	ok(!strcmp(line, "pick P1 r384 | sel: P1 only | stored fit 0.5000 sel 0.2500"), "line: %s",
	   line);
	ok(strstr(line, " P2 ") == NULL, "follow sees no comparison in it");
}

/* a full buffer: truncated, always terminated, nothing written past cap */
static void bounded(void)
{
	char buf[16];

	memset(buf, 'x', sizeof(buf));
	buf[0] = '\0';
	for (int i = 0; i < 8; i++)
		nv_rep_note(buf, 12, "P2", 0.5);
	ok(strlen(buf) == 11 && buf[12] == 'x', "notes cut at cap 12: '%s'", buf);
	ok(!strncmp(buf, "P2 0.5000 P", 11), "the first note whole: '%s'", buf);
	memset(buf, 'x', sizeof(buf));
	nv_rep_line(buf, 8, 2, 1, "", 0, 0);
	ok(!strcmp(buf, "pick P2") && buf[8] == 'x', "a line cut at cap 8: '%s'", buf);
	nv_rep_only(buf, 0, 2);
	nv_rep_line(buf, 0, 2, 1, "", 0, 0);
	ok(buf[0] == 'p', "cap 0 writes nothing");
}

int main(void)
{
	chosen();
	lone();
	bounded();
	return done_testing();
}
