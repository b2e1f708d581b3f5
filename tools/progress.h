/* A one-line progress indicator on stderr, shown only when stderr is a terminal. */
#ifndef LMQ_PROGRESS_H
#define LMQ_PROGRESS_H

#include <stdint.h>

typedef struct {
    const char *label;
    int tty;
} progress;

void progress_init(progress *p, const char *label);
/* Redraws "label: done/total what". */
void progress_show(progress *p, int64_t done, int64_t total, const char *what);
/* Clears the line. */
void progress_end(progress *p);

#endif
