#include "formats/roles.h"

#include <stdio.h>
#include <string.h>

#define GPT2 LMQ_ROLE_GPT2
#define LLAMA LMQ_ROLE_LLAMA

const lmq_role_row lmq_roles[LMQ_ROLE_COUNT] = {
    [LMQ_ROLE_QKV] = { "attn_qkv", GPT2, GPT2, LMQ_IN_ATTN },
    [LMQ_ROLE_Q] = { "attn_q", GPT2 | LLAMA, GPT2 | LMQ_ROLE_QKV_BIAS, LMQ_IN_ATTN },
    [LMQ_ROLE_K] = { "attn_k", GPT2 | LLAMA, GPT2 | LMQ_ROLE_QKV_BIAS, LMQ_IN_ATTN },
    [LMQ_ROLE_V] = { "attn_v", GPT2 | LLAMA, GPT2 | LMQ_ROLE_QKV_BIAS, LMQ_IN_ATTN },
    [LMQ_ROLE_OUT] = { "attn_out", GPT2 | LLAMA, GPT2, LMQ_IN_ATTN_OUT },
    [LMQ_ROLE_GATE] = { "ffn_gate", LLAMA, 0, LMQ_IN_FFN },
    [LMQ_ROLE_UP] = { "ffn_up", GPT2 | LLAMA, GPT2, LMQ_IN_FFN },
    [LMQ_ROLE_DOWN] = { "ffn_down", GPT2 | LLAMA, GPT2, LMQ_IN_FFN_DOWN },
};

const char *const lmq_input_names[LMQ_IN_COUNT] = { "attn_in", "attn_out_in", "ffn_in", "ffn_down_in" };

int lmq_role_of(const char *name, int *layer, lmq_role *role)
{
    char what[32];
    int l, end = 0;
    if (sscanf(name, "blk.%d.%31[a-z_].weight%n", &l, what, &end) != 2 || name[end] || l < 0)
        return 0;
    for (int r = 0; r < LMQ_ROLE_COUNT; r++)
        if (!strcmp(what, lmq_roles[r].name)) {
            *layer = l;
            *role = (lmq_role)r;
            return 1;
        }
    return 0;
}
