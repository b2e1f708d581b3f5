/* Path and note helpers shared by the importers. */
#include "convert/paths.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

lmq_code cv_join(char *out, const char *dir, const char *name, lmq_err *err)
{
    if (snprintf(out, PATH_CAP, "%s/%s", dir, name) >= PATH_CAP)
        return lmq_fail(err, LMQ_E_ARG, "%s/%s: path too long", dir, name);
    return LMQ_OK;
}

int cv_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cv_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

void cv_dir_of(const char *path, char *out)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, PATH_CAP, ".");
    else if (slash == path)
        snprintf(out, PATH_CAP, "/");
    else
        snprintf(out, PATH_CAP, "%.*s", (int)(slash - path), path);
}

void cv_note(lmq_model *m, const char *fmt, ...)
{
    size_t n = strlen(m->notes);
    if (n + 3 >= sizeof m->notes)
        return;
    if (n)
        n += (size_t)snprintf(m->notes + n, sizeof m->notes - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->notes + n, sizeof m->notes - n, fmt, ap);
    va_end(ap);
}
