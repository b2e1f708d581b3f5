/* Progress of a long run on stderr. On a terminal: one line redrawn in place. Otherwise (CI
 * logs, pipes): plain lines with the elapsed time and an ETA, at most one per
 * PROGRESS_EVERY_S seconds (LMQ_PROGRESS_EVERY in the environment sets another interval), so a
 * run shorter than that prints none. */
#ifndef LMQ_PROGRESS_H
#define LMQ_PROGRESS_H

#include <stdint.h>

#define PROGRESS_EVERY_S 5.0

typedef struct {
    const char *label;
    int tty;
    double start, last;  /* lmq_now() at the start of the stage, and at the last plain line */
    double every;        /* seconds between plain lines */
    int64_t last_done;   /* done at the last call: a smaller one starts a new stage */
} progress;

void progress_init(progress *p, const char *label);
/* Reports "label: done/total what": redrawn on a terminal, else a plain line when due. */
void progress_show(progress *p, int64_t done, int64_t total, const char *what);
/* Clears the terminal line. */
void progress_end(progress *p);

#endif
