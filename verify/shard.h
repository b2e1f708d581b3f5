/* Sharded verify (lmq verify --shard K/N, lmq verify --merge): shard K of N scores windows K,
 * K + N, K + 2N, ... and keeps every scored position's values (NLL, KL, agreement) for every
 * artefact; the merge puts them back in window order and computes the report with the very
 * function a single run uses (vf_results), so every statistic is the single run's, bit for bit.
 *
 * A shard file is an lmq container (formats/CONTAINER.md): per row i (the reference first) the
 * carried files "nll.<i>" and "kl.<i>" (fp64, little-endian) and "agree.<i>" (one byte, 0 or 1)
 * over the shard's positions in window order, each checksummed; its manifest text is JSON:
 * lmq_verify_shard (the layout's version), shard (K), threads, kernels, and binding: what every
 * shard of one run has alike (protocol, tool version, ctx, N, the token stream's length and
 * checksum, the text's path, checksum and documents, the device, and per row the artefact's path,
 * file checksum, storage facts, scheme and KV cache formats). */
#ifndef LMQ_VF_SHARD_H
#define LMQ_VF_SHARD_H

#include "verify/report.h"

#define VF_SHARD_VERSION 1

/* Writes shard `shard` of `shards` of report r (its rows and text; no results needed) with p[i],
 * row i's positions, to path atomically. */
lmq_code vf_shard_write(const char *path, const vf_report *r, int shard, int shards, const vf_positions *p,
                        lmq_err *err);

/* A merged report and the strings it points to. */
typedef struct {
    vf_report report; /* report.rows malloc'd: free it */
    char text[4096], isa[32], device[16];
} vf_merged;

/* Reads the n shard files, checks every one through the container's checksums and that they are
 * the N shards of one run, each once (an error names the file: foreign, repeated, damaged; or
 * the index missing), and fills m with the report a single run gives (no speed measured). */
lmq_code vf_shard_merge(const char *const *paths, int n, vf_merged *m, lmq_err *err);

#endif
