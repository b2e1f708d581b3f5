/* The roles of a block's matrices, one row each (as llama.cpp's llama-arch tables name a
 * model's tensors): the canonical name blk.N.<name>.weight, which families have it and a bias
 * beside it, and the activations it reads. The runtime's weight slots and the calibrate stage's
 * inputs are these rows; formats/model.h lists the whole canonical naming. */
#ifndef LMQ_ROLES_H
#define LMQ_ROLES_H

#include "formats/model.h"

/* In the order a token reads them. */
typedef enum {
    LMQ_ROLE_QKV,  /* attn_qkv: q|k|v fused (GPT-2 as imported by default) */
    LMQ_ROLE_Q,    /* attn_q, attn_k, attn_v: otherwise (biases: GPT-2, Qwen2) */
    LMQ_ROLE_K,
    LMQ_ROLE_V,
    LMQ_ROLE_OUT,  /* attn_out */
    LMQ_ROLE_GATE, /* ffn_gate: Llama */
    LMQ_ROLE_UP,   /* ffn_up */
    LMQ_ROLE_DOWN, /* ffn_down */
    LMQ_ROLE_COUNT
} lmq_role;

/* The activations a block's matrices read. Matrices that read the same ones share an input (q, k
 * and v read the attention norm's output; Llama's gate and up the feed-forward norm's). */
typedef enum {
    LMQ_IN_ATTN,     /* attention norm → q, k, v (or fused qkv) */
    LMQ_IN_ATTN_OUT, /* attention's weighted values → output projection */
    LMQ_IN_FFN,      /* feed-forward norm → gate and up (or up) */
    LMQ_IN_FFN_DOWN, /* activation → down projection */
    LMQ_IN_COUNT
} lmq_input;

/* Families as bits (1u << lmq_family), and Llama's q, k, v bias when the model has attn_q.bias
 * (Qwen2). */
#define LMQ_ROLE_GPT2 (1u << LMQ_FAMILY_GPT2)
#define LMQ_ROLE_LLAMA (1u << LMQ_FAMILY_LLAMA)
#define LMQ_ROLE_QKV_BIAS (1u << 8)

typedef struct {
    const char *name; /* "attn_q" */
    unsigned in;      /* the families that can have it */
    unsigned bias;    /* those whose matrix has a bias (blk.N.<name>.bias) */
    lmq_input input;
} lmq_role_row;

extern const lmq_role_row lmq_roles[LMQ_ROLE_COUNT];
/* "attn_in", "attn_out_in", "ffn_in", "ffn_down_in": how statistics files name the inputs. */
extern const char *const lmq_input_names[LMQ_IN_COUNT];

/* The role of "blk.<layer>.<name>.weight": returns 1 and sets layer and role, or 0 when name is
 * no block matrix's. */
int lmq_role_of(const char *name, int *layer, lmq_role *role);

#endif
