/* formats/safetensors: header validation (one hostile file per error path, each with its own
 * message), exact F16/BF16/F32 decoding, and st_write round trips. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp.h"
#include "formats/safetensors.h"
#include "tests/testutil.h"

/* One scratch directory per test (Check runs each test in its own process). */
static char scratch[64];

static void scratch_up(void)
{
    snprintf(scratch, sizeof scratch, "%s", test_tmpdir());
}

static void scratch_down(void)
{
    test_rmtree(scratch);
}

/* Writes <scratch>/<name>: the 8-byte header length hlen, the header text, then data (n bytes). */
static const char *raw_file(const char *name, uint64_t hlen, const char *header, const void *data, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)(hlen >> (8 * i));
    ck_assert_uint_eq(fwrite(len8, 1, 8, f), 8);
    ck_assert_uint_eq(fwrite(header, 1, strlen(header), f), strlen(header));
    if (n)
        ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
    return path;
}

/* A file whose header length is exactly its JSON, followed by n zero bytes of data. */
static const char *json_file(const char *name, const char *header, size_t n)
{
    static uint8_t zeros[4096];
    ck_assert_uint_le(n, sizeof zeros);
    return raw_file(name, strlen(header), header, zeros, n);
}

/* st_open must fail, and the message must name the file and contain each of the needles. */
static void expect_open_error(const char *path, lmq_code code, const char *needle1, const char *needle2)
{
    st_file f;
    lmq_err err = { 0 };
    lmq_code c = st_open(path, &f, &err);
    ck_assert_msg(c == code, "%s: code %d (%s), wanted %d", path, c, err.msg, code);
    ck_assert_msg(strstr(err.msg, path), "message does not name the file: %s", err.msg);
    ck_assert_msg(strstr(err.msg, needle1), "message lacks \"%s\": %s", needle1, err.msg);
    if (needle2)
        ck_assert_msg(strstr(err.msg, needle2), "message lacks \"%s\": %s", needle2, err.msg);
    ck_assert_ptr_null(f.tensors);
}

START_TEST(header_length_errors)
{
    char shortp[512];
    snprintf(shortp, sizeof shortp, "%s/short.safetensors", scratch);
    FILE *f = fopen(shortp, "wb");
    ck_assert_uint_eq(fwrite("\x10\0\0", 1, 3, f), 3);
    fclose(f);
    expect_open_error(shortp, LMQ_E_FORMAT, "file is 3 bytes, too short", NULL);
    expect_open_error(json_file("zero.safetensors", "", 16), LMQ_E_FORMAT, "header length is 0", NULL);
    expect_open_error(raw_file("huge.safetensors", (uint64_t)1 << 40, "{}", NULL, 0), LMQ_E_FORMAT, "too big",
                      "1099511627776");
    expect_open_error(raw_file("pasteof.safetensors", 100, "{\"a\": 1}", NULL, 0), LMQ_E_FORMAT,
                      "runs past the end of the file", "100");
    expect_open_error(raw_file("u64max.safetensors", UINT64_MAX, "{}", NULL, 0), LMQ_E_FORMAT, "too big", NULL);
}
END_TEST

START_TEST(json_errors)
{
    expect_open_error(json_file("notjson.safetensors", "this is not json", 0), LMQ_E_FORMAT, "not valid JSON", NULL);
    expect_open_error(json_file("truncjson.safetensors", "{\"a\": {\"dtype\": \"F32\"", 0), LMQ_E_FORMAT,
                      "not valid JSON", NULL);
    expect_open_error(json_file("array.safetensors", "[1, 2, 3]", 0), LMQ_E_FORMAT, "not a JSON object", NULL);
    expect_open_error(json_file("dup.safetensors",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                                " \"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
                                8),
                      LMQ_E_FORMAT, "not valid JSON", "duplicate");
    expect_open_error(json_file("entry.safetensors", "{\"w\": 5}", 0), LMQ_E_FORMAT, "tensor w: entry is not an object",
                      NULL);
    expect_open_error(json_file("nodtype.safetensors", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                      LMQ_E_FORMAT, "tensor w: missing dtype", NULL);
    expect_open_error(json_file("extra.safetensors",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}", 4),
                      LMQ_E_FORMAT, "tensor w: unexpected field \"x\"", NULL);
    expect_open_error(json_file("meta.safetensors", "{\"__metadata__\": {\"format\": 3}}", 0), LMQ_E_FORMAT,
                      "__metadata__ entry \"format\" is not a string", NULL);
    expect_open_error(json_file("meta2.safetensors", "{\"__metadata__\": [\"pt\"]}", 0), LMQ_E_FORMAT,
                      "__metadata__ is not an object", NULL);
}
END_TEST

START_TEST(dtype_errors)
{
    expect_open_error(json_file("q7.safetensors", "{\"w\": {\"dtype\": \"Q7\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1),
                      LMQ_E_FORMAT, "tensor w: unknown dtype \"Q7\"", NULL);
    expect_open_error(json_file("dnum.safetensors", "{\"w\": {\"dtype\": 32, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                      LMQ_E_FORMAT, "tensor w: dtype is not a string", NULL);
    /* Valid safetensors dtypes that lmq does not convert: the header opens (sizes checked with
     * the right element size), reading says which dtype and tensor. */
    static const struct { const char *dtype; int bytes; } others[] = {
        { "F64", 8 }, { "I64", 8 }, { "I32", 4 }, { "U16", 2 }, { "U8", 1 }, { "BOOL", 1 }, { "F8_E4M3", 1 },
        { "F8_E5M2", 1 },
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"t%zu\": {\"dtype\": \"%s\", \"shape\": [2, 3], \"data_offsets\": [0, %d]}}", i,
                 others[i].dtype, 6 * others[i].bytes);
        const char *path = json_file("other.safetensors", hdr, (size_t)(6 * others[i].bytes));
        st_file f;
        lmq_err err = { 0 };
        ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
        ck_assert_int_eq(f.n_tensors, 1);
        float out[6];
        ck_assert_int_eq(st_read_f32(&f, &f.tensors[0], out, &err), LMQ_E_UNSUPPORTED);
        char want[64];
        snprintf(want, sizeof want, "unsupported dtype %s for tensor t%zu", others[i].dtype, i);
        ck_assert_msg(strstr(err.msg, want) && strstr(err.msg, path), "%s", err.msg);
        st_close(&f);
    }
}
END_TEST

START_TEST(shape_errors)
{
    expect_open_error(json_file("neg.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -3], \"data_offsets\": [0, 0]}}", 0),
                      LMQ_E_FORMAT, "tensor w: shape dimension 1 is negative (-3)", NULL);
    expect_open_error(json_file("float.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8),
                      LMQ_E_FORMAT, "tensor w: shape dimension 0 is not an integer", NULL);
    expect_open_error(json_file("noarr.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}}", 16),
                      LMQ_E_FORMAT, "tensor w: shape is not an array", NULL);
    expect_open_error(json_file("rank.safetensors",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4),
                      LMQ_E_FORMAT, "tensor w: shape has 9 dimensions", NULL);
    /* 2^32 * 2^32 elements: the product overflows 64 bits. */
    expect_open_error(json_file("overflow.safetensors",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 0),
                      LMQ_E_FORMAT, "tensor w: shape [4294967296, 4294967296] overflows", NULL);
    /* 2^60 elements fit in int64 but their bit count does not. */
    expect_open_error(json_file("overflow2.safetensors",
                                "{\"w\": {\"dtype\": \"BF16\", \"shape\": [1152921504606846976], \"data_offsets\": [0, 0]}}", 0),
                      LMQ_E_FORMAT, "overflows", NULL);
    expect_open_error(json_file("mismatch.safetensors",
                                "{\"w\": {\"dtype\": \"F16\", \"shape\": [3, 4], \"data_offsets\": [0, 48]}}", 48),
                      LMQ_E_FORMAT, "tensor w: data_offsets span 48 bytes but shape [3, 4] of F16 needs 24", NULL);
    expect_open_error(json_file("f4.safetensors", "{\"w\": {\"dtype\": \"F4\", \"shape\": [3], \"data_offsets\": [0, 2]}}", 2),
                      LMQ_E_FORMAT, "tensor w: shape [3] of F4 does not fill whole bytes", NULL);
}
END_TEST

START_TEST(offset_errors)
{
    expect_open_error(json_file("range.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 16),
                      LMQ_E_FORMAT, "tensor w: data_offsets [8, 24] out of range (the data region is 16 bytes)", NULL);
    expect_open_error(json_file("reversed.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 16),
                      LMQ_E_FORMAT, "tensor w: data_offsets [8, 4] end before they begin", NULL);
    expect_open_error(json_file("negoff.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 16),
                      LMQ_E_FORMAT, "tensor w: data_offsets is not [begin, end]", NULL);
    expect_open_error(json_file("three.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 16),
                      LMQ_E_FORMAT, "tensor w: data_offsets is not [begin, end]", NULL);
    expect_open_error(json_file("overlap.safetensors",
                                "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                                " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [24, 32]},"
                                " \"c\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [12, 28]}}",
                                32),
                      LMQ_E_FORMAT, "tensors a [0, 16) and c [12, 28) overlap", NULL);
    /* A tensor inside a larger one that starts earlier (not just its neighbour). */
    expect_open_error(json_file("nested.safetensors",
                                "{\"big\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]},"
                                " \"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]},"
                                " \"y\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [20, 24]}}",
                                32),
                      LMQ_E_FORMAT, "overlap", "big");
    expect_open_error(json_file("same.safetensors",
                                "{\"p\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]},"
                                " \"q\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                                4),
                      LMQ_E_FORMAT, "overlap", NULL);
}
END_TEST

/* A well-formed file: metadata, a scalar, an empty tensor inside the range of others (it
 * occupies no bytes), tensors listed in header order, lookups. */
START_TEST(valid_layout)
{
    const char *hdr = "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"x\"},"
                      " \"w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [4, 20]},"
                      " \"empty\": {\"dtype\": \"F32\", \"shape\": [0, 7], \"data_offsets\": [8, 8]},"
                      " \"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}   ";
    uint8_t data[20];
    const float vals[5] = { -0.5f, 1.0f, 2.0f, 3.0f, 1e-30f };
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 4; b++)
            data[4 * i + b] = (uint8_t)(lmq_f32_bits(vals[i]) >> (8 * b));
    const char *path = raw_file("valid.safetensors", strlen(hdr), hdr, data, sizeof data);
    st_file f;
    lmq_err err = { 0 };
    ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
    ck_assert_int_eq(f.n_tensors, 3);
    ck_assert_int_eq(f.n_metadata, 2);
    ck_assert_str_eq(f.tensors[0].name, "w");
    ck_assert_str_eq(f.tensors[1].name, "empty");
    ck_assert_str_eq(f.tensors[2].name, "s");
    ck_assert_uint_eq(f.data_size, 20);
    const st_tensor *w = st_find(&f, "w"), *s = st_find(&f, "s"), *e = st_find(&f, "empty");
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_null(st_find(&f, "W"));
    ck_assert_int_eq(w->ndim, 2);
    ck_assert_int_eq(w->numel, 4);
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_int_eq(s->numel, 1);
    ck_assert_int_eq(e->numel, 0);
    float out[4];
    ck_assert_int_eq(st_read_f32(&f, w, out, &err), LMQ_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(lmq_f32_bits(out[i]), lmq_f32_bits(vals[i + 1]));
    ck_assert_int_eq(st_read_f32(&f, s, out, &err), LMQ_OK);
    ck_assert_uint_eq(lmq_f32_bits(out[0]), lmq_f32_bits(-0.5f));
    st_close(&f);
}
END_TEST

/* Half and bfloat16 bit patterns decode to their exact values; the data region is unaligned. */
START_TEST(f16_bf16_decode)
{
    static const struct { uint16_t bits; float value; } f16[] = {
        { 0x3c00, 1.0f },        { 0xc000, -2.0f },           { 0x0001, 0x1p-24f },     { 0x03ff, 0x3ffp-24f },
        { 0x0400, 0x1p-14f },    { 0x7bff, 65504.0f },        { 0x3555, 0.333251953125f }, { 0x8000, -0.0f },
        { 0x7c00, INFINITY },    { 0xfc00, -INFINITY },       { 0x3c01, 1.0f + 0x1p-10f },
    };
    static const struct { uint16_t bits; float value; } bf16[] = {
        { 0x3f80, 1.0f },      { 0xc040, -3.0f },        { 0x0001, 0x1p-133f },       { 0x7f7f, 0x1.fep127f },
        { 0x3eab, 0.333984375f }, { 0x8000, -0.0f },     { 0x3f81, 1.0f + 0x1p-7f },  { 0xff80, -INFINITY },
        { 0x0080, 0x1p-126f },
    };
    enum { NF = sizeof f16 / sizeof f16[0], NB = sizeof bf16 / sizeof bf16[0] };
    uint8_t data[2 * (NF + NB)];
    for (int i = 0; i < NF; i++) {
        data[2 * i] = (uint8_t)f16[i].bits;
        data[2 * i + 1] = (uint8_t)(f16[i].bits >> 8);
    }
    for (int i = 0; i < NB; i++) {
        data[2 * (NF + i)] = (uint8_t)bf16[i].bits;
        data[2 * (NF + i) + 1] = (uint8_t)(bf16[i].bits >> 8);
    }
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "{\"h\": {\"dtype\": \"F16\", \"shape\": [%d], \"data_offsets\": [0, %d]},"
             " \"b\": {\"dtype\": \"BF16\", \"shape\": [%d], \"data_offsets\": [%d, %d]}}",
             NF, 2 * NF, NB, 2 * NF, 2 * (NF + NB));
    if (strlen(hdr) % 2 == 0) /* make 8 + header odd so no element is aligned */
        strcat(hdr, " ");
    const char *path = raw_file("half.safetensors", strlen(hdr), hdr, data, sizeof data);
    st_file f;
    lmq_err err = { 0 };
    ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
    float out[NF > NB ? NF : NB];
    ck_assert_int_eq(st_read_f32(&f, st_find(&f, "h"), out, &err), LMQ_OK);
    for (int i = 0; i < NF; i++)
        ck_assert_msg(lmq_f32_bits(out[i]) == lmq_f32_bits(f16[i].value), "F16 %04x -> %a, want %a", f16[i].bits,
                      (double)out[i], (double)f16[i].value);
    ck_assert_int_eq(st_read_f32(&f, st_find(&f, "b"), out, &err), LMQ_OK);
    for (int i = 0; i < NB; i++)
        ck_assert_msg(lmq_f32_bits(out[i]) == lmq_f32_bits(bf16[i].value), "BF16 %04x -> %a, want %a", bf16[i].bits,
                      (double)out[i], (double)bf16[i].value);
    st_close(&f);
}
END_TEST

/* st_write: F32 stays bit-exact, F16/BF16 hold the round-to-nearest-even value; the header is
 * padded to 8 bytes and the file reopens with the same names, shapes and order. */
START_TEST(write_round_trip)
{
    enum { N = 3 * 5 };
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)sin(i * 1.7) * powf(10.0f, (float)(i % 7) - 3.0f);
    const int64_t shape[2] = { 3, 5 };
    const st_out ts[3] = {
        { "a.f32", ST_F32, 2, shape, v }, { "b.f16", ST_F16, 2, shape, v }, { "c.bf16", ST_BF16, 1, shape + 1, v },
    };
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", scratch);
    lmq_err err = { 0 };
    ck_assert_int_eq(st_write(path, ts, 3, &err), LMQ_OK);
    FILE *fp = fopen(path, "rb");
    uint8_t len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, fp), 8);
    fclose(fp);
    ck_assert_uint_eq(len8[0] % 8, 0);
    st_file f;
    ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
    ck_assert_int_eq(f.n_tensors, 3);
    ck_assert_uint_eq(f.data_size, N * 4 + N * 2 + 5 * 2);
    float out[N];
    for (int k = 0; k < 3; k++) {
        const st_tensor *t = &f.tensors[k];
        ck_assert_str_eq(t->name, ts[k].name);
        ck_assert_int_eq(t->dtype, ts[k].dtype);
        ck_assert_int_eq(t->ndim, ts[k].ndim);
        ck_assert_int_eq(st_read_f32(&f, t, out, &err), LMQ_OK);
        for (int i = 0; i < t->numel; i++) {
            float want = k == 0 ? v[i] : k == 1 ? lmq_f16_to_f32(lmq_f32_to_f16(v[i])) : lmq_bf16_to_f32(lmq_f32_to_bf16(v[i]));
            ck_assert_uint_eq(lmq_f32_bits(out[i]), lmq_f32_bits(want));
        }
    }
    st_close(&f);
    /* Integer dtypes take stored bytes, not values; sub-byte dtypes are not written at all. */
    const st_out bad = { "i", ST_I32, 1, shape, v };
    ck_assert_int_eq(st_write(path, &bad, 1, &err), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "takes stored bytes, not values"));
    const st_out f4 = { "i", ST_F4, 1, shape, v };
    ck_assert_int_eq(st_write(path, &f4, 1, &err), LMQ_E_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot write dtype F4"));
}
END_TEST

/* Stored bytes of any whole-byte dtype: written in pieces that cross tensors, read back as is;
 * a piece that is not whole values, or one too many, is refused. */
START_TEST(write_raw_bytes)
{
    const int64_t s3[1] = { 3 }, s2[2] = { 1, 2 };
    const st_out ts[2] = { { "w", ST_I32, 1, s3, NULL }, { "b", ST_I8, 2, s2, NULL } };
    const uint8_t bytes[14] = { 1, 0, 0, 0x80, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x80 };
    char path[512];
    snprintf(path, sizeof path, "%s/raw.safetensors", test_tmpdir());
    lmq_err err;
    st_stream s;
    ck_assert_int_eq(st_stream_open(&s, path, ts, 2, &err), LMQ_OK);
    ck_assert_int_eq(st_stream_write_raw(&s, bytes, 6, &err), LMQ_E_ARG); /* 1.5 I32 values */
    ck_assert_ptr_nonnull(strstr(err.msg, "not whole I32 values"));
    ck_assert_int_eq(st_stream_write_raw(&s, bytes, 4, &err), LMQ_OK);
    ck_assert_int_eq(st_stream_write_raw(&s, bytes + 4, 9, &err), LMQ_OK); /* runs into "b" */
    ck_assert_int_eq(st_stream_write_raw(&s, bytes + 13, 1, &err), LMQ_OK);
    ck_assert_int_eq(st_stream_write_raw(&s, bytes, 1, &err), LMQ_E_ARG);
    ck_assert_int_eq(st_stream_commit(&s, &err), LMQ_OK);
    st_file f;
    ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
    ck_assert_int_eq(f.tensors[0].dtype, ST_I32);
    ck_assert_int_eq(f.tensors[1].dtype, ST_I8);
    ck_assert_uint_eq(f.data_size, sizeof bytes);
    ck_assert_mem_eq(f.data, bytes, sizeof bytes);
    st_close(&f);
}
END_TEST

/* st_open_mem (used by tests/fuzz/fuzz_safetensors) over a file's bytes sees what st_open sees, and
 * its errors name the given label; its prefixes are all refused (ASan sees any read past). */
START_TEST(open_mem_matches_open)
{
    const float v[6] = { 1, -2, 3.5f, 4, 5, 6 };
    const int64_t s1[1] = { 2 }, s2[2] = { 2, 2 };
    const st_out ts[2] = { { "x", ST_F32, 1, s1, v }, { "y", ST_BF16, 2, s2, v + 2 } };
    char path[512];
    snprintf(path, sizeof path, "%s/mem.safetensors", scratch);
    lmq_err err = { 0 };
    ck_assert_int_eq(st_write(path, ts, 2, &err), LMQ_OK);
    lmq_blob b;
    ck_assert_int_eq(lmq_blob_open(path, &b, &err), LMQ_OK);
    st_file f, g;
    ck_assert_int_eq(st_open(path, &f, &err), LMQ_OK);
    ck_assert_int_eq(st_open_mem(b.data, b.size, "label", &g, &err), LMQ_OK);
    ck_assert_ptr_null(g.blob.data);
    ck_assert_int_eq(g.n_tensors, f.n_tensors);
    ck_assert_uint_eq(g.data_size, f.data_size);
    ck_assert_int_eq(g.n_metadata, f.n_metadata);
    for (int k = 0; k < f.n_tensors; k++) {
        float a[4], c[4];
        ck_assert_str_eq(g.tensors[k].name, f.tensors[k].name);
        ck_assert_int_eq(g.tensors[k].dtype, f.tensors[k].dtype);
        ck_assert_uint_eq(g.tensors[k].begin, f.tensors[k].begin);
        ck_assert_uint_eq(g.tensors[k].end, f.tensors[k].end);
        ck_assert_int_eq(st_read_f32(&f, &f.tensors[k], a, &err), LMQ_OK);
        ck_assert_int_eq(st_read_f32(&g, &g.tensors[k], c, &err), LMQ_OK);
        ck_assert(!memcmp(a, c, (size_t)f.tensors[k].numel * sizeof *a));
    }
    st_close(&g);
    st_close(&f);
    for (size_t n = 0; n < b.size; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, b.data, n);
        ck_assert_msg(st_open_mem(p, n, "label", &g, &err) == LMQ_E_FORMAT, "prefix of %zu bytes", n);
        ck_assert_msg(!strncmp(err.msg, "label: ", 7), "%s", err.msg);
        ck_assert_ptr_null(g.tensors);
        free(p);
    }
    lmq_blob_close(&b);
}
END_TEST

/* Hostile variations of a valid file: every truncation fails cleanly, and every single-byte
 * corruption of the header either fails cleanly or yields tensors inside the data region. */
START_TEST(truncation_and_corruption)
{
    const float v[6] = { 1, 2, 3, 4, 5, 6 };
    const int64_t s1[1] = { 2 }, s2[2] = { 2, 2 };
    const st_out ts[2] = { { "x", ST_F32, 1, s1, v }, { "y", ST_F16, 2, s2, v + 2 } };
    char path[512], bad[512];
    const char *dir = scratch;
    snprintf(path, sizeof path, "%s/ok.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    lmq_err err;
    ck_assert_int_eq(st_write(path, ts, 2, &err), LMQ_OK);
    FILE *fp = fopen(path, "rb");
    uint8_t buf[1024];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    ck_assert_uint_lt(n, sizeof buf);
    for (size_t len = 0; len < n; len++) {
        fp = fopen(bad, "wb");
        ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
        fclose(fp);
        st_file f;
        ck_assert_msg(st_open(bad, &f, &err) == LMQ_E_FORMAT, "truncated to %zu bytes but opened", len);
    }
    const uint8_t subst[] = { 0x00, '"', '9', '-', '}', ']', 0xff };
    for (size_t pos = 0; pos < 8 + (size_t)buf[0]; pos++)
        for (size_t k = 0; k < sizeof subst; k++) {
            uint8_t copy[1024];
            memcpy(copy, buf, n);
            copy[pos] = subst[k];
            fp = fopen(bad, "wb");
            ck_assert_uint_eq(fwrite(copy, 1, n, fp), n);
            fclose(fp);
            st_file f;
            if (st_open(bad, &f, &err) != LMQ_OK)
                continue;
            for (int i = 0; i < f.n_tensors; i++)
                ck_assert_uint_le(f.tensors[i].end, f.data_size);
            st_close(&f);
        }
}
END_TEST

START_TEST(missing_file)
{
    st_file f;
    lmq_err err;
    ck_assert_int_eq(st_open("/nonexistent/x.safetensors", &f, &err), LMQ_E_IO);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/x.safetensors"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, scratch_up, scratch_down);
    tcase_add_test(tc, header_length_errors);
    tcase_add_test(tc, json_errors);
    tcase_add_test(tc, dtype_errors);
    tcase_add_test(tc, shape_errors);
    tcase_add_test(tc, offset_errors);
    tcase_add_test(tc, valid_layout);
    tcase_add_test(tc, f16_bf16_decode);
    tcase_add_test(tc, write_round_trip);
    tcase_add_test(tc, write_raw_bytes);
    tcase_add_test(tc, truncation_and_corruption);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, open_mem_matches_open);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
