#include "tools/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/clock.h"

void progress_init(progress *p, const char *label)
{
    *p = (progress){ .label = label, .tty = isatty(STDERR_FILENO), .start = lmq_now(), .every = PROGRESS_EVERY_S };
    p->last = p->start;
    const char *every = getenv("LMQ_PROGRESS_EVERY"); /* seconds; a value that is none is ignored */
    char *end;
    double v = every ? strtod(every, &end) : -1;
    if (every && end != every && !*end && v >= 0)
        p->every = v;
}

/* "1 h 02 min", "3 min 05 s", "12 s". */
static void duration(char *buf, size_t size, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%ld h %02ld min", t / 3600, t % 3600 / 60);
    else if (t >= 60)
        snprintf(buf, size, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(buf, size, "%ld s", t);
}

/* The plain line for done of total after elapsed seconds (what may be NULL), into buf. */
static void format_line(char *buf, size_t size, const char *label, int64_t done, int64_t total, const char *what,
                     double elapsed)
{
    char el[32], eta[32] = "?";
    duration(el, sizeof el, elapsed);
    if (done > 0 && total >= done) /* the rate so far, carried over what is left */
        duration(eta, sizeof eta, elapsed / (double)done * (double)(total - done));
    snprintf(buf, size, "%s: %lld/%lld %s (%.0f%%, %s elapsed, ETA %s)", label, (long long)done, (long long)total,
             what ? what : "", total > 0 ? 100.0 * (double)done / (double)total : 0.0, el, eta);
}

void progress_show(progress *p, int64_t done, int64_t total, const char *what)
{
    const double now = lmq_now();
    if (done < p->last_done) /* a new stage (calibrated runs report several): its own rate */
        p->start = now;
    p->last_done = done;
    if (!p->tty && now - p->last < p->every)
        return;
    char line[512];
    format_line(line, sizeof line, p->label, done, total, what, now - p->start);
    if (p->tty) /* the same line, redrawn in place */
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    p->last = now;
}

void progress_end(progress *p)
{
    if (p->tty)
        fprintf(stderr, "\r\033[K");
}
