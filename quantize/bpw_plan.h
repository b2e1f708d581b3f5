/* target_bpw: each free tensor's encoding chosen from the recipe's candidates so that the summed
 * estimated output error is least with the whole model at most target_bpw bits per weight, counted
 * as llama.cpp counts them (every stored tensor's bits over every stored tensor's elements; a tied
 * embedding that keeps one encoding for both uses is one tensor).
 *
 * Free tensors: the linear layers of blocks whose rule gives a GGUF block scheme. Each may take the
 * candidates whose blocks divide its rows, or what its rule resolved to (its fallback, say); every
 * other tensor keeps its rule and counts against the budget. The estimate of each (tensor, option)
 * comes from the caller: weight MSE (quantize/) or the output error through the calibration's Gram
 * matrix (calibrate/). */
#ifndef LMQ_BPW_PLAN_H
#define LMQ_BPW_PLAN_H

#include <stdint.h>

#include "common/err.h"
#include "quantize/recipe.h"

/* One way to store one tensor: its storage bits and its estimated error. */
typedef struct {
    double bits, err;
} q_bpw_option;

/* Chooses choice[i] in [0, first[i+1] - first[i]) for each of n items (item i's options are
 * opts[first[i] ..]) with Σ bits <= budget and Σ err small: the upgrades on each item's lower
 * convex hull taken steepest first while they fit (the Lagrangian solution), then single changes
 * that lower the error and still fit, largest gain first, until none does. LMQ_E_ARG when even the
 * cheapest options exceed the budget. The result is within the largest hull step of one item of
 * the optimum, and exact when every step costs the same bits and the budget is a whole number of
 * steps. */
lmq_code q_bpw_solve(const q_bpw_option *opts, const int *first, int n, double budget, int *choice, lmq_err *err);

/* The estimated error of plan entry `entry` stored as qp with method m, into *out. */
typedef lmq_code (*q_bpw_error_fn)(void *ctx, int entry, const lmq_qparams *qp, const q_method *m, double *out,
                                   lmq_err *err);

typedef struct {
    int entry;      /* plan index */
    double err;     /* the estimate of the option chosen */
    int n_options;  /* how many it was chosen from */
} q_bpw_choice;

typedef struct {
    double target, reached; /* whole-model bits per weight: asked, and of the plan as chosen */
    double err;             /* Σ of the chosen estimates */
    q_bpw_choice *choices;  /* the free tensors, in plan order */
    int n;
} q_bpw_report;

/* Storage bits and elements of the artefact the plan writes over tensors of rows[i] × cols[i]
 * (plan order): the whole-model bits per weight is bits / params. */
lmq_code q_plan_bits(const q_plan *plan, const int64_t *rows, const int64_t *cols, uint64_t *bits, uint64_t *params,
                     lmq_err *err);

/* For a recipe with target_bpw: estimates every free tensor's options with fn, solves, and
 * rewrites the plan's free entries to the choice (qp, method; fell_back when it is the rule's own
 * fallback). A target outside the mixes the options reach is an error naming the recipe line. */
lmq_code q_bpw_assign(const q_recipe *r, q_plan *plan, const int64_t *rows, const int64_t *cols, q_bpw_error_fn fn,
                      void *ctx, q_bpw_report *rep, lmq_err *err);
void q_bpw_report_free(q_bpw_report *rep);

#endif
