#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

lmq_code lmq_fail(lmq_err *err, lmq_code code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

lmq_code lmq_err_prefix(lmq_err *err, const char *fmt, ...)
{
    if (!err)
        return LMQ_OK;
    char head[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(head);
    if (n >= sizeof err->msg)
        n = sizeof err->msg - 1;
    memcpy(err->msg, head, n);
    size_t rest = strnlen(old, sizeof old - 1);
    if (rest > sizeof err->msg - 1 - n)
        rest = sizeof err->msg - 1 - n;
    memcpy(err->msg + n, old, rest);
    err->msg[n + rest] = '\0';
    return err->code;
}

const char *lmq_code_name(lmq_code code)
{
    static const char *names[] = {
        [LMQ_OK] = "ok", [LMQ_E_IO] = "i/o error", [LMQ_E_FORMAT] = "format error",
        [LMQ_E_CHECKSUM] = "checksum mismatch", [LMQ_E_NOMEM] = "out of memory",
        [LMQ_E_ARG] = "bad argument", [LMQ_E_UNSUPPORTED] = "unsupported",
        [LMQ_E_NUMERIC] = "numeric error", [LMQ_E_RECIPE] = "recipe error",
    };
    if ((unsigned)code < sizeof names / sizeof names[0] && names[code])
        return names[code];
    return "unknown error";
}
