/* Hash maps and the BPE merge engine shared by both tokenizer families. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define NONE UINT32_MAX

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* FNV-1a over the concatenation a || b. */
static uint64_t hash2(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < na; i++)
        h = (h ^ a[i]) * 0x100000001b3ull;
    for (size_t i = 0; i < nb; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int key_equal2(const tok_strmap *m, uint32_t id, const uint8_t *a, size_t na,
                      const uint8_t *b, size_t nb)
{
    const uint8_t *k = m->arena + m->off[id];
    size_t nk = m->off[id + 1] - m->off[id];
    return nk == na + nb && memcmp(k, a, na) == 0 && (nb == 0 || memcmp(k + na, b, nb) == 0);
}

lmq_code tok_strmap_build(tok_strmap *m, const uint8_t *arena, const size_t *off, int n)
{
    m->mask = pow2_at_least((size_t)n * 2) - 1;
    m->arena = arena;
    m->off = off;
    m->slot = calloc(m->mask + 1, sizeof *m->slot);
    if (!m->slot)
        return LMQ_E_NOMEM;
    for (int id = 0; id < n; id++) {
        const uint8_t *k = arena + off[id];
        size_t nk = off[id + 1] - off[id];
        size_t i = hash2(k, nk, NULL, 0) & m->mask;
        while (m->slot[i] && !key_equal2(m, m->slot[i] - 1, k, nk, NULL, 0))
            i = (i + 1) & m->mask;
        if (!m->slot[i])
            m->slot[i] = (uint32_t)id + 1;
    }
    return LMQ_OK;
}

int32_t tok_strmap_get2(const tok_strmap *m, const uint8_t *a, size_t na, const uint8_t *b,
                        size_t nb)
{
    size_t i = hash2(a, na, b, nb) & m->mask;
    for (; m->slot[i]; i = (i + 1) & m->mask)
        if (key_equal2(m, m->slot[i] - 1, a, na, b, nb))
            return (int32_t)(m->slot[i] - 1);
    return -1;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slot);
    m->slot = NULL;
}

static uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static size_t pair_hash(uint64_t k) /* splitmix64's finaliser */
{
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    k ^= k >> 31;
    return (size_t)k;
}

lmq_code tok_pairmap_init(tok_pairmap *m, size_t expected)
{
    m->mask = pow2_at_least(expected * 2) - 1;
    m->slot = malloc((m->mask + 1) * sizeof *m->slot);
    if (!m->slot)
        return LMQ_E_NOMEM;
    for (size_t i = 0; i <= m->mask; i++)
        m->slot[i].rank = -1;
    return LMQ_OK;
}

/* The map is sized for `expected` pairs at init; callers never put more. */
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    uint64_t k = pair_key(a, b);
    size_t i = pair_hash(k) & m->mask;
    while (m->slot[i].rank >= 0 && m->slot[i].key != k)
        i = (i + 1) & m->mask;
    m->slot[i] = (tok_pair_slot){ k, rank, merged };
}

static const tok_pair_slot *pairmap_get(const tok_pairmap *m, int32_t a, int32_t b)
{
    uint64_t k = pair_key(a, b);
    for (size_t i = pair_hash(k) & m->mask; m->slot[i].rank >= 0; i = (i + 1) & m->mask)
        if (m->slot[i].key == k)
            return &m->slot[i];
    return NULL;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->slot);
    m->slot = NULL;
}

/* ---- merge engine: a linked list over the symbols, a min-heap of candidate pairs keyed by
 * (key, left position). Entries go stale when a neighbour merges; they are recognised on pop
 * (the pair is no longer adjacent or holds other ids) and skipped. */

static int heap_less(const tok_heap_entry *x, const tok_heap_entry *y)
{
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

static void sift_down(tok_heap_entry *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        if (l < n && heap_less(&h[l], &h[best]))
            best = l;
        if (l + 1 < n && heap_less(&h[l + 1], &h[best]))
            best = l + 1;
        if (best == i)
            return;
        tok_heap_entry tmp = h[i];
        h[i] = h[best];
        h[best] = tmp;
        i = best;
    }
}

static void sift_up(tok_heap_entry *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&h[i], &h[p]))
            return;
        tok_heap_entry tmp = h[i];
        h[i] = h[p];
        h[p] = tmp;
        i = p;
    }
}

/* Adds the pair (l, r) when it merges; sift = 0 leaves restoring the heap order to the caller
 * (the initial heapify). */
static lmq_code add_pair(tok_bpe_work *w, const tok_tokenizer *t, tok_pair_fn pair,
                         const int32_t *sym, uint32_t l, uint32_t r, int sift, lmq_err *err)
{
    int32_t merged;
    double key;
    if (!pair(t, sym[l], sym[r], &merged, &key))
        return LMQ_OK;
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        tok_heap_entry *h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory (merge heap)");
        w->heap = h;
        w->heap_cap = cap;
    }
    w->heap[w->heap_n++] = (tok_heap_entry){ key, l, r, sym[l], sym[r], merged };
    if (sift)
        sift_up(w->heap, w->heap_n - 1);
    return LMQ_OK;
}

lmq_code tok_bpe_merge(tok_bpe_work *w, const tok_tokenizer *t, tok_pair_fn pair, int32_t *sym,
                       size_t *n, lmq_err *err)
{
    size_t m = *n;
    if (m < 2)
        return LMQ_OK;
    if (m >= NONE)
        return lmq_fail(err, LMQ_E_ARG, "tokenizer: %zu symbols in one piece is too many", m);
    if (m > w->cap) {
        uint32_t *p = realloc(w->prev, m * sizeof *p);
        if (p)
            w->prev = p;
        uint32_t *q = p ? realloc(w->next, m * sizeof *q) : NULL;
        if (!q)
            return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory (%zu symbols)", m);
        w->next = q;
        w->cap = m;
    }
    lmq_code c;
    w->heap_n = 0;
    for (uint32_t i = 0; i < m; i++) {
        w->prev[i] = i ? i - 1 : NONE;
        w->next[i] = i + 1 < m ? i + 1 : NONE;
        if (i + 1 < m && (c = add_pair(w, t, pair, sym, i, i + 1, 0, err)))
            return c;
    }
    for (size_t i = w->heap_n / 2; i-- > 0;)
        sift_down(w->heap, w->heap_n, i);

    while (w->heap_n) {
        tok_heap_entry e = w->heap[0];
        w->heap[0] = w->heap[--w->heap_n];
        sift_down(w->heap, w->heap_n, 0);
        if (w->next[e.left] != e.right || sym[e.left] != e.a || sym[e.right] != e.b)
            continue; /* stale */
        sym[e.left] = e.merged;
        sym[e.right] = -1;
        uint32_t nx = w->next[e.right];
        w->next[e.left] = nx;
        if (nx != NONE)
            w->prev[nx] = e.left;
        uint32_t pv = w->prev[e.left];
        if (pv != NONE && (c = add_pair(w, t, pair, sym, pv, e.left, 1, err)))
            return c;
        if (nx != NONE && (c = add_pair(w, t, pair, sym, e.left, nx, 1, err)))
            return c;
    }
    size_t k = 0;
    for (uint32_t i = 0; i != NONE; i = w->next[i])
        sym[k++] = sym[i];
    *n = k;
    return LMQ_OK;
}

void tok_bpe_work_free(tok_bpe_work *w)
{
    free(w->prev);
    free(w->next);
    free(w->heap);
    memset(w, 0, sizeof *w);
}

lmq_code tok_ids_reserve(tok_ids *a, size_t extra, lmq_err *err)
{
    if (a->cap - a->n >= extra)
        return LMQ_OK;
    size_t cap = a->cap ? a->cap : 256;
    while (cap - a->n < extra)
        cap *= 2;
    int32_t *v = realloc(a->v, cap * sizeof *v);
    if (!v)
        return lmq_fail(err, LMQ_E_NOMEM, "tokenizer: out of memory (%zu ids)", cap);
    a->v = v;
    a->cap = cap;
    return LMQ_OK;
}

lmq_code tok_ids_push(tok_ids *a, int32_t id, lmq_err *err)
{
    lmq_code c = tok_ids_reserve(a, 1, err);
    if (!c)
        a->v[a->n++] = id;
    return c;
}

int tok_rank_pair(const tok_tokenizer *t, int32_t a, int32_t b, int32_t *merged, double *key)
{
    const tok_pair_slot *s = pairmap_get(&t->merges, a, b);
    if (!s)
        return 0;
    *merged = s->merged;
    *key = s->rank;
    return 1;
}
