/* ZeRO-2 and ZeRO-3 in the training step, the bookkeeping (validator/zero_plan.c):
 * where each rank's shard of a bucket lies, how large the gathered and gradient
 * buffers are, and in which order a step gathers the buckets' parameters.  Plain C,
 * no CUDA: validator/zero.c runs it, tests/test_zero.c checks it.
 *
 * A bucket is the unit of sharding (validator/train.c: the embedding, one per layer,
 * the final norm with an untied head, a tied head's copy): contiguous, padded to a
 * multiple of 8 dp elements.  Rank r of dp owns elements [r size/dp, (r+1) size/dp)
 * of each bucket; its shards of all buckets lie one after another (shard_offset). */
#ifndef SEXTANT_ZERO_PLAN_H
#define SEXTANT_ZERO_PLAN_H

#include <stddef.h>

#include "schedule.h"

typedef struct {
    size_t offset, size;      /* elements of the whole layout, padded to 8 dp */
    size_t shard_offset;      /* where this rank's slice lies in the shard arrays */
    int layer;                /* 1: a transformer layer's bucket */
} zero_bucket;

/* Where rank `rank`'s slice of a bucket starts in the whole layout. */
size_t zero_slice_at(const zero_bucket *b, int dp, int rank);

/* The elements of one rank's slice. */
size_t zero_slice_elems(const zero_bucket *b, int dp);

/* Buffers come in two sizes: two of the largest layer bucket (`small`), which layers use
 * in turn, and one of the largest bucket when that is larger (`big`, else 0): the
 * embedding, or the final norm with an untied head, whose vocabulary-sized tables would
 * make every buffer several layers large.  Both in elements. */
void zero_buffer_elems(const zero_bucket *buckets, int n, size_t *small, size_t *big);

/* The buffer (0, 1: small; ZERO_BIG) of a bucket of `size` elements, `previous` the small
 * buffer used last (-1: none): small buckets alternate. */
#define ZERO_BIG 2
int zero_buffer_for(size_t size, size_t small, int previous);

/* What ZeRO-2/3 allocate beyond the shards, in bytes of elem_bytes each: ZeRO-3's
 * gathered buffers (the bucket in use and the next one arriving) and, ZeRO-2 and 3, the
 * gradient buffers (a bucket's backward writes one while the other's reduce-scatter,
 * in place, reads it); each set two small and one big.  0 below ZeRO-2 or on one rank. */
size_t zero_buffer_bytes(int stage, size_t small, size_t big, int dp, size_t elem_bytes);

/* The stage as the gather order needs it: bucket indices, -1 where absent. */
typedef struct {
    const zero_bucket *buckets;
    size_t small;    /* zero_buffer_elems */
    int embed;       /* the embedding (first stage) */
    int final;       /* the final norm, with the head when the head is its own and untied (last stage) */
    int head;        /* the bucket of the tensor the head multiplies with: embed (tied, one stage), final, or its own */
    int layer0;      /* the stage's first layer; layer l is bucket layer0 + l */
    int Lc, vpp;     /* layers per chunk and chunks on this stage */
    int first, last; /* the stage holds the embedding / the head */
} zero_stage;

typedef struct {
    int bucket;      /* which bucket the step uses next */
    int backward;    /* 1: a backward (or its recomputation) uses it, 0: a forward */
    int buffer;      /* the gathered buffer it arrives in: 0 or 1 (small), ZERO_BIG */
    int issue_at;    /* the use at whose take its gather goes out: itself (the step's first use, which
                      * the step's start gathers, or two big buckets in a row), else the prefetch, into a
                      * buffer the uses in between do not hold: the use before, or the one before that
                      * where neither holds it (a big bucket after a layer and the final norm, a layer
                      * after a big bucket), so that a gather behind a short use has a longer one to
                      * hide behind */
} zero_use;

/* ZeRO-3's order of parameter uses in one step of `actions` (schedule.h): a forward
 * uses [embed], its chunk's layers in order, [final, head]; a backward [head, final],
 * its layers in reverse (a recomputed layer's forward with its backward: one use);
 * the embedding's backward reads no weight.  A use of the bucket just used is no new
 * use (the forward's head and the backward's head of one micro-batch on one stage:
 * gathered once).  Small buffers alternate, so a prefetch never writes a buffer a use
 * between its issue and its use holds (zero_use.issue_at).  Returns the count written,
 * -1 when max is too small. */
int zero_gather_sequence(const zero_stage *st, const pipe_action *actions, int nactions, zero_use *out, int max);

/* The step asks for `bucket` (0 forward, 1 backward); *cursor is the index of the use
 * now held (-1 at the step's start).  Returns the index of the use to wait for (and
 * advances *cursor), -1 when the bucket is the one held, -2 when the sequence expected
 * another bucket (the step and the sequence disagree: a bug). */
int zero_next_use(const zero_use *seq, int n, int *cursor, int bucket);

#endif
