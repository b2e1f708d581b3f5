#include "tools/progress.h"

#include <stdio.h>
#include <unistd.h>

void progress_init(progress *p, const char *label)
{
    p->label = label;
    p->tty = isatty(STDERR_FILENO);
}

void progress_show(progress *p, int64_t done, int64_t total, const char *what)
{
    if (p->tty)
        fprintf(stderr, "\r\033[K%s: %lld/%lld %s", p->label, (long long)done, (long long)total, what ? what : "");
}

void progress_end(progress *p)
{
    if (p->tty)
        fprintf(stderr, "\r\033[K");
}
