/* SentencePiece's tokenizer.model: a ModelProto read by a strict minimal protobuf reader, turned
 * into the SentencePiece-style tokenizer llama2.c's tokenizer.bin also becomes (merges by score,
 * byte fallback through "<0xHH>" pieces). Fields used (sentencepiece_model.proto):
 *   ModelProto   1: repeated SentencePiece pieces   2: TrainerSpec   3: NormalizerSpec
 *   SentencePiece 1: piece (string)   2: score (float)   3: type (NORMAL 1, UNKNOWN 2, CONTROL 3,
 *                 USER_DEFINED 4, BYTE 6, UNUSED 5)
 *   TrainerSpec  3: model_type (UNIGRAM 1, BPE 2, WORD 3, CHAR 4)   35: byte_fallback
 *                40: unk_id   41: bos_id   42: eos_id
 *   NormalizerSpec 1: name   3: add_dummy_prefix   4: remove_extra_whitespaces
 * Everything else is skipped by its wire type; every length is checked against what is left. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/le.h"
#include "tokenizer/tok_internal.h"

#define FILE_NAME "tokenizer.model"

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };
enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4, PIECE_UNUSED = 5,
       PIECE_BYTE = 6 };
enum { MODEL_BPE = 2 };

typedef struct {
    const uint8_t *p, *end;
} pb_reader;

/* One field: its number, wire type and value (varint / fixed) or bytes (LEN). */
typedef struct {
    uint32_t field, wire;
    uint64_t value;
    pb_reader bytes;
} pb_field;

static lmq_code varint(pb_reader *r, uint64_t *v, const char *what, lmq_err *err)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end)
            return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s: truncated varint", what);
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            return LMQ_OK;
    }
    return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s: varint longer than 10 bytes", what);
}

/* The next field of r into f; 0 at the end, 1 when read, an error otherwise (*c). */
static int next_field(pb_reader *r, pb_field *f, const char *what, lmq_code *c, lmq_err *err)
{
    uint64_t key;
    *c = LMQ_OK;
    if (r->p == r->end)
        return 0;
    if ((*c = varint(r, &key, what, err)))
        return 0;
    f->field = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    size_t left;
    switch (f->wire) {
    case WIRE_VARINT:
        *c = varint(r, &f->value, what, err);
        return !*c;
    case WIRE_I64:
    case WIRE_I32: {
        size_t k = f->wire == WIRE_I64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < k)
            break;
        f->value = lmq_le(r->p, (unsigned)k);
        r->p += k;
        return 1;
    }
    case WIRE_LEN:
        if ((*c = varint(r, &f->value, what, err)))
            return 0;
        left = (size_t)(r->end - r->p);
        if (f->value > left)
            break;
        f->bytes = (pb_reader){ r->p, r->p + f->value };
        r->p += f->value;
        return 1;
    default:
        *c = lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s: field %u has wire type %u (not a ModelProto)",
                      what, (unsigned)f->field, (unsigned)f->wire);
        return 0;
    }
    *c = lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s: field %u runs past the end of its message", what,
                  (unsigned)f->field);
    return 0;
}

/* A field's wire type must be the one the schema gives it. */
static lmq_code want_wire(const pb_field *f, uint32_t wire, const char *what, lmq_err *err)
{
    return f->wire == wire ? LMQ_OK
                           : lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s: field %u has wire type %u, expected %u",
                                      what, (unsigned)f->field, (unsigned)f->wire, (unsigned)wire);
}

typedef struct {
    int model_type, byte_fallback;
    int64_t unk_id, bos_id, eos_id;
    int add_dummy_prefix, remove_extra_whitespaces;
    char normalizer[32];
} spm_spec;

static lmq_code read_trainer(pb_reader r, spm_spec *s, lmq_err *err)
{
    pb_field f;
    lmq_code c;
    while (next_field(&r, &f, "trainer_spec", &c, err)) {
        int64_t *id = f.field == 40 ? &s->unk_id : f.field == 41 ? &s->bos_id : f.field == 42 ? &s->eos_id : NULL;
        if ((f.field == 3 || f.field == 35 || id) && (c = want_wire(&f, WIRE_VARINT, "trainer_spec", err)))
            return c;
        if (f.field == 3)
            s->model_type = (int)f.value;
        else if (f.field == 35)
            s->byte_fallback = f.value != 0;
        else if (id)
            *id = (int32_t)(uint32_t)f.value; /* int32: -1 is sign-extended on the wire */
    }
    return c;
}

static lmq_code read_normalizer(pb_reader r, spm_spec *s, lmq_err *err)
{
    pb_field f;
    lmq_code c;
    while (next_field(&r, &f, "normalizer_spec", &c, err)) {
        if (f.field == 1) {
            if ((c = want_wire(&f, WIRE_LEN, "normalizer_spec", err)))
                return c;
            size_t n = (size_t)(f.bytes.end - f.bytes.p);
            if (n >= sizeof s->normalizer)
                n = sizeof s->normalizer - 1;
            memcpy(s->normalizer, f.bytes.p, n);
            s->normalizer[n] = '\0';
        } else if (f.field == 3 || f.field == 4) {
            if ((c = want_wire(&f, WIRE_VARINT, "normalizer_spec", err)))
                return c;
            *(f.field == 3 ? &s->add_dummy_prefix : &s->remove_extra_whitespaces) = f.value != 0;
        }
    }
    return c;
}

/* One SentencePiece message: its text (U+2581 as " ") appended at t->bytes + *at, score, type. */
static lmq_code read_piece(pb_reader r, int index, tok_tokenizer *t, size_t *at, int *type, lmq_err *err)
{
    pb_field f;
    lmq_code c;
    int have_text = 0;
    *type = PIECE_NORMAL;
    t->score[index] = 0;
    t->off[index] = *at;
    while (next_field(&r, &f, "piece", &c, err)) {
        if (f.field == 1) {
            if ((c = want_wire(&f, WIRE_LEN, "piece", err)))
                return c;
            const uint8_t *p = f.bytes.p;
            size_t n = (size_t)(f.bytes.end - p);
            if (have_text++)
                return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": piece %d has two texts", index);
            for (size_t i = 0; i < n; i++) {
                int space = n - i >= 3 && p[i] == 0xE2 && p[i + 1] == 0x96 && p[i + 2] == 0x81;
                t->bytes[(*at)++] = space ? ' ' : p[i];
                i += space ? 2 : 0;
            }
        } else if (f.field == 2) {
            if ((c = want_wire(&f, WIRE_I32, "piece", err)))
                return c;
            uint32_t bits = (uint32_t)f.value;
            memcpy(&t->score[index], &bits, sizeof bits);
        } else if (f.field == 3) {
            if ((c = want_wire(&f, WIRE_VARINT, "piece", err)))
                return c;
            *type = (int)f.value;
        }
    }
    if (!c && !have_text)
        c = lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": piece %d has no text", index);
    if (!c && (*type < PIECE_NORMAL || *type > PIECE_BYTE))
        c = lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": piece %d has type %d", index, *type);
    return c;
}

/* What lmq's encoder reproduces: a BPE model, byte fallback or not, the identity normalizer,
 * no whitespace squeezing, no user-defined pieces (SentencePiece matches those before BPE). */
static lmq_code check_spec(const spm_spec *s, int n, lmq_err *err)
{
    if (s->model_type != MODEL_BPE)
        return lmq_fail(err, LMQ_E_UNSUPPORTED,
                        FILE_NAME ": model_type %d is not supported (lmq encodes BPE, type %d; Unigram is not)",
                        s->model_type, MODEL_BPE);
    if (strcmp(s->normalizer, "identity"))
        return lmq_fail(err, LMQ_E_UNSUPPORTED, FILE_NAME ": normalizer \"%s\" is not supported (only identity)",
                        s->normalizer);
    if (s->remove_extra_whitespaces)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, FILE_NAME ": remove_extra_whitespaces is not supported");
    const int64_t *ids[] = { &s->unk_id, &s->bos_id, &s->eos_id };
    for (int i = 0; i < 3; i++)
        if (*ids[i] >= n || *ids[i] < -1)
            return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": %s id %lld outside the %d pieces",
                            (const char *[]){ "unk", "bos", "eos" }[i], (long long)*ids[i], n);
    return LMQ_OK;
}

lmq_code tok_open_spm_model(const uint8_t *data, size_t size, tok_tokenizer **out, lmq_err *err)
{
    spm_spec spec = { .model_type = 1, .unk_id = 0, .bos_id = 1, .eos_id = 2, .add_dummy_prefix = 1,
                      .remove_extra_whitespaces = 1, .normalizer = "nmt_nfkc" };
    pb_reader r = { data, data + size };
    pb_field f;
    lmq_code c;
    int n = 0;
    /* first pass: count the pieces, read the specs */
    while (next_field(&r, &f, "ModelProto", &c, err)) {
        if (f.field >= 1 && f.field <= 3 && (c = want_wire(&f, WIRE_LEN, "ModelProto", err)))
            return c;
        if (f.field == 1 && ++n == INT32_MAX / 2)
            return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": too many pieces");
        if (f.field == 2 && (c = read_trainer(f.bytes, &spec, err)))
            return c;
        if (f.field == 3 && (c = read_normalizer(f.bytes, &spec, err)))
            return c;
    }
    if (c)
        return c;
    if (n == 0)
        return lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": no pieces (is it a SentencePiece model?)");
    if ((c = check_spec(&spec, n, err)))
        return c;

    tok_tokenizer *t = tok_alloc(LMQ_TOK_SPM);
    if (!t)
        return lmq_fail(err, LMQ_E_NOMEM, FILE_NAME ": out of memory");
    t->n_vocab = n;
    t->bytes = malloc(size ? size : 1); /* the texts cannot hold more than the file */
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->score = malloc((size_t)n * sizeof *t->score);
    if (!t->bytes || !t->off || !t->score)
        c = lmq_fail(err, LMQ_E_NOMEM, FILE_NAME ": out of memory (%d pieces)", n);
    size_t at = 0;
    int i = 0;
    r = (pb_reader){ data, data + size };
    while (!c && next_field(&r, &f, "ModelProto", &c, err)) {
        if (f.field != 1)
            continue;
        int type;
        if ((c = read_piece(f.bytes, i, t, &at, &type, err)))
            break;
        if (type == PIECE_USER)
            c = lmq_fail(err, LMQ_E_UNSUPPORTED,
                         FILE_NAME ": piece %d \"%.*s\" is user-defined (matched before BPE): not supported", i,
                         (int)(at - t->off[i]), (const char *)t->bytes + t->off[i]);
        /* SentencePiece merges only into normal pieces */
        if (type != PIECE_NORMAL)
            t->score[i] = -INFINITY;
        i++;
    }
    if (!c) {
        t->off[n] = at;
        t->unk_id = (int32_t)spec.unk_id;
        t->bos_id = (int32_t)spec.bos_id;
        t->eos_id = (int32_t)spec.eos_id;
        t->prepend = spec.add_dummy_prefix ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        c = tok_sp_finish(t, FILE_NAME, err);
    }
    if (!c && !spec.byte_fallback)
        t->byte_fallback = 0; /* byte pieces there, but SentencePiece would give unk */
    if (!c && spec.byte_fallback && !t->byte_fallback)
        c = lmq_fail(err, LMQ_E_FORMAT, FILE_NAME ": byte_fallback is set but not all 256 <0xHH> pieces exist");
    if (c) {
        tok_free(t);
        return c;
    }
    *out = t;
    return LMQ_OK;
}
