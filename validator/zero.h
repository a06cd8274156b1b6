/* ZeRO-2 and ZeRO-3 in the training step, FSDP-style (validator/zero.c):
 *
 *   ZeRO-2: each rank keeps its shard of the gradients and of the optimizer state and
 *     the whole 16-bit parameters.  A bucket's backward writes its whole gradient into
 *     a gradient buffer; when it is done the bucket is reduce-scattered in place on the
 *     communication stream and the rank's slice added into its gradient shard (every
 *     micro-batch), while the backward goes on into the other buffer.  The optimizer
 *     updates the shard and all-gathers the parameters (as ZeRO-1 does, validator/train.c).
 *   ZeRO-3: the parameters are sharded too.  Before a bucket's forward or backward its
 *     parameters are all-gathered into a gathered buffer; the gather of the next bucket
 *     of zero_gather_sequence (the prefetch) is issued on the communication stream when
 *     the step takes this one, into the other buffer, once the compute stream is done
 *     with what that buffer held.
 *   Layers take two layer-sized buffers in turn; a bucket larger than a layer (the
 *   embedding, an untied head) has a third of its own (zero_plan.h).
 *
 * The compute stream waits for a collective through an event; the wait is profiled
 * as <collective>_exposed, the part of the collective the compute did not hide. */
#ifndef SEXTANT_ZERO_H
#define SEXTANT_ZERO_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "kernels.h"
#include "planner.h"
#include "zero_plan.h"

/* The training step's profiler: marks the start (end 0) or end of op `name` of `pass` on stream `on`. */
typedef void (*zero_mark_fn)(const char *name, int end, cudaStream_t on, pass_t pass);

/* The names the profile gives a state's operations: the data-parallel group's (the planner's dp_* ops), or the
 * experts' over the expert-data-parallel group (edp_*, validator/moe.c). */
typedef struct {
    const char *gather_fwd, *gather_bwd, *gather_fwd_exposed, *gather_bwd_exposed;
    const char *reduce_scatter, *reduce_scatter_exposed, *shard_add, *buffer_clear;
} zero_names;
extern const zero_names zero_dp_names, zero_edp_names;

typedef struct {
    int stage, dp, rank, my_rank;      /* ZeRO stage (2 or 3), the data-parallel group, this process's rank */
    cudaStream_t compute, comm;
    ncclComm_t dp_comm;
    zero_mark_fn mark;
    const zero_names *names;           /* NULL: zero_dp_names */
    const zero_bucket *buckets;
    int nbuckets;
    size_t small, big;                 /* zero_buffer_elems: the buffers' elements */
    sx_bf16 *param_shard;              /* ZeRO-3: this rank's slices of every bucket (shard_offset) */
    sx_bf16 *grad_shard;               /* this rank's slices of the gradients */
    sx_bf16 *gathered[3], *work[3];    /* [0], [1]: small; [ZERO_BIG]: big, NULL when big is 0 */
    cudaEvent_t gathered_ev[3], released, written_ev[3], reduced_ev[3];
    zero_use *seq;                     /* ZeRO-3: the step's gathers */
    int nseq, cursor;
    int held_buffer;                   /* the gathered buffer of the use at cursor */
    int grad_bucket, grad_buffer;      /* the bucket whose gradient the backward writes now, -1: none */
    int grad_small_last;               /* the small gradient buffer used last */
    int pending[3], npending;          /* ZeRO-3: gradient buffers whose reduce-scatter waits for the next take's
                                          gathers, in order */
    int pending_bucket[3];             /* the bucket each of those buffers holds, by buffer */
} zero_state;

/* Fills the sequence (ZeRO-3) and the events; the caller sets z->small and z->big
 * (zero_buffer_elems), the buffers (z->gathered: ZeRO-3; z->work) and the shards
 * (z->param_shard, z->grad_shard).  -1 after one stderr line. */
int zero_init(zero_state *z, const zero_stage *st, const pipe_action *actions, int nactions);

/* The step starts: ZeRO-3 gathers its first bucket once `optimizer_done` (the last step's
 * optimizer, on the compute stream) is reached. */
void zero_step_begin(zero_state *z, cudaEvent_t optimizer_done);

/* ZeRO-3: the step is about to read `bucket`'s parameters (backward: 1 in a backward or
 * its recomputation).  Waits for its gather, issues the next one's. */
void zero_take_params(zero_state *z, int bucket, int backward);

/* Where whole-layout element `offset` lies in the gathered bucket held now; NULL when the
 * bucket held does not contain it. */
sx_bf16 *zero_param_at(const zero_state *z, size_t offset);

/* The backward is about to write `bucket`'s gradients: its gradient buffer, cleared once
 * its last reduce-scatter has read it. */
void zero_grads_begin(zero_state *z, int bucket);

/* Where whole-layout element `offset` lies in the gradient buffer being written; NULL when
 * outside the bucket. */
sx_bf16 *zero_grad_at(const zero_state *z, size_t offset);

/* The bucket's gradients of this micro-batch are complete: reduce-scatter them in place and
 * add the rank's slice into the shard, on the communication stream.  ZeRO-3 issues the two
 * after the next take's gathers (zero_take_params), so that a gather the next layer waits for
 * never queues behind them on the one communication stream, as FSDP's gathers on their own
 * stream do not; sooner where the buffer is wanted again, and at zero_grads_flush. */
void zero_grads_end(zero_state *z);

/* Every reduce-scatter still held back goes out: before the step waits for its reductions. */
void zero_grads_flush(zero_state *z);

/* Each collective once, bucket by bucket, on scratch (the communicator's first use). */
void zero_warmup(zero_state *z);

void zero_free(zero_state *z);

#endif
