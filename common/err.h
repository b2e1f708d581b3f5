/* Errors are values: a code plus a message, returned up to tools/ which prints them. */
#ifndef LMQ_ERR_H
#define LMQ_ERR_H

typedef enum {
    LMQ_OK = 0,
    LMQ_E_IO,          /* open/read/write/rename failed */
    LMQ_E_FORMAT,      /* malformed, truncated or hostile input */
    LMQ_E_CHECKSUM,    /* stored checksum does not match the bytes */
    LMQ_E_NOMEM,
    LMQ_E_ARG,         /* bad argument or option from the caller */
    LMQ_E_UNSUPPORTED, /* valid input we do not handle (dtype, architecture) */
    LMQ_E_NUMERIC,     /* NaN/Inf or out-of-range values */
    LMQ_E_RECIPE,      /* recipe or policy error */
} lmq_code;

typedef struct {
    lmq_code code;
    char msg[1024];
} lmq_err;

/* Sets err (if not NULL) and returns code, so callers can write `return lmq_fail(...)`. */
lmq_code lmq_fail(lmq_err *err, lmq_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context ("file.lmq: ") to an error already set; returns its code. */
lmq_code lmq_err_prefix(lmq_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *lmq_code_name(lmq_code code);

#endif
