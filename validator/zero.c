/* ZeRO-2 and ZeRO-3 in the training step: the gathers, reduce-scatters and their
 * events (zero.h); the order of the gathers is zero_plan.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "zero.h"

/* the rank in the line from zero.c's own state: it builds without train.c (tests/test_zero_streams.c) */
#define ZCK(z, call) RANK_CK((z)->my_rank, call)
#define ZNC(z, call) RANK_NC((z)->my_rank, call)

const zero_names zero_dp_names = {"dp_allgather_params_fwd", "dp_allgather_params_bwd", "dp_allgather_params_fwd_exposed",
                                  "dp_allgather_params_bwd_exposed", "dp_reduce_scatter_grads",
                                  "dp_reduce_scatter_grads_exposed", "dp_grad_shard_add", "dp_grad_buffer_clear"};
const zero_names zero_edp_names = {"edp_allgather_params_fwd", "edp_allgather_params_bwd", "edp_allgather_params_fwd_exposed",
                                   "edp_allgather_params_bwd_exposed", "edp_reduce_scatter_grads",
                                   "edp_reduce_scatter_grads_exposed", "edp_grad_shard_add", "edp_grad_buffer_clear"};

static const zero_names *names(const zero_state *z) { return z->names ? z->names : &zero_dp_names; }

int zero_init(zero_state *z, const zero_stage *st, const pipe_action *actions, int nactions)
{
    z->seq = NULL;
    z->nseq = 0;
    if (z->stage == 3) {
        /* each action uses at most its chunk's layers and three other buckets */
        int max = nactions * (st->Lc + 3) + 1;
        z->seq = malloc((size_t)max * sizeof *z->seq);
        if (!z->seq) { fprintf(stderr, "sextant-gpu train: out of host memory\n"); return -1; }
        z->nseq = zero_gather_sequence(st, actions, nactions, z->seq, max);
        if (z->nseq < 0) { fprintf(stderr, "sextant-gpu train: rank %d: internal: ZeRO-3's gather sequence\n", z->my_rank); return -1; }
    }
    for (int i = 0; i < 3; i++) {
        ZCK(z, cudaEventCreateWithFlags(&z->gathered_ev[i], cudaEventDisableTiming));
        ZCK(z, cudaEventCreateWithFlags(&z->reduced_ev[i], cudaEventDisableTiming));
    }
    ZCK(z, cudaEventCreateWithFlags(&z->released, cudaEventDisableTiming));
    for (int i = 0; i < 3; i++) ZCK(z, cudaEventCreateWithFlags(&z->written_ev[i], cudaEventDisableTiming));
    z->npending = 0;
    z->cursor = -1;
    z->held_buffer = -1;
    z->grad_bucket = -1;
    z->grad_buffer = -1;
    z->grad_small_last = -1;
    return 0;
}

/* The gather of use i into its buffer, on the communication stream. */
static void gather(zero_state *z, int i)
{
    const zero_use *u = &z->seq[i];
    const zero_bucket *b = &z->buckets[u->bucket];
    size_t slice = zero_slice_elems(b, z->dp);
    const char *name = u->backward ? names(z)->gather_bwd : names(z)->gather_fwd;
    pass_t pass = u->backward ? PASS_BWD : PASS_FWD;
    z->mark(name, 0, z->comm, pass);
    ZNC(z, ncclAllGather(z->param_shard + b->shard_offset, z->gathered[u->buffer], slice, ncclBfloat16, z->dp_comm, z->comm));
    z->mark(name, 1, z->comm, pass);
    ZCK(z, cudaEventRecord(z->gathered_ev[u->buffer], z->comm));
}

void zero_step_begin(zero_state *z, cudaEvent_t optimizer_done)
{
    z->cursor = -1;
    z->held_buffer = -1;
    z->grad_bucket = -1;
    if (z->npending) {   /* the last step's optimizer flushes them (zero_grads_flush): a step that did not lost them */
        fprintf(stderr, "sextant-gpu train: rank %d: internal: %d reduce-scatters held back past the optimizer\n",
                z->my_rank, z->npending);
        exit(1);
    }
    if (z->stage != 3 || z->nseq == 0) return;
    /* the shards are the last optimizer's, and the compute stream is past every read of the buffers */
    ZCK(z, cudaStreamWaitEvent(z->comm, optimizer_done, 0));
    gather(z, 0);
}

void zero_take_params(zero_state *z, int bucket, int backward)
{
    if (z->stage != 3 || bucket < 0) return;
    int i = zero_next_use(z->seq, z->nseq, &z->cursor, bucket);
    if (i == -1) return;
    if (i == -2) {
        fprintf(stderr, "sextant-gpu train: rank %d: internal: ZeRO-3 %s asked for bucket %d, the gather sequence has %d next\n",
                z->my_rank, backward ? "backward" : "forward", bucket,
                z->cursor + 1 < z->nseq ? z->seq[z->cursor + 1].bucket : -1);
        exit(1);
    }
    /* A gather into a buffer waits for the compute stream to have passed every read of what the
     * buffer held: uses before the one whose take issues it, whose reads are all on the compute
     * stream by now.  Use i's own gather went out at the step's start (i = 0) or at an earlier
     * take (zero_use.issue_at), else now; the next two uses' may go out now. */
    int own = i > 0 && z->seq[i].issue_at == i, ahead = 0;
    for (int k = i + 1; k <= i + 2 && k < z->nseq; k++) ahead |= z->seq[k].issue_at == i;
    if (own || ahead) {
        ZCK(z, cudaEventRecord(z->released, z->compute));
        ZCK(z, cudaStreamWaitEvent(z->comm, z->released, 0));
    }
    if (own) gather(z, i);
    for (int k = i + 1; k <= i + 2 && k < z->nseq; k++)
        if (z->seq[k].issue_at == i) gather(z, k);
    /* the reduce-scatters held back go out behind them */
    zero_grads_flush(z);
    const zero_use *u = &z->seq[i];
    const char *name = u->backward ? names(z)->gather_bwd_exposed : names(z)->gather_fwd_exposed;
    pass_t pass = u->backward ? PASS_BWD : PASS_FWD;
    z->mark(name, 0, z->compute, pass);
    ZCK(z, cudaStreamWaitEvent(z->compute, z->gathered_ev[u->buffer], 0));
    z->mark(name, 1, z->compute, pass);
    z->held_buffer = u->buffer;
}

sx_bf16 *zero_param_at(const zero_state *z, size_t offset)
{
    if (z->stage != 3 || z->cursor < 0) return NULL;
    const zero_bucket *b = &z->buckets[z->seq[z->cursor].bucket];
    if (offset < b->offset || offset >= b->offset + b->size) return NULL;
    return z->gathered[z->held_buffer] + (offset - b->offset);
}

void zero_grads_begin(zero_state *z, int bucket)
{
    if (bucket < 0) return;
    if (z->grad_bucket >= 0) zero_grads_end(z);
    const zero_bucket *b = &z->buckets[bucket];
    int j = zero_buffer_for(b->size, z->small, z->grad_small_last);
    if (j != ZERO_BIG) z->grad_small_last = j;
    /* a buffer whose reduce-scatter is held back must have it issued before its event is waited for */
    for (int k = 0; k < z->npending; k++)
        if (z->pending[k] == j) zero_grads_flush(z);
    /* the buffer's last reduce-scatter must have read it */
    z->mark(names(z)->reduce_scatter_exposed, 0, z->compute, PASS_BWD);
    ZCK(z, cudaStreamWaitEvent(z->compute, z->reduced_ev[j], 0));
    z->mark(names(z)->reduce_scatter_exposed, 1, z->compute, PASS_BWD);
    z->mark(names(z)->buffer_clear, 0, z->compute, PASS_BWD);
    ZCK(z, cudaMemsetAsync(z->work[j], 0, b->size * sizeof(sx_bf16), z->compute));
    z->mark(names(z)->buffer_clear, 1, z->compute, PASS_BWD);
    z->grad_buffer = j;
    z->grad_bucket = bucket;
}

sx_bf16 *zero_grad_at(const zero_state *z, size_t offset)
{
    if (z->grad_bucket < 0) return NULL;
    const zero_bucket *b = &z->buckets[z->grad_bucket];
    if (offset < b->offset || offset >= b->offset + b->size) return NULL;
    return z->work[z->grad_buffer] + (offset - b->offset);
}

/* The reduce-scatter of gradient buffer j (holding bucket `bucket`) and the add into the shard, on the
 * communication stream, once the compute stream has written it (written_ev[j]). */
static void reduce_buffer(zero_state *z, int bucket, int j)
{
    const zero_bucket *b = &z->buckets[bucket];
    size_t slice = zero_slice_elems(b, z->dp);
    ZCK(z, cudaStreamWaitEvent(z->comm, z->written_ev[j], 0));
    /* in place: the rank's slice of the sum lands where its slice of the buffer was */
    sx_bf16 *mine = z->work[j] + (size_t)z->rank * slice;
    z->mark(names(z)->reduce_scatter, 0, z->comm, PASS_BWD);
    ZNC(z, ncclReduceScatter(z->work[j], mine, slice, ncclBfloat16, ncclSum, z->dp_comm, z->comm));
    z->mark(names(z)->reduce_scatter, 1, z->comm, PASS_BWD);
    /* micro-batches add up in the shard (cleared by the step's zero_grads) */
    sx_bf16 *shard = z->grad_shard + b->shard_offset;
    z->mark(names(z)->shard_add, 0, z->comm, PASS_BWD);
    ZCK(z, sx_residual_add(shard, NULL, shard, mine, slice, z->comm));
    z->mark(names(z)->shard_add, 1, z->comm, PASS_BWD);
    ZCK(z, cudaEventRecord(z->reduced_ev[j], z->comm));
}

void zero_grads_end(zero_state *z)
{
    if (z->grad_bucket < 0) return;
    int j = z->grad_buffer;
    ZCK(z, cudaEventRecord(z->written_ev[j], z->compute));
    if (z->stage == 3) {
        /* the next take's gathers go first (zero.h); a buffer is held back at most once: its next use flushes */
        if (z->npending == 3) zero_grads_flush(z);   /* one a buffer: cannot happen, kept bounded anyway */
        z->pending_bucket[j] = z->grad_bucket;
        z->pending[z->npending++] = j;
    } else {
        reduce_buffer(z, z->grad_bucket, j);
    }
    z->grad_bucket = -1;
}

void zero_grads_flush(zero_state *z)
{
    for (int k = 0; k < z->npending; k++) reduce_buffer(z, z->pending_bucket[z->pending[k]], z->pending[k]);
    z->npending = 0;
}

void zero_warmup(zero_state *z)
{
    for (int k = 0; k < z->nbuckets; k++) {
        const zero_bucket *b = &z->buckets[k];
        size_t slice = zero_slice_elems(b, z->dp);
        sx_bf16 *w = z->work[zero_buffer_for(b->size, z->small, 1)];
        ZNC(z, ncclReduceScatter(w, w + (size_t)z->rank * slice, slice, ncclBfloat16, ncclSum, z->dp_comm, z->compute));
        ZNC(z, ncclAllGather(w + (size_t)z->rank * slice, w, slice, ncclBfloat16, z->dp_comm, z->compute));
    }
}

void zero_free(zero_state *z)
{
    for (int i = 0; i < 3; i++) {
        ZCK(z, cudaEventDestroy(z->gathered_ev[i]));
        ZCK(z, cudaEventDestroy(z->reduced_ev[i]));
    }
    ZCK(z, cudaEventDestroy(z->released));
    for (int i = 0; i < 3; i++) ZCK(z, cudaEventDestroy(z->written_ev[i]));
    free(z->seq);
    z->seq = NULL;
}
