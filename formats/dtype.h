/* On-disk tensor encodings. The numbers are part of the lmq container format: never renumber.
 * formats/ only stores these descriptors; schemes/ knows the byte layout behind each. */
#ifndef LMQ_DTYPE_H
#define LMQ_DTYPE_H

#include <stdint.h>

typedef enum {
    LMQ_T_F32 = 0,
    LMQ_T_F16 = 1,
    LMQ_T_BF16 = 2,
    LMQ_T_F8_E4M3 = 3,
    LMQ_T_F8_E5M2 = 4,
    LMQ_T_INT8 = 5,
    LMQ_T_INT4 = 6,
    LMQ_T_INT3 = 7,
    LMQ_T_INT2 = 8,
    /* 9 is taken: the container's dtype field says "carried file" with it (formats/container.c) */
    /* GGUF's block encodings, stored as GGUF's own block bytes (imported, or quantised by
     * schemes/gguf_quant.h) */
    LMQ_T_Q4_1 = 10,
    LMQ_T_Q5_0 = 11,
    LMQ_T_Q5_1 = 12,
    LMQ_T_Q4_K = 13,
    LMQ_T_Q5_K = 14,
    LMQ_T_Q6_K = 15,
    LMQ_T_Q8_0 = 16, /* GGUF's Q8_0 / Q4_0 with a negative block scale (llama.cpp's Q4_0 rule */
    LMQ_T_Q4_0 = 17, /* d = max / -8 gives one in most blocks); otherwise int8 / int4 g32 */
    LMQ_T_Q2_K = 18,
    LMQ_T_Q3_K = 19,
    LMQ_T_IQ4_NL = 20,
    LMQ_T_IQ4_XS = 21,
    LMQ_T_COUNT
} lmq_dtype;

typedef enum {
    LMQ_GRAN_NONE = 0,    /* plain floats, no scales */
    LMQ_GRAN_TENSOR = 1,  /* one scale for the whole tensor */
    LMQ_GRAN_CHANNEL = 2, /* one scale per output row of the [out, in] matrix */
    LMQ_GRAN_GROUP = 3,   /* one scale per `group` consecutive inputs within a row */
} lmq_gran;

/* How one tensor is encoded. A 1-D tensor is one row. */
typedef struct {
    uint16_t dtype; /* lmq_dtype */
    uint8_t gran;   /* lmq_gran */
    uint8_t asym;   /* 1: zero points stored beside the scales */
    uint32_t group; /* inputs per group when gran == LMQ_GRAN_GROUP, else 0 */
} lmq_qparams;

/* Activation quantisation at run time (manifest key `activations`, recipes' rule key of the same
 * name): the input x of the linear layer that reads a tensor is quantised before the product,
 * int8: s = max|x| / 127, x' = clamp(roundf(x / s), -127, 127)·s; fp8_e4m3: s = max|x| / 448,
 * x' = e4m3(x / s)·s (nearest, ties to even, as vLLM's dynamic fp8); the max taken per token
 * (row of x) or over the layer call's whole input. int8 per block: each row cut into blocks, each
 * on its own grid as llama.cpp pairs them with the weights (Q8_0, blocks of 32 with an fp16
 * scale, against 32-blocks and groups; Q8_K, blocks of 256 with an fp32 scale, against the
 * 256-blocks) and multiplied in integers against the weights' own blocks (runtime/linear.h). Not
 * stored in the container: the manifest carries it. */
typedef enum { LMQ_ACT_NONE = 0, LMQ_ACT_INT8 = 1, LMQ_ACT_FP8_E4M3 = 2, LMQ_ACT_COUNT } lmq_act_scheme;
typedef enum { LMQ_ACT_TOKEN = 0, LMQ_ACT_TENSOR = 1, LMQ_ACT_BLOCK = 2, LMQ_ACT_GRAN_COUNT } lmq_act_gran;
/* The values an LMQ_ACT_BLOCK block holds against 32-blocks and groups (256 against GGUF's
 * 256-blocks: lmq_act_block_len, formats/encoding.h). */
#define LMQ_ACT_BLOCK_LEN 32

typedef struct {
    uint8_t scheme; /* lmq_act_scheme */
    uint8_t gran;   /* lmq_act_gran */
} lmq_act;

#endif
