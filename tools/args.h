/* Command-line options for the lmq subcommands: one table per command, parsed the same way. */
#ifndef LMQ_ARGS_H
#define LMQ_ARGS_H

#include <stdint.h>

/* One option. With `value` it takes an argument (--name VALUE or --name=VALUE), stored as
 * given; with `flag` it is a switch that sets *flag = 1. `alias` is an optional short form. */
typedef struct {
    const char *name, *alias;
    const char **value;
    int *flag;
} arg_opt;

/* Parses argv[1..argc) (argv[0] is the command name). Positional arguments go to pos[0..max_pos)
 * and their count to *n_pos. Returns -1 on success; otherwise the exit status to return: 0
 * after printing usage for --help, 2 after printing an error and usage to stderr. */
int args_parse(int argc, char **argv, const arg_opt *opts, const char **pos, int max_pos, int *n_pos,
               const char *usage);

/* The values of a repeatable option, in command-line order, in room for max the caller gives. */
typedef struct {
    const char **v;
    int n, max;
} arg_list;
/* Takes every "NAME VALUE" and "NAME=VALUE" out of argv (before args_parse sees it) into l.
 * Returns -1, or 2 after printing an error (a value missing, more than l->max of them). */
int args_take(int *argc, char **argv, const char *name, arg_list *l);

/* Parses an integer option value in [lo, hi]; returns 0 and prints an error when it is not. */
int args_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
/* The same for a finite double in [lo, hi]. */
int args_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
struct rt_kv_format;
/* The KV cache format named s (runtime/kv.h); NULL s leaves *out. 0 after printing an error that
 * names the valid ones. */
int args_kv(const char *cmd, const char *opt, const char *s, const struct rt_kv_format **out);
/* --shard S: "K/N" (0 <= K < N <= ARGS_MAX_SHARDS); "env": K and N from a Slurm job array
 * (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT); "env/N": K from a Slurm
 * array or a Kubernetes indexed job (JOB_COMPLETION_INDEX), N given (and checked against Slurm's
 * count where it is set). 0 after printing an error that says which part is wrong. */
#define ARGS_MAX_SHARDS 256 /* a merge reads them all: as many files as verify takes artefacts */
int args_shard(const char *cmd, const char *s, int *k, int *n);
/* The same for any unsigned 64-bit integer (decimal digits only, no sign). */
int args_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);

#endif
