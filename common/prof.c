/* prof.c - the per-stage profile (see prof.h) */
#include "prof.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

double nv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void nv_prof_init(nv_prof *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
}

void nv_prof_free(nv_prof *p)
{
	pthread_mutex_destroy(&p->mu);
}

void nv_prof_add(nv_prof *p, const char *name, double secs, uint64_t n)
{
	size_t i;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->k && strcmp(p->e[i].name, name); i++)
		;
	if (i == p->k && p->k < NV_PROF_MAX)
		p->e[p->k++] = (nv_prof_entry){name, 0.0, 0};
	if (i < p->k) {
		p->e[i].secs += secs;
		p->e[i].n += n;
	}
	pthread_mutex_unlock(&p->mu);
}

void nv_prof_line(nv_prof *p, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->k && off < len; i++) {
		const nv_prof_entry *e = &p->e[i];
		int w = e->n ? snprintf(buf + off, len - off, "%s%s %.2fs/%llu", i ? " | " : "",
					e->name, e->secs, (unsigned long long)e->n)
			     : snprintf(buf + off, len - off, "%s%s %.2fs", i ? " | " : "",
					e->name, e->secs);
		off += w > 0 ? (size_t)w : 0;
	}
	pthread_mutex_unlock(&p->mu);
}
