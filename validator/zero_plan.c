/* ZeRO-2 and ZeRO-3's bookkeeping: shards, buffer sizes, the order of gathers
 * (zero_plan.h).  Plain C. */
#include "zero_plan.h"

size_t zero_slice_elems(const zero_bucket *b, int dp) { return b->size / (size_t)dp; }

size_t zero_slice_at(const zero_bucket *b, int dp, int rank) { return b->offset + (size_t)rank * zero_slice_elems(b, dp); }

void zero_buffer_elems(const zero_bucket *buckets, int n, size_t *small, size_t *big)
{
    size_t layer = 0, most = 0;
    for (int i = 0; i < n; i++) {
        if (buckets[i].layer && buckets[i].size > layer) layer = buckets[i].size;
        if (buckets[i].size > most) most = buckets[i].size;
    }
    *small = layer;
    *big = most > layer ? most : 0;
}

int zero_buffer_for(size_t size, size_t small, int previous)
{
    if (size > small) return ZERO_BIG;
    return previous == 0 ? 1 : 0;
}

size_t zero_buffer_bytes(int stage, size_t small, size_t big, int dp, size_t elem_bytes)
{
    if (stage < 2 || dp < 2) return 0;
    size_t set = 2 * small + big;
    return (stage == 3 ? 2 * set : set) * elem_bytes;
}

/* Appends one use unless it repeats the last; 0, or -1 when out is full.  *small_last: the
 * small buffer used last, -1 before the first. */
static int push_use(const zero_stage *st, zero_use *out, int max, int *n, int *small_last, int bucket, int backward)
{
    if (bucket < 0) return 0;
    if (*n > 0 && out[*n - 1].bucket == bucket) return 0;
    if (*n >= max) return -1;
    int buffer = zero_buffer_for(st->buckets[bucket].size, st->small, *small_last);
    if (buffer != ZERO_BIG) *small_last = buffer;
    int issue_at = *n;
    if (*n > 0 && out[*n - 1].buffer != buffer) issue_at = *n - 1;
    if (*n > 1 && issue_at == *n - 1 && out[*n - 2].buffer != buffer) issue_at = *n - 2;
    out[*n] = (zero_use){bucket, backward, buffer, issue_at};
    (*n)++;
    return 0;
}

int zero_gather_sequence(const zero_stage *st, const pipe_action *actions, int nactions, zero_use *out, int max)
{
    int n = 0, small_last = -1;
    for (int i = 0; i < nactions; i++) {
        const pipe_action *a = &actions[i];
        if (a->kind == PIPE_EXCHANGE) continue;
        int c = a->chunk;
        int with_embedding = st->first && c == 0, with_head = st->last && c == st->vpp - 1;
        int lo = c * st->Lc, hi = (c + 1) * st->Lc;
        int bad = 0;
        if (a->kind == PIPE_FORWARD) {
            if (with_embedding) bad |= push_use(st, out, max, &n, &small_last, st->embed, 0);
            for (int l = lo; l < hi; l++) bad |= push_use(st, out, max, &n, &small_last, st->layer0 + l, 0);
            if (with_head) {
                bad |= push_use(st, out, max, &n, &small_last, st->final, 0);
                bad |= push_use(st, out, max, &n, &small_last, st->head, 0);
            }
        } else {
            if (with_head) {
                bad |= push_use(st, out, max, &n, &small_last, st->head, 1);
                bad |= push_use(st, out, max, &n, &small_last, st->final, 1);
            }
            for (int l = hi - 1; l >= lo; l--) bad |= push_use(st, out, max, &n, &small_last, st->layer0 + l, 1);
        }
        if (bad) return -1;
    }
    return n;
}

int zero_next_use(const zero_use *seq, int n, int *cursor, int bucket)
{
    if (*cursor >= 0 && *cursor < n && seq[*cursor].bucket == bucket) return -1;
    int next = *cursor + 1;
    if (next >= n || seq[next].bucket != bucket) return -2;
    *cursor = next;
    return next;
}
