#include "formats/encoding.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "formats/gguf.h"

/* Tensors beyond 2^48 weights are refused, so every bit count fits comfortably in 64 bits. */
#define MAX_WEIGHTS (INT64_C(1) << 48)

#define GRAN(g) (1u << LMQ_GRAN_##g)
#define SCALED (GRAN(TENSOR) | GRAN(CHANNEL) | GRAN(GROUP))
#define FLOAT_ROW(T, nm, b, sb, gr, mx, gg) [T] = { T, nm, b, sb, gr, 0, mx, 0, 0, gg },
#define INT_ROW(T, nm, b) [T] = { T, nm, b, 16, SCALED, 1, 0, 0, 0, -1 },
#define BLOCK_ROW(T, nm, blk, bytes, gg) [T] = { T, nm, 0, 0, GRAN(NONE), 0, 0, blk, bytes, gg },

const lmq_encoding lmq_encodings[LMQ_T_COUNT] = { LMQ_ENCODING_ROWS(FLOAT_ROW, INT_ROW, BLOCK_ROW) };

const char *const lmq_gran_names[4] = { "none", "tensor", "channel", "group" };

/* An activation scheme is named like the weight encoding it rounds to (its row gives the bits). */
const char *const lmq_act_scheme_names[LMQ_ACT_COUNT] = { [LMQ_ACT_NONE] = NULL, [LMQ_ACT_INT8] = "int8",
                                                          [LMQ_ACT_FP8_E4M3] = "fp8_e4m3" };
const char *const lmq_act_gran_names[LMQ_ACT_GRAN_COUNT] = { [LMQ_ACT_TOKEN] = "token", [LMQ_ACT_TENSOR] = "tensor",
                                                             [LMQ_ACT_BLOCK] = "block" };

void lmq_act_describe(lmq_act a, unsigned dtype, char *buf, size_t size)
{
    const lmq_encoding *w = lmq_encoding_of(dtype);
    if (a.scheme == LMQ_ACT_NONE || a.scheme >= LMQ_ACT_COUNT || a.gran >= LMQ_ACT_GRAN_COUNT) {
        const int fp8 = w && w->scale_bits == 32;
        snprintf(buf, size, "%s", a.scheme != LMQ_ACT_NONE ? "a?" : fp8 ? "weight-only (fp32 activations)" : "");
        return;
    }
    const lmq_encoding *e = lmq_encoding_find(lmq_act_scheme_names[a.scheme]);
    if (e->integer) /* "a8 token": the integer grids by their width */
        snprintf(buf, size, "a%u %s", e->bits, lmq_act_gran_names[a.gran]);
    else
        snprintf(buf, size, "a %s %s", e->name, lmq_act_gran_names[a.gran]);
}

unsigned lmq_act_block_len(unsigned dtype)
{
    const lmq_encoding *e = lmq_encoding_of(dtype);
    return e && e->block ? e->block : LMQ_ACT_BLOCK_LEN;
}

lmq_code lmq_act_check(lmq_act a, const lmq_qparams *qp, int64_t cols, lmq_err *err)
{
    if (a.scheme == LMQ_ACT_NONE || a.gran != LMQ_ACT_BLOCK)
        return LMQ_OK;
    const lmq_encoding *e = lmq_encoding_of(qp->dtype);
    if (a.scheme != LMQ_ACT_INT8)
        return lmq_fail(err, LMQ_E_ARG, "activations %s per block: only int8 takes granularity block",
                        a.scheme < LMQ_ACT_COUNT ? lmq_act_scheme_names[a.scheme] : "?");
    const int blocks = e && e->block;
    const int grouped = (qp->dtype == LMQ_T_INT8 || qp->dtype == LMQ_T_INT4) && !qp->asym &&
                        qp->gran == LMQ_GRAN_GROUP && qp->group % LMQ_ACT_BLOCK_LEN == 0;
    char d[64];
    snprintf(d, sizeof d, "%s%s %s", e ? e->name : "?", qp->asym ? " asym" : "", lmq_gran_name(qp->gran));
    if (qp->gran == LMQ_GRAN_GROUP)
        snprintf(d + strlen(d), sizeof d - strlen(d), " %u", (unsigned)qp->group);
    if (!blocks && !grouped)
        return lmq_fail(err, LMQ_E_ARG, "activations int8 per block multiply integers against weights in blocks "
                        "with a scale each: symmetric int8 or int4 per group (a multiple of 32) or a GGUF block type, "
                        "not %s", d);
    const unsigned len = lmq_act_block_len(qp->dtype);
    if (cols % len)
        return lmq_fail(err, LMQ_E_ARG, "activations int8 per block need a multiple of %u inputs, not %lld (%s "
                        "weights take llama.cpp's %s activations, blocks of %u)", len, (long long)cols, e->name,
                        len == LMQ_ACT_BLOCK_LEN ? "Q8_0" : "Q8_K", len);
    return LMQ_OK;
}

lmq_act lmq_act_llama(const lmq_qparams *qp, int64_t cols, int groups)
{
    const lmq_act a8b = { .scheme = LMQ_ACT_INT8, .gran = LMQ_ACT_BLOCK };
    const lmq_encoding *e = lmq_encoding_of(qp->dtype);
    const int paired = (e && e->block) || (groups && qp->gran == LMQ_GRAN_GROUP && qp->group == LMQ_ACT_BLOCK_LEN);
    return paired && !lmq_act_check(a8b, qp, cols, NULL) ? a8b : (lmq_act){ 0 };
}

/* The numbers between rows (9) have no name: they are no encoding. */
const lmq_encoding *lmq_encoding_of(unsigned dtype)
{
    return dtype < LMQ_T_COUNT && lmq_encodings[dtype].name ? &lmq_encodings[dtype] : NULL;
}

const lmq_encoding *lmq_encoding_find(const char *name)
{
    for (unsigned t = 0; t < LMQ_T_COUNT; t++)
        if (lmq_encoding_of(t) && strcmp(lmq_encodings[t].name, name) == 0)
            return &lmq_encodings[t];
    return NULL;
}

const lmq_encoding *lmq_encoding_of_ggml(uint32_t type)
{
    for (unsigned t = 0; t < LMQ_T_COUNT; t++)
        if (lmq_encoding_of(t) && lmq_encodings[t].ggml >= 0 && (uint32_t)lmq_encodings[t].ggml == type)
            return &lmq_encodings[t];
    return NULL;
}

char *lmq_encoding_names(char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned t = 0; t < LMQ_T_COUNT && n < size; t++)
        if (lmq_encoding_of(t) && !lmq_encodings[t].block)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", lmq_encodings[t].name);
    return buf;
}

const char *lmq_gran_name(unsigned gran)
{
    return gran < 4 ? lmq_gran_names[gran] : "?";
}

lmq_code lmq_qparams_check(const lmq_qparams *qp, lmq_err *err)
{
    const lmq_encoding *s = lmq_encoding_of(qp->dtype);
    if (!s)
        return lmq_fail(err, LMQ_E_ARG, "unknown dtype %u", (unsigned)qp->dtype);
    if (qp->gran > LMQ_GRAN_GROUP)
        return lmq_fail(err, LMQ_E_ARG, "unknown granularity %u", (unsigned)qp->gran);
    if (!(s->grans & (1u << qp->gran)))
        return s->scale_bits
                   ? lmq_fail(err, LMQ_E_ARG,
                              "%s needs scales: granularity must be tensor, channel or group, "
                              "not %s", s->name, lmq_gran_name(qp->gran))
                   : lmq_fail(err, LMQ_E_ARG, "%s stores no scales: granularity must be none, "
                              "not %s", s->name, lmq_gran_name(qp->gran));
    if (qp->asym > 1)
        return lmq_fail(err, LMQ_E_ARG, "asym must be 0 or 1, not %u", (unsigned)qp->asym);
    if (qp->asym && !s->integer)
        return lmq_fail(err, LMQ_E_ARG, "asymmetric quantisation applies to integer schemes, "
                        "not %s", s->name);
    if (qp->gran == LMQ_GRAN_GROUP) {
        if (qp->group < 16 || (qp->group & (qp->group - 1)))
            return lmq_fail(err, LMQ_E_ARG, "group size %" PRIu32 ": must be a power of two "
                            ">= 16", qp->group);
    } else if (qp->group != 0) {
        return lmq_fail(err, LMQ_E_ARG, "group size %" PRIu32 " given with granularity %s "
                        "(only group takes a size)", qp->group, lmq_gran_name(qp->gran));
    }
    return LMQ_OK;
}

lmq_code lmq_layout_of(const lmq_qparams *qp, int64_t rows, int64_t cols, lmq_layout *out,
                     lmq_err *err)
{
    lmq_code rc = lmq_qparams_check(qp, err);
    if (rc)
        return rc;
    if (rows < 1 || cols < 1 || rows > MAX_WEIGHTS / cols)
        return lmq_fail(err, LMQ_E_ARG, "shape [%" PRId64 ", %" PRId64 "]: need 1 .. 2^48 "
                        "weights", rows, cols);
    const lmq_encoding *s = lmq_encoding_of(qp->dtype);
    if (s->block) {
        if (cols % s->block)
            return lmq_fail(err, LMQ_E_ARG, "shape [%" PRId64 ", %" PRId64 "]: %s needs a multiple of %u columns",
                            rows, cols, s->name, s->block);
        const int64_t blocks = rows * (cols / s->block);
        *out = (lmq_layout){ .rows = rows, .cols = cols, .group = s->block, .groups_per_row = cols / s->block,
                             .bits = (uint64_t)blocks * s->block_bytes * 8,
                             .bytes = (size_t)blocks * s->block_bytes };
        return LMQ_OK;
    }
    lmq_layout L = { .rows = rows, .cols = cols, .group = cols, .groups_per_row = 1 };
    if (qp->gran == LMQ_GRAN_GROUP && cols > (int64_t)qp->group) {
        L.group = qp->group;
        L.groups_per_row = (cols + L.group - 1) / L.group;
    }
    L.n_scales = qp->gran == LMQ_GRAN_NONE     ? 0
                 : qp->gran == LMQ_GRAN_TENSOR ? 1
                                               : rows * L.groups_per_row;
    L.zero_offset = (size_t)L.n_scales * (s->scale_bits / 8);
    L.code_offset = L.zero_offset + (qp->asym ? (size_t)L.n_scales * 2 : 0);
    uint64_t code_bits = (uint64_t)(rows * cols) * s->bits;
    L.bits = (uint64_t)L.code_offset * 8 + code_bits;
    L.bytes = L.code_offset + (size_t)((code_bits + 7) / 8);
    *out = L;
    return LMQ_OK;
}
